//! The host source of a QEMU/KVM guest on a Linux host: its vCPU threads found by QEMU pid or libvirt
//! domain ([`discover`]), followed through the host's tracefs trace ([`TracefsSource`]) and folded into
//! per-vCPU intervals ([`fold`]).
//!
//! Events from different CPUs are merged by timestamp before they are folded: a drain takes what every
//! CPU's pipe holds and folds the events older than [`SETTLE_NS`] before the drain in time order, keeping the
//! rest for the next one (an event is in its CPU's buffer microseconds after it happened). The trace is the
//! probe crate's private tracefs instance with its cleanup (drop, and the next start after a kill -9).

pub mod discover;
pub mod fold;

use rtgauge_model::vm::{
    HostRecord, HostTraceInfo, ObserverCost, VmIdent, HOST_RECORD_KIND, HOST_SCHEMA_VERSION,
};
use rtgauge_model::CpuSet;
use rtgauge_probe::time::{now_ns, ClockId};
use rtgauge_probe::trace::{parse_line, ExtraEvent, TraceSession};

use crate::{HostSource, VmError};
use discover::Vm;
use fold::VcpuFolder;

/// Events younger than this at a drain wait for the next one, so that every CPU's events up to then are in.
pub const SETTLE_NS: u64 = 20_000_000;

/// How to trace the host.
#[derive(Debug, Clone)]
pub struct TraceOpts {
    /// Host CPUs to trace (default: every online CPU: a wake-up is recorded on the waker's CPU).
    pub cpus: CpuSet,
    /// Per-CPU trace buffer, KiB.
    pub buffer_kb: u32,
    /// Intervals kept at most.
    pub max_intervals: usize,
}

/// A QEMU/KVM guest's vCPU threads followed through this host's tracefs trace.
pub struct TracefsSource {
    vm: Vm,
    trace: TraceSession,
    folder: VcpuFolder,
    queue: Vec<(u64, u32, String)>,
    cpus: CpuSet,
    kvm_available: bool,
    missing: Vec<String>,
}

/// The tracefs filter `F == a || F == b …` over the VM's threads (`all`: the vCPUs and QEMU's others).
fn filter(field: &str, vm: &Vm, all: bool) -> String {
    let others = vm.others.iter().map(|o| o.0).filter(|_| all);
    vm.vcpus
        .iter()
        .map(|v| v.tid)
        .chain(others)
        .map(|t| format!("{field} == {t}"))
        .collect::<Vec<_>>()
        .join(" || ")
}

impl TracefsSource {
    /// Start tracing the host for `vm` (mounting tracefs if needed, removing a killed observer's instance
    /// first).
    pub fn start(vm: Vm, opts: &TraceOpts) -> Result<TracefsSource, VmError> {
        let cpus: Vec<u32> = opts.cpus.iter().collect();
        let extra = [
            ExtraEvent {
                system: "sched",
                event: "sched_wakeup",
                filter: Some(filter("pid", &vm, true)),
            },
            ExtraEvent {
                system: "sched",
                event: "sched_wakeup_new",
                filter: Some(filter("pid", &vm, true)),
            },
            ExtraEvent {
                system: "sched",
                event: "sched_migrate_task",
                filter: Some(filter("pid", &vm, true)),
            },
            ExtraEvent {
                system: "kvm",
                event: "kvm_exit",
                filter: Some(filter("common_pid", &vm, false)),
            },
            ExtraEvent {
                system: "kvm",
                event: "kvm_entry",
                filter: Some(filter("common_pid", &vm, false)),
            },
        ];
        let trace = TraceSession::start_with(&cpus, opts.buffer_kb, &extra)?;
        let kvm_available = trace.has_event("kvm", "kvm_exit");
        let mut missing = Vec::new();
        if !kvm_available {
            missing.push(
                "no kvm tracepoints on this host (TCG, or KVM not loaded): no VM exits".to_string(),
            );
        }
        if !trace.unfiltered.is_empty() {
            missing.push(format!(
                "the kernel refused the thread filter of {} ({} threads): read unfiltered, at a higher cost",
                trace.unfiltered.join(", "),
                vm.vcpus.len() + vm.others.len()
            ));
        }
        if !trace.has_event("sched", "sched_wakeup") {
            missing.push("no sched_wakeup event: wake-up waits are seen as sleep".to_string());
        }
        let tids: Vec<(u32, i64)> = vm
            .vcpus
            .iter()
            .map(|v| (v.index, i64::from(v.tid)))
            .collect();
        let helpers: Vec<(i64, String)> = vm
            .others
            .iter()
            .map(|(t, n)| (i64::from(*t), n.clone()))
            .collect();
        Ok(TracefsSource {
            folder: VcpuFolder::new(&tids, &helpers, opts.max_intervals),
            vm,
            trace,
            queue: Vec::new(),
            cpus: opts.cpus.clone(),
            kvm_available,
            missing,
        })
    }

    /// The trace instance (for tests and messages).
    pub fn trace_dir(&self) -> &std::path::Path {
        self.trace.dir()
    }

    /// Read every CPU's pipe and fold, in time order, the events older than [`SETTLE_NS`] (all of them when
    /// `all`).
    fn pump(&mut self, all: bool) {
        let queue = &mut self.queue;
        self.trace.drain_lines(&mut |cpu, line| {
            if let Some(e) = parse_line(line) {
                queue.push((e.ts_ns, cpu, line.to_string()));
            }
        });
        let upto = if all {
            u64::MAX
        } else {
            now_ns(ClockId::Monotonic).saturating_sub(SETTLE_NS)
        };
        self.queue.sort_by_key(|x| x.0);
        let n = self.queue.partition_point(|x| x.0 <= upto);
        for (_, cpu, line) in self.queue.drain(..n) {
            self.folder.feed(cpu, &line);
        }
        self.folder.prune();
    }
}

impl HostSource for TracefsSource {
    fn gather(&mut self) {
        self.pump(false);
    }

    /// Stop tracing, fold what is left and hand the record over (the instance is removed when this
    /// returns).
    fn into_record(mut self: Box<Self>, started_ns: u64, ended_ns: u64) -> HostRecord {
        self.trace.stop_recording();
        self.pump(true);
        let events = self.trace.events();
        let lost = self.trace.lost();
        let this = *self;
        let f = this.folder.finish(ended_ns);
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        HostRecord {
            kind: HOST_RECORD_KIND.into(),
            schema_version: HOST_SCHEMA_VERSION,
            host: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            vm: VmIdent {
                pid: this.vm.pid,
                name: this.vm.name,
                found_by: this.vm.found_by,
                accel: this.vm.accel,
            },
            vcpus: this.vm.vcpus,
            qemu_threads: this.vm.others,
            started_ns,
            ended_ns,
            dropped_before_ns: f.dropped_before_ns,
            dropped: f.dropped,
            names: f.names,
            interval_fields: rtgauge_model::vm::INTERVAL_FIELDS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            intervals: f.intervals,
            exits: f.exits,
            clock: None,
            trace: HostTraceInfo {
                mechanism: "tracefs events (instance, trace_clock mono, per-CPU trace_pipe): sched_switch, sched_wakeup, sched_migrate_task, irq, softirq, irq_vectors, kvm_exit/kvm_entry".into(),
                cpus: this.cpus.to_string(),
                events,
                lost,
                kvm_events: this.kvm_available && f.kvm_seen,
            },
            observer: ObserverCost::default(),
            missing: this.missing,
        }
    }
}

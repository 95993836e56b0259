//! Observing a VM's host while its guest measures: an [`Observer`] ([`HostObserver`]) that follows the
//! vCPU threads through the host trace and measures the guest's clock, run by a [`Probe`] that measures
//! nothing itself ([`VmWatch`]) through [`rtgauge_session::Session::measure`] — the session's stop flag,
//! ticks and cleanup, unchanged.
//!
//! Events from different CPUs are merged by timestamp before they are folded: a drain takes what every
//! CPU's pipe holds and folds the events older than [`SETTLE_NS`] before the drain in time order, keeping the
//! rest for the next one (an event is in its CPU's buffer microseconds after it happened). The trace is the
//! probe crate's private tracefs instance with its cleanup (drop, and the next start after a kill -9).

use rtgauge_model::run::ProbeResult;
use rtgauge_model::vm::{
    HostRecord, HostTraceInfo, ObserverCost, VmIdent, HOST_RECORD_KIND, HOST_SCHEMA_VERSION,
};
use rtgauge_model::CpuSet;
use rtgauge_probe::clock::{now_ns, Clock};
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::trace::{parse_line, ExtraEvent, TraceSession};
use rtgauge_session::{Observer, Probe, SessionError, Tick};
use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::clock::{Channel, ClockClient};
use crate::kvm::discover::Vm;
use crate::kvm::fold::VcpuFolder;
use crate::VmError;

/// Events younger than this at a drain wait for the next one, so that every CPU's events up to then are in.
pub const SETTLE_NS: u64 = 20_000_000;

/// How to observe.
#[derive(Debug, Clone)]
pub struct ObserveOpts {
    /// The clock channel to the guest, if any.
    pub clock: Option<Channel>,
    /// Host CPUs to trace (default: every online CPU: a wake-up is recorded on the waker's CPU).
    pub cpus: CpuSet,
    /// Per-CPU trace buffer, KiB.
    pub buffer_kb: u32,
    /// How often the clock is measured.
    pub sync_every: Duration,
    /// Intervals kept at most.
    pub max_intervals: usize,
    /// The observer's own nice value (it shares host CPUs with the vCPU threads it watches unless pinned
    /// elsewhere); `None` leaves it as it is.
    pub nice: Option<i32>,
}

/// The host observer: the trace of the vCPU threads and the clock exchanges, as an [`Observer`].
pub struct HostObserver {
    vm: Vm,
    trace: TraceSession,
    recorder: VcpuFolder,
    queue: Vec<(u64, u32, String)>,
    clock: Option<ClockClient>,
    sync_every_ns: u64,
    next_sync_ns: u64,
    started_ns: u64,
    cpus: CpuSet,
    kvm_available: bool,
    missing: Vec<String>,
    wall: Instant,
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

impl HostObserver {
    /// Start tracing the host for `vm` (mounting tracefs if needed, removing a killed observer's instance
    /// first) and connect the clock channel.
    pub fn start(vm: Vm, opts: &ObserveOpts) -> Result<HostObserver, VmError> {
        if let Some(n) = opts.nice {
            // SAFETY: setpriority on the calling thread (who 0), plain integers.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) } != 0 {
                return Err(VmError::Input(format!(
                    "--nice {n}: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
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
        let mut clock = opts.clock.clone().map(ClockClient::new);
        if let Some(c) = clock.as_mut() {
            c.burst();
        }
        let now = now_ns(Clock::Monotonic);
        Ok(HostObserver {
            recorder: VcpuFolder::new(&tids, &helpers, opts.max_intervals),
            vm,
            trace,
            queue: Vec::new(),
            clock,
            sync_every_ns: opts.sync_every.as_nanos() as u64,
            next_sync_ns: now + opts.sync_every.as_nanos() as u64,
            started_ns: now,
            cpus: opts.cpus.clone(),
            kvm_available,
            missing,
            wall: Instant::now(),
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
            now_ns(Clock::Monotonic).saturating_sub(SETTLE_NS)
        };
        self.queue.sort_by_key(|x| x.0);
        let n = self.queue.partition_point(|x| x.0 <= upto);
        for (_, cpu, line) in self.queue.drain(..n) {
            self.recorder.feed(cpu, &line);
        }
        self.recorder.prune();
    }

    /// Stop tracing and hand the record over (the instance is removed when this returns).
    pub fn finish(mut self) -> HostRecord {
        if let Some(c) = self.clock.as_mut() {
            c.burst();
        }
        let ended = now_ns(Clock::Monotonic);
        self.trace.stop_recording();
        self.pump(true);
        let events = self.trace.events();
        let lost = self.trace.lost();
        let f = self.recorder.finish(ended);
        let mut missing = self.missing;
        if let Some(c) = &self.clock {
            if c.sync.samples.is_empty() {
                missing.push(match &c.error {
                    Some(e) => format!("{e}: no clock"),
                    None => format!(
                        "--clock {}: no exchange answered (is `rtgauge vm clock-serve` running in the guest?)",
                        c.sync.channel
                    ),
                });
            }
        }
        if f.dropped > 0 {
            missing.push(format!(
                "{} intervals dropped (the bound of {}): the record covers the end only",
                f.dropped,
                f.intervals.len()
            ));
        }
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
                pid: self.vm.pid,
                name: self.vm.name.clone(),
                found_by: self.vm.found_by.clone(),
                accel: self.vm.accel.clone(),
            },
            vcpus: self.vm.vcpus.clone(),
            qemu_threads: self.vm.others.clone(),
            started_ns: self.started_ns,
            ended_ns: ended,
            dropped_before_ns: f.dropped_before_ns,
            dropped: f.dropped,
            names: f.names,
            interval_fields: rtgauge_model::vm::INTERVAL_FIELDS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            intervals: f.intervals,
            exits: f.exits,
            clock: self.clock.map(|c| c.sync),
            trace: HostTraceInfo {
                mechanism: "tracefs events (instance, trace_clock mono, per-CPU trace_pipe): sched_switch, sched_wakeup, sched_migrate_task, irq, softirq, irq_vectors, kvm_exit/kvm_entry".into(),
                cpus: self.cpus.to_string(),
                events,
                lost,
                kvm_events: self.kvm_available && f.kvm_seen,
            },
            observer: own_cost(self.wall.elapsed()),
            missing,
        }
    }
}

/// This process's CPU time and peak memory. The peak is `VmHWM` of /proc/self/status, this program's own
/// address space: getrusage's `ru_maxrss` keeps the high-water mark of whatever ran before the exec (a
/// Python parent's fork, in the bench).
fn own_cost(wall: Duration) -> ObserverCost {
    // SAFETY: rusage is plain data filled by getrusage.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(r.ru_maxrss as u64);
    ObserverCost {
        cpu_ns: tv(r.ru_utime) + tv(r.ru_stime),
        max_rss_kib: hwm,
        wall_ns: wall.as_nanos() as u64,
    }
}

impl Observer for HostObserver {
    fn tick(&mut self, _tick: &Tick<'_>, _checkpoint: &mut dyn FnMut() -> ProbeResult) {
        self.pump(false);
        let now = now_ns(Clock::Monotonic);
        if now >= self.next_sync_ns {
            if let Some(c) = self.clock.as_mut() {
                c.burst();
            }
            self.next_sync_ns = now + self.sync_every_ns;
        }
    }
}

/// Watching a VM as a probe: it measures nothing itself; it ticks its observers until the duration, a
/// stop (SIGINT/SIGTERM) or the VM's end.
pub struct VmWatch {
    /// The QEMU process.
    pub pid: u32,
    /// How long (`None`: until stopped or the VM ends).
    pub duration: Option<Duration>,
    /// The host CPUs its vCPU threads may use (where load would be kept away from).
    pub cpus: CpuSet,
    /// Tick period.
    pub tick: Duration,
    /// Why it ended.
    pub ended: Cell<&'static str>,
}

impl Probe for VmWatch {
    fn measured(&self) -> CpuSet {
        self.cpus.clone()
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn Observer,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        observer.start(None);
        let t0 = Instant::now();
        // Nothing is measured here: a checkpoint is an empty result.
        let mut empty = || {
            ProbeResult::Ops(rtgauge_model::ops::OpsResult {
                config: rtgauge_model::ops::OpsConfig {
                    ops: Vec::new(),
                    repetitions: 0,
                    sample_ns: 0,
                    ctx_procs: 0,
                    ctx_size_bytes: 0,
                    mmap_size_bytes: 0,
                    sleep_intervals_ns: Vec::new(),
                    exec_program: String::new(),
                },
                cpu: rtgauge_model::rt::Setting {
                    requested: None,
                    achieved: None,
                    error: None,
                },
                ops: Vec::new(),
                skipped: Vec::new(),
                load: None,
            })
        };
        let alive = || {
            std::path::Path::new("/proc")
                .join(self.pid.to_string())
                .exists()
        };
        loop {
            let left = self.duration.map(|d| d.saturating_sub(t0.elapsed()));
            std::thread::sleep(left.map_or(self.tick, |l| l.min(self.tick)));
            let tick = Tick {
                elapsed: t0.elapsed(),
                threads: &[],
                cpus: &[],
            };
            observer.tick(&tick, &mut empty);
            if stop.is_set() {
                self.ended.set("stopped (SIGINT/SIGTERM)");
                break;
            }
            if self.duration.is_some_and(|d| t0.elapsed() >= d) {
                self.ended.set("duration reached");
                break;
            }
            if !alive() {
                self.ended.set("the VM ended");
                break;
            }
        }
        Ok(Vec::new())
    }
}

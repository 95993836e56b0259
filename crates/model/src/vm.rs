//! The virtualization tax explained from both sides, as data: what a VM's host did to its vCPU threads (the
//! host record of `rtgauge vm observe`), the clock shared by guest and host (an NTP-style exchange with its
//! error bound), and what the join of a guest spike episode with that record found.
//!
//! - [`HostRecord`]: every interval in which a vCPU thread was runnable but not running (who ran instead on
//!   its host CPU, or a host interrupt there), was interrupted while running (host IRQs, softirqs, vectors),
//!   or was outside the guest in a VM exit (with its reason, where the kvm tracepoints exist). Host
//!   CLOCK_MONOTONIC ns. Bounded: at most [`MAX_INTERVALS`] are kept, the oldest dropped and counted.
//! - [`ClockSync`]: the guest→host offset from exchanges over a channel both sides have: the host stamps
//!   its send (T1) and receive (T4), the guest its CLOCK_MONOTONIC in between (T), so the guest's stamp was
//!   taken at a host time inside [T1, T4]: offset = T − (T1 + T4)/2 within ±(T4 − T1)/2 — a bound, not an
//!   estimate of the error (RFC 5905 §8 with the two guest stamps equal).
//! - [`EpisodeHost`], [`HostJoin`]: what the host explains of one guest episode, and of a whole run.
//!
//! Plain data. The join and the clock's interpolation are `rtgauge_analysis::vm_join`; how a host record is
//! gathered (tracefs on a KVM/QEMU host) is `rtgauge_vmhost`.

use serde::{Deserialize, Serialize};

/// What a host record holds, for readers to recognise it.
pub const HOST_RECORD_KIND: &str = "rtgauge-vm-host";

/// Version of the host record's schema (additive fields keep it).
pub const HOST_SCHEMA_VERSION: u32 = 1;

/// Host intervals kept per record; beyond it the oldest are dropped and counted ([`HostRecord::dropped`]).
/// ~40 bytes each in memory: 40 MB at most.
pub const MAX_INTERVALS: usize = 1_000_000;

/// Unattributed stretches kept per guest episode (the longest; a stall is usually one or a few).
pub const MAX_GAPS: usize = 64;

/// What the host did to a vCPU thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostKind {
    /// Runnable (preempted, or woken) but another host thread ran on its CPU: the name is that thread
    /// (`comm/pid FIFO 50`).
    Preempted,
    /// Runnable but not running, and nothing traced ran on its CPU meanwhile (a migration, the scheduler).
    Waiting,
    /// A host hard IRQ on its CPU (`42 virtio0`).
    Irq,
    /// A host softirq on its CPU (`NET_RX`).
    Softirq,
    /// A host vector on its CPU (local timer, IPIs, NMI).
    Vector,
    /// A host workqueue item on its CPU (the function).
    Work,
    /// Outside the guest, in the hypervisor: a VM exit until the next entry (the name is its reason).
    Exit,
    /// The vCPU thread asleep in the host — the guest halted, or the thread blocked in the hypervisor (a
    /// lock, I/O) — until it was woken: past the guest's timer deadline, the host woke it late.
    Asleep,
    /// Asleep, and the QEMU thread that woke it (under TCG the main loop runs the guest's timers) was itself
    /// runnable but kept off its CPU: the name says that thread and who ran instead.
    WakerDelayed,
    /// Asleep, woken by no QEMU thread that waited (a host timer, another vCPU that lost no time), while a
    /// QEMU thread of its own was runnable but kept off its CPU: under TCG and without vhost the main loop
    /// carries the guest's NIC, timers and devices, so what it held back reached the guest late. The name
    /// says that thread and who ran instead.
    HelperHeld,
}

/// One vCPU thread of the observed VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuThread {
    /// The vCPU's index (QEMU's cpu-index: the guest's CPU number on x86 with the usual topology).
    pub index: u32,
    /// Its host thread id.
    pub tid: u32,
    /// Its host thread name (`CPU 1/KVM`, `CPU 1/TCG`).
    pub comm: String,
    /// The host CPUs it may run on, when observation started.
    pub cpus_allowed: String,
    /// Its scheduling policy and real-time priority on the host when observation started (`fifo 1`,
    /// `other 0`); `None` in records written before it was kept, or when unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<String>,
}

impl VcpuThread {
    /// Whether it runs at a real-time policy on the host (`None`: not known).
    pub fn realtime(&self) -> Option<bool> {
        let s = self.sched.as_deref()?;
        match s.split(' ').next()? {
            "fifo" | "rr" | "deadline" => Some(true),
            "other" | "batch" | "idle" => Some(false),
            _ => None,
        }
    }
}

/// One interval of a vCPU thread's life on the host that took time from its guest, host CLOCK_MONOTONIC.
/// Stored as a row `[vcpu, cpu, start_ns, end_ns, kind, name]` ([`INTERVAL_FIELDS`]): a busy host makes
/// hundreds of thousands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "IntervalRow", into = "IntervalRow")]
pub struct HostInterval {
    /// The vCPU's index.
    pub vcpu: u32,
    /// The host CPU it happened on.
    pub cpu: u32,
    /// Start, host CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// End (exclusive), host CLOCK_MONOTONIC ns.
    pub end_ns: u64,
    /// What it was.
    pub kind: HostKind,
    /// Index of its name in [`HostRecord::names`].
    pub name: u32,
}

/// The fields of a stored [`HostInterval`] row, in order.
pub const INTERVAL_FIELDS: [&str; 6] = ["vcpu", "cpu", "start_ns", "end_ns", "kind", "name"];

/// A [`HostInterval`] as stored.
type IntervalRow = (u32, u32, u64, u64, HostKind, u32);

impl From<IntervalRow> for HostInterval {
    fn from((vcpu, cpu, start_ns, end_ns, kind, name): IntervalRow) -> Self {
        HostInterval {
            vcpu,
            cpu,
            start_ns,
            end_ns,
            kind,
            name,
        }
    }
}

impl From<HostInterval> for IntervalRow {
    fn from(i: HostInterval) -> Self {
        (i.vcpu, i.cpu, i.start_ns, i.end_ns, i.kind, i.name)
    }
}

/// VM exits of one reason over the whole observation (all of them, however short).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitTotal {
    /// The exit reason (`EPT_VIOLATION`, `HLT`, `EXTERNAL_INTERRUPT`, …).
    pub reason: String,
    /// How many.
    pub count: u64,
    /// Time outside the guest, ns (exit to next entry).
    pub ns: u64,
}

/// The host's trace: how much was read and lost.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostTraceInfo {
    /// "tracefs events (instance, trace_clock mono, per-CPU trace_pipe)".
    pub mechanism: String,
    /// Host CPUs traced.
    pub cpus: String,
    /// Events read.
    pub events: u64,
    /// Events the kernel dropped (ring buffer overrun).
    pub lost: u64,
    /// Whether the kvm tracepoints (kvm_exit/kvm_entry) were there (no: TCG, or no KVM on this host).
    pub kvm_events: bool,
}

/// What the observer itself cost the host.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ObserverCost {
    /// CPU time of the observer process (user + system), ns.
    pub cpu_ns: u64,
    /// Its peak resident memory (VmHWM), KiB.
    pub max_rss_kib: u64,
    /// Wall time observed, ns.
    pub wall_ns: u64,
}

/// The observed VM.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VmIdent {
    /// The QEMU process id.
    pub pid: u32,
    /// Its name: the libvirt domain, or QEMU's `-name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How its vCPU threads were found ("thread names", "libvirt status XML", "QMP query-cpus-fast").
    pub found_by: String,
    /// The accelerator its vCPU thread names say (`KVM`, `TCG`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accel: Option<String>,
}

/// Everything `rtgauge vm observe` recorded on the host.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostRecord {
    /// Always [`HOST_RECORD_KIND`].
    pub kind: String,
    /// [`HOST_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The host's name (`uname -n`).
    pub host: String,
    /// The host's kernel release.
    pub kernel: String,
    /// The VM.
    pub vm: VmIdent,
    /// Its vCPU threads.
    pub vcpus: Vec<VcpuThread>,
    /// Its other threads when observation started (tid, name): the main loop, I/O threads — what wakes a
    /// halted vCPU under TCG, and device emulation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qemu_threads: Vec<(u32, String)>,
    /// Observation start, host CLOCK_MONOTONIC ns.
    pub started_ns: u64,
    /// Observation end, host CLOCK_MONOTONIC ns.
    pub ended_ns: u64,
    /// Intervals ending before this were dropped (the bound on intervals kept); 0 when none were.
    #[serde(default)]
    pub dropped_before_ns: u64,
    /// Intervals dropped.
    #[serde(default)]
    pub dropped: u64,
    /// Interval names (threads, IRQs, exit reasons), indexed by [`HostInterval::name`].
    pub names: Vec<String>,
    /// The fields of each interval row ([`INTERVAL_FIELDS`]).
    #[serde(default)]
    pub interval_fields: Vec<String>,
    /// The intervals, in the order they ended.
    pub intervals: Vec<HostInterval>,
    /// VM exits per reason (where the kvm tracepoints exist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exits: Vec<ExitTotal>,
    /// The guest→host clock, when a channel was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSync>,
    /// The trace.
    pub trace: HostTraceInfo,
    /// What observing cost.
    pub observer: ObserverCost,
    /// What could not be collected, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

impl HostRecord {
    /// Time the vCPU threads slept over the record (the guest halted, or blocked in the hypervisor), ns.
    pub fn asleep_ns(&self) -> u64 {
        self.intervals
            .iter()
            .filter(|i| i.kind == HostKind::Asleep)
            .map(|i| i.end_ns.saturating_sub(i.start_ns))
            .sum()
    }

    /// The vCPU of guest CPU `cpu` (its index).
    pub fn vcpu(&self, cpu: u32) -> Option<&VcpuThread> {
        self.vcpus.iter().find(|v| v.index == cpu)
    }

    /// The name of an interval.
    pub fn name(&self, i: &HostInterval) -> &str {
        self.names.get(i.name as usize).map_or("?", String::as_str)
    }

    /// Host time covered by the record: from its start (or the oldest interval kept) to its end.
    pub fn covers(&self, from: u64, to: u64) -> bool {
        from >= self.started_ns.max(self.dropped_before_ns) && to <= self.ended_ns
    }
}

/// One exchange over the clock channel: host send (T1), the guest's CLOCK_MONOTONIC when it answered, host
/// receive (T4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSample {
    /// Host CLOCK_MONOTONIC when the probe was sent, ns.
    pub host_send_ns: u64,
    /// Guest CLOCK_MONOTONIC when it answered, ns.
    pub guest_ns: u64,
    /// Host CLOCK_MONOTONIC when the answer was whole, ns.
    pub host_recv_ns: u64,
}

impl ClockSample {
    /// The round trip, ns.
    pub fn rtt_ns(&self) -> u64 {
        self.host_recv_ns.saturating_sub(self.host_send_ns)
    }

    /// Guest minus host: the guest's stamp against the middle of the round trip, ns.
    pub fn offset_ns(&self) -> i64 {
        let mid = self.host_send_ns as i128 + (self.rtt_ns() / 2) as i128;
        // Clamped: a corrupt record's stamps must not wrap into a plausible offset.
        (self.guest_ns as i128 - mid).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Half the round trip, rounded up: the guest's stamp was taken inside it.
    pub fn bound_ns(&self) -> u64 {
        self.rtt_ns().div_ceil(2)
    }

    /// The same exchange seen from the other side: made by the guest (`host_send_ns`/`host_recv_ns` on the
    /// guest's clock, `guest_ns` the host's stamp), as the host would have recorded it: the host's stamp
    /// with the round trip around it, the guest's midpoint. Offset negated, bound kept (rounded up).
    pub fn reversed(&self) -> ClockSample {
        let half = self.bound_ns();
        let mid = self.host_send_ns.saturating_add(self.rtt_ns() / 2);
        ClockSample {
            host_send_ns: self.guest_ns.saturating_sub(half),
            guest_ns: mid,
            host_recv_ns: self.guest_ns.saturating_add(half),
        }
    }
}

/// The guest→host clock of a record.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClockSync {
    /// The channel (`unix:/run/vm1-clock.sock`, `tcp:10.0.0.2:7031`, `/dev/pts/3`).
    pub channel: String,
    /// How samples were chosen.
    pub method: String,
    /// Exchanges attempted.
    pub exchanges: u64,
    /// Exchanges that got no (or a garbled) answer in time.
    pub failed: u64,
    /// The smallest-round-trip exchange of each burst, in time order.
    pub samples: Vec<ClockSample>,
}

/// A guest time on the host's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnHost {
    /// The host CLOCK_MONOTONIC time, ns.
    pub host_ns: u64,
    /// Guest minus host there, ns.
    pub offset_ns: i64,
    /// The true host time is within ± this, ns.
    pub bound_ns: u64,
}

/// One host cause of a guest episode (or of a whole record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCause {
    /// What the host did.
    pub kind: HostKind,
    /// As a sentence names it (`rtgauge_analysis::vm_join::host_cause_name`).
    pub name: String,
    /// Time, ns.
    pub ns: u64,
    /// Intervals it was made of.
    pub count: u64,
}

/// Whether an episode could be joined with the host record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostVerdict {
    /// Joined: the host causes are in the episode's causes.
    Joined,
    /// The clock's uncertainty (2 × bound) is wider than the episode: not joined, not guessed.
    BoundTooWide,
    /// The host record does not cover the episode (before or after the observation, or dropped).
    NotCovered,
    /// The record has no vCPU for the episode's CPU.
    NoVcpu,
    /// The record has no clock (no channel was given, or no exchange succeeded).
    NoClock,
}

/// What the host side says about one guest episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeHost {
    /// Whether it was joined, and why not.
    pub verdict: HostVerdict,
    /// The vCPU (the episode's CPU).
    pub vcpu: u32,
    /// The episode's start on the host clock, ns (0 without a clock).
    pub host_start_ns: u64,
    /// Guest minus host at the episode, ns.
    pub offset_ns: i64,
    /// The clock's bound there, ± ns.
    pub bound_ns: u64,
    /// The guest's own unattributed time before the join, ns.
    pub guest_unattributed_ns: u64,
    /// Of it, what the host explains, ns (the causes below sum to it).
    pub explained_ns: u64,
    /// The least and most the host would explain with the offset anywhere within its bound, ns.
    pub explained_range_ns: [u64; 2],
    /// The host causes, largest first.
    pub causes: Vec<HostCause>,
    /// Where each host cause fell, on the guest's clock (at most [`MAX_SEGMENTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<HostSegment>,
}

/// One stretch of a guest episode the host explains, on the guest's clock (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSegment {
    /// Start, guest ns.
    pub start_ns: u64,
    /// End, guest ns.
    pub end_ns: u64,
    /// Index of its cause in [`EpisodeHost::causes`].
    pub cause: u32,
}

/// Host segments kept per episode.
pub const MAX_SEGMENTS: usize = 200;

/// How a run was joined with a host record.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostJoin {
    /// The host's name.
    pub host: String,
    /// The VM (`pid 4242 (rt-guest)`).
    pub vm: String,
    /// The clock channel, the number of samples, the offset and the bound of the best one.
    pub clock: String,
    /// Guest→host drift, parts per billion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_ppb: Option<i64>,
    /// Episodes joined, and not joined per reason.
    pub joined: u64,
    /// Episodes not joined: "2 bound too wide, 1 not covered".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_joined: String,
    /// What the host did to the vCPUs over the whole record, largest first (at most 10).
    pub host_totals: Vec<HostCause>,
    /// What the host record could not collect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// A run's view of another machine's clock, read over `rtgauge vm`'s channel by the run's own reader:
/// what was added to put the other side's times on this side's clock, and how far it can be off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerClock {
    /// How the send times were put on this clock.
    pub method: String,
    /// The receiver's CLOCK_MONOTONIC minus the sender's, ns (by the first burst): with this side's
    /// CLOCK_REALTIME − CLOCK_MONOTONIC it is what puts every send time on the receiver's clock.
    pub offset_ns: i64,
    /// Each latency is right within ± this, ns (the exchange's bound and how far the offset wandered over
    /// the run); `None`: not known (two CLOCK_REALTIMEs, as synchronised as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_ns: Option<u64>,
    /// How far the offset moved between the first exchange and the others, ns (largest).
    #[serde(default)]
    pub wander_ns: u64,
    /// The exchanges, as `rtgauge vm observe` records them (this receiver as the guest, the sender as the
    /// host): what `rtgauge vm join` puts the receiver's episodes on the sender's clock with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<ClockSync>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_reversed_has_the_opposite_offset_and_the_same_bound() {
        // The guest probed the host: sent at 1,000, host stamped 50,400, answer back at 1,900 (guest clock).
        let g = ClockSample {
            host_send_ns: 1_000,
            guest_ns: 50_400,
            host_recv_ns: 1_900,
        };
        assert_eq!(g.offset_ns(), 50_400 - 1_450);
        let h = g.reversed();
        assert_eq!(h.offset_ns(), -(50_400 - 1_450));
        assert_eq!(h.bound_ns(), 450);
        assert_eq!(h.guest_ns, 1_450);
    }

    #[test]
    fn an_exchange_bounds_the_offset_by_half_its_round_trip() {
        let sample = |send, guest, recv| ClockSample {
            host_send_ns: send,
            guest_ns: guest,
            host_recv_ns: recv,
        };
        // The guest is 1 000 000 ns ahead; its stamp is 30 µs after the send, the answer back after 100 µs.
        let s = sample(5_000_000, 6_030_000, 5_100_000);
        assert_eq!(s.rtt_ns(), 100_000);
        assert_eq!(s.offset_ns(), 980_000, "midpoint estimate");
        assert_eq!(s.bound_ns(), 50_000);
        assert!(
            (s.offset_ns() - 1_000_000).unsigned_abs() <= s.bound_ns(),
            "truth inside the bound"
        );
        // Guest behind the host: negative offsets.
        assert_eq!(sample(10_000, 0, 10_002).offset_ns(), -10_001);
    }
}

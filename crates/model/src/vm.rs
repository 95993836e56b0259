//! The virtualization tax explained from both sides: what a VM's host did to its vCPU threads (the host
//! record of `rtgauge vm observe`), the clock shared by guest and host (an NTP-style exchange with its error
//! bound), and the join that charges a guest spike episode's unattributed time to what the host did then.
//!
//! - [`HostRecord`]: every interval in which a vCPU thread was runnable but not running (who ran instead on
//!   its host CPU, or a host interrupt there), was interrupted while running (host IRQs, softirqs, vectors),
//!   or was outside the guest in a VM exit (with its reason, where the kvm tracepoints exist). Host
//!   CLOCK_MONOTONIC ns. Bounded: at most [`MAX_INTERVALS`] are kept, the oldest dropped and counted.
//! - [`ClockSync`]: the guest→host offset from exchanges over a channel both sides have: the host stamps
//!   its send (T1) and receive (T4), the guest its CLOCK_MONOTONIC in between (T), so the guest's stamp was
//!   taken at a host time inside [T1, T4]: offset = T − (T1 + T4)/2 within ±(T4 − T1)/2 — a bound, not an
//!   estimate of the error (RFC 5905 §8 with the two guest stamps equal). Each burst keeps its exchange with
//!   the smallest round trip (trace-cmd's ptp does the same); between bursts the offset is interpolated, so
//!   drift between the two clocks is followed.
//! - [`join`]: per guest episode, its vCPU's host intervals laid over the episode's unattributed stretches
//!   (the guest's own trace explains the rest) shifted onto the host clock; what the host explains becomes
//!   [`CauseKind::Host`] causes, the rest stays unattributed. An episode shorter than the clock's
//!   uncertainty (2 × bound) is not joined: it says so ([`HostVerdict::BoundTooWide`]).
//!
//! Pure arithmetic on intervals; the tracing and the channel live in `rtgauge_session::vm`.

use crate::attribution::{Cause, CauseKind, Episode, Span, Why};
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

/// When one clock sample is all there is (no drift known), the drift assumed beyond it: 200 ppm, above
/// what a crystal or kvm-clock drifts.
pub const ASSUMED_DRIFT_PPM: f64 = 200.0;

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
}

impl HostKind {
    /// Innermost wins where host intervals nest: an IRQ inside a culprit's time inside a VM exit.
    pub fn layer(self) -> u8 {
        match self {
            HostKind::Exit | HostKind::Asleep => 0,
            HostKind::Waiting | HostKind::Preempted | HostKind::WakerDelayed => 1,
            HostKind::Work => 2,
            HostKind::Softirq => 3,
            HostKind::Irq | HostKind::Vector => 4,
        }
    }

    /// The host kind of a host trace span.
    pub fn of_span(k: CauseKind) -> HostKind {
        match k {
            CauseKind::Irq => HostKind::Irq,
            CauseKind::Vector => HostKind::Vector,
            CauseKind::Softirq => HostKind::Softirq,
            CauseKind::Work => HostKind::Work,
            CauseKind::Thread => HostKind::Preempted,
            CauseKind::Unattributed | CauseKind::Host => HostKind::Waiting,
        }
    }
}

/// A cause as a sentence names it: "vCPU 1 off its CPU: rtg-noise/4123 FIFO 50 ran on host CPU 1".
pub fn host_cause_name(kind: HostKind, name: &str, vcpu: u32, cpu: u32) -> String {
    match kind {
        HostKind::Preempted => format!("vCPU {vcpu} off its CPU: {name} ran on host CPU {cpu}"),
        HostKind::Waiting => format!("vCPU {vcpu} runnable, waiting for host CPU {cpu}"),
        HostKind::Irq => format!("IRQ {name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Softirq => format!("softirq {name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Vector => format!("{name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Work => format!("work {name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Exit => format!("VM exit {name} (vCPU {vcpu})"),
        HostKind::Asleep => format!(
            "vCPU {vcpu}'s thread asleep on host CPU {cpu} (guest halted, or blocked in the hypervisor)"
        ),
        HostKind::WakerDelayed => format!("vCPU {vcpu} asleep, {name} on host CPU {cpu}"),
    }
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

    /// Time per (vCPU, kind, name, CPU) over the whole record, largest first: what the host did to the VM.
    /// The vCPU threads' sleep is left out (mostly the guest idling: see [`HostRecord::asleep_ns`]).
    pub fn totals(&self) -> Vec<HostCause> {
        let mut out: Vec<HostCause> = Vec::new();
        for i in self.intervals.iter().filter(|i| i.kind != HostKind::Asleep) {
            let name = host_cause_name(i.kind, self.name(i), i.vcpu, i.cpu);
            let ns = i.end_ns.saturating_sub(i.start_ns);
            match out.iter_mut().find(|c| c.kind == i.kind && c.name == name) {
                Some(c) => {
                    c.ns += ns;
                    c.count += 1;
                }
                None => out.push(HostCause {
                    kind: i.kind,
                    name,
                    ns,
                    count: 1,
                }),
            }
        }
        out.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
        out
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

impl ClockSync {
    /// Guest→host drift over the samples, ppm (guest seconds per host second − 1), when there are two.
    pub fn drift_ppm(&self) -> Option<f64> {
        let (a, b) = (self.samples.first()?, self.samples.last()?);
        let dt = b.host_send_ns as f64 - a.host_send_ns as f64;
        (self.samples.len() >= 2 && dt > 0.0)
            .then(|| (b.offset_ns() as f64 - a.offset_ns() as f64) / dt * 1e6)
    }

    /// The sample with the smallest bound.
    pub fn best(&self) -> Option<&ClockSample> {
        self.samples.iter().min_by_key(|s| s.bound_ns())
    }

    /// `guest_ns` on the host clock: the offset interpolated between the samples around it (their larger
    /// bound), or beyond the first/last sample extrapolated with the drift and the bound widened by what the
    /// drift could add over that distance ([`ASSUMED_DRIFT_PPM`] when a single sample gives none).
    pub fn to_host(&self, guest_ns: u64) -> Option<OnHost> {
        if self.samples.is_empty() {
            return None;
        }
        let mut s: Vec<&ClockSample> = self.samples.iter().collect();
        s.sort_by_key(|x| x.guest_ns);
        let at = s.partition_point(|x| x.guest_ns <= guest_ns);
        let (offset, bound) = if at > 0 && at < s.len() {
            let (a, b) = (s[at - 1], s[at]);
            let span = (b.guest_ns - a.guest_ns) as f64;
            let w = if span > 0.0 {
                (guest_ns - a.guest_ns) as f64 / span
            } else {
                0.0
            };
            let o = a.offset_ns() as f64 + w * (b.offset_ns() as f64 - a.offset_ns() as f64);
            (o.round() as i64, a.bound_ns().max(b.bound_ns()))
        } else {
            let near = if at == 0 { s[0] } else { s[s.len() - 1] };
            let dt = (guest_ns as i128 - near.guest_ns as i128) as f64;
            let drift = self.drift_ppm();
            let o = near.offset_ns() as f64 + drift.unwrap_or(0.0) * 1e-6 * dt;
            // What the drift estimate may be off by, over that distance.
            let slack = drift.map_or(ASSUMED_DRIFT_PPM, |d| d.abs() * 0.1 + 1.0) * 1e-6 * dt.abs();
            (
                o.round() as i64,
                near.bound_ns().saturating_add(slack.ceil() as u64),
            )
        };
        let host = guest_ns as i128 - offset as i128;
        Some(OnHost {
            host_ns: u64::try_from(host).ok()?,
            offset_ns: offset,
            bound_ns: bound,
        })
    }
}

/// One host cause of a guest episode (or of a whole record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCause {
    /// What the host did.
    pub kind: HostKind,
    /// As a sentence names it ([`host_cause_name`]).
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

impl EpisodeHost {
    /// "vCPU 1 off its CPU for 19.8 ms: rtg-noise/4123 FIFO 50 ran on host CPU 1; …; clock ±0.4 ms" or why
    /// it was not joined.
    pub fn sentence(&self, window_ns: u64) -> String {
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        let bound = format!("{:.2} ms", self.bound_ns as f64 / 1e6);
        match self.verdict {
            HostVerdict::BoundTooWide => format!(
                "not joined: the clock's uncertainty ±{bound} is wider than this {} episode",
                ms(window_ns)
            ),
            HostVerdict::NotCovered => {
                "not joined: the host record does not cover this episode".to_string()
            }
            HostVerdict::NoVcpu => format!("not joined: the host record has no vCPU {}", self.vcpu),
            HostVerdict::NoClock => {
                "not joined: the host record has no guest clock (vm observe --clock)".to_string()
            }
            HostVerdict::Joined if self.causes.is_empty() => format!(
                "the host did nothing to vCPU {} then (clock ±{bound}): {} stays unattributed",
                self.vcpu,
                ms(self.guest_unattributed_ns)
            ),
            HostVerdict::Joined => {
                let parts: Vec<String> = self
                    .causes
                    .iter()
                    .take(4)
                    .map(|c| format!("{} for {}", c.name, ms(c.ns)))
                    .collect();
                let [lo, hi] = self.explained_range_ns;
                let left = self.guest_unattributed_ns.saturating_sub(self.explained_ns);
                format!(
                    "{}; {} of the guest's {} unattributed explained ({}–{} within the clock's ±{bound}), {} left",
                    parts.join("; "),
                    ms(self.explained_ns),
                    ms(self.guest_unattributed_ns),
                    ms(lo),
                    ms(hi),
                    ms(left)
                )
            }
        }
    }
}

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

/// The stretches of `[start, end)` no span covers: where the guest's own trace explains nothing. At most
/// [`MAX_GAPS`], the longest, in time order.
pub fn uncovered(start: u64, end: u64, spans: &[Span]) -> Vec<[u64; 2]> {
    let mut inside: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.end_ns > start && s.start_ns < end && s.end_ns > s.start_ns)
        .map(|s| (s.start_ns.max(start), s.end_ns.min(end)))
        .collect();
    inside.sort_unstable();
    let mut gaps = Vec::new();
    let mut at = start;
    for (a, b) in inside {
        if a > at {
            gaps.push([at, a]);
        }
        at = at.max(b);
    }
    if at < end {
        gaps.push([at, end]);
    }
    if gaps.len() > MAX_GAPS {
        gaps.sort_by_key(|g| std::cmp::Reverse(g[1] - g[0]));
        gaps.truncate(MAX_GAPS);
        gaps.sort_unstable();
    }
    gaps
}

/// Elementary pieces of `[start, end)` under `intervals` (start, end, layer, key): each piece goes to the
/// covering interval of the highest layer (the latest start among equals); pieces nothing covers are
/// left out. Adjacent pieces of one key merge.
pub fn layered<K: Copy + PartialEq>(
    start: u64,
    end: u64,
    intervals: &[(u64, u64, u8, K)],
) -> Vec<(u64, u64, K)> {
    let inside: Vec<&(u64, u64, u8, K)> = intervals
        .iter()
        .filter(|s| s.1 > start && s.0 < end && s.1 > s.0)
        .collect();
    let mut cuts: Vec<u64> = vec![start, end];
    for s in &inside {
        cuts.push(s.0.clamp(start, end));
        cuts.push(s.1.clamp(start, end));
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<(u64, u64, K)> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let top = inside
            .iter()
            .filter(|s| s.0 <= a && s.1 >= b)
            .max_by_key(|s| (s.2, s.0));
        if let Some(s) = top {
            match out.last_mut() {
                Some(l) if l.1 == a && l.2 == s.3 => l.1 = b,
                _ => out.push((a, b, s.3)),
            }
        }
    }
    out
}

/// A host interval's cause: its kind, name index and host CPU.
type Key = (HostKind, u32, u32);

/// One vCPU's intervals, sorted by start, with the longest one's length (to find those overlapping a
/// window by binary search).
struct VcpuIntervals<'a> {
    list: Vec<&'a HostInterval>,
    longest: u64,
}

impl<'a> VcpuIntervals<'a> {
    fn new(record: &'a HostRecord, vcpu: u32) -> VcpuIntervals<'a> {
        let mut list: Vec<&HostInterval> =
            record.intervals.iter().filter(|i| i.vcpu == vcpu).collect();
        list.sort_by_key(|i| i.start_ns);
        let longest = list
            .iter()
            .map(|i| i.end_ns.saturating_sub(i.start_ns))
            .max()
            .unwrap_or(0);
        VcpuIntervals { list, longest }
    }

    fn overlapping(&self, a: u64, b: u64) -> impl Iterator<Item = &&'a HostInterval> {
        let from = self
            .list
            .partition_point(|i| i.start_ns < a.saturating_sub(self.longest));
        self.list[from..]
            .iter()
            .take_while(move |i| i.start_ns < b)
            .filter(move |i| i.end_ns > a)
    }

    /// What the host did over the host-clock stretches `gaps`: causes keyed by the interval's (kind, name,
    /// CPU), with their time and how many intervals made them.
    fn explain(&self, gaps: &[(u64, u64)]) -> Vec<(Key, u64, u64)> {
        self.explain_with(gaps, &mut |_, _, _| {})
    }

    /// [`VcpuIntervals::explain`], handing each piece (host start, end, key) to `piece` too.
    fn explain_with(
        &self,
        gaps: &[(u64, u64)],
        piece: &mut dyn FnMut(u64, u64, Key),
    ) -> Vec<(Key, u64, u64)> {
        let mut by: Vec<(Key, u64, u64)> = Vec::new();
        for &(a, b) in gaps {
            let around: Vec<(u64, u64, u8, Key)> = self
                .overlapping(a, b)
                .map(|i| {
                    (
                        i.start_ns,
                        i.end_ns,
                        i.kind.layer(),
                        (i.kind, i.name, i.cpu),
                    )
                })
                .collect();
            for (x, y, k) in layered(a, b, &around) {
                piece(x, y, k);
                match by.iter_mut().find(|c| c.0 == k) {
                    Some(c) => c.1 += y - x,
                    None => by.push((k, y - x, 0)),
                }
            }
            for c in by.iter_mut() {
                c.2 += around.iter().filter(|s| s.3 == c.0).count() as u64;
            }
        }
        by
    }
}

/// The guest's unattributed stretches of an episode: its recorded gaps, or the whole window when the
/// guest explained nothing, or (an episode broken down before gaps were recorded) the whole window with
/// the host's share capped at the unattributed time (returned as the cap).
fn guest_gaps(e: &Episode) -> (Vec<(u64, u64)>, u64) {
    let unattributed: u64 = e
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Unattributed)
        .map(|c| c.ns)
        .sum();
    let window = (e.start_mono_ns, e.start_mono_ns.saturating_add(e.window_ns));
    if !e.gaps.is_empty() {
        return (e.gaps.iter().map(|g| (g[0], g[1])).collect(), unattributed);
    }
    (vec![window], unattributed)
}

/// Join every episode of `why` with `record`: see the module documentation. Episodes already joined are
/// joined afresh (their host causes go back to unattributed first).
pub fn join(why: &mut Why, record: &HostRecord) {
    let mut counts = [0u64; 5];
    for e in why.episodes.iter_mut() {
        unjoin(e);
        let h = join_episode(e, record);
        counts[h.verdict as usize] += 1;
        if h.verdict == HostVerdict::Joined {
            let mut left = h.explained_ns;
            if let Some(u) = e
                .causes
                .iter_mut()
                .find(|c| c.kind == CauseKind::Unattributed)
            {
                let take = left.min(u.ns);
                u.ns -= take;
                left = take;
            }
            let mut given = 0;
            for c in &h.causes {
                let ns = c.ns.min(left - given);
                given += ns;
                if ns > 0 {
                    e.causes.push(Cause {
                        kind: CauseKind::Host,
                        name: c.name.clone(),
                        ns,
                        count: c.count,
                    });
                }
            }
            e.causes.retain(|c| c.ns > 0);
            e.causes
                .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.kind.cmp(&b.kind)));
        }
        e.host = Some(h);
    }
    let clock = match &record.clock {
        Some(c) => match c.best() {
            Some(b) => format!(
                "{}: {} bursts of min-RTT exchanges ({} of {} exchanges failed); best offset {:+.3} ms ± {:.3} ms",
                c.channel,
                c.samples.len(),
                c.failed,
                c.exchanges,
                b.offset_ns() as f64 / 1e6,
                b.bound_ns() as f64 / 1e6
            ),
            None => format!("{}: no exchange answered ({} tried)", c.channel, c.exchanges),
        },
        None => "none (vm observe without --clock)".to_string(),
    };
    let names = [
        "joined",
        "bound too wide",
        "not covered",
        "no vCPU",
        "no clock",
    ];
    let not_joined: Vec<String> = (1..5)
        .filter(|&i| counts[i] > 0)
        .map(|i| format!("{} {}", counts[i], names[i]))
        .collect();
    let mut totals = record.totals();
    totals.truncate(10);
    why.host = Some(HostJoin {
        host: record.host.clone(),
        vm: match &record.vm.name {
            Some(n) => format!("pid {} ({n})", record.vm.pid),
            None => format!("pid {}", record.vm.pid),
        },
        clock,
        drift_ppb: record
            .clock
            .as_ref()
            .and_then(ClockSync::drift_ppm)
            .map(|d| (d * 1e3).round() as i64),
        joined: counts[0],
        not_joined: not_joined.join(", "),
        host_totals: totals,
        missing: record.missing.clone(),
    });
}

/// Undo an earlier join of `e`: its host causes go back to the unattributed remainder.
fn unjoin(e: &mut Episode) {
    let back: u64 = e
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Host)
        .map(|c| c.ns)
        .sum();
    e.causes.retain(|c| c.kind != CauseKind::Host);
    if back > 0 {
        match e
            .causes
            .iter_mut()
            .find(|c| c.kind == CauseKind::Unattributed)
        {
            Some(u) => u.ns += back,
            None => e.causes.push(Cause {
                kind: CauseKind::Unattributed,
                name: String::new(),
                ns: back,
                count: 0,
            }),
        }
        e.causes
            .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.kind.cmp(&b.kind)));
    }
    e.host = None;
}

fn join_episode(e: &Episode, record: &HostRecord) -> EpisodeHost {
    let (gaps, unattributed) = guest_gaps(e);
    let mut h = EpisodeHost {
        verdict: HostVerdict::NoClock,
        vcpu: e.cpu,
        host_start_ns: 0,
        offset_ns: 0,
        bound_ns: 0,
        guest_unattributed_ns: unattributed,
        explained_ns: 0,
        explained_range_ns: [0, 0],
        causes: Vec::new(),
        segments: Vec::new(),
    };
    let Some(on) = record
        .clock
        .as_ref()
        .and_then(|c| c.to_host(e.start_mono_ns))
    else {
        return h;
    };
    h.host_start_ns = on.host_ns;
    h.offset_ns = on.offset_ns;
    h.bound_ns = on.bound_ns;
    if record.vcpu(e.cpu).is_none() {
        h.verdict = HostVerdict::NoVcpu;
        return h;
    }
    if on.bound_ns.saturating_mul(2) >= e.window_ns {
        h.verdict = HostVerdict::BoundTooWide;
        return h;
    }
    let to_host =
        |g: u64, shift: i64| (g as i128 - on.offset_ns as i128 + shift as i128).max(0) as u64;
    let (first, last) = (
        to_host(e.start_mono_ns, 0),
        to_host(e.start_mono_ns.saturating_add(e.window_ns), 0),
    );
    let b = on.bound_ns;
    if !record.covers(first.saturating_sub(b), last.saturating_add(b)) {
        h.verdict = HostVerdict::NotCovered;
        return h;
    }
    h.verdict = HostVerdict::Joined;
    let vi = VcpuIntervals::new(record, e.cpu);
    let shifted = |shift: i64| -> Vec<(u64, u64)> {
        gaps.iter()
            .map(|&(a, z)| (to_host(a, shift), to_host(z, shift)))
            .collect()
    };
    let total = |by: &[(Key, u64, u64)]| by.iter().map(|c| c.1).sum::<u64>();
    let mut pieces: Vec<(u64, u64, Key)> = Vec::new();
    let by = vi.explain_with(&shifted(0), &mut |x, y, k| pieces.push((x, y, k)));
    // The same over offsets spread across the bound: how much the answer depends on the clock.
    let mut lo = total(&by);
    let mut hi = lo;
    let bi = i64::try_from(b).unwrap_or(i64::MAX / 4);
    for k in [-4i64, -3, -2, -1, 1, 2, 3, 4] {
        let t = total(&vi.explain(&shifted(bi * k / 4)));
        lo = lo.min(t);
        hi = hi.max(t);
    }
    let cap = unattributed;
    let mut causes: Vec<HostCause> = by
        .iter()
        .map(|&((kind, name, cpu), ns, count)| HostCause {
            kind,
            name: host_cause_name(
                kind,
                record.names.get(name as usize).map_or("?", |s| s),
                e.cpu,
                cpu,
            ),
            ns,
            count,
        })
        .collect();
    causes.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    h.explained_ns = total(&by).min(cap);
    h.explained_range_ns = [lo.min(cap), hi.min(cap)];
    // The pieces on the guest's clock, each naming its cause, for a timeline of both sides; the longest
    // MAX_SEGMENTS when there are more.
    let guest = |x: u64| (x as i128 + on.offset_ns as i128).max(0) as u64;
    if pieces.len() > MAX_SEGMENTS {
        pieces.sort_by_key(|p| std::cmp::Reverse(p.1 - p.0));
        pieces.truncate(MAX_SEGMENTS);
        pieces.sort_unstable_by_key(|p| p.0);
    }
    h.segments = pieces
        .iter()
        .filter_map(|&(x, y, (kind, name, cpu))| {
            let n = host_cause_name(
                kind,
                record.names.get(name as usize).map_or("?", |s| s),
                e.cpu,
                cpu,
            );
            let cause = causes.iter().position(|c| c.name == n)?;
            Some(HostSegment {
                start_ns: guest(x),
                end_ns: guest(y),
                cause: cause as u32,
            })
        })
        .collect();
    h.causes = causes;
    h
}

/// Give a cyclic result measured without `--trace` episodes from its late samples, so the host can explain
/// them; `false` when it has neither.
pub fn ensure_episodes(c: &mut crate::cyclic::CyclicResult) -> bool {
    if c.why.as_ref().is_some_and(|w| w.trace.is_some()) {
        return true;
    }
    let Some(thr) = c.config.spike_threshold_ns.filter(|_| !c.spikes.is_empty()) else {
        return false;
    };
    let cpus = c.config.cpus.clone();
    let (episodes, total) =
        episodes_from_spikes(&c.spikes, |t| cpus.get(t as usize).copied().flatten(), thr);
    let why = c.why.get_or_insert_with(Default::default);
    why.episodes = episodes;
    why.episodes_total = total;
    why.threshold = Some(crate::attribution::EpisodeThreshold {
        ns: thr,
        rule: "--spike (the guest was not traced: its late samples only)".into(),
    });
    true
}

/// A guest run measured without `--trace` (a VMware guest, or to keep the probe undisturbed): its late
/// samples (`--spike`) grouped into episodes, each wholly unattributed from the guest's side, so that the
/// host can still explain them. `cpu_of` gives a thread's CPU where a late sample does not say; the worst
/// [`crate::attribution::MAX_EPISODES`] at or above `threshold_ns` are kept, with the count of all.
pub fn episodes_from_spikes(
    spikes: &[crate::cyclic::Spike],
    cpu_of: impl Fn(u32) -> Option<u32>,
    threshold_ns: u64,
) -> (Vec<Episode>, u64) {
    use crate::attribution::{EpisodeTracker, Late, MAX_EPISODES};
    let mut t = EpisodeTracker::default();
    let mut retain = Vec::new();
    let mut sorted: Vec<&crate::cyclic::Spike> = spikes.iter().collect();
    sorted.sort_by_key(|s| (s.thread, s.monotonic_ns));
    for s in sorted {
        let Some(cpu) = s.cpu.or_else(|| cpu_of(s.thread)) else {
            continue;
        };
        t.feed(
            Late {
                thread: s.thread,
                cpu,
                start_ns: s.monotonic_ns.saturating_sub(s.latency_ns),
                end_ns: s.monotonic_ns,
            },
            &mut retain,
        );
    }
    t.finish(&mut retain);
    let (kept, total) = t.above(threshold_ns);
    let episodes = kept
        .iter()
        .take(MAX_EPISODES)
        .map(|c| {
            let w = c.end_ns.saturating_sub(c.start_ns);
            Episode {
                cpu: c.cpu,
                thread: c.thread,
                start_mono_ns: c.start_ns,
                window_ns: w,
                samples: c.samples,
                worst_ns: c.worst_ns,
                causes: vec![Cause {
                    kind: CauseKind::Unattributed,
                    name: String::new(),
                    ns: w,
                    count: 0,
                }],
                steal_ns: 0,
                gaps: vec![[c.start_ns, c.end_ns]],
                host: None,
            }
        })
        .collect();
    (episodes, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(send: u64, guest: u64, recv: u64) -> ClockSample {
        ClockSample {
            host_send_ns: send,
            guest_ns: guest,
            host_recv_ns: recv,
        }
    }

    #[test]
    fn an_exchange_bounds_the_offset_by_half_its_round_trip() {
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

    #[test]
    fn offsets_are_interpolated_and_extrapolated_with_the_drift() {
        // Guest = host × (1 + 100 ppm) + 1 s: samples each second, each with 10 µs round trip.
        let truth = |h: u64| h + 1_000_000_000 + h / 10_000;
        let samples: Vec<ClockSample> = (1..=5)
            .map(|k| {
                let h = k * 1_000_000_000;
                sample(h - 5_000, truth(h), h + 5_000)
            })
            .collect();
        let c = ClockSync {
            samples,
            ..ClockSync::default()
        };
        let d = c.drift_ppm().unwrap();
        assert!((d - 100.0).abs() < 1.0, "{d}");
        for host in [1_500_000_000u64, 3_250_000_000, 7_000_000_000, 200_000_000] {
            let on = c.to_host(truth(host)).unwrap();
            let err = (on.host_ns as i64 - host as i64).unsigned_abs();
            assert!(
                err <= on.bound_ns,
                "{host}: error {err} > bound {}",
                on.bound_ns
            );
        }
        // Inside: the samples' bound; 2 s past the last sample: wider.
        assert_eq!(c.to_host(truth(2_500_000_000)).unwrap().bound_ns, 5_000);
        assert!(c.to_host(truth(7_000_000_000)).unwrap().bound_ns > 5_000);
        // One sample: the assumed drift widens the bound with distance.
        let one = ClockSync {
            samples: vec![sample(1_000, 2_000, 1_200)],
            ..ClockSync::default()
        };
        assert_eq!(one.to_host(2_000).unwrap().bound_ns, 100);
        assert_eq!(
            one.to_host(1_000_002_000).unwrap().bound_ns,
            100 + 200_000,
            "200 ppm of 1 s"
        );
        assert!(ClockSync::default().to_host(5).is_none());
    }

    #[test]
    fn uncovered_stretches_are_what_no_span_covers() {
        let span = |a, b| Span {
            start_ns: a,
            end_ns: b,
            kind: CauseKind::Irq,
            name: "x".into(),
        };
        assert_eq!(uncovered(0, 100, &[]), vec![[0, 100]]);
        assert_eq!(
            uncovered(0, 100, &[span(10, 20), span(15, 30), span(90, 200)]),
            vec![[0, 10], [30, 90]]
        );
        assert!(uncovered(0, 100, &[span(0, 100)]).is_empty());
        // Many gaps: the longest MAX_GAPS, in time order.
        let many: Vec<Span> = (0..200)
            .map(|i| span(i * 10 + 1 + i % 3, i * 10 + 10))
            .collect();
        let g = uncovered(0, 2_000, &many);
        assert_eq!(g.len(), MAX_GAPS);
        assert!(g.windows(2).all(|w| w[0][0] < w[1][0]));
        assert!(g.iter().all(|x| x[1] - x[0] == 3), "{g:?}");
    }

    #[test]
    fn layers_give_each_instant_to_the_innermost_interval() {
        let iv = [(0u64, 100u64, 0u8, 'e'), (10, 60, 1, 'p'), (20, 25, 4, 'i')];
        assert_eq!(
            layered(0, 100, &iv),
            vec![
                (0, 10, 'e'),
                (10, 20, 'p'),
                (20, 25, 'i'),
                (25, 60, 'p'),
                (60, 100, 'e')
            ]
        );
        assert_eq!(layered(200, 300, &iv), vec![]);
        assert_eq!(layered(50, 70, &iv), vec![(50, 60, 'p'), (60, 70, 'e')]);
    }

    /// A record of vCPU 1 preempted for 20 ms by a FIFO 50 thread at host 10.000 s, a host IRQ inside, a
    /// guest 5 s ahead of the host, measured with ±50 µs.
    fn record() -> HostRecord {
        let iv = |start_ns, end_ns, kind, name| HostInterval {
            vcpu: 1,
            cpu: 1,
            start_ns,
            end_ns,
            kind,
            name,
        };
        HostRecord {
            kind: HOST_RECORD_KIND.into(),
            schema_version: HOST_SCHEMA_VERSION,
            host: "h".into(),
            vm: VmIdent {
                pid: 42,
                name: Some("g".into()),
                found_by: "thread names".into(),
                accel: Some("TCG".into()),
            },
            vcpus: vec![
                VcpuThread {
                    index: 0,
                    tid: 43,
                    comm: "CPU 0/TCG".into(),
                    cpus_allowed: "0".into(),
                },
                VcpuThread {
                    index: 1,
                    tid: 44,
                    comm: "CPU 1/TCG".into(),
                    cpus_allowed: "1".into(),
                },
            ],
            started_ns: 1_000_000_000,
            ended_ns: 30_000_000_000,
            names: vec!["rtg-noise/77 FIFO 50".into(), "9 acpi".into()],
            intervals: vec![
                iv(10_000_000_000, 10_020_000_000, HostKind::Preempted, 0),
                iv(10_005_000_000, 10_005_200_000, HostKind::Irq, 1),
            ],
            clock: Some(ClockSync {
                channel: "unix:/x".into(),
                samples: vec![
                    sample(2_000_000_000, 7_000_050_000, 2_000_100_000),
                    sample(20_000_000_000, 25_000_050_000, 20_000_100_000),
                ],
                ..ClockSync::default()
            }),
            ..HostRecord::default()
        }
    }

    fn episode(
        cpu: u32,
        start: u64,
        window: u64,
        causes: Vec<Cause>,
        gaps: Vec<[u64; 2]>,
    ) -> Episode {
        Episode {
            cpu,
            thread: 0,
            start_mono_ns: start,
            window_ns: window,
            samples: 20,
            worst_ns: window,
            causes,
            steal_ns: 0,
            gaps,
            host: None,
        }
    }

    fn unattributed(ns: u64) -> Cause {
        Cause {
            kind: CauseKind::Unattributed,
            name: String::new(),
            ns,
            count: 0,
        }
    }

    #[test]
    fn a_guest_stall_is_charged_to_the_host_thread_that_preempted_its_vcpu() {
        // Guest 15.000 s = host 10.000 s: the guest saw 20.5 ms, 0.5 ms of it its own local timer.
        let timer = Cause {
            kind: CauseKind::Vector,
            name: "local_timer".into(),
            ns: 500_000,
            count: 1,
        };
        let e = episode(
            1,
            14_999_900_000,
            20_500_000,
            vec![unattributed(20_000_000), timer],
            vec![
                [14_999_900_000, 15_010_000_000],
                [15_010_500_000, 15_020_400_000],
            ],
        );
        let mut why = Why {
            episodes: vec![e.clone()],
            ..Why::default()
        };
        let r = record();
        // Stored as rows, read back whole.
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.contains(r#"[1,1,10000000000,10020000000,"preempted",0]"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<HostRecord>(&text).unwrap(), r);
        join(&mut why, &r);
        let j = &why.episodes[0];
        let h = j.host.as_ref().unwrap();
        assert_eq!(h.verdict, HostVerdict::Joined);
        assert_eq!(h.bound_ns, 50_000);
        assert_eq!(h.offset_ns, 5_000_000_000);
        assert_eq!(
            h.causes[0].name,
            "vCPU 1 off its CPU: rtg-noise/77 FIFO 50 ran on host CPU 1"
        );
        assert_eq!(
            h.causes[0].ns, 19_300_000,
            "20 ms − the IRQ − the guest's own timer"
        );
        assert_eq!(h.causes[1].name, "IRQ 9 acpi on host CPU 1 (vCPU 1)");
        assert_eq!(h.explained_ns, 19_500_000);
        // The timeline: preempted, the IRQ, preempted again (on the guest's clock), the guest's own timer
        // between the two gaps left out.
        let seg: Vec<(u64, u64, u32)> = h
            .segments
            .iter()
            .map(|s| (s.start_ns, s.end_ns, s.cause))
            .collect();
        assert_eq!(
            seg,
            vec![
                (15_000_000_000, 15_005_000_000, 0),
                (15_005_000_000, 15_005_200_000, 1),
                (15_005_200_000, 15_010_000_000, 0),
                (15_010_500_000, 15_020_000_000, 0),
            ]
        );
        assert!(h.explained_range_ns[0] <= 19_500_000 && h.explained_range_ns[1] >= 19_500_000);
        assert!(
            h.explained_range_ns[1] - h.explained_range_ns[0] <= 100_000,
            "{h:?}"
        );
        // The guest's causes: the host's share replaces unattributed; the whole still sums to the window.
        assert_eq!(j.causes[0].kind, CauseKind::Host);
        assert_eq!(j.causes.iter().map(|c| c.ns).sum::<u64>(), 20_500_000);
        let left = j
            .causes
            .iter()
            .find(|c| c.kind == CauseKind::Unattributed)
            .unwrap()
            .ns;
        assert_eq!(left, 500_000);
        assert!(
            j.sentence()
                .starts_with("94 % host vCPU 1 off its CPU: rtg-noise/77"),
            "{}",
            j.sentence()
        );
        assert!(h
            .sentence(j.window_ns)
            .contains("19.5 ms of the guest's 20.0 ms unattributed explained"));
        let info = why.host.as_ref().unwrap();
        assert_eq!(info.joined, 1);
        assert_eq!(info.host_totals[0].ns, 20_000_000);
        assert_eq!(r.asleep_ns(), 0);
        // Joining again changes nothing.
        let once = why.clone();
        join(&mut why, &r);
        assert_eq!(why, once);
    }

    #[test]
    fn what_the_host_did_not_do_stays_unattributed_and_nothing_is_guessed() {
        let r = record();
        // A stall on vCPU 0: the host preempted vCPU 1, not 0.
        let mut why = Why {
            episodes: vec![episode(
                0,
                14_999_900_000,
                20_000_000,
                vec![unattributed(20_000_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &r);
        let j = &why.episodes[0];
        let h = j.host.as_ref().unwrap();
        assert_eq!(h.verdict, HostVerdict::Joined);
        assert!(h.causes.is_empty());
        assert_eq!(j.causes, vec![unattributed(20_000_000)]);
        assert!(h
            .sentence(j.window_ns)
            .contains("the host did nothing to vCPU 0"));
        // A stall on vCPU 1 a second later: nothing either.
        let mut why = Why {
            episodes: vec![episode(
                1,
                16_000_000_000,
                20_000_000,
                vec![unattributed(20_000_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &r);
        assert!(why.episodes[0].host.as_ref().unwrap().causes.is_empty());
        // An episode of 80 µs against a ±50 µs clock: refused.
        let mut why = Why {
            episodes: vec![episode(
                1,
                15_005_000_000,
                80_000,
                vec![unattributed(80_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &r);
        let j = &why.episodes[0];
        assert_eq!(j.host.as_ref().unwrap().verdict, HostVerdict::BoundTooWide);
        assert_eq!(j.causes, vec![unattributed(80_000)], "nothing guessed");
        assert!(j
            .host
            .as_ref()
            .unwrap()
            .sentence(80_000)
            .contains("wider than this"));
        // Before the observation; no vCPU 7; no clock.
        for (cpu, start, rec, want) in [
            (1, 5_100_000_000, r.clone(), HostVerdict::NotCovered),
            (7, 15_000_000_000, r.clone(), HostVerdict::NoVcpu),
            (
                1,
                15_000_000_000,
                HostRecord {
                    clock: None,
                    ..r.clone()
                },
                HostVerdict::NoClock,
            ),
        ] {
            let mut why = Why {
                episodes: vec![episode(
                    cpu,
                    start,
                    20_000_000,
                    vec![unattributed(20_000_000)],
                    vec![],
                )],
                ..Why::default()
            };
            join(&mut why, &rec);
            assert_eq!(why.episodes[0].host.as_ref().unwrap().verdict, want);
            assert_eq!(why.episodes[0].causes, vec![unattributed(20_000_000)]);
        }
    }

    #[test]
    fn late_samples_of_an_untraced_guest_become_unattributed_episodes() {
        let spike = |thread, latency_ns, monotonic_ns| crate::cyclic::Spike {
            thread,
            cycle: 0,
            latency_ns,
            monotonic_ns,
            cpu: None,
        };
        // Thread 0 on CPU 1: one 20 ms stall seen by 20 late 1 ms periods, and a lone 50 µs sample.
        let mut s: Vec<_> = (0..20)
            .map(|k| spike(0, 20_000_000 - k * 1_000_000, 15_020_000_000))
            .collect();
        s.push(spike(0, 50_000, 16_000_000_000));
        let (e, total) = episodes_from_spikes(&s, |t| (t == 0).then_some(1), 1_000_000);
        assert_eq!((e.len(), total), (1, 1));
        assert_eq!(
            (e[0].cpu, e[0].samples, e[0].window_ns),
            (1, 20, 20_000_000)
        );
        assert_eq!(e[0].gaps, vec![[15_000_000_000, 15_020_000_000]]);
        let mut why = Why {
            episodes: e,
            ..Why::default()
        };
        join(&mut why, &record());
        assert_eq!(
            why.episodes[0].top().map(|c| c.kind),
            Some(CauseKind::Host),
            "{:?}",
            why.episodes[0]
        );
        // A thread whose CPU is unknown is left out.
        assert_eq!(episodes_from_spikes(&s, |_| None, 1).1, 0);
    }

    #[test]
    fn an_episode_without_gaps_caps_the_host_share_at_its_unattributed_time() {
        // A document broken down before gaps were kept: 15 ms of thread, 5 ms unattributed.
        let thread = Cause {
            kind: CauseKind::Thread,
            name: "x/1 CFS".into(),
            ns: 15_000_000,
            count: 1,
        };
        let mut why = Why {
            episodes: vec![episode(
                1,
                15_000_000_000,
                20_000_000,
                vec![thread, unattributed(5_000_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &record());
        let j = &why.episodes[0];
        assert_eq!(j.host.as_ref().unwrap().explained_ns, 5_000_000);
        assert_eq!(j.causes.iter().map(|c| c.ns).sum::<u64>(), 20_000_000);
        assert!(j.causes.iter().all(|c| c.kind != CauseKind::Unattributed));
    }
}

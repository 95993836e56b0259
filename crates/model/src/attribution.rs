//! Why a spike happened, as data: the always-on per-interval interrupt/softirq/scheduler counters of the
//! measured CPUs, and (with `--trace`) each spike episode's window broken down into the kernel activity
//! that filled it.
//!
//! An *episode* is one stall as the probe saw it: the late samples whose windows (expected wake-up → actual
//! wake-up) overlap are one episode, so a 5 ms stall of a 1 ms timer is one episode of five late samples,
//! not five spikes.
//!
//! Plain data. The counters are read by `rtgauge_host::counters`, the trace by `rtgauge_probe::trace`;
//! grouping late samples into episodes, breaking a window down and judging an interval against the
//! typical one are `rtgauge_analysis`.

use serde::{Deserialize, Serialize};

/// What rose on one measured CPU during one timeline interval (deltas over the interval).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IntervalCounters {
    /// The measured CPU these counters are for.
    pub cpu: u32,
    /// Start of the interval, ns after the probe's start (matches the timeline's `start_ns`).
    pub start_ns: u64,
    /// Length of the interval, ns (0 in documents written before intervals could merge: one timeline interval).
    #[serde(default)]
    pub len_ns: u64,
    /// Interrupts per source (`/proc/interrupts`: "24 virtio0-input", "LOC", "RES", "CAL", "NMI", ...), the
    /// largest first, at most [`TOP_SOURCES`] kept.
    pub irqs: Vec<(String, u64)>,
    /// Softirqs per type (`/proc/softirqs`: TIMER, NET_RX, RCU, SCHED, ...), non-zero only.
    pub softirqs: Vec<(String, u64)>,
    /// Calls of the scheduler on the CPU (`/proc/schedstat` sched_count): context switches and idle entries.
    /// `None` where the kernel has no schedstats (CONFIG_SCHEDSTATS off, as here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_calls: Option<u64>,
    /// Time the CPU spent in hard IRQ, softirq and stolen by the hypervisor (`/proc/stat`, tick resolution).
    pub irq_ns: u64,
    /// Time the CPU spent in softirqs over the interval (`/proc/stat`, tick resolution), ns.
    pub softirq_ns: u64,
    /// Time the hypervisor stole from the CPU over the interval (`/proc/stat`, tick resolution), ns.
    pub steal_ns: u64,
    /// Time the probe's thread(s) on this CPU were runnable but waited for the CPU (their
    /// `/proc/<pid>/task/<tid>/schedstat` run delay, ns resolution): other tasks held the CPU. `None` where
    /// the kernel keeps no per-task schedstat (CONFIG_SCHED_INFO off) or the thread is not pinned here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_ns: Option<u64>,
    /// System Management Interrupts the CPU took over the interval (`MSR_SMI_COUNT` deltas): firmware ran
    /// and no kernel saw it. `None` where SMIs are not countable ([`Why::smi`] says why) or were not asked
    /// for per interval (`--smi`: each read interrupts the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smis: Option<u64>,
}

/// Interrupt sources kept per interval.
pub const TOP_SOURCES: usize = 8;

/// Most counter intervals kept per CPU; beyond it adjacent intervals merge pairwise (as the windows do), so
/// a 7-day run keeps ~2048 intervals of ~5 min per CPU instead of 604 800 one-second ones.
pub const MAX_INTERVALS: usize = 2048;

impl IntervalCounters {
    /// All interrupts of the interval.
    pub fn irq_total(&self) -> u64 {
        self.irqs.iter().map(|(_, n)| n).sum()
    }
    /// One line naming what rose: "LOC 1000, RES 40, NET_RX 12, 2000 sched, steal 0 ms".
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .irqs
            .iter()
            .take(4)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        parts.extend(
            self.softirqs
                .iter()
                .take(3)
                .map(|(n, c)| format!("{n} {c}")),
        );
        if let Some(n) = self.sched_calls {
            parts.push(format!("{n} sched"));
        }
        if self.steal_ns > 0 {
            parts.push(format!("steal {:.1} ms", self.steal_ns as f64 / 1e6));
        }
        if let Some(n) = self.smis.filter(|&n| n > 0) {
            parts.push(format!("{n} SMI{}", if n == 1 { "" } else { "s" }));
        }
        parts.join(", ")
    }
}

/// The kind of activity a share of a spike is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// A hard IRQ handler (name: "24 virtio0-input").
    Irq,
    /// An architecture vector: local timer, IPIs (call function, reschedule), NMI.
    Vector,
    /// A softirq (name: TIMER, NET_RX, ...).
    Softirq,
    /// Another thread ran on the CPU (name: "comm/pid prio").
    Thread,
    /// A workqueue work item (name: the function).
    Work,
    /// Nothing visible from inside the OS: hypervisor, SMI/firmware, hardware, or the wake-up path itself.
    Unattributed,
    /// What the VM's host did to the vCPU (joined from a host record, `rtgauge vm join`): the thread that ran
    /// instead, a host IRQ, a VM exit — the name says which ([`crate::vm`]).
    Host,
}

impl CauseKind {
    /// The name used in sentences and tables ("IRQ", "softirq", "unattributed", ...).
    pub fn label(self) -> &'static str {
        match self {
            CauseKind::Irq => "IRQ",
            CauseKind::Vector => "vector",
            CauseKind::Softirq => "softirq",
            CauseKind::Thread => "thread",
            CauseKind::Work => "work",
            CauseKind::Unattributed => "unattributed",
            CauseKind::Host => "host",
        }
    }
}

/// One named share of a spike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    /// The kind of activity.
    pub kind: CauseKind,
    /// The activity's name: IRQ source, softirq type, "comm/pid prio" of a thread, work function; empty for the remainder.
    pub name: String,
    /// Time of the window spent in it, ns.
    pub ns: u64,
    /// How many times it started (IRQs, softirqs) or was switched in (threads) inside the window; a softirq
    /// or work item its thread was switched out of counts once for each stretch it ran.
    pub count: u64,
}

fn one() -> u64 {
    1
}

/// One spike episode (one stall, however many late samples it made) and what filled its window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Episode {
    /// The CPU the episode was measured on.
    pub cpu: u32,
    /// Thread index of the probe (cyclic) or 0 (oslat).
    pub thread: u32,
    /// CLOCK_MONOTONIC time of the window's start (the first late sample's expected wake-up, or the gap's
    /// start), ns.
    pub start_mono_ns: u64,
    /// Length of the window (from the first late sample's expected wake-up to the last one's actual
    /// wake-up; the gap), ns.
    pub window_ns: u64,
    /// Late samples in the episode (1 for a gap, or a stall shorter than the period).
    #[serde(default = "one")]
    pub samples: u64,
    /// The episode's worst latency or gap, ns (0 in documents that predate episodes: the window).
    #[serde(default)]
    pub worst_ns: u64,
    /// The causes, largest first; they sum to `window_ns` (the unattributed remainder included).
    pub causes: Vec<Cause>,
    /// Steal time of the CPU in the enclosing counter interval, ns (what the hypervisor admits to).
    #[serde(default)]
    pub steal_ns: u64,
    /// SMIs the CPU took in the enclosing counter interval (`None`: not countable): firmware ran there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smis: Option<u64>,
    /// The stretches of the window the trace explains nothing of (CLOCK_MONOTONIC ns, the longest
    /// [`crate::vm::MAX_GAPS`]): where a VM's host record is laid over the episode (`rtgauge_analysis::vm_join::join`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<[u64; 2]>,
    /// What the VM's host did meanwhile, once joined with a host record (`rtgauge vm join`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::vm::EpisodeHost>,
}

impl Episode {
    /// The worst sample of the episode, ns.
    pub fn worst(&self) -> u64 {
        if self.worst_ns > 0 {
            self.worst_ns
        } else {
            self.window_ns
        }
    }
    /// The largest attributed cause (not the remainder), if any.
    pub fn top(&self) -> Option<&Cause> {
        self.causes
            .iter()
            .find(|c| c.kind != CauseKind::Unattributed)
    }
    /// Share of the window, %.
    pub fn pct(&self, cause: &Cause) -> f64 {
        if self.window_ns == 0 {
            0.0
        } else {
            cause.ns as f64 * 100.0 / self.window_ns as f64
        }
    }
}

/// What `--trace` found and how it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TraceInfo {
    /// "tracefs events" or "timerlat".
    pub mechanism: String,
    /// Events read from the measured CPUs.
    pub events: u64,
    /// Events the kernel dropped (ring buffer overrun), summed over CPUs.
    pub lost: u64,
    /// Episodes whose window was older than the retained trace.
    #[serde(default)]
    pub not_retained: u64,
    /// Late samples the probe could not hand to the tracker (runs before 2026-11-28: its ring was full and
    /// a later stall came): each a stall whose episode is unknown.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub late_dropped: u64,
    /// Stalls the tracker got inside the window of the stall before them (the probe's ring was full and 64
    /// earlier stalls already waited for room): explained together with it.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub late_coalesced: u64,
    /// CPU time the collector (the main thread reading and folding the trace) used, ns; 0: not measured
    /// (runs before it was).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub collector_ns: u64,
    /// CPU time the collector spent once, at the end, naming the kernel functions the binary records hold
    /// as addresses (reading `/proc/kallsyms`), ns: not in `collector_ns`, which grows with the run.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub symbols_ns: u64,
    /// How long the trace ran, ns (with `cpus`, what the collector's time is per CPU and second).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub traced_ns: u64,
    /// The CPUs traced.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub cpus: u64,
}

impl TraceInfo {
    /// The collector's CPU time per traced CPU and second of trace, ns (`None` when not measured).
    pub fn collector_ns_per_cpu_s(&self) -> Option<f64> {
        (self.collector_ns > 0 && self.traced_ns > 0 && self.cpus > 0)
            .then(|| self.collector_ns as f64 / self.cpus as f64 / (self.traced_ns as f64 / 1e9))
    }
}

/// The latency above which an episode is explained, and why that value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeThreshold {
    /// Episodes whose worst sample is at or above this are explained, ns.
    pub ns: u64,
    /// Where it comes from: "profile gate cyclic.max", "--spike", "p50 + 10 × (p90 − p50)", ….
    pub rule: String,
}

/// Everything the "why" part of a latency probe holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Why {
    /// Counters per measured CPU and timeline interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<IntervalCounters>,
    /// How the spikes were traced and what was lost; `None` without `--trace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceInfo>,
    /// The explained episodes, worst first (at most [`MAX_EPISODES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "spikes")]
    pub episodes: Vec<Episode>,
    /// The threshold episodes were explained above (with `--trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<EpisodeThreshold>,
    /// Episodes at or above the threshold, explained or not (beyond [`MAX_EPISODES`] they are counted).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub episodes_total: u64,
    /// `--break-above`: the sample that stopped the run, its breakdown and the trace before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub break_sample: Option<BreakTrace>,
    /// What could not be collected, one line ("no tracefs: counters only").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// What the SMI counts of [`IntervalCounters::smis`] cover, or why there are none (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smi: Option<String>,
    /// The SMIs each measured CPU took over the probe, (CPU, count), where countable: read at its start
    /// and end (per interval too, in [`IntervalCounters::smis`], with `--smi`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub smis: Vec<(u32, u64)>,
    /// The VM host record the episodes were joined with (`rtgauge vm join`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::vm::HostJoin>,
}

impl Why {
    /// The counters of `cpu` for the interval starting at `start_ns`.
    pub fn interval(&self, cpu: u32, start_ns: u64) -> Option<&IntervalCounters> {
        self.counters.iter().find(|c| {
            c.cpu == cpu
                && (c.start_ns == start_ns
                    || (c.start_ns <= start_ns && start_ns < c.start_ns + c.len_ns))
        })
    }
}

/// The sample that crossed `--break-above`, broken down, with the spans of its CPU over the
/// [`BREAK_TRACE_NS`] before it (the trace a user would otherwise dig out of trace-cmd).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakTrace {
    /// The breaking sample's window, broken down.
    pub breakdown: Episode,
    /// The CPU's activity spans over the [`BREAK_TRACE_NS`] before the sample, in time order.
    pub spans: Vec<Span>,
}

/// How much trace is kept before a break sample.
pub const BREAK_TRACE_NS: u64 = 20_000_000;

/// A stretch of time on one CPU spent in one activity (from trace events), CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Start of the span, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// End of the span (exclusive), CLOCK_MONOTONIC ns.
    pub end_ns: u64,
    /// The kind of activity that ran.
    pub kind: CauseKind,
    /// The activity's name, as in [`Cause::name`].
    pub name: String,
}

/// Episodes explained per probe (worst first); the others above the threshold are counted.
pub const MAX_EPISODES: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_found_by_any_time_inside_it() {
        let iv = |cpu, start_ns: u64, len_ns: u64| IntervalCounters {
            cpu,
            start_ns,
            len_ns,
            ..IntervalCounters::default()
        };
        let w = Why {
            counters: vec![
                iv(0, 0, 2_000),
                iv(1, 0, 2_000),
                iv(0, 2_000, 1_000),
                iv(1, 5_000, 0),
            ],
            ..Why::default()
        };
        assert_eq!(w.interval(1, 1_000).map(|c| c.start_ns), Some(0));
        assert_eq!(w.interval(0, 2_500).map(|c| c.start_ns), Some(2_000));
        assert!(w.interval(0, 3_000).is_none());
        // An interval of a document written before intervals could merge (no length): its start only.
        assert_eq!(w.interval(1, 5_000).map(|c| c.start_ns), Some(5_000));
        assert!(w.interval(1, 5_001).is_none());
    }
}

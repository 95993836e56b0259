//! Why a spike happened: the always-on per-interval interrupt/softirq/scheduler counters of the measured
//! CPUs, and (with `--trace`) each spike's window broken down into the kernel activity that filled it.
//!
//! Nothing here measures; the counters are read by `rtgauge_host::counters` and the trace is turned into
//! [`SpikeBreakdown`]s by `rtgauge_probe::trace`. The breakdown is pure arithmetic on event intervals and lives
//! here ([`breakdown`]) so reports and tests can use it without tracefs.

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
}

/// Interrupt sources kept per interval.
pub const TOP_SOURCES: usize = 8;

/// Most counter intervals kept per CPU; beyond it adjacent intervals merge pairwise (as the windows do), so
/// a 7-day run keeps ~2048 intervals of ~5 min per CPU instead of 604 800 one-second ones.
pub const MAX_INTERVALS: usize = 2048;

/// Sum two named-counter lists, largest first, at most `keep`.
fn add_named(a: &[(String, u64)], b: &[(String, u64)], keep: usize) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = a.to_vec();
    for (n, c) in b {
        match out.iter_mut().find(|(m, _)| m == n) {
            Some(x) => x.1 += c,
            None => out.push((n.clone(), *c)),
        }
    }
    out.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    out.truncate(keep);
    out
}

/// Merge each CPU's adjacent intervals pairwise (`counters` in time order, CPUs interleaved).
pub fn merge_pairs(counters: &mut Vec<IntervalCounters>) {
    let mut out: Vec<IntervalCounters> = Vec::with_capacity(counters.len() / 2 + 1);
    let mut open: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for c in counters.drain(..) {
        match open.remove(&c.cpu) {
            Some(i) => {
                let a = &mut out[i];
                a.len_ns = (c.start_ns + c.len_ns).saturating_sub(a.start_ns);
                a.irqs = add_named(&a.irqs, &c.irqs, TOP_SOURCES);
                a.softirqs = add_named(&a.softirqs, &c.softirqs, usize::MAX);
                a.sched_calls = a.sched_calls.zip(c.sched_calls).map(|(x, y)| x + y);
                a.irq_ns += c.irq_ns;
                a.softirq_ns += c.softirq_ns;
                a.steal_ns += c.steal_ns;
            }
            None => {
                open.insert(c.cpu, out.len());
                out.push(c);
            }
        }
    }
    *counters = out;
}

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
    /// How many times it started (IRQs, softirqs) or was switched in (threads) inside the window.
    pub count: u64,
}

/// One spike and what filled its window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpikeBreakdown {
    /// The CPU the spike was measured on.
    pub cpu: u32,
    /// Thread index of the probe (cyclic) or 0 (oslat).
    pub thread: u32,
    /// CLOCK_MONOTONIC time of the window's start (expected wake-up, or gap start), ns.
    pub start_mono_ns: u64,
    /// Length of the window (the latency or the gap), ns.
    pub window_ns: u64,
    /// The causes, largest first; they sum to `window_ns` (the unattributed remainder included).
    pub causes: Vec<Cause>,
    /// Steal time of the CPU in the enclosing counter interval, ns (what the hypervisor admits to).
    #[serde(default)]
    pub steal_ns: u64,
}

impl SpikeBreakdown {
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
    /// "78 % thread rtg-culprit/1234 FIFO 95, 12 % IRQ 24 virtio0-input, 10 % unattributed".
    pub fn sentence(&self) -> String {
        // Shares that round to 0 % say nothing in a sentence; the causes list keeps them.
        let parts: Vec<String> = self
            .causes
            .iter()
            .enumerate()
            .filter(|(i, c)| *i == 0 || self.pct(c) >= 0.5)
            .map(|(_, c)| c)
            .take(4)
            .map(|c| {
                if c.kind == CauseKind::Unattributed && self.steal_ns > 0 {
                    format!(
                        "{:.0} % unattributed (hypervisor/firmware/hardware; steal {:.1} ms in that interval)",
                        self.pct(c),
                        self.steal_ns as f64 / 1e6
                    )
                } else if c.kind == CauseKind::Unattributed {
                    format!(
                        "{:.0} % unattributed (hypervisor/firmware/hardware)",
                        self.pct(c)
                    )
                } else {
                    format!("{:.0} % {} {}", self.pct(c), c.kind.label(), c.name)
                }
            })
            .collect();
        parts.join(", ")
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
    /// Spikes whose window was older than the retained trace.
    #[serde(default)]
    pub not_retained: u64,
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
    /// The traced spikes, worst first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spikes: Vec<SpikeBreakdown>,
    /// `--break-above`: the sample that stopped the run, its breakdown and the trace before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub break_sample: Option<BreakTrace>,
    /// What could not be collected, one line ("no tracefs: counters only").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
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
    pub breakdown: SpikeBreakdown,
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

/// Break the window `[start, end)` down over `spans`. Nested spans (an IRQ inside a thread's time, a softirq
/// inside an IRQ exit) are charged to the innermost one: spans are laid over each other in the order
/// thread < work < softirq < irq/vector, and each instant goes to the highest layer covering it. Whatever no
/// span covers is the unattributed remainder. The probe's own thread is not passed in.
pub fn breakdown(start: u64, end: u64, spans: &[Span]) -> Vec<Cause> {
    fn layer(k: CauseKind) -> u8 {
        match k {
            CauseKind::Thread => 0,
            CauseKind::Work => 1,
            CauseKind::Softirq => 2,
            CauseKind::Irq | CauseKind::Vector => 3,
            CauseKind::Unattributed => 4,
        }
    }
    let inside: Vec<&Span> = spans
        .iter()
        .filter(|s| s.end_ns > start && s.start_ns < end && s.end_ns > s.start_ns)
        .collect();
    // Elementary intervals between every boundary inside the window.
    let mut cuts: Vec<u64> = vec![start, end];
    for s in &inside {
        cuts.push(s.start_ns.clamp(start, end));
        cuts.push(s.end_ns.clamp(start, end));
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<Cause> = Vec::new();
    let mut add = |kind: CauseKind, name: &str, ns: u64| {
        if let Some(c) = out.iter_mut().find(|c| c.kind == kind && c.name == name) {
            c.ns += ns;
        } else {
            out.push(Cause {
                kind,
                name: name.to_string(),
                ns,
                count: 0,
            });
        }
    };
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let top = inside
            .iter()
            .filter(|s| s.start_ns <= a && s.end_ns >= b)
            .max_by_key(|s| (layer(s.kind), s.start_ns));
        match top {
            Some(s) => add(s.kind, &s.name, b - a),
            None => add(CauseKind::Unattributed, "", b - a),
        }
    }
    for c in out.iter_mut() {
        c.count = inside
            .iter()
            .filter(|s| s.kind == c.kind && s.name == c.name)
            .count() as u64;
    }
    out.retain(|c| c.ns > 0);
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.kind.cmp(&b.kind)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(a: u64, b: u64, kind: CauseKind, name: &str) -> Span {
        Span {
            start_ns: a,
            end_ns: b,
            kind,
            name: name.into(),
        }
    }

    #[test]
    fn innermost_span_wins_and_the_rest_is_unattributed() {
        let spans = [
            span(0, 800, CauseKind::Thread, "rtg-culprit"),
            span(100, 150, CauseKind::Irq, "24 virtio0-input"),
            span(140, 160, CauseKind::Softirq, "NET_RX"),
            span(5000, 6000, CauseKind::Thread, "outside"),
        ];
        let c = breakdown(50, 1000, &spans);
        let total: u64 = c.iter().map(|c| c.ns).sum();
        assert_eq!(total, 950);
        assert_eq!(c[0].name, "rtg-culprit");
        assert_eq!(c[0].ns, 750 - 50 - 10);
        assert_eq!(c[1].kind, CauseKind::Unattributed);
        assert_eq!(c[1].ns, 200);
        let irq = c.iter().find(|c| c.kind == CauseKind::Irq).map(|c| c.ns);
        assert_eq!(irq, Some(50));
        let sirq = c
            .iter()
            .find(|c| c.kind == CauseKind::Softirq)
            .map(|c| c.ns);
        assert_eq!(sirq, Some(10));
        assert!(!c.iter().any(|c| c.name == "outside"));
    }

    #[test]
    fn intervals_merge_pairwise_per_cpu_and_are_found_by_any_time_inside() {
        let iv = |cpu, start_ns: u64, loc: u64| IntervalCounters {
            cpu,
            start_ns,
            len_ns: 1_000,
            irqs: vec![("LOC".into(), loc)],
            steal_ns: 1,
            ..IntervalCounters::default()
        };
        let mut v = vec![
            iv(0, 0, 1),
            iv(1, 0, 10),
            iv(0, 1_000, 2),
            iv(1, 1_000, 20),
            iv(0, 2_000, 4),
        ];
        merge_pairs(&mut v);
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].cpu, v[0].len_ns, v[0].irqs[0].1, v[0].steal_ns),
            (0, 2_000, 3, 2)
        );
        assert_eq!((v[1].cpu, v[1].irqs[0].1), (1, 30));
        assert_eq!((v[2].start_ns, v[2].len_ns), (2_000, 1_000));
        let w = Why {
            counters: v,
            ..Why::default()
        };
        assert_eq!(w.interval(1, 1_000).map(|c| c.irqs[0].1), Some(30));
        assert_eq!(w.interval(0, 2_500).map(|c| c.start_ns), Some(2_000));
        assert!(w.interval(0, 3_000).is_none());
    }

    #[test]
    fn empty_window_and_no_spans() {
        assert!(breakdown(10, 10, &[]).is_empty());
        let c = breakdown(0, 100, &[]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].kind, CauseKind::Unattributed);
        let b = SpikeBreakdown {
            cpu: 1,
            thread: 0,
            start_mono_ns: 0,
            window_ns: 100,
            causes: c,
            steal_ns: 0,
        };
        assert!(b.top().is_none());
        assert!(b.sentence().starts_with("100 % unattributed"));
        let stolen = SpikeBreakdown {
            steal_ns: 20_000_000,
            ..b
        };
        assert!(
            stolen
                .sentence()
                .ends_with("steal 20.0 ms in that interval)"),
            "{}",
            stolen.sentence()
        );
    }
}

//! Why a spike happened: the always-on per-interval interrupt/softirq/scheduler counters of the measured
//! CPUs, and (with `--trace`) each spike episode's window broken down into the kernel activity that filled
//! it.
//!
//! An *episode* is one stall as the probe saw it: the late samples whose windows (expected wake-up → actual
//! wake-up) overlap are one episode, so a 5 ms stall of a 1 ms timer is one episode of five late samples,
//! not five spikes ([`EpisodeTracker`]). Episodes above a threshold are explained: the profile's gate, an
//! explicit `--spike`, or else a rule on the run's own distribution ([`rule_threshold`]).
//!
//! Nothing here measures; the counters are read by `rtgauge_host::counters` and the trace is turned into
//! [`Episode`] breakdowns by `rtgauge_probe::trace`. Grouping and breakdown are pure arithmetic on
//! intervals and live here so reports and tests can use them without tracefs.

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
                a.run_delay_ns = a.run_delay_ns.zip(c.run_delay_ns).map(|(x, y)| x + y);
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

/// One counter of an interval that rose above the CPU's typical interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Rise {
    /// "24 virtio0-input", "NET_RX", "IRQ time", "run-queue wait", ….
    pub name: String,
    /// Its value in the interval (a count, or ns for times).
    pub value: u64,
    /// Its median over the CPU's intervals, scaled to this interval's length.
    pub typical: u64,
    /// Whether `value` and `typical` are ns (times) rather than counts.
    pub time: bool,
}

/// What the counters say about one interval, against the CPU's typical interval.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalVerdict {
    /// What rose above typical (largest excess first); empty when nothing in this kernel did.
    pub risen: Vec<Rise>,
    /// Steal time the hypervisor reported for the interval, ns.
    pub steal_ns: u64,
    /// Whether the probe's run-queue wait was counted (else a thread that preempted it shows only in CPU
    /// time at tick resolution, or with `--trace`).
    pub run_delay_known: bool,
}

impl Why {
    /// Compare the interval of `cpu` containing `start_ns` with the CPU's typical interval (the median of
    /// each counter over the run). A count rose when it is above twice its median plus 5; a time (IRQ or
    /// softirq time, the probe's run-queue wait) when it exceeds its median by at least half of
    /// `worst_ns`, the latency to explain — enough of the interval's time went there to matter.
    pub fn explain_interval(
        &self,
        cpu: u32,
        start_ns: u64,
        worst_ns: u64,
    ) -> Option<IntervalVerdict> {
        let c = self.interval(cpu, start_ns)?;
        let all: Vec<&IntervalCounters> = self.counters.iter().filter(|x| x.cpu == cpu).collect();
        let len = |x: &IntervalCounters| {
            if x.len_ns == 0 {
                1_000_000_000
            } else {
                x.len_ns
            }
        };
        // A counter's median over the run, scaled to this interval's length.
        let typical = |f: &dyn Fn(&IntervalCounters) -> u64| -> u64 {
            let mut rates: Vec<f64> = all.iter().map(|x| f(x) as f64 / len(x) as f64).collect();
            rates.sort_by(f64::total_cmp);
            let m = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
            (m * len(c) as f64).round() as u64
        };
        let named = |list: &[(String, u64)], n: &str| {
            list.iter().find(|(m, _)| m == n).map_or(0, |(_, v)| *v)
        };
        let mut risen = Vec::new();
        for (name, value) in c.irqs.iter().chain(&c.softirqs) {
            let in_irqs = c.irqs.iter().any(|(m, _)| m == name);
            let t = typical(&|x: &IntervalCounters| {
                named(if in_irqs { &x.irqs } else { &x.softirqs }, name)
            });
            if *value > 2 * t + 5 {
                risen.push(Rise {
                    name: name.clone(),
                    value: *value,
                    typical: t,
                    time: false,
                });
            }
        }
        if let Some(v) = c.sched_calls {
            let t = typical(&|x: &IntervalCounters| x.sched_calls.unwrap_or(0));
            if v > 2 * t + 5 {
                risen.push(Rise {
                    name: "scheduler calls".into(),
                    value: v,
                    typical: t,
                    time: false,
                });
            }
        }
        let mut time = |name: &str, v: u64, f: &dyn Fn(&IntervalCounters) -> u64| {
            let t = typical(f);
            if v > t && v - t >= worst_ns / 2 && v > 0 {
                risen.push(Rise {
                    name: name.into(),
                    value: v,
                    typical: t,
                    time: true,
                });
            }
        };
        time("IRQ time", c.irq_ns, &|x| x.irq_ns);
        time("softirq time", c.softirq_ns, &|x| x.softirq_ns);
        if let Some(d) = c.run_delay_ns {
            time("run-queue wait (another task held the CPU)", d, &|x| {
                x.run_delay_ns.unwrap_or(0)
            });
        }
        // Times first (they account for the latency directly), then counts; the largest excess first.
        risen.sort_by_key(|r| {
            (
                !r.time,
                std::cmp::Reverse(r.value.saturating_sub(r.typical)),
            )
        });
        Some(IntervalVerdict {
            risen,
            steal_ns: c.steal_ns,
            run_delay_known: c.run_delay_ns.is_some(),
        })
    }
}

impl IntervalVerdict {
    /// The verdict in one sentence: what rose, or that nothing in this kernel did and where that points.
    pub fn sentence(&self) -> String {
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        if !self.risen.is_empty() {
            let parts: Vec<String> = self
                .risen
                .iter()
                .take(4)
                .map(|r| {
                    if r.time {
                        format!("{} {} (typically {})", r.name, ms(r.value), ms(r.typical))
                    } else {
                        format!("{} {} (typically {})", r.name, r.value, r.typical)
                    }
                })
                .collect();
            let steal = if self.steal_ns > 0 {
                format!("; steal {}", ms(self.steal_ns))
            } else {
                String::new()
            };
            return format!(
                "rose above the typical interval: {}{steal}",
                parts.join(", ")
            );
        }
        let looked = if self.run_delay_known {
            "interrupts, softirqs, IRQ time and the probe's run-queue wait"
        } else {
            "interrupts, softirqs and IRQ time; this kernel keeps no per-task run-queue wait, so a thread that held the CPU briefly would not show"
        };
        let outside = if self.steal_ns > 0 {
            format!(
                "steal {} in that interval: the stall points outside this kernel — the hypervisor (it reported steal), firmware/SMI or hardware",
                ms(self.steal_ns)
            )
        } else {
            "no steal reported: the stall points outside this kernel — firmware/SMI, hardware, or a hypervisor that reports no steal".to_string()
        };
        format!("nothing in this kernel rose above its typical interval ({looked}); {outside}; --trace breaks a stall down")
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
    /// How many times it started (IRQs, softirqs) or was switched in (threads) inside the window.
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
    /// The stretches of the window the trace explains nothing of (CLOCK_MONOTONIC ns, the longest
    /// [`crate::vm::MAX_GAPS`]): where a VM's host record is laid over the episode ([`crate::vm::join`]).
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
    /// Episodes whose window was older than the retained trace.
    #[serde(default)]
    pub not_retained: u64,
    /// Late samples the probe could not hand to the tracker (its ring was full): their episodes are unknown.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub late_dropped: u64,
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
            CauseKind::Unattributed | CauseKind::Host => 4,
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

/// Episodes explained per probe (worst first); the others above the threshold are counted.
pub const MAX_EPISODES: usize = 100;

/// Episodes a tracker keeps as candidates (the worst, with their trace pinned) while the run goes on: more
/// than [`MAX_EPISODES`], because the threshold that decides which are explained is known only at the end.
pub const TRACKED_EPISODES: usize = 256;

/// The threshold when neither a gate nor `--spike` gives one: `max(p50 + 10 × (p90 − p50), 3 × p90)` of the
/// run's own distribution. A sample that far above the body of the distribution is not jitter; the body
/// (p50–p90) is untouched by a few stalls even in a short run (thousands of samples), where p99.99 would be
/// the stall itself. On this project's 2-vCPU VM (p50 ≈ 15 µs, p90 ≈ 25 µs) it is ≈ 115 µs; on a tuned
/// PREEMPT_RT server (p50 ≈ 2 µs, p90 ≈ 3 µs) ≈ 12 µs. The `3 × p90` term keeps a very tight distribution
/// (p90 = p50) from calling every sample an episode.
pub fn rule_threshold(p50_ns: u64, p90_ns: u64) -> u64 {
    let spread = p90_ns.saturating_sub(p50_ns);
    p50_ns
        .saturating_add(spread.saturating_mul(10))
        .max(p90_ns.saturating_mul(3))
}

/// The words for [`rule_threshold`] in reports.
pub const RULE: &str = "max(p50 + 10 × (p90 − p50), 3 × p90)";

/// One late sample: its window on CLOCK_MONOTONIC (expected wake-up → actual wake-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late {
    /// The probe thread.
    pub thread: u32,
    /// The CPU it woke on.
    pub cpu: u32,
    /// Expected wake-up, ns.
    pub start_ns: u64,
    /// Actual wake-up, ns.
    pub end_ns: u64,
}

/// An episode while it is tracked: its window, worst sample and count of late samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Unique within a tracker (for pinning its trace).
    pub id: u64,
    /// The probe thread.
    pub thread: u32,
    /// The CPU of its first late sample.
    pub cpu: u32,
    /// Window start, ns.
    pub start_ns: u64,
    /// Window end, ns.
    pub end_ns: u64,
    /// Worst late sample, ns.
    pub worst_ns: u64,
    /// Late samples merged into it.
    pub samples: u64,
}

/// What the tracker asks of the trace: keep the window of a candidate that is among the worst, or let go of
/// one that no longer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retain {
    /// Keep the trace of `[from, to]` under this id.
    Keep {
        /// The candidate's id.
        id: u64,
        /// Window start, ns.
        from: u64,
        /// Window end, ns.
        to: u64,
    },
    /// The candidate left the worst: its trace may go.
    Release(u64),
}

/// Groups a probe's late samples into episodes as they arrive (per thread, in time order): a sample whose
/// window overlaps the thread's open episode joins it, any other closes it and opens a new one. Memory is
/// bounded whatever the run's length: the [`TRACKED_EPISODES`] worst closed episodes are kept (their trace
/// pinned through [`Retain`]), and every episode's worst value is counted in a histogram, so the number
/// above any threshold is known at the end.
pub struct EpisodeTracker {
    open: Vec<Candidate>,
    worst: Vec<Candidate>,
    counts: hdrhistogram::Histogram<u64>,
    next_id: u64,
}

impl Default for EpisodeTracker {
    fn default() -> Self {
        EpisodeTracker {
            open: Vec::new(),
            worst: Vec::new(),
            counts: crate::latency::new_histogram(),
            next_id: 0,
        }
    }
}

impl EpisodeTracker {
    /// Add one late sample; what the trace should keep or release is pushed to `retain`.
    pub fn feed(&mut self, s: Late, retain: &mut Vec<Retain>) {
        let lat = s.end_ns.saturating_sub(s.start_ns);
        if let Some(i) = self.open.iter().position(|c| c.thread == s.thread) {
            let c = &mut self.open[i];
            if s.start_ns <= c.end_ns {
                c.end_ns = c.end_ns.max(s.end_ns);
                c.worst_ns = c.worst_ns.max(lat);
                c.samples += 1;
                return;
            }
            let done = self.open.swap_remove(i);
            self.close(done, retain);
        }
        self.next_id += 1;
        self.open.push(Candidate {
            id: self.next_id,
            thread: s.thread,
            cpu: s.cpu,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            worst_ns: lat,
            samples: 1,
        });
    }

    /// Close every open episode (the probe has ended).
    pub fn finish(&mut self, retain: &mut Vec<Retain>) {
        for c in std::mem::take(&mut self.open) {
            self.close(c, retain);
        }
    }

    fn close(&mut self, c: Candidate, retain: &mut Vec<Retain>) {
        self.counts.saturating_record(c.worst_ns.max(1));
        if self.worst.len() < TRACKED_EPISODES {
            retain.push(Retain::Keep {
                id: c.id,
                from: c.start_ns,
                to: c.end_ns,
            });
            self.worst.push(c);
            return;
        }
        let Some((i, least)) = self
            .worst
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| w.worst_ns)
        else {
            return;
        };
        if c.worst_ns > least.worst_ns {
            retain.push(Retain::Release(least.id));
            retain.push(Retain::Keep {
                id: c.id,
                from: c.start_ns,
                to: c.end_ns,
            });
            self.worst[i] = c;
        }
    }

    /// The closed episodes at or above `threshold_ns`, worst first (at most [`TRACKED_EPISODES`]), and how
    /// many closed episodes are at or above it in all: exact while the kept ones include every episode above
    /// it, else from the histogram of every episode's worst value (3 significant digits).
    pub fn above(&self, threshold_ns: u64) -> (Vec<Candidate>, u64) {
        let mut kept: Vec<Candidate> = self
            .worst
            .iter()
            .filter(|c| c.worst_ns >= threshold_ns)
            .copied()
            .collect();
        kept.sort_by_key(|c| (std::cmp::Reverse(c.worst_ns), c.start_ns));
        // Every episode above the threshold is among the kept unless all the kept ones are above it.
        if self.worst.len() < TRACKED_EPISODES || kept.len() < self.worst.len() {
            let n = kept.len() as u64;
            return (kept, n);
        }
        let counted: u64 = self
            .counts
            .iter_recorded()
            .filter(|v| v.value_iterated_to() >= threshold_ns)
            .map(|v| v.count_at_value())
            .sum();
        let n = counted.max(kept.len() as u64);
        (kept, n)
    }
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
        let b = Episode {
            cpu: 1,
            thread: 0,
            start_mono_ns: 0,
            window_ns: 100,
            samples: 1,
            worst_ns: 100,
            causes: c,
            steal_ns: 0,
            gaps: Vec::new(),
            host: None,
        };
        assert!(b.top().is_none());
        assert!(b.sentence().starts_with("100 % unattributed"));
        let stolen = Episode {
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

    fn late(thread: u32, start_ns: u64, end_ns: u64) -> Late {
        Late {
            thread,
            cpu: thread,
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn the_late_samples_of_one_stall_are_one_episode() {
        // A 5 ms stall of a 1 ms timer: five late samples whose windows overlap (each woke at ~5.0 ms).
        let mut t = EpisodeTracker::default();
        let mut r = Vec::new();
        for k in 0..5u64 {
            t.feed(
                late(0, 300_000 + k * 1_000_000, 5_000_000 + k * 1_000),
                &mut r,
            );
        }
        // A second stall on the same thread, later, and one on another thread at the same time.
        t.feed(late(0, 500_000_000, 505_000_000), &mut r);
        t.feed(late(1, 300_000, 2_000_000), &mut r);
        t.finish(&mut r);
        let (eps, total) = t.above(1_000_000);
        assert_eq!(total, 3);
        assert_eq!(eps.len(), 3);
        let first = eps
            .iter()
            .find(|e| e.thread == 0 && e.start_ns == 300_000)
            .unwrap();
        assert_eq!(
            (first.samples, first.worst_ns, first.end_ns),
            (5, 4_700_000, 5_004_000)
        );
        assert_eq!(eps[0].worst_ns, 5_000_000, "worst first");
        assert_eq!(
            r.iter()
                .filter(|x| matches!(x, Retain::Keep { .. }))
                .count(),
            3
        );
        // Nothing above a threshold above every episode.
        assert_eq!(t.above(6_000_000), (Vec::new(), 0));
    }

    #[test]
    fn the_tracker_keeps_the_worst_and_counts_the_rest() {
        let mut t = EpisodeTracker::default();
        let mut r = Vec::new();
        let n = TRACKED_EPISODES as u64 + 100;
        for k in 0..n {
            // Separate samples 1 ms apart; latency grows with k, so the first 100 are pushed out.
            t.feed(late(0, k * 1_000_000, k * 1_000_000 + 10_000 + k), &mut r);
        }
        t.finish(&mut r);
        let (eps, total) = t.above(0);
        assert_eq!(eps.len(), TRACKED_EPISODES);
        assert_eq!(total, n);
        assert_eq!(
            eps.last().unwrap().worst_ns,
            10_100,
            "the least of the kept is the 101st"
        );
        let released = r.iter().filter(|x| matches!(x, Retain::Release(_))).count();
        assert_eq!(released, 100);
        let (above, total) = t.above(10_000 + n - 10);
        assert_eq!(
            (above.len(), total),
            (10, 10),
            "exact while the kept include them all"
        );
    }

    #[test]
    fn the_rule_sits_well_above_the_body() {
        assert_eq!(rule_threshold(15_000, 25_000), 115_000);
        assert_eq!(rule_threshold(2_000, 3_000), 12_000);
        assert_eq!(
            rule_threshold(1_000, 1_000),
            3_000,
            "a tight distribution: 3 × p90"
        );
        assert_eq!(rule_threshold(u64::MAX, u64::MAX), u64::MAX);
    }

    fn iv(
        start_s: u64,
        loc: u64,
        net_rx: u64,
        steal_ms: u64,
        run_delay_ms: Option<u64>,
    ) -> IntervalCounters {
        IntervalCounters {
            cpu: 1,
            start_ns: start_s * 1_000_000_000,
            len_ns: 1_000_000_000,
            irqs: vec![("LOC".into(), loc)],
            softirqs: vec![("NET_RX".into(), net_rx)],
            steal_ns: steal_ms * 1_000_000,
            run_delay_ns: run_delay_ms.map(|m| m * 1_000_000),
            ..IntervalCounters::default()
        }
    }

    #[test]
    fn a_worst_interval_like_the_others_points_outside_the_kernel() {
        // Ten ordinary seconds; the worst (at 4 s) has the usual tick and a little more, and 6 ms of steal.
        let mut counters: Vec<IntervalCounters> =
            (0..10).map(|s| iv(s, 250, 2, 0, Some(1))).collect();
        counters[4] = iv(4, 271, 3, 6, Some(1));
        let why = Why {
            counters,
            ..Why::default()
        };
        let v = why.explain_interval(1, 4_000_000_000, 6_890_000).unwrap();
        assert!(v.risen.is_empty(), "{:?}", v.risen);
        let s = v.sentence();
        assert!(
            s.starts_with("nothing in this kernel rose above its typical interval"),
            "{s}"
        );
        assert!(
            s.contains("steal 6.0 ms")
                && s.contains("outside this kernel")
                && s.contains("hypervisor"),
            "{s}"
        );
        assert!(s.contains("--trace"), "{s}");
    }

    #[test]
    fn what_rose_is_named_against_its_typical_value() {
        let mut counters: Vec<IntervalCounters> =
            (0..10).map(|s| iv(s, 250, 2, 0, Some(1))).collect();
        // A network storm and a thread that held the CPU for 5 ms.
        counters[7] = iv(7, 260, 500, 0, Some(6));
        let why = Why {
            counters,
            ..Why::default()
        };
        let v = why.explain_interval(1, 7_000_000_000, 5_000_000).unwrap();
        let names: Vec<&str> = v.risen.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["run-queue wait (another task held the CPU)", "NET_RX"],
            "{v:?}"
        );
        let s = v.sentence();
        assert!(
            s.starts_with("rose above the typical interval: run-queue wait (another task held the CPU) 6.0 ms (typically 1.0 ms), NET_RX 500 (typically 2)"),
            "{s}"
        );
        assert!(!s.contains("outside this kernel"), "{s}");
        // No steal and no per-task wait: the sentence says what could not be seen.
        let quiet: Vec<IntervalCounters> = (0..3).map(|s| iv(s, 250, 2, 0, None)).collect();
        let why = Why {
            counters: quiet,
            ..Why::default()
        };
        let s = why.explain_interval(1, 0, 1_000_000).unwrap().sentence();
        assert!(
            s.contains("no per-task run-queue wait") && s.contains("no steal reported"),
            "{s}"
        );
        assert!(
            why.explain_interval(2, 0, 1).is_none(),
            "no counters for that CPU"
        );
    }
}

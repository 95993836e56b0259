//! The "why" of a latency probe in words: each CPU's worst timeline interval against its typical interval
//! (what rose, or that nothing in this kernel did), and the breakdown of the traced spike episodes
//! (terminal), plus the shares a stacked bar or a comparison needs.

use crate::text::{TextOptions, DETAILED_CPUS};
use rtgauge_analysis::kind::KindData;
use rtgauge_analysis::kind::ProbeData;
use rtgauge_model::attribution::{CauseKind, Episode, Why};
use rtgauge_model::latency::TimelineEntry;
use rtgauge_model::units::us;
use std::fmt::Write as _;

/// What reading the trace cost the housekeeping CPU: `collector: 0.31 ms of CPU per traced CPU per second
/// (4 CPUs, 10.0 s: 0.12 % of one CPU)`.
pub(crate) fn collector_line(t: &rtgauge_model::attribution::TraceInfo) -> Option<String> {
    let per = t.collector_ns_per_cpu_s()?;
    let once = if t.symbols_ns > 0 {
        format!(
            "; {:.1} ms once at the end naming kernel functions",
            t.symbols_ns as f64 / 1e6
        )
    } else {
        String::new()
    };
    Some(format!(
        "collector: {:.2} ms of CPU per traced CPU per second ({} CPUs, {:.1} s: {:.2} % of one CPU){once}",
        per / 1e6,
        t.cpus,
        t.traced_ns as f64 / 1e9,
        t.collector_ns as f64 / t.traced_ns as f64 * 100.0,
    ))
}

/// Episodes printed in the terminal summary with `-v`.
pub const TERMINAL_EPISODES: usize = 5;
/// Episodes printed in the brief terminal summary.
pub const BRIEF_EPISODES: usize = 3;

/// Each measured CPU with its timeline.
pub type CpuTimelines<'a> = Vec<(u32, &'a [TimelineEntry])>;

/// The why part and, per measured CPU, its timeline, of a latency probe.
pub fn why_of(probe: &dyn KindData) -> Option<(&Why, CpuTimelines<'_>)> {
    Some((probe.why()?, rtgauge_analysis::kind::cpu_timelines(probe)))
}

/// A CPU's worst timeline interval and what its counters say of it.
pub struct WorstInterval<'a> {
    /// The CPU.
    pub cpu: u32,
    /// Its worst interval.
    pub entry: &'a TimelineEntry,
    /// What rose, or that nothing in this kernel did and where that points (with its VM host's record
    /// when joined).
    pub sentence: String,
    /// The same in a few words (the verdict block's).
    pub brief: String,
    /// What explains it, without its figures: the terminal names CPUs of one class once.
    pub class: String,
}

/// The worst timeline interval of each CPU and what its counters say.
///
/// `normal_priority`: the measuring threads were refused their real-time policy, so any runnable thread could
/// delay them without a counter showing it; an interval whose counters show nothing then says so, not
/// "outside this kernel".
pub fn worst_intervals<'a>(
    why: &Why,
    timelines: &CpuTimelines<'a>,
    normal_priority: bool,
) -> Vec<WorstInterval<'a>> {
    timelines
        .iter()
        .filter_map(|(cpu, tl)| {
            let worst = tl.iter().max_by_key(|e| e.max_ns)?;
            let v = rtgauge_analysis::interval::explain_interval(
                why,
                *cpu,
                worst.start_ns,
                worst.max_ns,
            )?;
            // The interval's worst sample is an episode's worst (the same sample, to the ns): joined with
            // its VM host's record, the host says what the guest's counters could not.
            let host = why
                .episodes
                .iter()
                .filter(|e| e.cpu == *cpu && e.worst() == worst.max_ns)
                .find_map(|e| Some((e.host.as_ref()?, e.window_ns)))
                .map(|(h, window)| rtgauge_analysis::vm_join::episode_host_sentence(h, window));
            const NORMAL: &str = "the thread ran at a normal priority (its real-time policy was refused)";
            let (sentence, brief, class) = match host {
                Some(h) if v.risen.is_empty() => {
                    let s = format!(
                        "nothing in the guest's kernel rose; its host's record explains it: {h}"
                    );
                    (s.clone(), s, format!("host {h}"))
                }
                Some(h) => (
                    format!("{}; its host's record: {h}", v.sentence()),
                    format!("{}; its host's record: {h}", v.brief()),
                    format!("host {h}"),
                ),
                None if normal_priority && v.risen.is_empty() => {
                    let s = format!(
                        "nothing in this kernel's counters rose, and {NORMAL}: any runnable thread could \
                         have delayed it without showing here (--trace names it)"
                    );
                    let b = format!("nothing in this kernel's counters rose, and {NORMAL}");
                    (s, b, format!("normal {}", v.class()))
                }
                None if normal_priority => (
                    format!("{}; {NORMAL}", v.sentence()),
                    format!("{}; {NORMAL}", v.brief()),
                    format!("normal {}", v.class()),
                ),
                None => (v.sentence(), v.brief(), v.class()),
            };
            Some(WorstInterval {
                cpu: *cpu,
                entry: worst,
                sentence,
                brief,
                class,
            })
        })
        .collect()
}

/// "SMIs: 5 (CPU 0 5, CPU 1 0); MSR_SMI_COUNT …", or "SMIs not counted: …": what firmware took, per CPU,
/// over the probe (`None` for documents from before SMIs were counted).
pub fn smi_line(why: &Why) -> Option<String> {
    let note = why.smi.as_ref()?;
    let mut per_cpu: std::collections::BTreeMap<u32, u64> = why.smis.iter().copied().collect();
    if per_cpu.is_empty() {
        // Documents that counted per interval only.
        for c in &why.counters {
            if let Some(n) = c.smis {
                *per_cpu.entry(c.cpu).or_insert(0) += n;
            }
        }
    }
    if per_cpu.is_empty() {
        return Some(note.clone());
    }
    let total: u64 = per_cpu.values().sum();
    let cpus: Vec<String> = per_cpu
        .iter()
        .map(|(c, n)| format!("CPU {c} {n}"))
        .collect();
    Some(format!("SMIs: {total} ({}); {note}", cpus.join(", ")))
}

/// "3 episodes at or above 115.0 µs (max(p50 + 10 × (p90 − p50), 3 × p90)), 3 explained".
pub fn episodes_line(why: &Why) -> String {
    let thr = why.threshold.as_ref().map_or(String::new(), |t| {
        format!(" at or above {:.1} µs ({})", us(t.ns), t.rule)
    });
    format!(
        "{} episode{}{thr}, {} explained",
        why.episodes_total,
        if why.episodes_total == 1 { "" } else { "s" },
        why.episodes.len()
    )
}

/// Terminal lines: the worst interval of each CPU against its typical interval (CPUs alike in it named
/// once, unless `opts.verbose`), then the episodes' breakdowns.
pub fn render_why(probe: &dyn KindData, opts: TextOptions) -> String {
    match why_of(probe) {
        Some((why, timelines)) => render_why_of(
            why,
            &timelines,
            crate::kind::sched_shortfall(probe).is_some(),
            opts,
        ),
        None => String::new(),
    }
}

/// Explanations of worst intervals printed at more than [`DETAILED_CPUS`] measured CPUs (the rest are
/// counted; `-v` prints each CPU's).
pub const TERMINAL_CLASSES: usize = 3;

/// The worst intervals as terminal lines: one per CPU when `verbose`, else one per explanation, naming its
/// CPUs and setting out the worst of them.
fn worst_interval_lines(worst: Vec<WorstInterval<'_>>, opts: TextOptions, cpus: usize) -> String {
    let line = |w: &WorstInterval<'_>| {
        format!(
            "  worst interval CPU {} at {:.0} s (max {:.1} µs): {}\n",
            w.cpu,
            w.entry.start_ns as f64 / 1e9,
            us(w.entry.max_ns),
            w.sentence
        )
    };
    if opts.verbose {
        return worst.iter().map(line).collect();
    }
    let mut classes: Vec<Vec<WorstInterval<'_>>> = Vec::new();
    for w in worst {
        match classes.iter_mut().find(|c| c[0].class == w.class) {
            Some(c) => c.push(w),
            None => classes.push(vec![w]),
        }
    }
    let peak = |c: &Vec<WorstInterval<'_>>| c.iter().map(|w| w.entry.max_ns).max().unwrap_or(0);
    classes.sort_by_key(|c| std::cmp::Reverse(peak(c)));
    let shown = if cpus > DETAILED_CPUS {
        TERMINAL_CLASSES
    } else {
        classes.len()
    };
    let mut s = String::new();
    for c in classes.iter().take(shown) {
        // The worst, the lowest CPU among equals.
        let Some(top) = c
            .iter()
            .max_by_key(|w| (w.entry.max_ns, std::cmp::Reverse(w.cpu)))
        else {
            continue;
        };
        if c.len() == 1 {
            s.push_str(&line(top));
            continue;
        }
        let low = c.iter().map(|w| w.entry.max_ns).min().unwrap_or(0);
        let range = match low == top.entry.max_ns {
            true => format!("{:.1}", us(low)),
            false => format!("{:.1}–{:.1}", us(low), us(top.entry.max_ns)),
        };
        let _ = writeln!(
            s,
            "  worst intervals alike on CPUs {} (max {range} µs; the worst, CPU {} at {:.0} s): {}",
            rtgauge_model::cpuset::CpuSet::new(c.iter().map(|w| w.cpu)),
            top.cpu,
            top.entry.start_ns as f64 / 1e9,
            top.sentence
        );
    }
    if classes.len() > shown {
        let rest: usize = classes[shown..].iter().map(Vec::len).sum();
        let _ = writeln!(
            s,
            "  … {} other explanations of the worst intervals of {rest} CPUs (-v prints each CPU's)",
            classes.len() - shown
        );
    }
    s
}

/// [`render_why`] of a probe's why and timelines (`normal_priority`: see [`worst_intervals`]).
pub fn render_why_of(
    why: &Why,
    timelines: &CpuTimelines<'_>,
    normal_priority: bool,
    opts: TextOptions,
) -> String {
    let mut s = String::new();
    if let Some(m) = &why.missing {
        let _ = writeln!(s, "  why: {m}");
    }
    if let Some(l) = smi_line(why) {
        let _ = writeln!(s, "  {l}");
    }
    s.push_str(&worst_interval_lines(
        worst_intervals(why, timelines, normal_priority),
        opts,
        timelines.len(),
    ));
    // A guest measured without --trace has episodes too once joined with its host's record (--spike).
    let joined = why.episodes.iter().any(|b| b.host.is_some());
    match &why.trace {
        Some(t) => {
            let mut behind = String::new();
            if t.late_dropped > 0 {
                let _ = write!(
                    behind,
                    ", {} stalls lost before the episode tracker saw them",
                    t.late_dropped
                );
            }
            if t.late_coalesced > 0 {
                let _ = write!(
                    behind,
                    ", {} stalls explained inside the window of the stall before them (the main thread fell behind)",
                    t.late_coalesced
                );
            }
            let _ = writeln!(
                s,
                "  episodes: {} ({} events read, {} lost, {} older than the trace kept{behind})",
                episodes_line(why),
                t.events,
                t.lost,
                t.not_retained,
            );
            if let Some(c) = collector_line(t) {
                let _ = writeln!(s, "  {c}");
            }
        }
        None if joined => {
            let _ = writeln!(
                s,
                "  episodes: {} (the guest was not traced: what its host's record shows)",
                episodes_line(why)
            );
        }
        None => {}
    }
    if why.trace.is_some() || joined {
        let shown = if opts.verbose {
            TERMINAL_EPISODES
        } else {
            BRIEF_EPISODES
        };
        for b in why.episodes.iter().take(shown) {
            let _ = writeln!(s, "    {}", spike_line(b));
            if let Some(h) = crate::vm::episode_line(b) {
                let _ = writeln!(s, "      {h}");
            }
        }
    }
    if let Some(h) = crate::vm::join_line(why) {
        let _ = writeln!(s, "  {h}");
    }
    if let Some(b) = &why.break_sample {
        let _ = writeln!(
            s,
            "  break sample: {} ({} trace spans of the {} ms before it stored with the run)",
            spike_line(&b.breakdown),
            b.spans.len(),
            rtgauge_model::attribution::BREAK_TRACE_NS / 1_000_000
        );
    }
    s
}

/// "CPU 1 at 4718.530 s, 5012.3 µs (5 late samples): 98 % thread rtg-culprit/77 FIFO 50, 2 % unattributed (…)".
pub fn spike_line(e: &Episode) -> String {
    let samples = if e.samples > 1 {
        format!(" ({} late samples)", e.samples)
    } else {
        String::new()
    };
    format!(
        "CPU {} at {:.3} s, {:.1} µs{samples}: {}",
        e.cpu,
        e.start_mono_ns as f64 / 1e9,
        us(e.worst()),
        rtgauge_analysis::episodes::sentence(e)
    )
}

/// Shares of the spikes' total time per cause kind, %, largest first (for stacked bars and comparisons).
pub fn kind_shares(spikes: &[Episode]) -> Vec<(CauseKind, f64)> {
    let total: u64 = spikes.iter().map(|b| b.window_ns).sum();
    let mut by: Vec<(CauseKind, u64)> = Vec::new();
    for c in spikes.iter().flat_map(|b| &b.causes) {
        match by.iter_mut().find(|(k, _)| *k == c.kind) {
            Some(x) => x.1 += c.ns,
            None => by.push((c.kind, c.ns)),
        }
    }
    by.sort_by_key(|x| std::cmp::Reverse(x.1));
    by.into_iter()
        .map(|(k, ns)| {
            (
                k,
                if total == 0 {
                    0.0
                } else {
                    ns as f64 * 100.0 / total as f64
                },
            )
        })
        .collect()
}

/// The cause that took the largest share over all spikes, with that share: "80 % IRQ 24 virtio0-input".
pub fn dominant(spikes: &[Episode]) -> Option<String> {
    let total: u64 = spikes.iter().map(|b| b.window_ns).sum();
    let mut by: Vec<(CauseKind, &str, u64)> = Vec::new();
    for c in spikes.iter().flat_map(|b| &b.causes) {
        match by.iter_mut().find(|(k, n, _)| *k == c.kind && *n == c.name) {
            Some(x) => x.2 += c.ns,
            None => by.push((c.kind, &c.name, c.ns)),
        }
    }
    let (k, n, ns) = by.into_iter().max_by_key(|x| x.2)?;
    if total == 0 {
        return None;
    }
    let pct = ns as f64 * 100.0 / total as f64;
    Some(if k == CauseKind::Unattributed {
        format!("{pct:.0} % unattributed (hypervisor/firmware/hardware)")
    } else {
        format!("{pct:.0} % {} {n}", k.label())
    })
}

/// Colour of a cause kind in the stacked bars.
fn colour(k: CauseKind) -> &'static str {
    match k {
        CauseKind::Irq => "#d62728",
        CauseKind::Vector => "#ff7f0e",
        CauseKind::Softirq => "#9467bd",
        CauseKind::Thread => "#1f77b4",
        CauseKind::Work => "#2ca02c",
        CauseKind::Unattributed => "#7f7f7f",
        CauseKind::Host => "#8c564b",
    }
}

/// One spike as a stacked bar (SVG, 300 px wide), each cause a segment titled with its name and share.
fn bar(b: &Episode) -> maud::Markup {
    let w = b.window_ns.max(1) as f64;
    // (x, width) of each segment: the running sum of the widths before it.
    let mut x = 0.0;
    let segs: Vec<(f64, f64)> = b
        .causes
        .iter()
        .map(|c| {
            let cw = c.ns as f64 * 300.0 / w;
            x += cw;
            (x - cw, cw)
        })
        .collect();
    maud::html! {
        svg width="300" height="14" role="img" {
            @for (c, (x, cw)) in b.causes.iter().zip(&segs) {
                rect x=(format!("{x:.1}")) y="0" width=(format!("{cw:.1}")) height="14" fill=(colour(c.kind)) {
                    title { (format!("{:.0} % {} {}", b.pct(c), c.kind.label(), c.name)) }
                }
            }
        }
    }
}

/// The HTML part of a probe's why: worst interval per CPU against its typical interval, and a table of the
/// explained episodes with a stacked bar each (empty when the probe has no why).
pub fn html(probe: &dyn KindData) -> maud::Markup {
    let Some((why, timelines)) = why_of(probe) else {
        return maud::html! {};
    };
    let worst = worst_intervals(
        why,
        &timelines,
        crate::kind::sched_shortfall(probe).is_some(),
    );
    maud::html! {
        h3 { "Why: the worst interval against the typical one" }
        @if let Some(m) = &why.missing { probe { (m) } }
        @if let Some(l) = smi_line(why) { p { (l) } }
        @if !worst.is_empty() {
            table {
                tr { th { "CPU" } th { "interval start s" } th { "max µs" } th { "what the counters say" } }
                @for w in &worst {
                    tr { td { (w.cpu) } td.n { (w.entry.start_ns / 1_000_000_000) } td.n { (format!("{:.1}", us(w.entry.max_ns))) } td { (w.sentence) } }
                }
            }
        }
        @if let Some(t) = &why.trace {
            h3 { "Spike episodes broken down (" (t.mechanism) ")" }
            probe { (episodes_line(why)) "; " (t.events) " events read, " (t.lost) " lost, " (t.not_retained) " older than the trace kept."
                @if let Some(c) = collector_line(t) { " " (c) "." }
                @if let Some(d) = dominant(&why.episodes) { " Overall: " (d) "." } }
            table {
                tr { th { "CPU" } th { "at s (CLOCK_MONOTONIC)" } th { "worst µs" } th { "late samples" } th { "causes" } th { "share" } }
                @for b in why.episodes.iter().take(50) {
                    tr { td { (b.cpu) } td.n { (format!("{:.3}", b.start_mono_ns as f64 / 1e9)) } td.n { (format!("{:.1}", us(b.worst()))) }
                         td.n { (b.samples) } td { (rtgauge_analysis::episodes::sentence(b)) } td { (bar(b)) } }
                }
            }
        }
        (crate::vm::html(why))
    }
}

/// "run B's cyclic: 3 episodes at or above 115.0 µs (…), 3 explained; 80 % IRQ 24 virtio0-input" for every
/// run whose latency probes were traced.
pub fn compare_sentences(
    names: &[String],
    runs: &[&rtgauge_model::run::RunDocument],
) -> Vec<String> {
    let mut out = Vec::new();
    for (n, d) in names.iter().zip(runs) {
        for p in &d.probes {
            let Some((why, _)) = why_of(p.data()) else {
                continue;
            };
            if why.trace.is_none() {
                continue;
            }
            let kind = p.name();
            let causes = dominant(&why.episodes).map_or(String::new(), |d| format!("; {d}"));
            out.push(format!("run {n}'s {kind}: {}{causes}", episodes_line(why)));
            if let Some(h) = crate::vm::join_line(why) {
                out.push(format!("run {n}'s {kind} {h}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::attribution::Cause;

    #[test]
    fn the_collector_cost_is_said_per_cpu_and_second_and_not_when_unmeasured() {
        let mut t = rtgauge_model::attribution::TraceInfo {
            collector_ns: 26_000_000,
            traced_ns: 10_000_000_000,
            cpus: 2,
            ..Default::default()
        };
        assert_eq!(
            collector_line(&t).as_deref(),
            Some("collector: 1.30 ms of CPU per traced CPU per second (2 CPUs, 10.0 s: 0.26 % of one CPU)")
        );
        t.symbols_ns = 41_500_000;
        assert_eq!(
            collector_line(&t).as_deref(),
            Some("collector: 1.30 ms of CPU per traced CPU per second (2 CPUs, 10.0 s: 0.26 % of one CPU); 41.5 ms once at the end naming kernel functions")
        );
        t.collector_ns = 0;
        assert_eq!(
            collector_line(&t),
            None,
            "a run from before it was measured"
        );
    }

    fn b(causes: &[(CauseKind, &str, u64)]) -> Episode {
        Episode {
            cpu: 1,
            thread: 0,
            start_mono_ns: 4_000_000_000,
            window_ns: causes.iter().map(|c| c.2).sum(),
            samples: 1,
            worst_ns: 0,
            causes: causes
                .iter()
                .map(|&(kind, name, ns)| Cause {
                    kind,
                    name: name.into(),
                    ns,
                    count: 1,
                })
                .collect(),
            steal_ns: 0,
            smis: None,
            gaps: Vec::new(),
            host: None,
        }
    }

    #[test]
    fn shares_and_dominant_cause() {
        let s = [
            b(&[
                (CauseKind::Irq, "24 virtio0-input", 800),
                (CauseKind::Unattributed, "", 200),
            ]),
            b(&[
                (CauseKind::Irq, "24 virtio0-input", 800),
                (CauseKind::Thread, "x/1 CFS", 200),
            ]),
        ];
        assert_eq!(dominant(&s).as_deref(), Some("80 % IRQ 24 virtio0-input"));
        let k = kind_shares(&s);
        assert_eq!(k[0], (CauseKind::Irq, 80.0));
        assert_eq!(k.len(), 3);
        assert_eq!(
            spike_line(&s[0]),
            "CPU 1 at 4.000 s, 1.0 µs: 80 % IRQ 24 virtio0-input, 20 % unattributed (hypervisor/firmware/hardware)"
        );
        assert!(dominant(&[]).is_none());
    }

    #[test]
    fn stacked_bar_segments_add_up_to_the_bar() {
        let x = b(&[
            (CauseKind::Thread, "rtg-culprit/7 RT 50", 750),
            (CauseKind::Unattributed, "", 250),
        ]);
        let svg = bar(&x).into_string();
        assert!(svg.contains(r#"width="225.0""#), "{svg}");
        assert!(svg.contains(r#"x="225.0" y="0" width="75.0""#), "{svg}");
        assert!(svg.contains("75 % thread rtg-culprit/7 RT 50"), "{svg}");
        let evil = b(&[(CauseKind::Thread, "<script>/1 CFS", 10)]);
        assert!(
            !bar(&evil).into_string().contains("<script>"),
            "names are escaped"
        );
    }
}

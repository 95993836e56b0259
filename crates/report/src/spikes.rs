//! The "why" of a latency probe in words: the counters of each CPU's worst timeline interval, and the
//! breakdown of the worst traced spikes (terminal), plus the shares a stacked bar or a comparison needs.

use rtgauge_model::attribution::{CauseKind, SpikeBreakdown, Why};
use rtgauge_model::latency::TimelineEntry;
use rtgauge_model::run::ProbeResult;
use std::fmt::Write as _;

/// Spikes printed in the terminal summary.
pub const TERMINAL_SPIKES: usize = 5;

/// Each measured CPU with its timeline.
pub type CpuTimelines<'a> = Vec<(u32, &'a [TimelineEntry])>;

/// The why part and, per measured CPU, its timeline, of a latency probe.
pub fn why_of(probe: &ProbeResult) -> Option<(&Why, CpuTimelines<'_>)> {
    match probe {
        ProbeResult::Cyclic(c) => Some((
            c.why.as_ref()?,
            c.threads
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    let cpu = t
                        .conditions
                        .cpu
                        .achieved
                        .or_else(|| c.config.cpus.get(i).copied().flatten())?;
                    Some((cpu, t.timeline.as_slice()))
                })
                .collect(),
        )),
        ProbeResult::Oslat(o) => Some((
            o.why.as_ref()?,
            o.threads
                .iter()
                .map(|t| (t.cpu, t.timeline.as_slice()))
                .collect(),
        )),
        ProbeResult::Net(_) | ProbeResult::Ops(_) | ProbeResult::Mem(_) | ProbeResult::Numa(_) => {
            None
        }
    }
}

/// Terminal lines: the worst interval of each CPU with what rose in it, then the worst spikes' breakdowns.
pub fn render_why(probe: &ProbeResult) -> String {
    let Some((why, timelines)) = why_of(probe) else {
        return String::new();
    };
    let mut s = String::new();
    if let Some(m) = &why.missing {
        let _ = writeln!(s, "  why: {m}");
    }
    for (cpu, tl) in &timelines {
        let Some(worst) = tl.iter().max_by_key(|e| e.max_ns) else {
            continue;
        };
        let Some(c) = why.interval(*cpu, worst.start_ns) else {
            continue;
        };
        let _ = writeln!(
            s,
            "  worst interval CPU {cpu} at {:.0} s (max {:.1} µs): {}",
            worst.start_ns as f64 / 1e9,
            worst.max_ns as f64 / 1e3,
            c.summary()
        );
    }
    if let Some(t) = &why.trace {
        let _ = writeln!(
            s,
            "  spikes traced: {} broken down ({} events read, {} lost, {} older than the trace kept)",
            why.spikes.len(),
            t.events,
            t.lost,
            t.not_retained
        );
        for b in why.spikes.iter().take(TERMINAL_SPIKES) {
            let _ = writeln!(s, "    {}", spike_line(b));
        }
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

/// "CPU 1 at 4718.530 s, 5012.3 µs: 98 % thread rtg-culprit/77 RT 95, 2 % unattributed (…)".
pub fn spike_line(breakdown: &SpikeBreakdown) -> String {
    format!(
        "CPU {} at {:.3} s, {:.1} µs: {}",
        breakdown.cpu,
        breakdown.start_mono_ns as f64 / 1e9,
        breakdown.window_ns as f64 / 1e3,
        breakdown.sentence()
    )
}

/// Shares of the spikes' total time per cause kind, %, largest first (for stacked bars and comparisons).
pub fn kind_shares(spikes: &[SpikeBreakdown]) -> Vec<(CauseKind, f64)> {
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
pub fn dominant(spikes: &[SpikeBreakdown]) -> Option<String> {
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
    }
}

/// One spike as a stacked bar (SVG, 300 px wide), each cause a segment titled with its name and share.
fn bar(b: &SpikeBreakdown) -> maud::Markup {
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

/// The HTML part of a probe's why: worst interval per CPU, and a table of the traced spikes with a stacked
/// bar each (empty when the probe has no why).
pub fn html(probe: &ProbeResult) -> maud::Markup {
    let Some((why, timelines)) = why_of(probe) else {
        return maud::html! {};
    };
    let worst: Vec<(
        u32,
        &TimelineEntry,
        &rtgauge_model::attribution::IntervalCounters,
    )> = timelines
        .iter()
        .filter_map(|(cpu, tl)| {
            let w = tl.iter().max_by_key(|e| e.max_ns)?;
            Some((*cpu, w, why.interval(*cpu, w.start_ns)?))
        })
        .collect();
    maud::html! {
        h3 { "Why: what rose with the worst interval" }
        @if let Some(m) = &why.missing { probe { (m) } }
        @if !worst.is_empty() {
            table {
                tr { th { "CPU" } th { "interval start s" } th { "max µs" } th { "interrupts, softirqs, steal in it" } }
                @for (cpu, e, c) in &worst {
                    tr { td { (cpu) } td.n { (e.start_ns / 1_000_000_000) } td.n { (format!("{:.1}", e.max_ns as f64 / 1e3)) } td { (c.summary()) } }
                }
            }
        }
        @if let Some(t) = &why.trace {
            h3 { "Spikes broken down (" (t.mechanism) ")" }
            probe { (why.spikes.len()) " spikes; " (t.events) " events read, " (t.lost) " lost, " (t.not_retained) " older than the trace kept."
                @if let Some(d) = dominant(&why.spikes) { " Overall: " (d) "." } }
            table {
                tr { th { "CPU" } th { "at s (CLOCK_MONOTONIC)" } th { "µs" } th { "causes" } th { "share" } }
                @for b in why.spikes.iter().take(50) {
                    tr { td { (b.cpu) } td.n { (format!("{:.3}", b.start_mono_ns as f64 / 1e9)) } td.n { (format!("{:.1}", b.window_ns as f64 / 1e3)) }
                         td { (b.sentence()) } td { (bar(b)) } }
                }
            }
        }
    }
}

/// "run B's spikes are 80 % IRQ 24 virtio0-input" for every run whose latency probes were traced.
pub fn compare_sentences(
    names: &[String],
    runs: &[&rtgauge_model::run::RunDocument],
) -> Vec<String> {
    let mut out = Vec::new();
    for (n, d) in names.iter().zip(runs) {
        for p in &d.probes {
            let Some((why, _)) = why_of(p) else { continue };
            if let Some(s) = dominant(&why.spikes) {
                let kind = if matches!(p, ProbeResult::Cyclic(_)) {
                    "cyclic"
                } else {
                    "oslat"
                };
                out.push(format!("run {n}'s {kind} spikes are {s}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::attribution::Cause;

    fn b(causes: &[(CauseKind, &str, u64)]) -> SpikeBreakdown {
        SpikeBreakdown {
            cpu: 1,
            thread: 0,
            start_mono_ns: 4_000_000_000,
            window_ns: causes.iter().map(|c| c.2).sum(),
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

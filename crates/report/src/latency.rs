//! The views every latency kind (timer latency, busy-loop gap) shares: its section of the run page (the
//! per-CPU result table, the charts — one histogram per CPU, or with many CPUs a heatmap, an overlay and a
//! strip chart — the why, the conditions) and its part of the comparison page. Each reads the kind's
//! threads through [`KindData::latency_threads`]; the kinds add their own title and headline.

use crate::charts::{self, Series};
use crate::markup::{chart, details, measures_table, ReportOptions};
use crate::units::us_figure;
use maud::{html, Markup};
use rtgauge_analysis::kind::ProbeData;
use rtgauge_analysis::kind::{KindData, LatThread};
use rtgauge_model::latency::{Sparse, TimelineEntry};
use rtgauge_model::rt::ProcessConditions;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::units::us_trunc;

/// CPUs up to which a probe's per-CPU tables are shown open and its histograms drawn one per CPU; above,
/// the many-CPU views (overlay, heatmap, strip chart) carry the page and the per-CPU detail is collapsed.
pub(crate) const FEW_CPUS: usize = 4;
/// Per-CPU tables longer than this are collapsed (in `<details>`, readable without script).
const OPEN_ROWS: usize = 8;

/// What a latency kind (timer latency, busy-loop gap) puts in its section of the run page.
pub(crate) struct Section<'a> {
    /// The result.
    pub data: &'a dyn KindData,
    /// What a value is ("timer latency", "busy-loop gap").
    pub what: &'static str,
    /// The section's heading.
    pub title: String,
    /// Per-thread samples over the overflow bound (seed 003's "overflows" column), with the bound, ns.
    pub overflows: Option<(u64, Vec<u64>)>,
    /// What the kind adds to the headline sentence after the largest value.
    pub headline_extra: Markup,
}

/// A latency kind's section: the headline, the per-CPU result table, the charts, the why, and the
/// conditions (requested → achieved). A result without threads shows its measures only.
pub(crate) fn section(s: &Section, o: ReportOptions) -> Markup {
    let threads = s.data.latency_threads();
    let what = s.what;
    let process: Option<&ProcessConditions> = s.data.process_conditions();
    if threads.is_empty() {
        return html! {
            h2 { "Measures" }
            (measures_table(&s.data.measures()))
        };
    }
    let names: Vec<String> = threads.iter().map(LatThread::name).collect();
    let sparse: Vec<Sparse> = threads.iter().map(|t| t.stats.sparse()).collect();
    let series: Vec<Series<Sparse>> = names
        .iter()
        .zip(&sparse)
        .map(|(n, s)| Series {
            name: n.clone(),
            data: s,
        })
        .collect();
    let overflows = s.overflows.as_ref();
    let worst = threads
        .iter()
        .enumerate()
        .max_by_key(|(_, t)| t.stats.max_ns)
        .map_or(0, |(i, _)| i);
    let table = result_table(&threads, &names, overflows, worst);
    let conditions = conditions_table(&threads, &names);
    let shortfalls = threads
        .iter()
        .filter(|t| {
            let c = t.conditions;
            c.policy.error.is_some() || c.priority.error.is_some() || c.cpu.error.is_some()
        })
        .count();
    html! {
        h2 { (s.title) }
        @if let Some(t) = threads.get(worst) {
            p { (threads.len()) " CPU" (if threads.len() == 1 { "" } else { "s" }) "; the largest " (what) " "
                strong { (us_figure(t.stats.max_ns)) " µs" } " on " (names[worst])
                (s.headline_extra)
                "." }
        }
        @if threads.len() > OPEN_ROWS {
            (details(o.record, html! { "Result per CPU (" (threads.len()) " CPUs: samples, min, avg, percentiles, max" @if overflows.is_some() { ", overflows" } ")" }, table))
        } @else {
            (table)
        }
        // An imported result without a histogram keeps only min and max: a distribution drawn from those two
        // would be made up, so its charts are left out and the reason said.
        @if threads.iter().all(|t| t.stats.beyond.is_some_and(|b| b.limit_ns == 0)) {
            p.note { "No distribution to chart: the imported file has no histogram (only min, avg and max)." }
        } @else {
            (charts_of(s.data, what, &threads, &names, &series))
        }
        (crate::spikes::html(s.data))
        h3 { "Conditions (requested → achieved)" }
        @if threads.len() > OPEN_ROWS {
            (details(o.record || shortfalls > 0, html! { "Per thread (" (threads.len()) "; " (shortfalls) " with a shortfall)" }, conditions))
        } @else {
            (conditions)
        }
        @if let Some(pc) = process {
            table {
                tr { th { "mlockall" } (setting(&pc.mlockall.requested.to_string(), &pc.mlockall.achieved.to_string(), pc.mlockall.error.as_deref())) }
                tr { th { "cpu_dma_latency µs" } (setting(&fmt_opt(pc.cpu_dma_latency_us.requested), &fmt_opt(pc.cpu_dma_latency_us.achieved), pc.cpu_dma_latency_us.error.as_deref())) }
            }
        }
    }
}

/// The result per CPU: samples, min, avg, percentiles, max (the `worst` row marked when there are many),
/// and the samples at or above the overflow threshold when there is one.
fn result_table(
    threads: &[LatThread],
    names: &[String],
    overflows: Option<&(u64, Vec<u64>)>,
    worst: usize,
) -> Markup {
    let many = threads.len() > FEW_CPUS;
    html! {
        table {
            tr { th { "CPU" } th { "samples" } th { "min µs" } th { "avg µs" } th { "p99 µs" } th { "p99.9 µs" } th { "p99.99 µs" } th { "max µs" }
                 @if let Some((thr, _)) = &overflows { th { "overflows (≥ " (us_trunc(*thr)) " µs)" } } }
            @for (i, t) in threads.iter().enumerate() {
                tr {
                    td { (names[i]) } td.n { (t.stats.count) } td.n { (us_figure(t.stats.min_ns)) }
                    td.n { (us_figure(t.stats.mean_ns as u64)) }
                    td.n { (pct_us(t.stats, 99.0)) }
                    td.n { (pct_us(t.stats, 99.9)) }
                    td.n { (pct_us(t.stats, 99.99)) }
                    td.n.worst[many && i == worst] { (us_figure(t.stats.max_ns)) }
                    @if let Some((_, n)) = &overflows { td.n { (n.get(i).copied().unwrap_or(0)) } }
                }
            }
        }
    }
}

/// The scheduling settings of each measurement thread, requested → achieved.
fn conditions_table(threads: &[LatThread], names: &[String]) -> Markup {
    html! {
        table {
            tr { th { "thread" } th { "policy" } th { "priority" } th { "CPU" } }
            @for (t, name) in threads.iter().zip(names) {
                tr {
                    td { (name) }
                    (setting(&t.conditions.policy.requested.to_string(), &t.conditions.policy.achieved.to_string(), t.conditions.policy.error.as_deref()))
                    (setting(&t.conditions.priority.requested.to_string(), &t.conditions.priority.achieved.to_string(), t.conditions.priority.error.as_deref()))
                    (setting(&fmt_opt(t.conditions.cpu.requested), &fmt_opt(t.conditions.cpu.achieved), t.conditions.cpu.error.as_deref()))
                }
            }
        }
    }
}

/// The charts of a latency probe: per-CPU histograms, percentiles and the timeline; with many CPUs a
/// heatmap, an overlay and a strip instead of a histogram each.
fn charts_of(
    data: &dyn KindData,
    what: &str,
    threads: &[LatThread],
    names: &[String],
    series: &[Series<Sparse>],
) -> Markup {
    let many = threads.len() > FEW_CPUS;
    // Many CPUs: the timeline of the largest value over all of them (64 lines would be a smear).
    let pooled_tl;
    let tl: Vec<Series<[TimelineEntry]>> = if many {
        pooled_tl = pooled_timeline(data);
        vec![Series {
            name: format!("all {} CPUs", threads.len()),
            data: pooled_tl.as_slice(),
        }]
    } else {
        threads
            .iter()
            .zip(names)
            .map(|(t, n)| Series {
                name: n.clone(),
                data: t.timeline,
            })
            .collect()
    };
    let figures: Vec<(String, Vec<u64>)> = [99.0, 99.9]
        .iter()
        .map(|&q| {
            (
                format!("p{q}"),
                threads
                    .iter()
                    .map(|t| t.stats.percentile(q).unwrap_or(0))
                    .collect(),
            )
        })
        .chain(std::iter::once((
            "max".to_string(),
            threads.iter().map(|t| t.stats.max_ns).collect(),
        )))
        .collect();
    html! {
        @if many {
            div.grid {
                (chart(charts::heatmap(&format!("{what}: CPU × latency (shade: log samples)"), series)))
                (chart(charts::histogram_overlay(&format!("{what} histograms, {} CPUs overlaid", series.len()), series)))
                (chart(charts::strip(&format!("{what} per CPU"), names, &figures)))
                (chart(charts::percentiles(&format!("{what} percentiles"), series)))
                @if tl.iter().any(|t| !t.data.is_empty()) {
                    (chart(charts::timeline(&format!("largest {what} per interval"), &tl)))
                }
            }
            (details(false, html! { "Histogram of each CPU (" (series.len()) ")" }, html! {
                @for s in series {
                    details { summary { (s.name) ": max " (threads.iter().zip(names).find(|(_, n)| **n == s.name).map_or(String::new(), |(t, _)| us_figure(t.stats.max_ns))) " µs" }
                        (chart(charts::histogram(&format!("{what} histogram, {}", s.name), std::slice::from_ref(s)))) }
                }
            }))
        } @else {
            div.grid {
                @for s in series {
                    (chart(charts::histogram_within(&format!("{what} histogram, {}", s.name), std::slice::from_ref(s), series)))
                }
                (chart(charts::percentiles(&format!("{what} percentiles"), series)))
                @if tl.iter().any(|t| !t.data.is_empty()) {
                    (chart(charts::timeline(&format!("largest {what} per interval"), &tl)))
                }
            }
        }
    }
}

/// A stored percentile in µs, or "> limit" when it lies beyond an imported histogram's range.
pub(crate) fn pct_us(stats: &rtgauge_model::latency::LatencyStats, percentile: f64) -> String {
    match stats.unknown_above(percentile) {
        Some(l) => format!("> {}", us_figure(l)),
        None => us_figure(stats.percentile(percentile).unwrap_or(0)),
    }
}

fn fmt_opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |x| x.to_string())
}

fn setting(requested: &str, achieved: &str, error: Option<&str>) -> Markup {
    let ok = error.is_none();
    html! {
        td class=(if ok { "" } else { "fail" }) {
            (requested) " → " (achieved)
            @if let Some(e) = error { " (" (e) ")" }
        }
    }
}

/// A latency kind's part of the comparison page: every run's distribution over all CPUs overlaid
/// (histogram, percentiles, largest per interval), then per CPU side by side. `all` holds the kind's
/// result of every run, in column order.
pub(crate) fn compare(kind: &str, names: &[String], all: &[&ProbeResult]) -> Markup {
    let pooled: Vec<Sparse> = all
        .iter()
        .map(|p| rtgauge_analysis::kind::pooled(p.data()))
        .collect();
    let series: Vec<Series<Sparse>> = names
        .iter()
        .zip(&pooled)
        .map(|(n, s)| Series {
            name: n.clone(),
            data: s,
        })
        .collect();
    let tls: Vec<Vec<TimelineEntry>> = all.iter().map(|p| pooled_timeline(p.data())).collect();
    let tl: Vec<Series<[TimelineEntry]>> = names
        .iter()
        .zip(&tls)
        .map(|(n, t)| Series {
            name: n.clone(),
            data: t.as_slice(),
        })
        .collect();
    let k = kind;
    html! {
        h2 { (k) }
        div.grid {
            (chart(charts::histogram(&format!("{k}: histograms (all CPUs)"), &series)))
            (chart(charts::percentiles(&format!("{k}: percentiles (all CPUs)"), &series)))
            // Imported runs have no timeline: a chart with no data is left out rather than drawn empty.
            @if tl.iter().any(|t| !t.data.is_empty()) {
                (chart(charts::timeline(&format!("{k}: largest per interval (all CPUs)"), &tl)))
            }
        }
        (per_cpu_compare(names, all, k))
    }
}

/// Per CPU, side by side: each run's p99 and max, and each later run's ratio to the baseline (CPUs
/// matched by name; a CPU one run lacks shows "-"). Collapsed beyond a few CPUs.
fn per_cpu_compare(names: &[String], all: &[&ProbeResult], kind: &str) -> Markup {
    let threads: Vec<Vec<(String, LatThread)>> = all
        .iter()
        .map(|p| {
            p.data()
                .latency_threads()
                .into_iter()
                .map(|t| (t.name(), t))
                .collect()
        })
        .collect();
    let mut cpus: Vec<&str> = Vec::new();
    for (n, _) in threads.iter().flatten() {
        if !cpus.contains(&n.as_str()) {
            cpus.push(n);
        }
    }
    let find = |r: usize, cpu: &str| threads[r].iter().find(|(n, _)| n == cpu).map(|(_, t)| t);
    let fig = |r: usize, cpu: &str, q: Option<f64>| -> Option<u64> {
        let t = find(r, cpu)?;
        match q {
            Some(q) => t.stats.percentile(q),
            None => Some(t.stats.max_ns),
        }
    };
    let ratio = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if a > 0 => format!("{:.2}×", b as f64 / a as f64),
        _ => "-".into(),
    };
    let show = |v: Option<u64>| v.map_or("-".to_string(), us_figure);
    let table = html! {
        table {
            tr { th { "CPU" } @for n in names { th { (n) " p99 µs" } th { (n) " max µs" } }
                 @for n in names.iter().skip(1) { th { (n) " / baseline p99" } th { (n) " / baseline max" } } }
            @for cpu in &cpus {
                tr {
                    td { (cpu) }
                    @for r in 0..all.len() { td.n { (show(fig(r, cpu, Some(99.0)))) } td.n { (show(fig(r, cpu, None))) } }
                    @for r in 1..all.len() {
                        td.n { (ratio(fig(0, cpu, Some(99.0)), fig(r, cpu, Some(99.0)))) }
                        td.n { (ratio(fig(0, cpu, None), fig(r, cpu, None))) }
                    }
                }
            }
        }
    };
    html! {
        h3 { (kind) " per CPU" }
        @if cpus.len() > OPEN_ROWS {
            (details(false, html! { (cpus.len()) " CPUs: p99 and max per run, ratios to the baseline" }, table))
        } @else {
            (table)
        }
    }
}

/// The largest value per interval over all threads.
fn pooled_timeline(data: &dyn KindData) -> Vec<TimelineEntry> {
    let mut m: std::collections::BTreeMap<u64, TimelineEntry> = std::collections::BTreeMap::new();
    for t in data.latency_threads() {
        for e in t.timeline {
            let x = m.entry(e.start_ns).or_insert(TimelineEntry {
                start_ns: e.start_ns,
                ..TimelineEntry::default()
            });
            x.max_ns = x.max_ns.max(e.max_ns);
            x.count += e.count;
            x.missed += e.missed;
        }
    }
    m.into_values().collect()
}

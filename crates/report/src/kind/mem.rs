//! The memory probe (`rtgauge mem`) in every view: its terminal rendering of the latency curve, bandwidth
//! and NUMA matrix, its section of the run page (the curve beside the steps and bandwidths), its
//! shortfalls (NUMA cells on the wrong node) and its comparison (the curves overlaid).

use super::KindView;
use crate::markup::{fmt_value, ReportOptions};
use crate::text::TextOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::measure::MeasureUnit;
use rtgauge_model::mem::{size_label, MemResult};
use rtgauge_model::run::ProbeResult;

fn gbs(b: f64) -> String {
    format!("{:.2}", b / 1e9)
}

/// The brief terminal form: the plateaus of the latency curve, the bandwidths and the NUMA matrix (its
/// cells when few, else local against remote), a line each.
fn render_brief(result: &MemResult) -> String {
    let mut s = heading(result);
    let mut say = |first: &str, parts: Vec<String>| {
        if !parts.is_empty() {
            for l in crate::text::wrap(first, "    ", &parts.join(", ")) {
                s.push_str(&l);
                s.push('\n');
            }
        }
    };
    let mut curve: Vec<String> = result
        .steps
        .iter()
        .map(|st| {
            let m = st
                .matches
                .as_ref()
                .map_or(" (no sysfs cache)".into(), |m| format!(" ({m})"));
            format!(
                "{:.2} ns to {}{m}",
                st.plateau_ns,
                size_label(st.capacity_bytes)
            )
        })
        .collect();
    if let Some(last) = result.latency.last() {
        curve.push(format!(
            "{:.2} ns at {}",
            last.ns_per_load,
            size_label(last.size_bytes)
        ));
    }
    say("  load latency:", curve);
    // One working set for all (the probe's default): said once.
    let one = match result.bandwidth.first() {
        Some(f)
            if result
                .bandwidth
                .iter()
                .all(|b| b.size_bytes == f.size_bytes) =>
        {
            Some(f.size_bytes)
        }
        _ => None,
    };
    say(
        &one.map_or("  bandwidth GB/s:".to_string(), |b| {
            format!("  bandwidth GB/s at {}:", size_label(b))
        }),
        result
            .bandwidth
            .iter()
            .map(|b| match one {
                Some(_) => format!("{} {}", b.kind, gbs(b.bytes_per_sec)),
                None => format!(
                    "{} {} at {}",
                    b.kind,
                    gbs(b.bytes_per_sec),
                    size_label(b.size_bytes)
                ),
            })
            .collect(),
    );
    let ok: Vec<_> = result.numa.iter().filter(|c| c.error.is_none()).collect();
    let failed = result.numa.len() - ok.len();
    let mut numa: Vec<String> = if ok.len() <= 4 {
        ok.iter()
            .map(|c| {
                format!(
                    "{} → {} {:.1} ns {} GB/s",
                    c.cpu_node,
                    c.mem_node,
                    c.latency_ns,
                    gbs(c.read_bytes_per_sec)
                )
            })
            .collect()
    } else {
        let range = |local: bool| {
            let v: Vec<f64> = ok
                .iter()
                .filter(|c| (c.cpu_node == c.mem_node) == local)
                .map(|c| c.latency_ns)
                .collect();
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            (!v.is_empty()).then(|| {
                format!(
                    "{} {lo:.1}–{hi:.1} ns",
                    if local { "local" } else { "remote" }
                )
            })
        };
        [range(true), range(false)]
            .into_iter()
            .flatten()
            .chain(["-v: each cell".to_string()])
            .collect()
    };
    if failed > 0 {
        numa.push(format!("{failed} cells not measured (-v says why)"));
    }
    say("  NUMA (CPUs of node → memory of node):", numa);
    s
}

fn heading(result: &MemResult) -> String {
    let caches: Vec<String> = result
        .caches
        .iter()
        .map(|c| format!("L{} {}", c.level, size_label(c.size_bytes)))
        .collect();
    format!(
        "\nmemory (mem, {} pages; sysfs caches: {}):\n",
        if result.config.hugepages {
            "huge"
        } else {
            "4 KiB"
        },
        if caches.is_empty() {
            "-".into()
        } else {
            caches.join(", ")
        }
    )
}

/// Curve, steps, bandwidth and matrix as text.
pub fn render(result: &MemResult, full_curve: bool) -> String {
    use std::fmt::Write as _;
    let mut s = heading(result);
    if full_curve {
        let _ = writeln!(s, "  {:>10} {:>10}", "working set", "ns/load");
        for p in &result.latency {
            let _ = writeln!(
                s,
                "  {:>10} {:>10.2}",
                size_label(p.size_bytes),
                p.ns_per_load
            );
        }
    }
    let _ = writeln!(s, "  steps of the latency curve:");
    for st in &result.steps {
        let _ = writeln!(
            s,
            "    up to {:>6}: {:>7.2} ns, then {:>7.2} ns  {}",
            size_label(st.capacity_bytes),
            st.plateau_ns,
            st.next_ns,
            st.matches.as_ref().map_or(
                "(no sysfs cache of this size: TLB reach, or the share of a cache this CPU gets)"
                    .to_string(),
                |m| format!("= {m}")
            )
        );
    }
    if let Some(last) = result.latency.last() {
        let _ = writeln!(
            s,
            "    at {:>6}: {:>7.2} ns (largest working set)",
            size_label(last.size_bytes),
            last.ns_per_load
        );
    }
    for b in &result.bandwidth {
        let _ = writeln!(
            s,
            "  {:<5} bandwidth {:>6}: {:>8} GB/s",
            b.kind,
            size_label(b.size_bytes),
            gbs(b.bytes_per_sec)
        );
    }
    if !result.numa.is_empty() {
        let _ = writeln!(
            s,
            "  NUMA matrix (CPUs of node → memory of node): latency ns, read GB/s"
        );
        for c in &result.numa {
            match &c.error {
                Some(e) => {
                    let _ = writeln!(s, "    {} → {}: {e}", c.cpu_node, c.mem_node);
                }
                None => {
                    let _ = writeln!(
                        s,
                        "    {} → {} (CPU {}, page on node {}): {:>7.1} ns {:>8} GB/s",
                        c.cpu_node,
                        c.mem_node,
                        c.cpu,
                        c.verified_node.map_or("?".into(), |n| n.to_string()),
                        c.latency_ns,
                        gbs(c.read_bytes_per_sec)
                    );
                }
            }
        }
    }
    s
}

impl KindView for MemResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        "Memory (mem)".to_string()
    }

    fn terminal_section(&self, _facts: &RunFacts, opts: TextOptions) -> String {
        match opts.verbose {
            true => render(self, false),
            false => render_brief(self),
        }
    }

    /// The latency curve beside the steps and bandwidths; every measure collapsed below.
    fn html_section(&self, _options: ReportOptions, _facts: &RunFacts) -> Markup {
        let ms = self.measures();
        let ns = |v: f64| fmt_value(v, MeasureUnit::Nanos);
        html! {
            h2 { (self.section_title()) }
                div.grid {
                    (mem_chart(&[("load latency".to_string(), self)]))
                    div {
                        @if !self.steps.is_empty() {
                            table {
                                tr { th { "step at" } th { "plateau" } th { "next" } th { "matches" } }
                                @for st in &self.steps {
                                    tr { td.n { (rtgauge_model::mem::size_label(st.capacity_bytes)) } td.n { (ns(st.plateau_ns)) }
                                         td.n { (ns(st.next_ns)) } td { (st.matches.as_deref().unwrap_or("-")) } }
                                }
                            }
                        }
                        @if !self.bandwidth.is_empty() {
                            table {
                                tr { th { "bandwidth" } th { "working set" } th { "GB/s" } }
                                @for b in &self.bandwidth {
                                    tr { td { (b.kind) } td.n { (rtgauge_model::mem::size_label(b.size_bytes)) }
                                         td.n { (fmt_value(b.bytes_per_sec, MeasureUnit::BytesPerSecond)) } }
                                }
                            }
                        }
                    }
                }
                (crate::markup::details(false, html! { "All measures (" (ms.len()) ")" }, crate::markup::measures_table(&ms)))

        }
    }

    /// NUMA cells that failed or landed on another node.
    fn shortfalls(&self) -> Vec<String> {
        self.numa
            .iter()
            .filter_map(|c| match (&c.error, c.verified_node) {
                (Some(e), _) => Some(format!("mem: NUMA {} → {}: {e}", c.cpu_node, c.mem_node)),
                (None, Some(n)) if n != c.mem_node => Some(format!(
                    "mem: NUMA {} → {}: memory landed on node {n}",
                    c.cpu_node, c.mem_node
                )),
                _ => None,
            })
            .collect()
    }

    fn compare_html(&self, names: &[String], all: &[&ProbeResult]) -> Markup {
        let mems: Vec<(String, &MemResult)> = names
            .iter()
            .zip(all)
            .filter_map(|(n, p)| Some((n.clone(), p.downcast_ref::<MemResult>()?)))
            .collect();
        html! { h2 { "mem" } (mem_chart(&mems)) }
    }
}

/// Load latency against working-set size, one curve per run, the caches sysfs reports marked.
fn mem_chart(runs: &[(String, &MemResult)]) -> Markup {
    let curves: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|(_, m)| {
            m.latency
                .iter()
                .map(|p| (p.size_bytes as f64, p.ns_per_load))
                .collect()
        })
        .collect();
    let series: Vec<crate::charts::Series<[(f64, f64)]>> = runs
        .iter()
        .zip(&curves)
        .map(|((n, _), c)| crate::charts::Series {
            name: n.clone(),
            data: c.as_slice(),
        })
        .collect();
    let marks: Vec<(f64, String)> = runs
        .first()
        .map(|(_, m)| {
            m.caches
                .iter()
                .map(|c| (c.size_bytes as f64, format!("L{}", c.level)))
                .collect()
        })
        .unwrap_or_default();
    crate::markup::chart(crate::charts::log_curve(
        "memory load latency by working set",
        "working set",
        "ns per load",
        &series,
        &marks,
    ))
}

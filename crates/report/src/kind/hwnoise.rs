//! The hardware/firmware noise probe (`rtgauge hwnoise`) in every view: per CPU the windows whose gap
//! reached the threshold, the largest gap and the NMIs, the worst windows, and the SMIs the CPUs took.

use super::KindView;
use crate::markup::ReportOptions;
use crate::text::TextOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::hwnoise::{HwTracer, HwnoiseResult};
use rtgauge_model::kind::RunFacts;

/// Worst windows listed.
const LISTED: usize = 10;

fn us(ns: u64) -> String {
    format!("{:.1}", rtgauge_model::units::us(ns))
}

/// One line per CPU: "CPU 1: 3 windows with a gap ≥ 10 µs, max 20012.0 µs, 0 NMIs" or "no gap ≥ 10 µs";
/// where the tracer says (osnoise), the time sampled and the share of it the CPU was available.
pub fn cpu_lines(r: &HwnoiseResult) -> Vec<String> {
    let thr = us(r.config.threshold_ns);
    r.cpus
        .iter()
        .map(|c| {
            let mut l = match c.gaps.count {
                0 => format!("CPU {}: no gap ≥ {thr} µs", c.cpu),
                n => format!(
                    "CPU {}: {n} window{} with a gap ≥ {thr} µs, max {} µs, {} NMI{}",
                    c.cpu,
                    if n == 1 { "" } else { "s" },
                    us(c.gaps.max_ns),
                    c.nmi_count,
                    if c.nmi_count == 1 { "" } else { "s" }
                ),
            };
            if let (Some(s), Some(n)) = (c.sampled_ns, c.noise_ns) {
                l.push_str(&match c.available_pct() {
                    Some(pct) => format!(
                        "; noise {} µs in {:.1} s sampled: {pct:.5} % available",
                        us(n),
                        s as f64 / 1e9
                    ),
                    None => "; no period completed (nothing sampled to judge)".into(),
                });
            }
            l
        })
        .collect()
}

/// One window in words: hwlat's inner and outer gaps, or osnoise's largest noise.
fn window_words(r: &HwnoiseResult, g: &rtgauge_model::hwnoise::HwGap) -> String {
    let plural = |n: u64, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    let nmis = if g.nmi_count > 0 && r.config.tracer == HwTracer::Hwlat {
        format!(", {} NMIs ({} µs)", g.nmi_count, us(g.nmi_ns))
    } else if g.nmi_count > 0 {
        format!(", {}", plural(g.nmi_count, "NMI"))
    } else {
        String::new()
    };
    match r.config.tracer {
        HwTracer::Hwlat => format!(
            "inner {} µs, outer {} µs, {} in the window{nmis}",
            us(g.inner_ns),
            us(g.outer_ns),
            plural(g.count, "gap")
        ),
        HwTracer::Osnoise => format!(
            "largest noise {} µs, {} ≥ {} µs in the period{nmis}",
            us(g.inner_ns),
            plural(g.count, "noise"),
            us(r.config.threshold_ns)
        ),
    }
}

impl KindView for HwnoiseResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        format!(
            "Hardware and firmware noise (hwnoise: {})",
            self.settings_line().unwrap_or_default()
        )
    }

    fn terminal_section(&self, _facts: &RunFacts, opts: TextOptions) -> String {
        use std::fmt::Write as _;
        let mut s = format!("\n{}:\n", self.section_title().to_lowercase());
        let maxima: Vec<u64> = self.cpus.iter().map(|c| c.gaps.max_ns).collect();
        let (shown, rest) = crate::text::cpu_rows(&maxima, opts);
        for (l, _) in cpu_lines(self).iter().zip(&shown).filter(|(_, &on)| on) {
            let _ = writeln!(s, "  {l}");
        }
        if let Some(r) = rest {
            let _ = writeln!(s, "{r}");
        }
        for g in self.gaps.iter().take(LISTED) {
            let _ = writeln!(
                s,
                "  at {:.3} s on CPU {}: {}",
                g.at_ns as f64 / 1e9,
                g.cpu,
                window_words(self, g)
            );
        }
        if self.lost > 0 {
            let _ = writeln!(
                s,
                "  {} trace entries lost before they were read",
                self.lost
            );
        }
        if let Some(l) = self.why.as_ref().and_then(crate::spikes::smi_line) {
            let _ = writeln!(s, "  {l}");
        }
        s
    }

    fn html_section(&self, _options: ReportOptions, _facts: &RunFacts) -> Markup {
        html! {
            h2 { (self.section_title()) }
            p { (self.method) }
            ul { @for l in cpu_lines(self) { li { (l) } } }
            @if !self.gaps.is_empty() {
                @let osnoise = self.config.tracer == HwTracer::Osnoise;
                table {
                    tr {
                        th { "at s" } th { "CPU" }
                        @if osnoise { th { "largest noise µs" } th { "noises" } }
                        @else { th { "inner µs" } th { "outer µs" } th { "gaps" } }
                        th { "NMIs" }
                    }
                    @for g in self.gaps.iter().take(50) {
                        tr { td.n { (format!("{:.3}", g.at_ns as f64 / 1e9)) } td.n { (g.cpu) } td.n { (us(g.inner_ns)) }
                             @if !osnoise { td.n { (us(g.outer_ns)) } }
                             td.n { (g.count) } td.n { (g.nmi_count) } }
                    }
                }
            }
            @if let Some(l) = self.why.as_ref().and_then(crate::spikes::smi_line) { p { (l) } }
        }
    }

    fn headline(&self) -> Option<(String, u64)> {
        Some(("hardware/firmware gap".into(), self.max_ns()))
    }
}

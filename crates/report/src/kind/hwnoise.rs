//! The hardware/firmware noise probe (`rtgauge hwnoise`) in every view: per CPU the windows whose gap
//! reached the threshold, the largest gap and the NMIs, the worst windows, and the SMIs the CPUs took.

use super::KindView;
use crate::markup::ReportOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::hwnoise::HwnoiseResult;
use rtgauge_model::kind::RunFacts;

/// Worst windows listed.
const LISTED: usize = 10;

fn us(ns: u64) -> String {
    format!("{:.1}", rtgauge_model::units::us(ns))
}

/// One line per CPU: "CPU 1: 3 windows with a gap ≥ 10 µs, max 20012.0 µs, 0 NMIs" or "no gap ≥ 10 µs".
pub fn cpu_lines(r: &HwnoiseResult) -> Vec<String> {
    let thr = us(r.config.threshold_ns);
    r.cpus
        .iter()
        .map(|c| match c.gaps.count {
            0 => format!("CPU {}: no gap ≥ {thr} µs", c.cpu),
            n => format!(
                "CPU {}: {n} window{} with a gap ≥ {thr} µs, max {} µs, {} NMI{}",
                c.cpu,
                if n == 1 { "" } else { "s" },
                us(c.gaps.max_ns),
                c.nmi_count,
                if c.nmi_count == 1 { "" } else { "s" }
            ),
        })
        .collect()
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

    fn terminal_section(&self, _facts: &RunFacts) -> String {
        use std::fmt::Write as _;
        let mut s = format!("\n{}:\n", self.section_title().to_lowercase());
        for l in cpu_lines(self) {
            let _ = writeln!(s, "  {l}");
        }
        for g in self.gaps.iter().take(LISTED) {
            let _ = writeln!(
                s,
                "  at {:.3} s on CPU {}: inner {} µs, outer {} µs, {} gap{} in the window{}",
                g.at_ns as f64 / 1e9,
                g.cpu,
                us(g.inner_ns),
                us(g.outer_ns),
                g.count,
                if g.count == 1 { "" } else { "s" },
                if g.nmi_count > 0 {
                    format!(", {} NMIs ({} µs)", g.nmi_count, us(g.nmi_ns))
                } else {
                    String::new()
                }
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
                table {
                    tr { th { "at s" } th { "CPU" } th { "inner µs" } th { "outer µs" } th { "gaps" } th { "NMIs" } }
                    @for g in self.gaps.iter().take(50) {
                        tr { td.n { (format!("{:.3}", g.at_ns as f64 / 1e9)) } td.n { (g.cpu) } td.n { (us(g.inner_ns)) }
                             td.n { (us(g.outer_ns)) } td.n { (g.count) } td.n { (g.nmi_count) } }
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

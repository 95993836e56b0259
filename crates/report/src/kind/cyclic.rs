//! The timer wake-up latency probe (`rtgauge cyclic`, imported cyclictest) in every view: the terminal
//! table in the layout of the vPAC guide's result table, the run page's latency section with missed
//! deadlines and rt-tests overflows, its shortfalls, its headline and its comparison.

use super::KindView;
use crate::latency::{self, Section};
use crate::markup::ReportOptions;
use crate::text::TextOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::units::{us, us_f64, us_trunc};
use std::fmt::Write as _;

impl KindView for CyclicResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        let sched = super::sched_shortfall(self)
            .unwrap_or_else(|| format!("{} {}", self.config.policy, self.config.priority));
        format!(
            "Timer latency (cyclic, interval {}, {sched})",
            crate::interval_text(self.config.interval_ns),
        )
    }

    fn terminal_section(&self, facts: &RunFacts, opts: TextOptions) -> String {
        let mut s = String::new();
        // The -h range in µs as the column has always said it; a sub-µs range (cyclictest -N,
        // whose buckets are ns) in ns, so that it does not read as "≥0µs".
        let over = match self.config.overflow_threshold_ns() {
            Some(ns) if ns < 1000 => format!("overflows≥{ns}ns"),
            Some(ns) => format!("overflows≥{}µs", us_trunc(ns)),
            None => "overflows".to_string(),
        };
        let _ = writeln!(
            s,
            "\ntimer latency (cyclic, interval {}{}):",
            crate::interval_text(self.config.interval_ns),
            super::sched_shortfall(self).map_or(String::new(), |s| format!("; {s}"))
        );
        let _ = writeln!(
            s,
            "{:>4} {:>14} {:>9} {:>9} {:>9} {:>14} {:>10} {:>10} {:>8}",
            "CPU", "samples", "min µs", "avg µs", "max µs", over, "p99.9 µs", "p99.99 µs", "missed"
        );
        let maxima: Vec<u64> = self.threads.iter().map(|t| t.latency.max_ns).collect();
        let (shown, rest) = crate::text::cpu_rows(&maxima, opts);
        for (t, _) in self.threads.iter().zip(&shown).filter(|(_, &on)| on) {
            let _ = writeln!(
                s,
                "{:>4} {:>14} {:>9.1} {:>9.1} {:>9.1} {:>14} {:>10} {:>10} {:>8}",
                t.conditions
                    .cpu
                    .achieved
                    .map_or("-".into(), |c| c.to_string()),
                t.cycles,
                us(t.latency.min_ns),
                us_f64(t.latency.mean_ns),
                us(t.latency.max_ns),
                t.linear
                    .as_ref()
                    .map_or("-".into(), |l| l.overflows.to_string()),
                pct(&t.latency, 99.9),
                pct(&t.latency, 99.99),
                if facts.missed_deadlines_known {
                    t.missed_deadlines.to_string()
                } else {
                    "-".into()
                }
            );
        }
        if let Some(r) = rest {
            let _ = writeln!(s, "{r}");
        }
        s
    }

    fn html_section(&self, options: ReportOptions, facts: &RunFacts) -> Markup {
        let missed = match facts.missed_deadlines_known {
            true => self
                .threads
                .iter()
                .map(|t| t.missed_deadlines)
                .sum::<u64>()
                .to_string(),
            false => "unknown (cyclictest does not count them)".to_string(),
        };
        let section = Section {
            data: self,
            what: "timer latency",
            title: self.section_title(),
            overflows: self.config.overflow_threshold_ns().map(|thr| {
                (
                    thr,
                    self.threads
                        .iter()
                        .map(|t| t.samples_at_or_above(thr))
                        .collect(),
                )
            }),
            headline_extra: html! {
                "; missed deadlines: " (missed)
                @if let Some((thr, n)) = self.overflows() { "; samples ≥ " (us_trunc(thr)) " µs (overflows): " (n) }
            },
        };
        latency::section(&section, options)
    }

    /// Another run on the same CPUs, starved timeline readers, late samples the episode tracker never saw,
    /// page faults taken while measuring (the settings not got are the run's unmet conditions).
    fn shortfalls(&self) -> Vec<String> {
        let mut w = crate::shortfalls::process(&self.conditions);
        for t in &self.threads {
            if t.timeline_dropped > 0 {
                w.push(format!(
                    "thread {}: {} timeline intervals dropped (reader starved)",
                    t.index, t.timeline_dropped
                ));
            }
            if t.late_dropped > 0 {
                w.push(format!(
                    "thread {}: {} late samples (each a stall) not handed to the episode tracker (its ring was full: reader starved)",
                    t.index, t.late_dropped
                ));
            }
            if t.late_coalesced > 0 {
                w.push(format!(
                    "thread {}: {} stalls explained inside the window of the stall before them (the main thread fell behind: its ring full, {} stalls waiting)",
                    t.index, t.late_coalesced, rtgauge_model::cyclic::LATE_WAITING
                ));
            }
            w.extend(crate::shortfalls::disturbance(
                &format!("thread {}", t.index),
                t.disturbance.as_ref(),
            ));
        }
        w
    }

    fn headline(&self) -> Option<(String, u64)> {
        self.threads
            .iter()
            .map(|t| t.latency.max_ns)
            .max()
            .map(|m| ("timer latency max (cyclic)".to_string(), m))
    }

    fn compare_html(&self, names: &[String], all: &[&ProbeResult]) -> Markup {
        latency::compare("cyclic", names, all)
    }
}

/// A percentile in µs with one decimal, or "> limit" when it lies beyond an imported histogram's range.
fn pct(l: &rtgauge_model::latency::LatencyStats, p: f64) -> String {
    match l.unknown_above(p) {
        // Below 10 µs three decimals, so that a 50 ns limit does not read as ">0.1".
        Some(lim) if lim < 10_000 => format!(">{:.3}", us(lim)),
        Some(lim) => format!(">{:.1}", us(lim)),
        None => format!("{:.1}", us(l.percentile(p).unwrap_or(0))),
    }
}

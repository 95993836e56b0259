//! The busy-loop OS-noise probe (`rtgauge oslat`, imported oslat) in every view: the terminal table (loop
//! cost, p99.99, max, gaps over 20 µs per second, CPU availability), the run page's latency section, its
//! shortfalls, its headline, its progress line and its comparison.

use super::KindView;
use crate::latency::{self, Section};
use crate::markup::ReportOptions;
use crate::text::TextOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::oslat::OslatResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::units::us;
use std::fmt::Write as _;

impl KindView for OslatResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        match super::sched_shortfall(self) {
            Some(s) => format!("OS noise (oslat busy loop, {s})"),
            None => "OS noise (oslat busy loop)".to_string(),
        }
    }

    fn terminal_section(&self, _facts: &RunFacts, opts: TextOptions) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\nOS noise (oslat busy loop{}):",
            super::sched_shortfall(self).map_or(String::new(), |s| format!("; {s}"))
        );
        let _ = writeln!(
            s,
            "{:>4} {:>14} {:>8} {:>10} {:>10} {:>10} {:>12}",
            "CPU", "iterations", "loop ns", "p99.99 µs", "max µs", ">20µs/s", "available %"
        );
        let maxima: Vec<u64> = self.threads.iter().map(|t| t.gaps.max_ns).collect();
        let (shown, rest) = crate::text::cpu_rows(&maxima, opts);
        for (t, _) in self.threads.iter().zip(&shown).filter(|(_, &on)| on) {
            // Unknown for an import whose overflow bucket starts below 20 µs, and availability for any import.
            let over20 = t
                .over(20_000)
                .map_or("-".into(), |x| format!("{:.2}", x.per_second));
            let _ = writeln!(
                s,
                "{:>4} {:>14} {:>8.1} {:>10} {:>10.1} {:>10} {:>12}",
                t.cpu,
                t.iterations,
                t.loop_ns,
                match t.gaps.unknown_above(99.99) {
                    Some(l) => format!(">{:.3}", us(l)),
                    None => format!("{:.3}", us(t.gaps.percentile(99.99).unwrap_or(0))),
                },
                us(t.gaps.max_ns),
                over20,
                t.availability_pct.map_or("-".into(), |a| format!("{a:.4}"))
            );
        }
        if let Some(r) = rest {
            let _ = writeln!(s, "{r}");
        }
        s
    }

    fn html_section(&self, options: ReportOptions, _facts: &RunFacts) -> Markup {
        let section = Section {
            data: self,
            what: "busy-loop gap",
            title: self.section_title(),
            overflows: None,
            headline_extra: html! {},
        };
        latency::section(&section, options)
    }

    /// Another run on the same CPUs, page faults taken while measuring, and a counter that drifted (the
    /// settings not got are the run's unmet conditions).
    fn shortfalls(&self) -> Vec<String> {
        let mut w = crate::shortfalls::process(&self.conditions);
        for t in &self.threads {
            w.extend(crate::shortfalls::disturbance(
                &format!("CPU {}", t.cpu),
                t.disturbance.as_ref(),
            ));
        }
        if self.counter.cross_check_ppm.abs() > 1000.0 {
            w.push(format!(
            "counter frequency drifted {:+.0} ppm from CLOCK_MONOTONIC_RAW over the run: gap lengths are off by as much",
            self.counter.cross_check_ppm
        ));
        }
        w
    }

    fn headline(&self) -> Option<(String, u64)> {
        self.threads
            .iter()
            .map(|t| t.gaps.max_ns)
            .max()
            .map(|m| ("busy-loop gap max (oslat)".to_string(), m))
    }

    fn compare_html(&self, names: &[String], all: &[&ProbeResult]) -> Markup {
        latency::compare("oslat", names, all)
    }

    fn progress_line(&self) -> Option<String> {
        let max = self
            .threads
            .iter()
            .map(|t| t.gaps.max_ns)
            .max()
            .unwrap_or(0);
        let iters: u64 = self.threads.iter().map(|t| t.iterations).sum();
        Some(format!("max gap {:.1} µs, {iters} iterations", us(max)))
    }
}

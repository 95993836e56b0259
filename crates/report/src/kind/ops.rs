//! The OS-primitive probe (`rtgauge ops`) in every view: its terminal table (median, p99, max per
//! operation), its section of the run page, and its shortfalls (pinning not achieved, operations skipped).

use super::KindView;
use crate::markup::{fmt_value, ReportOptions};
use crate::text::TextOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::measure::MeasureUnit;
use rtgauge_model::ops::OpsResult;
use rtgauge_model::units;

/// Microseconds with three decimals, as lmbench prints them.
fn us(ns: f64) -> String {
    format!("{:.3}", units::us_f64(ns))
}

/// The operations the brief terminal form names, with the word it names each by: the costs a real-time
/// design budgets for (entering the kernel, switching, a round trip, a page fault, creating a process,
/// a short sleep's overshoot).
const BRIEF: [(&str, &str); 6] = [
    ("null_syscall", "null syscall"),
    ("ctx_switch", "context switch"),
    ("pipe_rtt", "pipe round trip"),
    ("page_fault", "page fault"),
    ("fork_exit", "fork+exit"),
    ("sleep_100us", "sleep 100 µs overshoot"),
];

/// The brief terminal form: the medians of the [`BRIEF`] operations, in a sentence.
fn render_brief(result: &OpsResult) -> String {
    let pin = result
        .cpu
        .achieved
        .map_or("not pinned".to_string(), |c| format!("CPU {c}"));
    let mut s = format!(
        "\nOS primitives (ops, {pin}, {} samples each; -v: all {} operations with p99 and max):\n",
        result.config.repetitions,
        result.ops.len() + result.skipped.len()
    );
    let named: Vec<String> = BRIEF
        .iter()
        .filter_map(|(op, word)| {
            let o = result.ops.iter().find(|o| o.op == *op)?;
            Some(format!("{word} {}", us(o.median_ns)))
        })
        .collect();
    if !named.is_empty() {
        for l in crate::text::wrap("  median µs:", "    ", &named.join(", ")) {
            s.push_str(&l);
            s.push('\n');
        }
    }
    if !result.skipped.is_empty() {
        s.push_str(&format!(
            "  {} operations not measured (-v says why)\n",
            result.skipped.len()
        ));
    }
    s
}

/// The per-operation table (µs, as lmbench prints).
pub fn render_table(result: &OpsResult) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let pin = result
        .cpu
        .achieved
        .map_or("not pinned".to_string(), |c| format!("CPU {c}"));
    let _ = writeln!(
        s,
        "\nOS primitives (ops, {pin}, {} samples each):",
        result.config.repetitions
    );
    let _ = writeln!(
        s,
        "  {:<44} {:>11} {:>11} {:>11} {:>10}",
        "operation", "median µs", "p99 µs", "max µs", "ops/sample"
    );
    for o in &result.ops {
        let _ = writeln!(
            s,
            "  {:<44} {:>11} {:>11} {:>11} {:>10}",
            o.label,
            us(o.median_ns),
            us(o.p99_ns() as f64),
            us(o.latency.max_ns as f64),
            o.iterations_per_sample
        );
    }
    for (op, why) in &result.skipped {
        let _ = writeln!(s, "  {op:<44} not measured: {why}");
    }
    s
}

impl KindView for OpsResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        "OS primitives (ops)".to_string()
    }

    fn terminal_section(&self, _facts: &RunFacts, opts: TextOptions) -> String {
        match opts.verbose {
            true => render_table(self),
            false => render_brief(self),
        }
    }

    /// One row per operation (median, p99, max) rather than three measure/value rows each.
    fn html_section(&self, _options: ReportOptions, _facts: &RunFacts) -> Markup {
        let ns = |v: f64| fmt_value(v, MeasureUnit::Nanos);
        html! {
            h2 { (self.section_title()) }
                table {
                    tr { th { "operation" } th { "median" } th { "p99" } th { "max" } th { "ops/sample" } }
                    @for o in &self.ops {
                        tr { td { (o.label) } td.n { (ns(o.median_ns)) } td.n { (ns(o.p99_ns() as f64)) }
                             td.n { (ns(o.latency.max_ns as f64)) } td.n { (o.iterations_per_sample) } }
                    }
                    @for (op, why) in &self.skipped { tr { td { (op) } td colspan="4" { "not measured: " (why) } } }
                }

        }
    }

    /// Pinning not achieved, operations skipped.
    fn shortfalls(&self) -> Vec<String> {
        let mut w = Vec::new();
        if !self.cpu.ok() {
            w.push(format!(
                "ops: not pinned to CPU {:?} ({})",
                self.cpu.requested,
                self.cpu.error.as_deref().unwrap_or("unknown")
            ));
        }
        for (op, why) in &self.skipped {
            w.push(format!("ops: {op} not measured: {why}"));
        }
        w
    }
}

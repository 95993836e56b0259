//! Terminal rendering of the OS-primitive costs (`rtgauge ops`).

use crate::units;
use rtgauge_model::ops::OpsResult;

/// Microseconds with three decimals, as lmbench prints them.
fn us(ns: f64) -> String {
    format!("{:.3}", units::us(ns))
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

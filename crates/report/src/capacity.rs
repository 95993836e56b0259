//! The views of `rtgauge capacity`: the latency-vs-load table (the run with the worst gated figure of each
//! level) with the answer, and a self-contained HTML page with the curve.

use rtgauge_analysis::capacity::{Capacity, CapacityPoint, CapacitySample};
use rtgauge_model::units::us;
use rtgauge_model::Nanos;
use std::fmt::Write as _;

/// One line saying what was found.
pub fn answer_line(c: &Capacity) -> String {
    match c.capacity_level {
        Some(l) => format!("capacity: the gate holds up to load level {l} %"),
        None => format!("capacity: no level holds ({})", c.gate.text),
    }
}

/// The worst run of each level (by the gated figure).
fn worst_runs(c: &Capacity) -> Vec<(&CapacityPoint, &CapacitySample)> {
    c.curve
        .iter()
        .filter_map(|p| p.runs.iter().max_by_key(|s| s.value_ns).map(|s| (p, s)))
        .collect()
}

fn us1(ns: u64) -> String {
    format!("{:.1}", us(ns))
}

fn load_of(s: &CapacitySample) -> String {
    s.load
        .as_ref()
        .map_or_else(|| "none".to_string(), |l| l.summary())
}

/// The page: the curve of p50, p99, p99.9 and max against the load level, the gate as a line, the table.
pub fn render_html(c: &Capacity) -> String {
    let worst = worst_runs(c);
    let curve = |f: fn(&CapacitySample) -> u64| -> Vec<(f64, f64)> {
        worst
            .iter()
            .map(|(p, s)| (f64::from(p.level), f(s) as f64))
            .collect()
    };
    let series = vec![
        ("p50".to_string(), curve(|s| s.p50_ns)),
        ("p99".to_string(), curve(|s| s.p99_ns)),
        ("p99.9".to_string(), curve(|s| s.p999_ns)),
        ("max".to_string(), curve(|s| s.max_ns)),
    ];
    let rows: Vec<Vec<String>> = worst
        .iter()
        .map(|(p, s)| {
            vec![
                format!("{} %", p.level),
                us1(s.p50_ns),
                us1(s.p99_ns),
                us1(s.p999_ns),
                us1(s.max_ns),
                us1(p.worst_ns),
                if p.holds { "holds" } else { "FAILS" }.to_string(),
                load_of(s),
            ]
        })
        .collect();
    crate::html::render_load_curve(
        &format!(
            "capacity of CPU {} under {} for {}",
            c.cpu, c.load, c.gate.text
        ),
        &answer_line(c),
        &series,
        Some((c.gate.max_ns as f64, c.gate.text.clone())),
        &[
            "level",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "gated µs",
            "gate",
            "load achieved",
        ],
        &rows,
    )
}

/// The terminal table and the answer.
pub fn render_table(c: &Capacity) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "capacity of CPU {} under {} for {} ({} × {} per level)",
        c.cpu,
        c.load,
        c.gate.text,
        c.repeat,
        Nanos(c.duration_ns)
    );
    let _ = writeln!(
        out,
        "{:>5}  {:>9} {:>9} {:>9} {:>9}  {:>9}  {:<5}  load achieved (µs; the run with the worst gated figure)",
        "level", "p50", "p99", "p99.9", "max", "gated", "gate"
    );
    for (p, worst) in worst_runs(c) {
        let _ = writeln!(
            out,
            "{:>4}%  {:>9} {:>9} {:>9} {:>9}  {:>9}  {:<5}  {}",
            p.level,
            us1(worst.p50_ns),
            us1(worst.p99_ns),
            us1(worst.p999_ns),
            us1(worst.max_ns),
            us1(p.worst_ns),
            if p.holds { "holds" } else { "FAILS" },
            load_of(worst),
        );
    }
    let _ = writeln!(out, "{}", answer_line(c));
    if let Some(l) = c.capacity_level {
        if let Some(p) = c.curve.iter().find(|p| p.level > l && p.holds) {
            let _ = writeln!(
                out,
                "note: level {} % held again after a failing level; the capacity stops at the first failure",
                p.level
            );
        }
    }
    out
}

//! Nanoseconds as microseconds, the unit every view shows latencies in: the one conversion and the few
//! ways the views print it, so that a figure reads the same wherever it appears.

/// `ns` nanoseconds in microseconds.
pub(crate) fn us(ns: f64) -> f64 {
    ns / 1000.0
}

/// Microseconds with one decimal and the unit ("12.3 µs"), for verdict lines and fleet tables.
pub(crate) fn us_label(ns: f64) -> String {
    format!("{:.1} µs", us(ns))
}

/// Microseconds without the unit, three decimals below 10 µs and one above (the digits that matter at
/// each scale), for HTML tables.
pub(crate) fn us_figure(ns: u64) -> String {
    let v = us(ns as f64);
    if v < 10.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.1}")
    }
}

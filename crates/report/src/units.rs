//! The few ways the views print a latency in microseconds (the conversion is `rtgauge_model::units`'), so
//! that a figure reads the same wherever it appears.

use rtgauge_model::units::{us, us_f64};

/// Microseconds with one decimal and the unit ("12.3 µs"), for verdict lines and fleet tables.
pub(crate) fn us_label(ns: f64) -> String {
    format!("{:.1} µs", us_f64(ns))
}

/// Microseconds without the unit, three decimals below 10 µs and one above (the digits that matter at
/// each scale), for HTML tables.
pub(crate) fn us_figure(ns: u64) -> String {
    let v = us(ns);
    if v < 10.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.1}")
    }
}

//! The building blocks of every HTML view: a chart in its figure, a collapsible part, a table of measures,
//! a value in its unit, and how a run page is rendered. A leaf: the pages (`crate::html`) and the kinds'
//! sections (`crate::kind`) both build on it.

use maud::{html, Markup, PreEscaped};
use rtgauge_model::measure::MeasureUnit;
use rtgauge_model::units::us_f64;

/// How a run page is rendered.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReportOptions {
    /// The qualification record (`report --pdf`): every collapsed table open, so the printed record holds
    /// them all.
    pub record: bool,
}

pub(crate) fn chart(svg: String) -> Markup {
    html! { figure.chart { (PreEscaped(svg)) } }
}

/// `<details>`, open in the record (a collapsed section does not print).
pub(crate) fn details(open: bool, summary: Markup, body: Markup) -> Markup {
    html! { details open[open] { summary { (summary) } (body) } }
}

/// Measures as a table of (measure, value) rows.
pub(crate) fn measures_table(ms: &[rtgauge_model::measure::Measure]) -> Markup {
    html! {
        table {
            tr { th { "measure" } th { "value" } }
            @for m in ms { tr { td { (m.label) } td.n { (fmt_measure(m.value, (m.unknown_above, m.unresolved_within), m.unit)) } } }
        }
    }
}

/// A value of the table: "> limit" when it is unknown beyond a histogram's limit ("> min", the value,
/// when the file had no histogram: limit 0); "≤ value + bound" when it lies within its clock's bound
/// (unresolved: the true value is anywhere from 0 to that).
pub fn fmt_measure(
    value: f64,
    (unknown_above, unresolved_within): (Option<f64>, Option<f64>),
    unit: MeasureUnit,
) -> String {
    match (unknown_above, unresolved_within) {
        (Some(0.0), _) => format!("> {}", fmt_value(value, unit)),
        (Some(l), _) => format!("> {}", fmt_value(l, unit)),
        (None, Some(b)) => format!("≤ {}", fmt_value(value + b, unit)),
        (None, None) => fmt_value(value, unit),
    }
}

/// A measure's value in its unit, with the precision its size calls for (e.g. "1.23 µs", "512.0/s").
pub fn fmt_value(value: f64, unit: MeasureUnit) -> String {
    match unit {
        MeasureUnit::Nanos if value < 100.0 => format!("{value:.1} ns"),
        MeasureUnit::Nanos if value < 1000.0 => format!("{value:.0} ns"),
        MeasureUnit::Nanos => format!("{:.2} µs", us_f64(value)),
        MeasureUnit::Count => format!("{value:.0}"),
        MeasureUnit::PerSecond => format!("{value:.1}/s"),
        MeasureUnit::BytesPerSecond => format!("{:.2} GB/s", value / 1e9),
        MeasureUnit::BitsPerSecond => format!("{:.2} Gbit/s", value / 1e9),
        MeasureUnit::Bytes => format!("{value:.0} B"),
        MeasureUnit::Percent => format!("{value:.2} %"),
    }
}

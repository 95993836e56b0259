//! The views: terminal tables, HTML pages and charts, comparisons, the fleet, the plan, and the PDF
//! qualification record; each a pure function of model data (`render_*`), so it can be golden-tested and
//! re-rendered from stored runs. A probe kind's views are its module of [`kind`] (one `KindView` each);
//! [`markup`] holds the HTML building blocks every page shares; [`pdf`] prints the record with headless
//! Chromium (the one view that starts a program). File formats (rt-tests, CSV, OpenMetrics) are
//! rtgauge-formats'.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
pub mod capacity;
pub mod charts;
pub mod escape;
pub mod fingerprint;
pub mod fleet;
pub mod html;
pub mod kind;
mod latency;
pub mod markup;
pub mod pdf;
pub mod plan;
pub mod record;
pub mod shortfalls;
pub mod spikes;
pub mod terminal;
pub mod text;
mod units;
pub mod verdict;
pub mod vm;

/// A timer-latency probe's period for titles: "1000 µs", or "unknown" for an imported rt-tests histogram
/// that did not state it (0).
pub fn interval_text(interval_ns: u64) -> String {
    if interval_ns == 0 {
        "unknown".to_string()
    } else {
        format!("{} µs", rtgauge_model::units::us_trunc(interval_ns))
    }
}

//! Scalar measures: the values a comparison puts side by side across runs (`rtgauge compare`), one list per
//! probe result. Each probe kind says which of its figures matter, in which unit, and which direction is
//! better; the comparison does the statistics.

use serde::{Deserialize, Serialize};

/// Unit of a measure's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasureUnit {
    /// Nanoseconds.
    Nanos,
    /// A plain count (events, samples).
    Count,
    /// Events per second.
    PerSecond,
    /// Bytes per second.
    BytesPerSecond,
    /// Bits per second.
    BitsPerSecond,
    /// Bytes.
    Bytes,
    /// Percent.
    Percent,
}

/// Which direction of change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// A smaller value is better (latencies, noise).
    Lower,
    /// A larger value is better (rates, bandwidths).
    Higher,
}

/// One comparable figure of a probe result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// Stable key, `probe.subject.statistic`, equal across runs: `cyclic.p99`, `ops.null_syscall.p50`,
    /// `mem.latency.l1`, `net.cps.rate`. Runs are matched on it.
    pub key: String,
    /// What a reader sees: "timer latency p99".
    pub label: String,
    /// Unit of `value` and `replicates`.
    pub unit: MeasureUnit,
    /// The figure, in `unit`.
    pub value: f64,
    /// Which direction of change is an improvement.
    pub better: Better,
    /// Independent estimates of the same quantity (one per repetition or per time window), from which a
    /// comparison bootstraps a confidence interval. Empty when the probe has none: the comparison then
    /// gives the ratio without an interval. Statistics of a pooled latency distribution (percentiles,
    /// max) are resampled from the probe's stored histograms instead, so they leave this empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicates: Vec<f64>,
    /// Set when the value is unknown beyond a lower bound: a percentile among the samples an rt-tests
    /// histogram only counted. It holds the histogram's limit (0 when the file had no histogram); `value`
    /// is then only a lower bound (the larger of the limit and the min), shown as "> limit" ("> min"
    /// without a histogram), and no comparison judges it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_above: Option<f64>,
    /// Set when the value lies within the bound of the clock it was measured on (a one-way latency
    /// stamped on another host's clock): it holds the bound, in `unit`. The true value is then anywhere
    /// from 0 to `value` + the bound; it is shown as "≤ value + bound" and no comparison judges it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved_within: Option<f64>,
}

impl Measure {
    /// A measure without replicates, known exactly.
    pub fn new(
        key: impl Into<String>,
        label: impl Into<String>,
        unit: MeasureUnit,
        value: f64,
        better: Better,
    ) -> Measure {
        Measure {
            key: key.into(),
            label: label.into(),
            unit,
            value,
            better,
            replicates: Vec::new(),
            unknown_above: None,
            unresolved_within: None,
        }
    }

    /// The same measure, unresolved where its value lies within `bound` (the clock's, in `unit`); None
    /// leaves it as it is.
    pub fn resolved_by(mut self, bound: Option<f64>) -> Measure {
        self.unresolved_within = bound.filter(|&b| self.value <= b);
        self
    }

    /// The same measure with independent estimates to bootstrap a confidence interval from.
    pub fn with_replicates(mut self, replicates: Vec<f64>) -> Measure {
        self.replicates = replicates;
        self
    }
}

/// Percentiles every latency comparison shows, with their key suffixes.
pub const LATENCY_STATISTICS: &[(&str, f64)] = &[
    ("p50", 50.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
    ("p99.99", 99.99),
];

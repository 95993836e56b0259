//! Latency distributions: the HDR histogram every probe records into, its portable serialisation, and the
//! summary statistics derived from it.
//!
//! The histogram covers 1 ns to 24 h with 3 significant digits (≤ 0.1 % relative error per value) and never
//! reallocates. Min, max, count and sum are exact: they are tracked beside the histogram, not read from its
//! buckets. A value beyond the trackable range is clamped into the top bucket *and counted* in
//! [`LatencyStats::clamped`], so it is never silently lost.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// The histogram type used everywhere.
pub type Histogram = hdrhistogram::Histogram<u64>;

/// Lowest value the histograms resolve, ns.
pub const LOWEST_NS: u64 = 1;
/// Highest value tracked without clamping, ns (24 h).
pub const HIGHEST_NS: u64 = 86_400 * 1_000_000_000;
/// Significant decimal digits kept.
pub const SIGFIGS: u8 = 3;

/// Percentiles shown by default (p50 … p99.999).
pub const DEFAULT_PERCENTILES: &[f64] = &[50.0, 90.0, 99.0, 99.9, 99.99, 99.999];

/// A fresh latency histogram with fixed bounds: it allocates here and never again while recording.
pub fn new_histogram() -> Histogram {
    // The bounds are constants that hdrhistogram accepts (low ≥ 1, high ≥ 2·low, sigfig ≤ 5), so this cannot
    // fail; `expect` documents the invariant rather than handling a runtime condition.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGFIGS)
        .expect("constant histogram bounds are valid")
}

/// One derived percentile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// The percentile, e.g. 99.99.
    pub percentile: f64,
    /// Highest recorded value at or below which `percentile` % of samples lie (HDR equivalent-range upper
    /// bound, clipped to the exact max).
    pub value_ns: u64,
}

/// Summary of one latency distribution, with the histogram it was derived from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Samples recorded.
    pub count: u64,
    /// Exact minimum (0 when `count` is 0).
    pub min_ns: u64,
    /// Exact maximum.
    pub max_ns: u64,
    /// Exact sum of all samples (saturating).
    pub sum_ns: u64,
    /// Exact mean, `sum_ns / count`.
    pub mean_ns: f64,
    /// Samples above [`HIGHEST_NS`], clamped into the top bucket.
    #[serde(default)]
    pub clamped: u64,
    /// Percentiles derived from `hdr` (a cache; recompute from `hdr` for others).
    pub percentiles: Vec<Percentile>,
    /// The whole distribution, HdrHistogram V2 + DEFLATE, base64.
    pub hdr: HdrBlob,
}

impl LatencyStats {
    /// Build the summary from exact side counters and the histogram.
    pub fn from_parts(
        hist: &Histogram,
        min_ns: u64,
        max_ns: u64,
        sum_ns: u64,
        clamped: u64,
    ) -> LatencyStats {
        let count = hist.len();
        LatencyStats {
            count,
            min_ns: if count == 0 { 0 } else { min_ns },
            max_ns,
            sum_ns,
            mean_ns: if count == 0 {
                0.0
            } else {
                sum_ns as f64 / count as f64
            },
            clamped,
            percentiles: percentiles(hist, DEFAULT_PERCENTILES, max_ns),
            hdr: HdrBlob::encode(hist),
        }
    }

    /// Value of a stored percentile, if it was stored.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        self.percentiles
            .iter()
            .find(|x| (x.percentile - p).abs() < 1e-9)
            .map(|x| x.value_ns)
    }
}

/// Percentiles of `hist`; values are clipped to the exact `max_ns` so that p100 never exceeds the real max.
pub fn percentiles(hist: &Histogram, ps: &[f64], max_ns: u64) -> Vec<Percentile> {
    ps.iter()
        .map(|&p| Percentile {
            percentile: p,
            value_ns: if hist.is_empty() {
                0
            } else {
                hist.value_at_percentile(p).min(max_ns)
            },
        })
        .collect()
}

/// A serialised histogram (HdrHistogram V2 + DEFLATE, standard base64), mergeable across threads and runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HdrBlob(pub String);

/// Why a stored histogram could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum HdrError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not a valid HdrHistogram V2 blob: {0}")]
    Decode(String),
}

impl HdrBlob {
    pub fn encode(hist: &Histogram) -> HdrBlob {
        let mut bytes = Vec::new();
        // Serialising into a Vec cannot fail for I/O reasons; a failure would mean a corrupt histogram, in
        // which case an empty blob (that decodes as an error) is stored rather than aborting the run.
        if V2DeflateSerializer::new()
            .serialize(hist, &mut bytes)
            .is_err()
        {
            bytes.clear();
        }
        HdrBlob(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn decode(&self) -> Result<Histogram, HdrError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(self.0.as_bytes())?;
        let mut cursor = std::io::Cursor::new(bytes);
        let h: Histogram = Deserializer::new()
            .deserialize(&mut cursor)
            .map_err(|e| HdrError::Decode(format!("{e:?}")))?;
        // Re-bound to the standard range so merges never need to resize.
        let mut out = new_histogram();
        out.add(&h)
            .map_err(|e| HdrError::Decode(format!("{e:?}")))?;
        Ok(out)
    }
}

/// One interval of a probe's timeline (default 1 s): enough to plot max latency over time and to
/// checkpoint long runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TimelineEntry {
    /// Start of the interval, ns after the probe's start.
    pub start_ns: u64,
    /// Samples whose intended time fell in this interval.
    pub count: u64,
    /// Largest sample in the interval.
    pub max_ns: u64,
    /// Missed deadlines (timer probes) or gaps above the threshold (noise probes) in the interval.
    pub missed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_round_trip_keeps_counts() {
        let mut h = new_histogram();
        for v in [1u64, 10, 1_000, 1_000_000, 200_000_000, HIGHEST_NS] {
            h.record(v).unwrap();
        }
        let blob = HdrBlob::encode(&h);
        let back = blob.decode().unwrap();
        assert_eq!(back.len(), 6);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_percentile(50.0), h.value_at_percentile(50.0));
    }

    #[test]
    fn garbage_blob_is_an_error() {
        assert!(HdrBlob("!!!".into()).decode().is_err());
        assert!(HdrBlob("AAAA".into()).decode().is_err());
    }

    #[test]
    fn stats_are_exact() {
        let mut h = new_histogram();
        for v in [3_001u64, 5_123, 7_777] {
            h.record(v).unwrap();
        }
        let s = LatencyStats::from_parts(&h, 3_001, 7_777, 15_901, 0);
        assert_eq!(s.count, 3);
        assert_eq!(s.min_ns, 3_001);
        assert_eq!(s.max_ns, 7_777);
        assert!((s.mean_ns - 15_901.0 / 3.0).abs() < 1e-9);
        // p99.999 never exceeds the exact max even though HDR buckets round up.
        assert!(s.percentiles.iter().all(|p| p.value_ns <= 7_777));
    }

    proptest::proptest! {
        #[test]
        fn percentiles_are_monotone(v in proptest::collection::vec(1u64..10_000_000_000, 1..200)) {
            let mut h = new_histogram();
            for x in &v { h.record(*x).unwrap(); }
            let max = *v.iter().max().unwrap();
            let ps = percentiles(&h, DEFAULT_PERCENTILES, max);
            for w in ps.windows(2) { proptest::prop_assert!(w[0].value_ns <= w[1].value_ns); }
            // Within HDR's 0.1 % of an exact sort oracle.
            let mut sorted = v.clone();
            sorted.sort_unstable();
            let idx = ((0.5 * sorted.len() as f64).ceil() as usize).max(1) - 1;
            let exact = sorted[idx] as f64;
            let got = ps[0].value_ns as f64;
            proptest::prop_assert!((got - exact).abs() <= exact * 0.001 + 1.0, "p50 {} vs exact {}", got, exact);
        }
    }
}

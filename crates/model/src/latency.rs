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

/// Upper bounds of the buckets the monitor exports a latency histogram in, ns (1 µs … 100 ms in 1-2-5
/// steps; +Inf is implicit): Prometheus needs fixed buckets, the HDR histogram's are too many to export.
pub const EXPORT_BUCKETS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// Counts of a latency distribution in [`EXPORT_BUCKETS_NS`] (the last entry is +Inf), with the exact
/// count and sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketCounts {
    /// Samples per bucket (not cumulative).
    pub buckets: [u64; EXPORT_BUCKETS_NS.len() + 1],
    /// Samples.
    pub count: u64,
    /// Sum of the samples, ns.
    pub sum_ns: u128,
}

impl BucketCounts {
    /// The bucket `value_ns` falls in.
    #[inline]
    pub fn bucket_of(value_ns: u64) -> usize {
        EXPORT_BUCKETS_NS.partition_point(|&b| b < value_ns)
    }
}

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
    /// Samples known only by their count: beyond an imported rt-tests histogram's range. They are stored
    /// in `hdr` at the range's edge, so any percentile that falls among them is unknown (see
    /// [`LatencyStats::unknown_above`]). None for rtgauge's own runs, which record every value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Beyond>,
    /// Percentiles derived from `hdr` (a cache; recompute from `hdr` for others).
    pub percentiles: Vec<Percentile>,
    /// The whole distribution, HdrHistogram V2 + DEFLATE, base64.
    pub hdr: HdrBlob,
}

impl LatencyStats {
    /// The whole distribution as sparse buckets (empty if its histogram does not decode).
    pub fn sparse(&self) -> Sparse {
        self.hdr.decode().map(|h| sparse(&h)).unwrap_or_default()
    }

    /// The warning for an imported histogram whose limit lost samples ([`limit_warning`]), `what` naming
    /// the thread; `None` for a distribution that recorded every value.
    pub fn beyond_warning(&self, what: &str) -> Option<String> {
        let b = self.beyond?;
        limit_warning(what, self, b.limit_ns, b.count)
    }

    /// Build the summary from exact side counters and the histogram.
    pub fn from_parts(
        histogram: &Histogram,
        min_ns: u64,
        max_ns: u64,
        sum_ns: u64,
        clamped: u64,
    ) -> LatencyStats {
        let count = histogram.len();
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
            beyond: None,
            percentiles: percentiles(histogram, DEFAULT_PERCENTILES, max_ns),
            hdr: HdrBlob::encode(histogram),
        }
    }

    /// The lower bound of `percentile` when it falls among the samples beyond an imported histogram (its
    /// value is then unknown: only "> bound", and at most the exact max, can be said): the histogram's
    /// limit, or the min when the file had no histogram at all (limit 0). None when it is known.
    pub fn unknown_above(&self, percentile: f64) -> Option<u64> {
        let b = self.beyond.filter(|b| b.count > 0)?;
        let bound = if b.limit_ns == 0 {
            self.min_ns
        } else {
            b.limit_ns
        };
        unknown_rank(percentile, self.count, b.count).then_some(bound)
    }

    /// Value of a stored percentile, if it was stored.
    pub fn percentile(&self, percentile: f64) -> Option<u64> {
        self.percentiles
            .iter()
            .find(|x| (x.percentile - percentile).abs() < 1e-9)
            .map(|x| x.value_ns)
    }
}

/// Samples at or above an rt-tests histogram's limit, whose values are lost (only counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beyond {
    /// The histogram's range, ns: every lost sample is at or above it. 0 when the file had no histogram
    /// (cyclictest without `-h`): every sample is lost but for min, avg and max.
    pub limit_ns: u64,
    /// How many samples were at or above the limit.
    pub count: u64,
}

/// Whether `percentile` of `total` samples lies among the `beyond` highest, whose values are unknown.
pub fn unknown_rank(percentile: f64, total: u64, beyond: u64) -> bool {
    if beyond == 0 || total == 0 {
        return false;
    }
    let rank = ((percentile / 100.0 * total as f64).ceil() as u64).max(1);
    rank > total.saturating_sub(beyond)
}

/// The warning for a histogram whose limit loses samples: when the limit is below the recorded min (every
/// percentile unknown) or more than 0.1 % of the samples overflow it. `what` names the thread.
pub fn limit_warning(
    what: &str,
    stats: &LatencyStats,
    limit_ns: u64,
    overflows: u64,
) -> Option<String> {
    // No histogram at all (limit 0) is said by the importer, in those words.
    if stats.count == 0 || overflows == 0 || limit_ns == 0 {
        return None;
    }
    let lim = crate::units::Nanos(limit_ns);
    if limit_ns <= stats.min_ns {
        return Some(format!(
            "{what}: histogram limit {lim} is below the recorded min {}: all {overflows} samples overflow, every percentile is unknown (> {lim})",
            crate::units::Nanos(stats.min_ns)
        ));
    }
    let share = overflows as f64 / stats.count as f64;
    (share > 0.001).then(|| {
        format!(
            "{what}: {overflows} of {} samples ({:.2} %) overflow the histogram limit {lim}: percentiles above p{:.2} are unknown (> {lim})",
            stats.count,
            share * 100.0,
            (1.0 - share) * 100.0
        )
    })
}

/// Percentiles of `histogram`; values are clipped to the exact `max_ns` so that p100 never exceeds the real max.
pub fn percentiles(histogram: &Histogram, percentiles: &[f64], max_ns: u64) -> Vec<Percentile> {
    percentiles
        .iter()
        .map(|&p| Percentile {
            percentile: p,
            value_ns: if histogram.is_empty() {
                0
            } else {
                histogram.value_at_percentile(p).min(max_ns)
            },
        })
        .collect()
}

/// A serialised histogram (HdrHistogram V2 + DEFLATE, standard base64), mergeable across threads and runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HdrBlob(pub String);

/// Why a stored histogram could not be read back (the decoder's error is the `source`).
#[derive(Debug, thiserror::Error)]
pub enum HdrError {
    /// The stored text is not base64.
    #[error("histogram is not valid base64")]
    Base64(#[from] base64::DecodeError),
    /// The bytes are not an HdrHistogram V2 + DEFLATE serialisation.
    #[error("histogram is not a valid HdrHistogram V2 blob")]
    Decode(#[source] hdrhistogram::serialization::DeserializeError),
    /// The histogram read does not fit the standard 1 ns–[`HIGHEST_NS`] range.
    #[error("histogram does not fit the standard range")]
    Range(#[source] hdrhistogram::errors::AdditionError),
}

impl HdrBlob {
    /// Serialise `histogram` for storage (an empty blob if serialisation fails: it decodes as an error, the run goes on).
    pub fn encode(histogram: &Histogram) -> HdrBlob {
        let mut bytes = Vec::new();
        // Serialising into a Vec cannot fail for I/O reasons; a failure would mean a corrupt histogram, in
        // which case an empty blob (that decodes as an error) is stored rather than aborting the run.
        if V2DeflateSerializer::new()
            .serialize(histogram, &mut bytes)
            .is_err()
        {
            bytes.clear();
        }
        HdrBlob(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// Read the histogram back, re-bounded to the standard 1 ns–[`HIGHEST_NS`] range so merges never resize.
    pub fn decode(&self) -> Result<Histogram, HdrError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(self.0.as_bytes())?;
        let mut cursor = std::io::Cursor::new(bytes);
        let h: Histogram = Deserializer::new()
            .deserialize(&mut cursor)
            .map_err(HdrError::Decode)?;
        // Re-bound to the standard range so merges never need to resize.
        let mut out = new_histogram();
        out.add(&h).map_err(HdrError::Range)?;
        Ok(out)
    }
}

/// One interval of a probe's timeline (default 1 s): enough to plot max latency over time and to
/// checkpoint long runs. A long run's entries cover several intervals: past [`MAX_TIMELINE`] entries the
/// timeline is thinned ([`push_bounded`]) into aligned buckets twice as long, each keeping the worst
/// sample of its bucket.
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

/// Most timeline entries kept per thread: past it, adjacent entries merge into buckets twice as long (as
/// the counter intervals, `attribution::MAX_INTERVALS`, do), so a 60-hour run keeps 1,688 entries of 128 s
/// per thread instead of 216,000 one-second ones, and none loses its bucket's worst sample.
pub const MAX_TIMELINE: usize = 2048;

/// A timeline's entry that neighbours can merge into (a latency [`TimelineEntry`], a clock source's
/// `crate::clock::ClockPoint`): what [`push_bounded`] needs.
pub trait Bucket: Copy {
    /// Its start, ns after the probe's start.
    fn start_ns(&self) -> u64;
    /// Move its start (to its bucket's).
    fn set_start_ns(&mut self, start_ns: u64);
    /// Take `other`, of the same bucket, into it.
    fn merge(&mut self, other: &Self);
    /// Most entries a timeline keeps before its span doubles.
    const MAX: usize;
}

impl Bucket for TimelineEntry {
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    fn set_start_ns(&mut self, start_ns: u64) {
        self.start_ns = start_ns;
    }
    fn merge(&mut self, e: &Self) {
        self.count = self.count.saturating_add(e.count);
        self.missed = self.missed.saturating_add(e.missed);
        self.max_ns = self.max_ns.max(e.max_ns);
    }
    const MAX: usize = MAX_TIMELINE;
}

/// Append one interval's entry `e` to `timeline`, whose entries are buckets of `*span_ns` aligned to the
/// probe's start: into the last entry when `e` falls in its bucket (merged: counts added, the worst kept),
/// else as a new one; past [`Bucket::MAX`] entries the span doubles and the timeline is merged into the
/// new buckets.
pub fn push_bounded<B: Bucket>(timeline: &mut Vec<B>, span_ns: &mut u64, e: B) {
    let span = (*span_ns).max(1);
    let bucket = e.start_ns() / span * span;
    match timeline.last_mut() {
        Some(last) if last.start_ns() == bucket => last.merge(&e),
        _ => {
            let mut e = e;
            e.set_start_ns(bucket);
            timeline.push(e);
        }
    }
    if timeline.len() > B::MAX {
        *span_ns = span.saturating_mul(2);
        let old = std::mem::take(timeline);
        for e in old {
            push_bounded(timeline, span_ns, e);
        }
    }
}

/// Most windows a distribution keeps; adjacent windows merge pairwise beyond it, so a 7-day run keeps 64
/// windows of ~2.6 h and the stored size never grows with the duration.
pub const MAX_WINDOWS: usize = 64;

/// A probe's distribution in consecutive time windows of equal length (the last may be shorter), for
/// comparisons: confidence intervals come from resampling whole windows, which keeps the bursts and the
/// autocorrelation of real latency data inside each resampled unit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Windows {
    /// Length of one window, ns.
    pub window_ns: u64,
    /// One histogram per window, in time order.
    pub hdr: Vec<HdrBlob>,
}

/// A histogram as its non-empty buckets, `(value, count)` sorted by value: the compact form windows are
/// kept and resampled in (a full histogram over 1 ns–24 h is ~300 KB of counters; a window is a few
/// hundred buckets).
pub type Sparse = Vec<(u64, u64)>;

/// The non-empty buckets of `histogram`, `(value, count)` in value order.
#[inline] // built where the collector calls it (the probe crate, optimised even in quickbuild)
pub fn sparse(histogram: &Histogram) -> Sparse {
    histogram
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// Sum of two sparse histograms.
#[inline] // as `sparse`
pub fn sparse_add(first: &[(u64, u64)], second: &[(u64, u64)]) -> Sparse {
    let mut out = Vec::with_capacity(first.len() + second.len());
    let (mut i, mut j) = (0, 0);
    while i < first.len() || j < second.len() {
        match (first.get(i), second.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                out.push((x.0, x.1 + y.1));
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                out.push(*x);
                i += 1;
            }
            (Some(x), None) => {
                out.push(*x);
                i += 1;
            }
            (_, Some(y)) => {
                out.push(*y);
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// A full histogram from sparse buckets (counts beyond the range saturate at the highest value).
pub fn histogram_of(buckets: &[(u64, u64)]) -> Histogram {
    let mut h = new_histogram();
    for &(v, c) in buckets {
        h.saturating_record_n(v, c);
    }
    h
}

impl Windows {
    /// Whether no window was recorded.
    pub fn is_empty(&self) -> bool {
        self.hdr.is_empty()
    }
}

/// A sample at or above a latency probe's spike threshold (the timer probe's `--spike`): what it hands
/// over while it runs for its spike episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spike {
    /// Index of the thread that saw the spike.
    pub thread: u32,
    /// Cycle number of the spike within its thread, from 0.
    pub cycle: u64,
    /// The spike's latency, ns.
    pub latency_ns: u64,
    /// CLOCK_MONOTONIC time of the wake-up, ns.
    pub monotonic_ns: u64,
    /// The CPU the thread woke on, where the thread was not pinned (a pinned thread's is in the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The window this sample stands for, ending at `monotonic_ns`, where it is wider than its latency:
    /// later late samples were merged into it while the main thread's ring was full (`latency_ns` is
    /// then the worst of them). 0: the sample's own window (its latency).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub window_ns: u64,
}

impl Spike {
    /// Start of the window the sample stands for: its expected wake-up, or the first merged one's.
    pub fn window_start_ns(&self) -> u64 {
        self.monotonic_ns
            .saturating_sub(self.latency_ns.max(self.window_ns))
    }

    /// Merge a later late sample of the same thread into this one: the window stretched to its end, the
    /// worst latency kept.
    pub fn absorb(&mut self, later: &Spike) {
        let start = self.window_start_ns();
        if later.monotonic_ns > self.monotonic_ns {
            self.monotonic_ns = later.monotonic_ns;
        }
        self.latency_ns = self.latency_ns.max(later.latency_ns);
        self.window_ns = self.monotonic_ns - start;
    }
}

/// Live figures of one measuring thread of a latency probe, readable while it runs (what a live screen, a
/// progress line and a monitor's window show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveThread {
    /// The measurement thread's kernel thread id.
    pub tid: i32,
    /// Its real-time priority.
    pub priority: i32,
    /// Its wake-up period, ns.
    pub interval_ns: u64,
    /// Wake-ups measured so far.
    pub cycles: u64,
    /// Smallest latency so far, ns.
    pub min_ns: u64,
    /// The latest latency, ns.
    pub last_ns: u64,
    /// Sum of the latencies so far, ns (for the average).
    pub sum_ns: u64,
    /// Largest latency so far, ns.
    pub max_ns: u64,
    /// Periods already over when the thread woke (missed deadlines).
    pub missed: u64,
    /// Largest sample since the previous tick (0 when none): what a monitor needs to see a spike within one
    /// tick without rebuilding the histograms.
    pub peak_ns: u64,
}

impl LiveThread {
    /// Average latency so far, ns (0 before the first wake-up).
    pub fn avg_ns(&self) -> u64 {
        self.sum_ns.checked_div(self.cycles).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_timeline_is_thinned_into_aligned_buckets_that_keep_their_worst() {
        const S: u64 = 1_000_000_000;
        let (mut t, mut span) = (Vec::new(), S);
        for i in 0..5000u64 {
            // Interval 700 had no sample at all (nothing pushed); interval 3333 held the spike.
            if i == 700 {
                continue;
            }
            let max_ns = if i == 3333 { 999_000 } else { 10_000 + i % 7 };
            push_bounded(
                &mut t,
                &mut span,
                TimelineEntry {
                    start_ns: i * S,
                    count: 1000,
                    max_ns,
                    missed: u64::from(i % 1000 == 0),
                },
            );
        }
        // 4,999 entries > 2 × 2,048: buckets of 4 s, 1,250 of them.
        assert_eq!(span, 4 * S);
        assert_eq!(t.len(), 1250);
        assert!(t.iter().all(|e| e.start_ns % span == 0));
        assert!(t.windows(2).all(|w| w[0].start_ns < w[1].start_ns));
        assert_eq!(t.iter().map(|e| e.count).sum::<u64>(), 4999 * 1000);
        assert_eq!(t.iter().map(|e| e.missed).sum::<u64>(), 5);
        let worst = t.iter().max_by_key(|e| e.max_ns).unwrap();
        assert_eq!((worst.start_ns, worst.max_ns), (3332 * S, 999_000));
        // The bucket without interval 700 has its other three.
        assert_eq!(t[175].count, 3000);
        // A short run is not touched.
        let (mut short, mut span) = (Vec::new(), S);
        for i in 0..10 {
            push_bounded(
                &mut short,
                &mut span,
                TimelineEntry {
                    start_ns: i * S,
                    count: 1,
                    max_ns: i,
                    missed: 0,
                },
            );
        }
        assert_eq!((short.len(), span, short[9].max_ns), (10, S, 9));
    }

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
    fn sparse_add_is_a_sorted_merge() {
        let a = vec![(1, 2), (5, 1), (9, 4)];
        let b = vec![(2, 1), (5, 3), (10, 1)];
        assert_eq!(
            sparse_add(&a, &b),
            vec![(1, 2), (2, 1), (5, 4), (9, 4), (10, 1)]
        );
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

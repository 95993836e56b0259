//! Comparisons of runs (`rtgauge compare`): for every measure the runs share, the value per run, the ratio to
//! the baseline (the first run) with a 95 % confidence interval, and a verdict against an equivalence margin.
//!
//! Method (docs/METHODOLOGY.md, "Comparing runs"):
//! - Latency statistics are resampled by whole time windows (block bootstrap over the ≤ 64 windows each
//!   probe keeps), so bursts stay inside a resampled unit. When both runs have the same number of windows
//!   the same window indices are drawn for both (for independent runs this changes nothing in
//!   distribution; a run compared with itself gives exactly 1).
//! - The interval is the *percentile* bootstrap interval of the log ratio, `[q2.5, q97.5]` of the
//!   replicates (the basic interval, `[2r − q97.5, 2r − q2.5]`, is kept for the median of repetitions).
//! - Extremes (min, max, a percentile with fewer than 100 samples beyond it, counts of fewer than 100
//!   events) are why: a resample cannot go beyond the observed extreme, so the basic interval (which
//!   mirrors the replicates around the estimate) says nothing there, but the share of resamples
//!   that keep or drop a run's worst windows does: one spike in one window of twenty is dropped by a third
//!   of the resamples, so it cannot decide; a stall in several windows is kept by nearly all.
//! - Results without windows (imported rt-tests files) get distribution-free order-statistic intervals for
//!   percentiles (assuming independent samples, which latency data is not: they are too narrow, and the
//!   table says so) and none for extremes and counts.
//! - A value that is unknown (a percentile among the samples an imported histogram only counted) gets
//!   no verdict: "unknown".
//! - Verdict (a [`Judgement`]) with margin m (δ = ln(1+m)): equivalent when the interval lies inside ±δ; worse or better
//!   when it lies wholly beyond the margin; otherwise inconclusive, with the duration that would shrink
//!   the interval enough (width ∝ 1/√duration).

use rtgauge_model::latency::{self, Sparse};
use rtgauge_model::measure::{Better, Measure, MeasureUnit, LATENCY_STATISTICS};
use rtgauge_model::run::{ProbeResult, RunDocument};
use serde::Serialize;

mod conditions;
mod note;
pub mod one_run;
mod repeats;
mod sets;
use crate::kind::ProbeData;
use conditions::differences;
pub use conditions::{flatten, same_conditions};
pub use note::single_run_note;
pub use repeats::{judge_single_runs, Repeats, MIN_REPEATS};
pub use sets::compare_sets;
#[cfg(test)]
use sets::{log_value, runs_needed, set_interval, t975, T975};

/// How to compare.
#[derive(Debug, Clone)]
pub struct Options {
    /// Equivalence margin, as a fraction (0.10 = ±10 %).
    pub margin: f64,
    /// Bootstrap resamples per interval.
    pub resamples: usize,
    /// Seed of the resampling's random numbers (fixed: the same runs compare the same every time).
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            margin: 0.10,
            resamples: 2000,
            seed: 0x5eed_2026,
        }
    }
}

/// What a comparison says of run B against the baseline for one measure, given the margin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Judgement {
    /// The interval lies within the margin: the runs are alike on this measure.
    Equivalent,
    /// The interval lies wholly beyond the margin, on the good side.
    Better,
    /// The interval lies wholly beyond the margin, on the bad side.
    Worse,
    /// The interval straddles the margin. `longer` is the factor by which the runs would have to be longer
    /// for the interval to decide (None when no duration would: the estimate sits on the margin).
    Inconclusive {
        /// Factor by which longer runs would decide (None: no duration would).
        longer: Option<f64>,
        /// Comparing sets of runs: the runs per platform that would decide (None: no number would, or
        /// single runs, where `longer` says it).
        #[serde(skip_serializing_if = "Option::is_none")]
        runs: Option<usize>,
        /// One run per platform and no stored repeats, and the interval did not lie wholly beyond the measure's
        /// one-run floor ([`Versus::one_run`]): how much runs of one platform differ is not known well
        /// enough, so a longer run does not decide — repeating the runs does.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        one_run: bool,
    },
    /// No interval could be computed.
    NoInterval {
        /// Why not (e.g. no time windows to resample).
        why: String,
    },
    /// A run's value is unknown (beyond its histogram's limit): nothing can be said.
    Unknown {
        /// Why (the histogram limit the value lies beyond).
        why: String,
    },
}

impl Judgement {
    /// The verdict in one word, as the tables print it.
    pub fn word(&self) -> &'static str {
        match self {
            Judgement::Equivalent => "equivalent",
            Judgement::Better => "better",
            Judgement::Worse => "worse",
            Judgement::Inconclusive { .. } => "inconclusive",
            Judgement::NoInterval { .. } => "no interval",
            Judgement::Unknown { .. } => "unknown",
        }
    }
}

/// One run against the baseline for one measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versus {
    /// Run B's value over the baseline's (NaN when a value is unknown).
    pub ratio: f64,
    /// 95 % interval of the ratio.
    pub ci: Option<(f64, f64)>,
    /// What the interval says against the margin.
    pub verdict: Judgement,
    /// How the interval was obtained.
    pub method: &'static str,
    /// Set where the pair is one run per platform with no stored repeats on either side, so that the
    /// verdict was held to the measure's one-run floor ([`one_run::hold_to_floors`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_run: Option<one_run::Floor>,
}

/// One measure across the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The measure's key (`cyclic.p99`, `net.cps`).
    pub key: String,
    /// The measure as the tables name it.
    pub label: String,
    /// The unit of its values.
    pub unit: MeasureUnit,
    /// Whether lower or higher values are better.
    pub better: Better,
    /// Value per run (None where the run lacks it).
    pub values: Vec<Option<f64>>,
    /// Per run, the histogram limit when its value is unknown beyond it ("> limit"; the value is then a
    /// lower bound). Left out of the JSON when every value is known.
    #[serde(skip_serializing_if = "all_known")]
    pub unknown_above: Vec<Option<f64>>,
    /// Per run, the clock's bound when its value lies within it ("≤ value + bound", unresolved: no
    /// verdict). Left out of the JSON when every value is resolved.
    #[serde(skip_serializing_if = "all_known")]
    pub unresolved_within: Vec<Option<f64>>,
    /// Per run after the baseline (index 0 of this is run 1).
    pub versus: Vec<Option<Versus>>,
}

impl Row {
    /// A measure's row: its key, label, unit and direction, then per run its value and histogram limit,
    /// and per run after the baseline the comparison.
    fn of(
        (key, label, unit, better): MeasureKey,
        values: Vec<Option<f64>>,
        (unknown_above, unresolved_within): (Vec<Option<f64>>, Vec<Option<f64>>),
        versus: Vec<Option<Versus>>,
    ) -> Row {
        Row {
            key,
            label,
            unit,
            better,
            values,
            unknown_above,
            unresolved_within,
            versus,
        }
    }

    /// Run `i`'s value's histogram limit and clock bound, where it has them ([`Row::unknown_above`],
    /// [`Row::unresolved_within`]).
    pub fn bounds(&self, i: usize) -> (Option<f64>, Option<f64>) {
        let at = |v: &[Option<f64>]| v.get(i).copied().flatten();
        (at(&self.unknown_above), at(&self.unresolved_within))
    }
}

fn all_known(v: &[Option<f64>]) -> bool {
    v.iter().all(Option::is_none)
}

/// A setting that differs between runs: `(run index, value)` for every run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The setting (a fingerprint field, `audit RULE`, the load).
    pub what: String,
    /// Its value in each run, in run order.
    pub values: Vec<String>,
}

/// Runs compared measure by measure, with the settings that differ between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The equivalence margin the verdicts used, as a fraction.
    pub margin: f64,
    /// One row per measure any run has.
    pub rows: Vec<Row>,
    /// Fingerprint fields and audit findings that differ.
    pub differences: Vec<Difference>,
    /// Duration of each run's longest probe, ns (for "inconclusive: run N× longer").
    pub durations_ns: Vec<u64>,
    /// Comparing sets of runs (repetitions per platform): the run ids of each column, filled in by the
    /// caller that knows them; empty when every column is one run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<Vec<i64>>,
    /// Per column, the ids of the stored runs that repeat its single run and whose run-to-run spread
    /// widened the intervals ([`widen_with_repeats`]); empty when none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Vec<i64>>,
}

/// Resampling material of one latency probe of one run.
struct LatencyData {
    /// Pooled over threads, per window; empty without windows.
    windows: Vec<Sparse>,
    /// Missed deadlines per window.
    missed: Vec<u64>,
    /// Whole distribution (for the no-window method).
    pooled: Sparse,
    /// Samples in `pooled`.
    total: u64,
    overflow_threshold: Option<u64>,
}

fn latency_data(p: &ProbeResult) -> Option<LatencyData> {
    if !p.data().is_latency() {
        return None;
    }
    let thr = p.data().overflow_threshold_ns();
    let threads = p.data().latency_threads();
    let pooled = crate::kind::pooled(p.data());
    let n = threads
        .iter()
        .map(|t| t.windows.hdr.len())
        .max()
        .unwrap_or(0);
    let mut pw: Vec<Sparse> = vec![Sparse::new(); n];
    let mut missed = vec![0u64; n];
    for t in &threads {
        let (w, tl) = (t.windows, t.timeline);
        for (i, b) in w.hdr.iter().enumerate() {
            if let Ok(h) = b.decode() {
                pw[i] = latency::sparse_add(&pw[i], &latency::sparse(&h));
            }
        }
        if w.window_ns > 0 && n > 0 {
            for e in tl {
                let i = ((e.start_ns / w.window_ns) as usize).min(n - 1);
                missed[i] += e.missed;
            }
        }
    }
    Some(LatencyData {
        windows: pw,
        missed,
        total: pooled.iter().map(|v| v.1).sum(),
        pooled,
        overflow_threshold: thr,
    })
}

/// The latency statistics of a (resampled) distribution, in the order of [`LATENCY_KEYS`].
const LATENCY_KEYS: &[&str] = &["min", "p50", "p99", "p99.9", "p99.99", "max"];

fn latency_stats(grid: &[u64], counts: &[u64]) -> [f64; 6] {
    let total: u64 = counts.iter().sum();
    let mut out = [0.0; 6];
    if total == 0 {
        return out;
    }
    let first = counts.iter().position(|&c| c > 0).unwrap_or(0);
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    out[0] = grid[first] as f64;
    out[5] = grid[last] as f64;
    let mut k = 1;
    let mut acc = 0u64;
    let targets: Vec<u64> = LATENCY_STATISTICS
        .iter()
        .map(|(_, p)| ((p / 100.0 * total as f64).ceil() as u64).max(1))
        .collect();
    for (i, &c) in counts.iter().enumerate() {
        acc += c;
        while k <= targets.len() && acc >= targets[k - 1] {
            out[k] = grid[i] as f64;
            k += 1;
        }
        if k > targets.len() {
            break;
        }
    }
    out
}

/// Windows as (grid, per-window (grid index, count)) for fast resampling.
struct Grid {
    values: Vec<u64>,
    windows: Vec<Vec<(usize, u64)>>,
}

fn grid(windows: &[Sparse]) -> Grid {
    let mut values: Vec<u64> = windows.iter().flatten().map(|&(v, _)| v).collect();
    values.sort_unstable();
    values.dedup();
    let windows = windows
        .iter()
        .map(|w| {
            w.iter()
                .map(|&(v, c)| (values.binary_search(&v).unwrap_or(0), c))
                .collect()
        })
        .collect();
    Grid { values, windows }
}

impl Grid {
    /// Statistics of the windows drawn `weights[i]` times each, plus the count at or above `thr`.
    fn stats(&self, weights: &[u64], counts: &mut Vec<u64>, thr: Option<u64>) -> ([f64; 6], f64) {
        counts.clear();
        counts.resize(self.values.len(), 0);
        for (w, &m) in self.windows.iter().zip(weights) {
            if m > 0 {
                for &(i, c) in w {
                    counts[i] += c * m;
                }
            }
        }
        let over = thr.map_or(0.0, |t| {
            let from = self.values.partition_point(|&v| v < t);
            counts[from..].iter().sum::<u64>() as f64
        });
        (latency_stats(&self.values, counts), over)
    }
}

/// A small, seeded PRNG for the resampling: results must be reproducible run to run.
struct Rng(fastrand::Rng);

impl Rng {
    fn weights(&mut self, n: usize, out: &mut Vec<u64>) {
        out.clear();
        out.resize(n, 0);
        for _ in 0..n {
            out[self.0.usize(0..n)] += 1;
        }
    }
}

/// Bootstrap replicates of every latency statistic (and overflows, missed) for run A and run B.
struct Replicates {
    /// [statistic][replicate] log ratios B/A.
    log_ratios: Vec<Vec<f64>>,
}

/// Statistics, in order: LATENCY_KEYS…, overflows, missed.
fn boot_latency(a: &LatencyData, b: &LatencyData, o: &Options) -> Option<Replicates> {
    if a.windows.len() < 2 || b.windows.len() < 2 {
        return None;
    }
    let (ga, gb) = (grid(&a.windows), grid(&b.windows));
    let mut rng = Rng(fastrand::Rng::with_seed(o.seed));
    let paired = a.windows.len() == b.windows.len();
    let (mut wa, mut wb, mut ca, mut cb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let n_stats = LATENCY_KEYS.len() + 2;
    let mut log_ratios = vec![Vec::with_capacity(o.resamples); n_stats];
    for _ in 0..o.resamples {
        rng.weights(a.windows.len(), &mut wa);
        if paired {
            wb.clone_from(&wa);
        } else {
            rng.weights(b.windows.len(), &mut wb);
        }
        let (sa, oa) = ga.stats(&wa, &mut ca, a.overflow_threshold);
        let (sb, ob) = gb.stats(&wb, &mut cb, b.overflow_threshold);
        for k in 0..LATENCY_KEYS.len() {
            log_ratios[k].push(log_ratio(sb[k], sa[k], MeasureUnit::Nanos));
        }
        log_ratios[LATENCY_KEYS.len()].push(log_ratio(ob, oa, MeasureUnit::Count));
        let ma: u64 = a.missed.iter().zip(&wa).map(|(m, w)| m * w).sum();
        let mb: u64 = b.missed.iter().zip(&wb).map(|(m, w)| m * w).sum();
        log_ratios[LATENCY_KEYS.len() + 1].push(log_ratio(
            mb as f64,
            ma as f64,
            MeasureUnit::Count,
        ));
    }
    Some(Replicates { log_ratios })
}

/// ln(b/a) on the scale of [`log_value`](sets::log_value): counts get +1 on both sides so that a zero
/// baseline gives a finite ratio; latencies are floored at 1 ns.
fn log_ratio(b: f64, a: f64, unit: MeasureUnit) -> f64 {
    sets::log_value(b, unit) - sets::log_value(a, unit)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1);
    sorted[i]
}

/// Basic bootstrap interval of the log ratio `r` from its replicates.
fn basic_interval(r: f64, reps: &mut [f64]) -> (f64, f64) {
    reps.sort_by(f64::total_cmp);
    let (lo, hi) = (quantile(reps, 0.025), quantile(reps, 0.975));
    (2.0 * r - hi, 2.0 * r - lo)
}

/// Percentile bootstrap interval `[q2.5, q97.5]` of the log-ratio replicates, stretched to hold the
/// estimate `lr`: for extremes, where the replicates can only fall at or below the observed value, this is
/// the interval that says how often the resampled windows keep each run's worst ones; and the resamples of
/// a min or a max can all fall on one side of the observed ratio, which would read as a ratio outside its
/// own interval.
fn percentile_interval(lr: f64, reps: &mut [f64]) -> (f64, f64) {
    reps.sort_by(f64::total_cmp);
    (quantile(reps, 0.025).min(lr), quantile(reps, 0.975).max(lr))
}

fn judge(r: f64, ci: (f64, f64), better: Better, margin: f64) -> Judgement {
    let d = (1.0 + margin).ln();
    let (lo, hi) = ci;
    // Below 1e-12 is rounding: an interval of exactly [0, 0] must read as equivalent.
    if lo >= -d - 1e-12 && hi <= d + 1e-12 {
        return Judgement::Equivalent;
    }
    let higher = lo > d;
    let lower = hi < -d;
    if higher || lower {
        let worse = higher == (better == Better::Lower);
        return if worse {
            Judgement::Worse
        } else {
            Judgement::Better
        };
    }
    let half = (hi - lo) / 2.0;
    let need = if r.abs() < d {
        d - r.abs()
    } else {
        r.abs() - d
    };
    Judgement::Inconclusive {
        longer: (need > 1e-9 && half > 0.0).then(|| (half / need).powi(2)),
        runs: None,
        one_run: false,
    }
}

/// Windows beyond the other run's worst that make an extreme decide: a resample drops all k of them with
/// probability ≈ e^−k, below 2.5 % from k = 4.
const DECIDING_WINDOWS: f64 = 4.0;

/// For an undecided extreme: how much longer the runs would have to be for the higher run's windows beyond
/// the other run's worst (× the margin) to recur [`DECIDING_WINDOWS`] times at the rate seen. None when
/// no window lies beyond (the estimate is within the margin's reach: the usual formula applies).
fn recurrences_needed(a: &LatencyData, b: &LatencyData, lr: f64, margin: f64) -> Option<f64> {
    let maxima = |d: &LatencyData| -> Vec<u64> {
        d.windows
            .iter()
            .filter_map(|w| w.last().map(|x| x.0))
            .collect()
    };
    let (hi, lo) = if lr > 0.0 { (b, a) } else { (a, b) };
    let bound = maxima(lo).into_iter().max()? as f64 * (1.0 + margin);
    let k = maxima(hi).iter().filter(|&&m| m as f64 > bound).count() as f64;
    (k > 0.0 && k < DECIDING_WINDOWS).then(|| DECIDING_WINDOWS / k)
}

/// Fewer samples than this beyond a percentile (in the smaller run) make it an extreme.
const EXTREME_TAIL: f64 = 100.0;

/// Whether latency statistic `stat` is an extreme of these runs: min and max always; a percentile when
/// fewer than [`EXTREME_TAIL`] samples lie beyond it (p99.99 of 5,000 samples is the largest one). The
/// bootstrap cannot resample beyond an observed extreme, so its intervals there say nothing (a baseline
/// with one 3 ms spike made a 200 ms stall "inconclusive").
fn is_extreme(stat: &str, a: Option<&LatencyData>, b: Option<&LatencyData>) -> bool {
    if stat == "min" || stat == "max" {
        return true;
    }
    let Some(p) = LATENCY_STATISTICS
        .iter()
        .find(|(n, _)| *n == stat)
        .map(|(_, p)| p / 100.0)
    else {
        return false;
    };
    let n = |x: Option<&LatencyData>| x.map_or(0.0, |d| d.total as f64);
    n(a).min(n(b)) * (1.0 - p) < EXTREME_TAIL
}

/// Distribution-free interval of the log of quantile `p` of `s` (independent samples assumed), as
/// (ln lo, ln hi).
fn order_statistic_interval(s: &Sparse, p: f64) -> Option<(f64, f64)> {
    let n: u64 = s.iter().map(|x| x.1).sum();
    if n < 2 || p >= 1.0 {
        return None;
    }
    let (nf, q) = (n as f64, p);
    let sd = (nf * q * (1.0 - q)).sqrt();
    let at = |rank: f64| {
        let r = rank.clamp(1.0, nf) as u64;
        let mut acc = 0;
        for &(v, c) in s {
            acc += c;
            if acc >= r {
                return v as f64;
            }
        }
        s.last().map_or(0.0, |x| x.0 as f64)
    };
    let lo = at((nf * q - 1.96 * sd).floor());
    let hi = at((nf * q + 1.96 * sd).ceil());
    Some((lo.max(1.0).ln(), hi.max(1.0).ln()))
}

fn measures_of(doc: &RunDocument) -> Vec<(usize, Measure)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (i, p) in doc.probes.iter().enumerate() {
        for m in p.data().comparable_measures(&doc.facts()) {
            // The first probe of a kind gives the measure (a profile rarely runs a kind twice).
            if seen.insert(m.key.clone()) {
                out.push((i, m));
            }
        }
    }
    out
}

fn probe_duration_ns(p: &ProbeResult) -> u64 {
    p.data().elapsed_ns()
}

/// A measure as the rows name it: key, label, unit, which direction is better.
type MeasureKey = (String, String, MeasureUnit, Better);

/// Every measure of `measures` once, in order of first appearance.
fn measure_keys<'a>(measures: impl Iterator<Item = &'a Measure>) -> Vec<MeasureKey> {
    let mut keys: Vec<MeasureKey> = Vec::new();
    for m in measures {
        if !keys.iter().any(|k| k.0 == m.key) {
            keys.push((m.key.clone(), m.label.clone(), m.unit, m.better));
        }
    }
    keys
}

/// The comparison of a value that is unknown beyond an rt-tests histogram's `limit` (ns): no ratio, no
/// interval, verdict "unknown".
fn unknown_versus(limit: f64) -> Versus {
    let why = if limit == 0.0 {
        "no histogram in the imported file: only min, avg and max are known".to_string()
    } else {
        format!(
            "histogram limit {} below the samples",
            rtgauge_model::Nanos(limit as u64)
        )
    };
    Versus {
        ratio: f64::NAN,
        ci: None,
        verdict: Judgement::Unknown { why },
        method: "unknown value: beyond an rt-tests histogram's range",
        one_run: None,
    }
}

/// A pair where a run's value lies within the bound of its clock: unresolved, so not judged.
fn unresolved_versus(bound_ns: f64) -> Versus {
    Versus {
        ratio: f64::NAN,
        ci: None,
        verdict: Judgement::Unknown {
            why: format!(
                "within its measurement's bound (± {}): unresolved",
                rtgauge_model::Nanos(bound_ns as u64)
            ),
        },
        method: "unresolved value: within the bound of its measurement",
        one_run: None,
    }
}

/// Method of counts above different histogram ranges: no interval, whatever else is known.
const NOT_COMPARABLE: &str = "not comparable";

/// Bootstraps per (run, probe index of A, probe index of B), computed once per probe pair.
type ReplicatesByPair = std::collections::HashMap<(usize, usize, usize), Option<Replicates>>;

/// Compare `runs[1..]` with `runs[0]`.
pub fn compare(runs: &[&RunDocument], options: &Options) -> Comparison {
    let per_run: Vec<Vec<(usize, Measure)>> = runs.iter().map(|d| measures_of(d)).collect();
    // Each latency probe's histograms decoded once, whatever the number of rows that use them.
    let data: Vec<Vec<Option<LatencyData>>> = runs
        .iter()
        .map(|d| d.probes.iter().map(latency_data).collect())
        .collect();
    let keys = measure_keys(per_run.iter().flatten().map(|(_, m)| m));
    let find = |r: usize, key: &str| per_run[r].iter().find(|(_, m)| m.key == key);
    let resolution: Vec<(f64, f64)> = runs.iter().map(|d| bucket_band(d)).collect();
    let mut boots = ReplicatesByPair::new();
    let mut rows = Vec::new();
    for measure in keys {
        let (key, unit, better) = (measure.0.as_str(), measure.2, measure.3);
        let values: Vec<Option<f64>> = (0..runs.len())
            .map(|r| find(r, key).map(|(_, m)| m.value))
            .collect();
        let unknown_above: Vec<Option<f64>> = (0..runs.len())
            .map(|r| find(r, key).and_then(|(_, m)| m.unknown_above))
            .collect();
        let unresolved: Vec<Option<f64>> = (0..runs.len())
            .map(|r| find(r, key).and_then(|(_, m)| m.unresolved_within))
            .collect();
        let mut versus = Vec::new();
        for r in 1..runs.len() {
            let (Some((pa, ma)), Some((pb, mb))) = (find(0, key), find(r, key)) else {
                versus.push(None);
                continue;
            };
            let pair = Pair {
                key,
                unit,
                better,
                a: ma,
                b: mb,
                da: data[0][*pa].as_ref(),
                db: data[r][*pb].as_ref(),
                resolution: if unit == MeasureUnit::Nanos {
                    (resolution[0], resolution[r])
                } else {
                    ((0.0, 0.0), (0.0, 0.0))
                },
            };
            versus.push(Some(versus_runs(&pair, &mut boots, (r, *pa, *pb), options)));
        }
        rows.push(Row::of(
            measure,
            values,
            (unknown_above, unresolved),
            versus,
        ));
    }
    Comparison {
        margin: options.margin,
        rows,
        differences: differences(runs),
        durations_ns: runs
            .iter()
            .map(|d| d.probes.iter().map(probe_duration_ns).max().unwrap_or(0))
            .collect(),
        sets: Vec::new(),
        repeats: Vec::new(),
    }
}

/// One measure of run B against the baseline run A.
struct Pair<'a> {
    key: &'a str,
    unit: MeasureUnit,
    better: Better,
    a: &'a Measure,
    b: &'a Measure,
    /// The resampling material of the probes the measure comes from (None: not a latency probe).
    da: Option<&'a LatencyData>,
    db: Option<&'a LatencyData>,
    /// Where each run's true latency values may lie around the shown ones, ns, as (below, above): an
    /// imported rt-tests result keeps whole buckets ([`bucket_band`]), rtgauge's own runs (0, 0).
    resolution: ((f64, f64), (f64, f64)),
}

/// An interval of the log ratio and how it was had, or why there is none.
struct Interval {
    ci: Option<(f64, f64)>,
    method: &'static str,
    why: String,
}

impl Interval {
    fn none(why: impl Into<String>) -> Interval {
        Interval {
            ci: None,
            method: "",
            why: why.into(),
        }
    }
}

/// Judge one pair of runs: the ratio, its interval (bootstraps memoised in `boots` under `slot`) and the
/// verdict against the margin.
fn versus_runs(
    p: &Pair,
    boots: &mut ReplicatesByPair,
    slot: (usize, usize, usize),
    o: &Options,
) -> Versus {
    let (ma, mb) = (p.a, p.b);
    let count = p.unit == MeasureUnit::Count;
    let lr = log_ratio(mb.value, ma.value, p.unit);
    let ratio = if count {
        // The ratio its interval is of: (B + 1)/(A + 1), finite for a zero baseline.
        lr.exp()
    } else if mb.value == ma.value {
        // Both 0 (an imported bucket's lower edge) are equal, not a ratio of 0.
        1.0
    } else {
        mb.value / ma.value.max(f64::MIN_POSITIVE)
    };
    let (probe, stat) = p.key.split_once('.').unwrap_or((p.key, ""));
    let latency_stat = matches!(probe, "cyclic" | "oslat");
    // Counts of rare events (missed deadlines, overflows: samples beyond a bound) are extremes too
    // while fewer than EXTREME_TAIL happened in either run: a few events in one window are one
    // observation, and the basic interval around them is as blind as around a max.
    let rare = matches!(stat, "missed" | "overflows") && ma.value.min(mb.value) < EXTREME_TAIL;
    let extreme = latency_stat && (is_extreme(stat, p.da, p.db) || rare);
    let Interval { ci, method, why } = if p.key.ends_with(".overflows") && ma.label != mb.label {
        // Counts above different histogram ranges are not the same measure.
        Interval {
            ci: None,
            method: NOT_COMPARABLE,
            why: format!("different histogram ranges ({} / {})", ma.label, mb.label),
        }
    } else if let Some(limit) = ma.unknown_above.or(mb.unknown_above) {
        return unknown_versus(limit);
    } else if let Some(bound) = ma.unresolved_within.or(mb.unresolved_within) {
        return unresolved_versus(bound);
    } else if latency_stat {
        let boot = boots.entry(slot).or_insert_with(|| match (p.da, p.db) {
            (Some(a), Some(b)) => boot_latency(a, b, o),
            _ => None,
        });
        latency_interval(p, stat, boot.as_ref(), extreme, lr)
    } else if mb.replicates.len() >= 2 && ma.replicates.len() >= 2 {
        Interval {
            ci: Some(boot_replicates(
                &ma.replicates,
                &mb.replicates,
                (lr, p.unit),
                o,
            )),
            method: "bootstrap over repetitions (median)",
            why: String::new(),
        }
    } else {
        Interval::none("no repetitions to resample")
    };
    let within = ci;
    let ci = ci.map(|c| within_resolution(c, ma.value, mb.value, p.resolution));
    let verdict = match ci {
        Some(c) => match judge(lr, c, p.better, o.margin) {
            // Undecided because an imported value is a whole bucket: neither longer runs nor more help.
            Judgement::Inconclusive { .. } if ci != within => {
                let ((a0, a1), (b0, b1)) = p.resolution;
                Judgement::Unknown {
                    why: format!(
                        "within an imported result's resolution ({} buckets)",
                        rtgauge_model::Nanos(a0.max(a1).max(b0).max(b1) as u64)
                    ),
                }
            }
            Judgement::Inconclusive { longer, .. }
                if extreme
                    && matches!(stat, "max" | "p99.9" | "p99.99" | "missed" | "overflows") =>
            {
                Judgement::Inconclusive {
                    longer: p
                        .da
                        .zip(p.db)
                        .and_then(|(a, b)| recurrences_needed(a, b, lr, o.margin))
                        .or(longer),
                    runs: None,
                    one_run: false,
                }
            }
            v => v,
        },
        None => Judgement::NoInterval { why },
    };
    Versus {
        ratio,
        ci: ci.map(|(lo, hi)| (lo.exp(), hi.exp())),
        verdict,
        method,
        one_run: None,
    }
}

/// Where the true values of an imported run's latencies lie around the shown ones, ns, as (below, above):
/// cyclictest keeps a bucket's lower edge (the true value is up to one bucket above), oslat its label, the
/// upper edge (up to one bucket below); rtgauge's own runs are exact to the nanosecond: (0, 0).
fn bucket_band(d: &RunDocument) -> (f64, f64) {
    match &d.imported_from {
        Some(i) if i.format.starts_with("oslat") => (i.resolution_ns as f64, 0.0),
        Some(i) if i.format.starts_with("cyclictest") => (0.0, i.resolution_ns as f64),
        _ => (0.0, 0.0),
    }
}

/// An interval of ln(B/A) stretched to hold every ratio the two values allow within their bucket bands
/// (see [`bucket_band`]): an imported oslat p50 of "1 µs" is a 1 µs bucket, and against a native 17 ns
/// it says nothing of which is lower.
fn within_resolution(
    ci: (f64, f64),
    a: f64,
    b: f64,
    ((a_below, a_above), (b_below, b_above)): ((f64, f64), (f64, f64)),
) -> (f64, f64) {
    if a_below + a_above + b_below + b_above <= 0.0 {
        return ci;
    }
    let lo = ((b - b_below).max(1.0) / (a + a_above).max(1.0)).ln();
    let hi = ((b + b_above).max(1.0) / (a - a_below).max(1.0)).ln();
    (ci.0.min(lo), ci.1.max(hi))
}

/// The interval of a latency statistic `stat` of log ratio `lr`: from the block bootstrap over time
/// windows where both runs have windows, else from order statistics (percentiles only).
fn latency_interval(
    p: &Pair,
    stat: &str,
    boot: Option<&Replicates>,
    extreme: bool,
    lr: f64,
) -> Interval {
    let idx = match stat {
        "overflows" => Some(LATENCY_KEYS.len()),
        "missed" => Some(LATENCY_KEYS.len() + 1),
        s => LATENCY_KEYS.iter().position(|k| *k == s),
    };
    match (boot, idx) {
        (Some(b), Some(i)) if extreme => {
            let mut reps = b.log_ratios[i].clone();
            Interval {
                ci: Some(percentile_interval(lr, &mut reps)),
                method: "extreme: percentile interval of the block bootstrap over time windows (how often resamples keep each run's worst windows)",
                why: String::new(),
            }
        }
        (Some(b), Some(i)) => {
            // The percentile interval here too: a tail statistic such as p99 can be set by
            // the samples of one burst (one 200 ms stall is 200 late samples at 1 kHz, p99 of
            // 20 s), and the basic interval, mirroring the replicates around the estimate,
            // then called one stall "worse" exactly as it did for the max.
            let mut reps = b.log_ratios[i].clone();
            Interval {
                ci: Some(percentile_interval(lr, &mut reps)),
                method: "block bootstrap over time windows (percentile interval)",
                why: String::new(),
            }
        }
        _ if extreme => Interval::none(
            "no time windows (imported result): an extreme needs per-window maxima for an interval",
        ),
        _ => {
            let p100 = LATENCY_STATISTICS
                .iter()
                .find(|(n, _)| *n == stat)
                .map(|(_, q)| q / 100.0);
            let iid = match (p100, p.da, p.db) {
                (Some(q), Some(a), Some(b)) => order_statistic_interval(&a.pooled, q)
                    .zip(order_statistic_interval(&b.pooled, q)),
                _ => None,
            };
            match iid {
                Some(((alo, ahi), (blo, bhi))) => {
                    let se = (((ahi - alo) / 3.92).powi(2) + ((bhi - blo) / 3.92).powi(2)).sqrt();
                    Interval {
                        ci: Some((lr - 1.96 * se, lr + 1.96 * se)),
                        method: "order statistics, independent samples assumed (no time windows)",
                        why: String::new(),
                    }
                }
                None => Interval::none(
                    "no time windows (imported result): no interval for extremes and counts",
                ),
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    quantile(v, 0.5)
}

/// Basic bootstrap interval of ln(median B / median A) over the repetitions (paired when equally many).
fn boot_replicates(
    a: &[f64],
    b: &[f64],
    (lr, unit): (f64, MeasureUnit),
    o: &Options,
) -> (f64, f64) {
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let paired = a.len() == b.len();
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    let mut reps = Vec::with_capacity(o.resamples);
    for _ in 0..o.resamples {
        for (j, x) in ra.iter_mut().enumerate() {
            let i = rng.usize(0..a.len());
            *x = a[i];
            if paired {
                rb[j] = b[i];
            }
        }
        if !paired {
            for x in rb.iter_mut() {
                *x = b[rng.usize(0..b.len())];
            }
        }
        reps.push(log_ratio(median(&mut rb), median(&mut ra), unit));
    }
    basic_interval(lr, &mut reps)
}

#[cfg(test)]
mod tests;

//! Single runs judged with their platform's run-to-run spread (docs/METHODOLOGY.md, "Comparing runs").
//!
//! The window bootstrap of [`compare`](super::compare) sees the variation inside each run. Idle runs of one
//! profile taken back to back on one VM differ by more than that (bench/compare_aa: min 12.0 vs 16.9 µs,
//! p99.9 34 vs 154 µs, max 0.29 vs 21 ms), because conditions change between runs. When the store holds
//! other runs of the same platform under the same conditions (the caller finds them: same host, profile,
//! label and probes; both with a fingerprint and no difference in it, in the audit, the probes' settings or
//! the load asked for; neither contended), their spread is that change: the log
//! ratio of two single runs varies by √(s_A² + s_B²) from run to run, s the standard deviation of one run's
//! log value among its repeats. The interval becomes the union of the within-run interval and
//! `ln(B/A) ± t₀.₉₇₅(df)·√(s_A² + s_B²)`: the first keeps one spike in one window from deciding, the second
//! keeps a change of conditions from deciding.

use super::sets::{log_value, runs_needed, sum_of_squares, t975};
use super::{judge, measures_of, Comparison, Judgement, Options, NOT_COMPARABLE};
use rtgauge_model::measure::{Measure, MeasureUnit};
use rtgauge_model::run::RunDocument;

/// Fewest repeats whose spread is used: two give one degree of freedom, whose t quantile (12.7) would make
/// almost every verdict inconclusive on a guess of the spread.
pub const MIN_REPEATS: usize = 3;

/// Method of an interval widened by the repeats' spread.
const WIDENED: &str = "window bootstrap inside each run, widened by the run-to-run spread of the platform's repeat runs (t interval)";

/// The stored runs that repeat one compared run: the same platform measured the same way at other times.
#[derive(Debug, Default)]
pub struct Repeats<'a> {
    /// The compared run's id (a run compared with itself is not widened: it reads exactly 1).
    pub run: i64,
    /// Their ids in the store (for the note under the table).
    pub ids: Vec<i64>,
    /// Their documents.
    pub runs: Vec<&'a RunDocument>,
}

/// The run-to-run spread of one measure among repeats: (standard deviation of the log values, degrees of
/// freedom). None with fewer than [`MIN_REPEATS`] known values. Counts that agree exactly (0 missed deadlines
/// in every run) have a spread of 0: the repeats are real and showed no variation, so the within-run interval
/// judges, where a copied result would not be a repeat at all ([`spread_of_logs`]).
fn spread(
    measures: &[Vec<(usize, Measure)>],
    key: &str,
    unit: MeasureUnit,
) -> Option<(f64, usize)> {
    let logs: Vec<f64> = measures
        .iter()
        .filter_map(|ms| ms.iter().find(|(_, m)| m.key == key))
        .filter(|(_, m)| m.unknown_above.is_none() && m.value.is_finite())
        .map(|(_, m)| log_value(m.value, unit))
        .collect();
    match spread_of_logs(&logs) {
        None if unit == MeasureUnit::Count && logs.len() >= MIN_REPEATS => {
            Some((0.0, logs.len() - 1))
        }
        s => s,
    }
}

/// Standard deviation and degrees of freedom of log values; None for fewer than [`MIN_REPEATS`], or when
/// they agree exactly (copies of one result, e.g. one file imported several times): no spread to judge by,
/// and a zero-width interval would fake certainty.
fn spread_of_logs(logs: &[f64]) -> Option<(f64, usize)> {
    if logs.len() < MIN_REPEATS {
        return None;
    }
    let df = logs.len() - 1;
    let sd = (sum_of_squares(logs) / df as f64).sqrt();
    (sd > 0.0 && sd.is_finite()).then_some((sd, df))
}

/// The variance of a single-run log ratio and its degrees of freedom, from the baseline's spread `a` and
/// the other run's `b`. One pool (both runs repeat the same platform): 2s². Two pools: s_A² + s_B² with
/// Welch–Satterthwaite degrees of freedom. One side without repeats borrows the other's spread: a platform
/// measured once is not assumed steadier than one measured often.
fn ratio_variance(
    a: Option<(f64, usize)>,
    b: Option<(f64, usize)>,
    one_pool: bool,
) -> Option<(f64, usize)> {
    match (a, b) {
        (Some((s, df)), _) if one_pool => Some((2.0 * s * s, df)),
        (Some((sa, dfa)), Some((sb, dfb))) => {
            let (va, vb) = (sa * sa, sb * sb);
            let welch = (va + vb).powi(2) / (va * va / dfa as f64 + vb * vb / dfb as f64);
            let df = if welch.is_finite() {
                (welch.floor() as usize).clamp(dfa.min(dfb), dfa + dfb)
            } else {
                dfa.min(dfb)
            };
            Some((va + vb, df))
        }
        (Some((s, df)), None) | (None, Some((s, df))) => Some((2.0 * s * s, df)),
        (None, None) => None,
    }
}

/// Judge the pairs of single runs in `c` by how much runs of their platforms differ: with the run-to-run
/// spread of each column's stored repeats where there is one ([`widen_with_repeats`]), else held to the
/// one-run floors ([`one_run`](super::one_run)). `repeats[column]`: None for a column that is a set (its
/// comparisons already judge by the spread between its runs); for a single run, its id and its repeats
/// (none: `--no-repeats`, or none stored).
pub fn judge_single_runs(c: &mut Comparison, repeats: &[Option<Repeats>], options: &Options) {
    let widened = widen_with_repeats(c, repeats, options);
    let single: Vec<Option<i64>> = repeats.iter().map(|r| r.as_ref().map(|r| r.run)).collect();
    super::one_run::hold_to_floors(c, &single, &widened, options.margin);
}

/// Widen the verdicts of single runs in `c` by the run-to-run spread of each column's repeats
/// (`repeats[column]`: None for a column that is a set, whose comparisons already judge by the spread
/// between its runs; empty for a run with no repeats stored). Records in `c.repeats` the ids of the repeats
/// whose spread was used, per column (empty where none was). Left as they are: a run against itself,
/// verdicts without an interval or on unknown values. Returns, per row and per run after the baseline,
/// whether the pair took a spread.
pub(super) fn widen_with_repeats(
    c: &mut Comparison,
    repeats: &[Option<Repeats>],
    options: &Options,
) -> Vec<Vec<bool>> {
    let mut widened: Vec<Vec<bool>> = c.rows.iter().map(|r| vec![false; r.versus.len()]).collect();
    let enough = |r: &Option<Repeats>| r.as_ref().is_some_and(|r| r.runs.len() >= MIN_REPEATS);
    let Some(Some(base_repeats)) = repeats.first() else {
        return widened;
    };
    if !repeats.iter().any(enough) {
        return widened;
    }
    let measures: Vec<Vec<Vec<(usize, Measure)>>> = repeats
        .iter()
        .map(|r| {
            r.as_ref()
                .map(|r| r.runs.iter().map(|d| measures_of(d)).collect())
                .unwrap_or_default()
        })
        .collect();
    let mut used = vec![false; repeats.len()];
    for (row, widened) in c.rows.iter_mut().zip(&mut widened) {
        let base = spread(&measures[0], &row.key, row.unit);
        for (k, versus) in row.versus.iter_mut().enumerate() {
            let col = k + 1;
            let (Some(v), Some(Some(a)), Some(Some(b)), Some(Some(rep))) = (
                versus.as_mut(),
                row.values.first(),
                row.values.get(col),
                repeats.get(col),
            ) else {
                continue;
            };
            let Some(within) = v.ci.map(|(lo, hi)| (lo.ln(), hi.ln())) else {
                continue;
            };
            if rep.run == base_repeats.run || v.method == NOT_COMPARABLE {
                continue;
            }
            let one_pool = !rep.ids.is_empty() && rep.ids == base_repeats.ids;
            let other = spread(&measures[col], &row.key, row.unit);
            let Some((var, df)) = ratio_variance(base, other, one_pool) else {
                continue;
            };
            widened[k] = true;
            used[0] |= base.is_some();
            used[col] |= other.is_some() || (one_pool && base.is_some());
            let lr = log_value(*b, row.unit) - log_value(*a, row.unit);
            let half = t975(df) * var.sqrt();
            let ci = (within.0.min(lr - half), within.1.max(lr + half));
            v.verdict = match judge(lr, ci, row.better, options.margin) {
                // Still undecided on the runs' own variation: what the bootstrap said would decide stands.
                Judgement::Inconclusive { .. }
                    if matches!(v.verdict, Judgement::Inconclusive { .. })
                        && within.1 - within.0 >= 2.0 * half =>
                {
                    v.verdict.clone()
                }
                // Undecided because runs differ from one another: repetitions decide, not length.
                Judgement::Inconclusive { .. } => Judgement::Inconclusive {
                    longer: None,
                    runs: runs_needed(lr, (var / 2.0).sqrt(), options.margin, 1),
                    one_run: false,
                },
                j => j,
            };
            // The method names what set the interval: the repeats, where they widened it.
            if within != ci {
                v.method = WIDENED;
            }
            v.ci = Some((ci.0.exp(), ci.1.exp()));
        }
    }
    if used.iter().any(|&u| u) {
        c.repeats = repeats
            .iter()
            .zip(&used)
            .map(|(r, &u)| match r {
                Some(r) if u => r.ids.clone(),
                _ => Vec::new(),
            })
            .collect();
    }
    widened
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::measure::Better;

    #[test]
    fn one_pool_doubles_the_variance_and_two_pools_add() {
        let (v, df) = ratio_variance(Some((0.1, 5)), Some((0.1, 5)), true).unwrap();
        assert!((v - 0.02).abs() < 1e-12 && df == 5);
        let (v, df) = ratio_variance(Some((0.1, 5)), Some((0.2, 3)), false).unwrap();
        assert!((v - 0.05).abs() < 1e-12);
        // Welch: (0.01 + 0.04)² / (0.0001/5 + 0.0016/3) = 4.52…
        assert_eq!(df, 4);
        // A platform without repeats borrows the other's spread.
        let (v, df) = ratio_variance(None, Some((0.2, 3)), false).unwrap();
        assert!((v - 0.08).abs() < 1e-12 && df == 3);
        assert!(ratio_variance(None, None, false).is_none());
    }

    /// The interval's half width for runs `a` and `b` judged with `repeats`, as [`widen_with_repeats`]
    /// computes it (one pool).
    fn half_width(repeats: &[f64]) -> f64 {
        let (var, df) = ratio_variance(spread_of_logs(repeats), None, true).unwrap();
        t975(df) * var.sqrt()
    }

    #[test]
    fn runs_drawn_alike_decide_at_most_five_percent_of_the_time() {
        // A/A on synthetic runs: each run's log value is the platform's plus a run-level shift (a change of
        // conditions, sd 0.3 — min and p99 of idle runs on this VM moved about that much) plus a small
        // within-run error. Run 0 against run 1, judged with runs 2–7 as repeats.
        let mut rng = fastrand::Rng::with_seed(12);
        let mut normal = || {
            // Box–Muller: fastrand has no normal distribution, and one function does not need a crate.
            let (u, v) = (1.0 - rng.f64(), rng.f64());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let margin = 0.10;
        let (trials, mut decided, mut decided_within) = (4000, 0, 0);
        for _ in 0..trials {
            let runs: Vec<f64> = (0..8).map(|_| 0.3 * normal() + 0.02 * normal()).collect();
            let lr = runs[1] - runs[0];
            let half = half_width(&runs[2..]);
            let v = judge(lr, (lr - half, lr + half), Better::Lower, margin);
            decided += usize::from(matches!(v, Judgement::Better | Judgement::Worse));
            // A within-run interval (±1.96 × the within-run error) alone, for contrast.
            let w = 1.96 * 0.02 * 2f64.sqrt();
            let v = judge(lr, (lr - w, lr + w), Better::Lower, margin);
            decided_within += usize::from(matches!(v, Judgement::Better | Judgement::Worse));
        }
        let share = decided as f64 / trials as f64;
        assert!(share <= 0.05, "{decided} of {trials} decided");
        // Without the repeats most pairs decide: the run-level shift is what they miss.
        assert!(
            decided_within as f64 / trials as f64 > 0.5,
            "{decided_within}"
        );
        // A real shift of 5× against that spread is mostly called worse (3× is only half the time: one
        // pair of runs cannot tell it from two runs 1.5 run-to-run deviations apart).
        let mut worse = 0;
        for _ in 0..1000 {
            let runs: Vec<f64> = (0..8).map(|_| 0.3 * normal()).collect();
            let lr = runs[1] + 5f64.ln() - runs[0];
            let half = half_width(&runs[2..]);
            worse += usize::from(
                judge(lr, (lr - half, lr + half), Better::Lower, margin) == Judgement::Worse,
            );
        }
        // Seed 12 gives: A/A 115 of 4000 decided (2.9 %), within-run only 2871 (72 %), 5× worse 801 of 1000.
        assert!(worse > 700, "{worse} of 1000");
    }
}

//! Comparisons of sets of runs (repetitions per platform): each column's value is the geometric mean of
//! its runs, and a ratio's interval a t interval on the log values with the run-to-run variance pooled
//! over both sets (docs/METHODOLOGY.md, "Comparing runs").

use super::{
    compare, differences, judge, measure_keys, measures_of, probe_duration_ns, unknown_versus,
    unresolved_versus, Comparison, Judgement, Options, Row, Versus,
};
use rtgauge_model::measure::{Better, Measure, MeasureUnit};
use rtgauge_model::run::RunDocument;

/// Two-sided 97.5 % quantiles of Student's t for 1–30 degrees of freedom (beyond: 1.96 at 2 % error).
/// Thirty constants rather than a statistics crate for one function.
pub(super) const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

pub(super) fn t975(df: usize) -> f64 {
    T975.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// A measure on the log scale that ratios and sets are judged on: counts + 1 (no missed deadline is a count
/// too), latencies floored at 1 ns (an imported bucket's lower edge can be 0; below a nanosecond nothing is
/// resolved), any other unit only kept off zero — a 0.5 ns L1 hit or 0.3 % must not read as 1.
pub(super) fn log_value(v: f64, unit: MeasureUnit) -> f64 {
    match unit {
        MeasureUnit::Count => (v + 1.0).ln(),
        MeasureUnit::Nanos => v.max(1.0).ln(),
        _ => v.max(1e-9).ln(),
    }
}

pub(super) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The sum of squared deviations from the mean: a sample variance times its degrees of freedom.
pub(super) fn sum_of_squares(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum()
}

/// Set B against set A on the log scale: (log ratio of the geometric means, 95 % t interval with the
/// run-to-run variance pooled over both sets, degrees of freedom, run-to-run standard deviation).
pub(super) fn set_interval(a: &[f64], b: &[f64]) -> Option<(f64, (f64, f64), f64)> {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 || na + nb < 3 {
        return None;
    }
    let (ma, mb) = (mean(a), mean(b));
    let ss = sum_of_squares(a) + sum_of_squares(b);
    let df = na + nb - 2;
    let sd = (ss / df as f64).sqrt();
    let half = t975(df) * sd * (1.0 / na as f64 + 1.0 / nb as f64).sqrt();
    let lr = mb - ma;
    Some((lr, (lr - half, lr + half), sd))
}

/// Runs per platform (equal sets) at which the interval of a run-to-run spread `sd` would exclude the
/// margin or fit inside it, for an estimate `lr`; None when the estimate sits on the margin.
pub(super) fn runs_needed(lr: f64, sd: f64, margin: f64, now: usize) -> Option<usize> {
    let need = (lr.abs() - (1.0 + margin).ln()).abs();
    if need < 1e-9 || sd <= 0.0 {
        return None;
    }
    // The smallest n per platform whose interval half width t(2n − 2)·sd·√(2/n) falls below the distance
    // (t itself shrinks with n, so no closed form).
    (now + 1..10_000).find(|&n| t975(2 * n - 2) * sd * (2.0 / n as f64).sqrt() < need)
}

/// Per set, the largest of a bound its runs' measures carry (a histogram limit, a clock's bound): a set is
/// as unknown, or as unresolved, as its least known run.
fn largest_per_set(
    got: &[Vec<&Measure>],
    bound: impl Fn(&Measure) -> Option<f64>,
) -> Vec<Option<f64>> {
    got.iter()
        .map(|ms| ms.iter().filter_map(|m| bound(m)).max_by(f64::total_cmp))
        .collect()
}

/// Compare sets of runs: each column is one platform measured once or several times (repetitions). Where
/// both sides of a pair are single runs this is [`compare`], whose intervals come from the variation
/// inside each run. With repetitions the interval comes from the variation between runs — the one a
/// single run cannot show (timer-latency percentiles of idle runs on one VM differed 2× between runs):
/// each column's value is the geometric mean of its runs, and the ratio's interval a t interval on the
/// log values with the run-to-run variance pooled over both sets.
pub fn compare_sets(sets: &[Vec<&RunDocument>], options: &Options) -> Comparison {
    let firsts: Vec<&RunDocument> = sets.iter().filter_map(|s| s.first().copied()).collect();
    if sets.iter().all(|s| s.len() == 1) {
        return compare(&firsts, options);
    }
    let per_run: Vec<Vec<Vec<(usize, Measure)>>> = sets
        .iter()
        .map(|s| s.iter().map(|d| measures_of(d)).collect())
        .collect();
    let keys = measure_keys(per_run.iter().flatten().flatten().map(|(_, m)| m));
    // Pairs of single runs keep the within-run comparison.
    let singles: Vec<Option<Comparison>> = (1..sets.len())
        .map(|r| {
            (sets[0].len() == 1 && sets[r].len() == 1)
                .then(|| compare(&[firsts[0], firsts[r]], options))
        })
        .collect();
    let mut rows = Vec::new();
    for measure in keys {
        let (key, unit, better) = (measure.0.as_str(), measure.2, measure.3);
        let count = unit == MeasureUnit::Count;
        // Per set: the measure of each run that has it.
        let got: Vec<Vec<&Measure>> = per_run
            .iter()
            .map(|runs| {
                runs.iter()
                    .filter_map(|ms| ms.iter().find(|(_, m)| m.key == key).map(|(_, m)| m))
                    .collect()
            })
            .collect();
        let logs: Vec<Vec<f64>> = got
            .iter()
            .map(|ms| ms.iter().map(|m| log_value(m.value, unit)).collect())
            .collect();
        let values: Vec<Option<f64>> = logs
            .iter()
            .zip(&got)
            .map(|(l, ms)| {
                (!l.is_empty()).then(|| {
                    let g = mean(l).exp();
                    if count {
                        g - 1.0
                    } else if ms.iter().all(|m| m.value == 0.0) {
                        // Zero latencies (imported bucket edges) were floored at 1 ns to take logs.
                        0.0
                    } else {
                        g
                    }
                })
            })
            .collect();
        let unknown_above = largest_per_set(&got, |m| m.unknown_above);
        let unresolved = largest_per_set(&got, |m| m.unresolved_within);
        let mut versus = Vec::new();
        for r in 1..sets.len() {
            if let Some(c) = &singles[r - 1] {
                versus.push(
                    c.rows
                        .iter()
                        .find(|row| row.key == key)
                        .and_then(|row| row.versus[0].clone()),
                );
                continue;
            }
            if logs[0].is_empty() || logs[r].is_empty() {
                versus.push(None);
                continue;
            }
            if let Some(limit) = unknown_above[0].or(unknown_above[r]) {
                versus.push(Some(unknown_versus(limit)));
                continue;
            }
            if let Some(bound) = unresolved[0].or(unresolved[r]) {
                versus.push(Some(unresolved_versus(bound)));
                continue;
            }
            // Counts above different histogram ranges are not one measure (as for single runs).
            let ranges: std::collections::BTreeSet<&str> = got[0]
                .iter()
                .chain(&got[r])
                .map(|m| m.label.as_str())
                .collect();
            if key.ends_with(".overflows") && ranges.len() > 1 {
                versus.push(Some(Versus {
                    ratio: f64::NAN,
                    ci: None,
                    verdict: Judgement::NoInterval {
                        why: "samples over different histogram ranges: not one measure".into(),
                    },
                    method: super::NOT_COMPARABLE,
                    one_run: None,
                }));
                continue;
            }
            versus.push(Some(versus_sets(&logs[0], &logs[r], better, options)));
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
        differences: differences(&firsts),
        durations_ns: sets
            .iter()
            .map(|s| {
                s.iter()
                    .flat_map(|d| d.probes.iter().map(probe_duration_ns))
                    .max()
                    .unwrap_or(0)
            })
            .collect(),
        sets: Vec::new(),
        repeats: Vec::new(),
    }
}

/// Set B's log values against set A's: the ratio of the geometric means, its t interval and the verdict
/// (inconclusive ones with the runs per platform that would decide).
fn versus_sets(a: &[f64], b: &[f64], better: Better, o: &Options) -> Versus {
    let lr = mean(b) - mean(a);
    let method = "repetitions: t interval over runs (geometric means, run-to-run variance pooled)";
    let (ci, verdict) = match set_interval(a, b) {
        // Runs that agree to the last digit while the sets differ are copies of one run (imported twice),
        // not repetitions: a zero-width interval would fake certainty.
        Some((lr, _, sd)) if sd == 0.0 && lr != 0.0 => (
            None,
            Judgement::NoInterval {
                why: "the runs of each set agree exactly on this measure (values this coarse, or copies of one result): no run-to-run variation to judge by"
                    .into(),
            },
        ),
        Some((lr, ci, sd)) => (
            Some(ci),
            match judge(lr, ci, better, o.margin) {
                Judgement::Inconclusive { .. } => Judgement::Inconclusive {
                    longer: None,
                    runs: runs_needed(lr, sd, o.margin, a.len().max(b.len())),
                    one_run: false,
                },
                v => v,
            },
        ),
        None => (
            None,
            Judgement::NoInterval {
                why: "one run on each side: no run-to-run variation to judge by".into(),
            },
        ),
    };
    Versus {
        ratio: lr.exp(),
        ci: ci.map(|(lo, hi)| (lo.exp(), hi.exp())),
        verdict,
        method,
        one_run: None,
    }
}

#[cfg(test)]
mod copies_tests {
    use super::*;

    #[test]
    fn copies_of_one_run_are_not_repetitions() {
        let o = Options::default();
        let (a, b) = ([10f64.ln(), 10f64.ln()], [20f64.ln()]);
        let v = versus_sets(&a, &b, Better::Lower, &o);
        assert!(matches!(v.verdict, Judgement::NoInterval { .. }), "{v:?}");
        assert!(v.ci.is_none());
        // Equal counts (no missed deadline anywhere) stay equivalent.
        let zeros = [0f64, 0.0];
        let v = versus_sets(&zeros, &zeros, Better::Lower, &o);
        assert_eq!(v.verdict, Judgement::Equivalent);
    }
}

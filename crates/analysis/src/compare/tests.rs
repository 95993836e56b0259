//! Unit tests of the comparison statistics: verdicts, intervals, extremes and sets of runs.

use super::*;

#[test]
fn verdicts_follow_the_margin() {
    let m = 0.10;
    let d = 1.1f64.ln();
    assert_eq!(
        judge(0.0, (0.0, 0.0), Better::Lower, m),
        Judgement::Equivalent
    );
    assert_eq!(
        judge(0.02, (-0.05, 0.08), Better::Lower, m),
        Judgement::Equivalent
    );
    assert_eq!(judge(0.5, (0.3, 0.7), Better::Lower, m), Judgement::Worse);
    assert_eq!(judge(0.5, (0.3, 0.7), Better::Higher, m), Judgement::Better);
    assert_eq!(
        judge(-0.5, (-0.7, -0.3), Better::Lower, m),
        Judgement::Better
    );
    // Straddles +δ: inconclusive, and a longer run would decide (half-width 0.1, distance 0.1 − δ).
    match judge(0.1, (0.0, 0.2), Better::Lower, m) {
        Judgement::Inconclusive {
            longer: Some(f), ..
        } => {
            let want = (0.1 / (0.1 - d)).powi(2);
            assert!((f - want).abs() < 1e-9, "{f} vs {want}");
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn basic_interval_mirrors_the_replicates_around_the_estimate() {
    // Replicates all below the estimate (as for a resampled max): the interval lies above it.
    let mut reps: Vec<f64> = (0..1000).map(|i| i as f64 / 1000.0).collect();
    let (lo, hi) = basic_interval(1.0, &mut reps);
    assert!(
        (lo - 1.025).abs() < 0.01 && (hi - 1.975).abs() < 0.01,
        "{lo} {hi}"
    );
}

#[test]
fn order_statistic_interval_brackets_the_median() {
    let s: Sparse = (1..=1000u64).map(|v| (v * 1000, 1)).collect();
    let (lo, hi) = order_statistic_interval(&s, 0.5).unwrap();
    assert!(lo.exp() < 500_000.0 && hi.exp() > 500_000.0);
    assert!(
        lo.exp() > 450_000.0 && hi.exp() < 550_000.0,
        "{} {}",
        lo.exp(),
        hi.exp()
    );
}

/// A run of `n` windows of 1,000 samples each: a body of 10–20 µs and one largest sample per window
/// drawn from 40–80 µs (times `scale`); `spikes` lists (window, value) to overwrite a window's max.
fn synthetic(
    rng: &mut fastrand::Rng,
    n: usize,
    scale: f64,
    spikes: &[(usize, u64)],
) -> LatencyData {
    let windows: Vec<Sparse> = (0..n)
        .map(|i| {
            let mut h = latency::new_histogram();
            for _ in 0..999 {
                h.saturating_record(10_000 + rng.u64(0..10_000));
            }
            let max = spikes
                .iter()
                .find(|s| s.0 == i)
                .map_or((40_000.0 + rng.f64() * 40_000.0) * scale, |s| s.1 as f64);
            h.saturating_record(max as u64);
            latency::sparse(&h)
        })
        .collect();
    let pooled = windows
        .iter()
        .fold(Sparse::new(), |acc, w| latency::sparse_add(&acc, w));
    LatencyData {
        missed: vec![0; n],
        total: pooled.iter().map(|v| v.1).sum(),
        pooled,
        windows,
        overflow_threshold: None,
    }
}

/// The verdicts on statistics `ks` of LATENCY_KEYS (extremes here: 20,000 samples) of B against A.
fn extreme_verdicts(a: &LatencyData, b: &LatencyData, ks: &[usize]) -> Vec<Judgement> {
    let o = Options {
        resamples: 1000,
        ..Options::default()
    };
    let boot = boot_latency(a, b, &o).unwrap();
    let full = |d: &LatencyData| {
        let g = grid(&d.windows);
        g.stats(&vec![1; d.windows.len()], &mut Vec::new(), None).0
    };
    let (fa, fb) = (full(a), full(b));
    ks.iter()
        .map(|&k| {
            let lr = log_ratio(fb[k], fa[k], MeasureUnit::Nanos);
            let mut reps = boot.log_ratios[k].clone();
            judge(
                lr,
                percentile_interval(lr, &mut reps),
                Better::Lower,
                o.margin,
            )
        })
        .collect()
}

fn extreme_verdict(a: &LatencyData, b: &LatencyData, k: usize) -> Judgement {
    extreme_verdicts(a, b, &[k]).remove(0)
}

#[test]
fn extremes_need_more_than_one_spike_to_decide() {
    let mut rng = fastrand::Rng::with_seed(7);
    // A/A: 40 pairs of runs drawn alike; "better" or "worse" on max or p99.99 at most at the nominal 5 %.
    let mut decided = 0;
    for _ in 0..40 {
        let (a, b) = (
            synthetic(&mut rng, 20, 1.0, &[]),
            synthetic(&mut rng, 20, 1.0, &[]),
        );
        for v in extreme_verdicts(&a, &b, &[4, 5]) {
            if matches!(v, Judgement::Better | Judgement::Worse) {
                decided += 1;
            }
        }
    }
    eprintln!("synthetic A/A: {decided} of 80 extreme verdicts decided");
    assert!(decided <= 4, "{decided} of 80 A/A verdicts decided");
    // One 6 ms spike in the baseline's 20 windows: the clean run is not "better" on max.
    let a = synthetic(&mut rng, 20, 1.0, &[(7, 6_000_000)]);
    let c = synthetic(&mut rng, 20, 1.0, &[]);
    let v = extreme_verdict(&a, &c, 5);
    assert!(matches!(v, Judgement::Inconclusive { .. }), "{v:?}");
    // What would decide: the spike seen 4 times, i.e. runs 4× as long if it recurs at this rate.
    assert_eq!(recurrences_needed(&a, &c, -4.4, 0.1), Some(4.0));
    // A clear shift of every window's max (×3) is worse; so are 200 ms stalls in 4 windows of 20.
    let b = synthetic(&mut rng, 20, 3.0, &[]);
    assert_eq!(extreme_verdict(&c, &b, 5), Judgement::Worse);
    let s = synthetic(
        &mut rng,
        20,
        1.0,
        &[
            (2, 2e8 as u64),
            (7, 2e8 as u64),
            (12, 2e8 as u64),
            (17, 2e8 as u64),
        ],
    );
    assert_eq!(extreme_verdict(&c, &s, 5), Judgement::Worse);
}

#[test]
fn resampled_statistics_come_from_the_merged_windows() {
    let w: Vec<Sparse> = vec![vec![(10, 99), (1_000, 1)], vec![(20, 100)]];
    let g = grid(&w);
    let mut counts = Vec::new();
    let (s, over) = g.stats(&[1, 1], &mut counts, Some(500));
    assert_eq!(s[0], 10.0); // min
    assert_eq!(s[1], 20.0); // p50 of 200 samples: rank 100, after the 99 tens
    assert_eq!(s[5], 1_000.0); // max
    assert_eq!(over, 1.0);
    let (s, over) = g.stats(&[0, 2], &mut counts, Some(500));
    assert_eq!((s[0], s[5], over), (20.0, 20.0, 0.0));
}

fn judge_sets(a: &[f64], b: &[f64]) -> Judgement {
    let logs = |v: &[f64]| {
        v.iter()
            .map(|x| log_value(*x, MeasureUnit::Nanos))
            .collect::<Vec<_>>()
    };
    let (lr, ci, sd) = set_interval(&logs(a), &logs(b)).unwrap();
    match judge(lr, ci, Better::Lower, 0.10) {
        Judgement::Inconclusive { .. } => Judgement::Inconclusive {
            longer: None,
            runs: runs_needed(lr, sd, 0.10, a.len().max(b.len())),
            one_run: false,
        },
        v => v,
    }
}

#[test]
fn sets_are_judged_by_the_variation_between_their_runs() {
    // Three runs each, 2 % apart inside a set: equal sets are equivalent, a 3× shift is worse.
    let a = [10_000.0, 10_200.0, 9_900.0];
    assert_eq!(
        judge_sets(&a, &[10_100.0, 9_950.0, 10_150.0]),
        Judgement::Equivalent
    );
    assert_eq!(
        judge_sets(&a, &[30_000.0, 31_000.0, 29_500.0]),
        Judgement::Worse
    );
    assert_eq!(
        judge_sets(&a, &[3_000.0, 3_100.0, 2_950.0]),
        Judgement::Better
    );
    // Runs that differ 2× among themselves: a 1.5× shift is not decided, and more runs are named.
    let v = judge_sets(
        &[20_000.0, 40_000.0, 28_000.0],
        &[45_000.0, 30_000.0, 60_000.0],
    );
    match v {
        Judgement::Inconclusive { runs: Some(n), .. } => assert!(n > 3, "{n}"),
        v => panic!("{v:?}"),
    }
    // One run against a set: the set's own spread stands for both (pooled), df = 2.
    let (_, (lo, hi), _) =
        set_interval(&[10f64.ln()], &[10f64.ln(), 12f64.ln(), 8f64.ln()]).unwrap();
    assert!(lo < 0.0 && hi > 0.0, "{lo} {hi}");
    // Two single runs carry no run-to-run variation: no set interval.
    assert!(set_interval(&[1.0], &[2.0]).is_none());
}

#[test]
fn the_runs_named_would_decide_and_one_fewer_would_not() {
    let margin = 0.10;
    let need = |lr: f64| (lr.abs() - 1.1f64.ln()).abs();
    for (lr, sd) in [(4.8, 1.34), (1.0, 0.3), (0.5, 0.1), (0.0, 0.05)] {
        let n = runs_needed(lr, sd, margin, 1).unwrap();
        let half = |n: usize| t975(2 * n - 2) * sd * (2.0 / n as f64).sqrt();
        assert!(half(n) < need(lr), "{lr} {sd}: {n}");
        assert!(
            n == 2 || half(n - 1) >= need(lr),
            "{lr} {sd}: {n} is not the fewest"
        );
    }
    // The reviewer's case: t(2) = 4.30 makes 2 runs too few at s = 1.34 and a distance of 4.7.
    assert_eq!(runs_needed(4.8, 1.34, margin, 1), Some(3));
}

#[test]
fn t_quantiles_fall_towards_the_normal_one() {
    assert_eq!(t975(1), 12.706);
    assert_eq!(t975(4), 2.776);
    assert_eq!(t975(30), 2.042);
    assert_eq!(t975(200), 1.96);
    assert!(T975.windows(2).all(|w| w[0] > w[1]));
}

#[test]
fn imported_buckets_bound_the_ratio_on_their_own_side() {
    let exact = (0.0, 0.0);
    // Two cyclictest values of 20 µs (lower edges of 1 µs buckets): the truth lies within [20, 21) µs each,
    // a ratio within [0.952, 1.05] — inside a ±10 % margin.
    let cyclic = (0.0, 1000.0);
    let (lo, hi) = within_resolution((0.0, 0.0), 20_000.0, 20_000.0, (cyclic, cyclic));
    assert!((lo.exp() - 20.0 / 21.0).abs() < 1e-9 && (hi.exp() - 21.0 / 20.0).abs() < 1e-9);
    assert_eq!(
        judge(0.0, (lo, hi), Better::Lower, 0.10),
        Judgement::Equivalent
    );
    // A native 17 ns against an oslat label of 1 µs (the truth anywhere in (0, 1] µs): no side is known.
    let oslat = (1000.0, 0.0);
    let (lo, hi) = within_resolution((4.07, 4.07), 17.0, 1000.0, (exact, oslat));
    assert!(lo < -(1.1f64.ln()) && hi > 1.1f64.ln(), "{lo} {hi}");
    // Exact values leave the interval alone.
    assert_eq!(
        within_resolution((0.1, 0.2), 1.0, 2.0, (exact, exact)),
        (0.1, 0.2)
    );
}

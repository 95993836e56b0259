//! One run per platform, without stored repeats (docs/report.md, "One run per platform"): no verdict unless the
//! effect is larger than the variation between runs can be.
//!
//! The window bootstrap of [`compare`](super::compare) sees the variation inside each run. Runs of one
//! platform differ by more than that when conditions change between them — on this project's VM the host
//! stalls vCPUs for milliseconds at random, and an idle run's p50 moved from 13 to 21 µs between two runs —
//! and one run per platform cannot show how much. Where stored repeats give that spread
//! ([`widen_with_repeats`](super::repeats::widen_with_repeats)) the interval carries it; where neither side has
//! any, a measure is decided only when its whole interval lies beyond the measure's *floor*: the largest ratio
//! (either way) between two idle runs of one platform seen in the A/A benches, per measure family
//! ([`family_of`]; each kind keeps its own beside its measures). Anything nearer is
//! "inconclusive: one run per platform", and so is an interval inside the margin: an equivalence needs the
//! run-to-run spread to be known as much as a difference does. A measure without a floor (the bench
//! measured none for it) gets no verdict from one run per platform.

use super::{Comparison, Judgement, NOT_COMPARABLE};
use serde::Serialize;

/// The one-run floor a pair of single runs was held to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Floor {
    /// The measure family whose floor it is (`ops.*.p50`), None without one.
    pub family: Option<&'static str>,
    /// The ratio, either way, that the interval had to lie wholly beyond for a verdict (never below the
    /// margin); None where the A/A bench gave the measure no floor: no verdict from one run per platform.
    pub floor: Option<f64>,
}

/// The overflows row the bench measured: samples above its `-h 2000` histogram.
const OVERFLOWS_MEASURED: &str = "samples ≥ 2000 µs";

/// Whether measure `key` is of the family `pattern`: dot-separated parts alike, where one `*` stands for
/// any number of parts, none included (`ops.*.p50` is the median of every OS primitive,
/// `net.throughput.*.rate` the rate with or without a core count of `--sweep-cpus`).
fn of_family(pattern: &str, key: &str) -> bool {
    let k: Vec<&str> = key.split('.').collect();
    match pattern.split_once('*') {
        None => pattern == key,
        Some((pre, post)) => {
            let pre: Vec<&str> = pre.split('.').filter(|p| !p.is_empty()).collect();
            let post: Vec<&str> = post.split('.').filter(|p| !p.is_empty()).collect();
            k.len() >= pre.len() + post.len() && k.starts_with(&pre) && k.ends_with(&post)
        }
    }
}

/// The family of measure `key` and its floor: the first of every kind's floors
/// ([`one_run_floors`](crate::kind::one_run_floors)) whose pattern it is of; None where the A/A benches
/// measured none for it.
pub fn family_of(key: &str) -> Option<(&'static str, f64)> {
    crate::kind::one_run_floors()
        .into_iter()
        .find(|(p, _)| of_family(p, key))
}

/// The floor of measure `key`, None where the A/A benches measured none.
pub fn floor_of(key: &str) -> Option<f64> {
    family_of(key).map(|(_, f)| f)
}

/// The family and floor a row of a comparison (`key`, `label`) is held to: its key's, but the overflows
/// row has one only where it counts what the bench counted (samples ≥ 2 ms, its `-h 2000`): another bound
/// counts other events.
pub fn row_family(key: &str, label: &str) -> Option<(&'static str, f64)> {
    family_of(key).filter(|_| key != "cyclic.overflows" || label.starts_with(OVERFLOWS_MEASURED))
}

/// Hold the pairs of single runs that nothing told the run-to-run spread of to the floors: `single[col]` is
/// the run id of a column that is one run (None for a set, whose comparisons judge by the spread between its
/// runs), `widened[row][k]` whether pair (0, k + 1) of that row took the spread of stored repeats. A run
/// against itself, a verdict without an interval and an unknown value are left as they are.
pub(super) fn hold_to_floors(
    c: &mut Comparison,
    single: &[Option<i64>],
    widened: &[Vec<bool>],
    margin: f64,
) {
    let Some(Some(base)) = single.first() else {
        return;
    };
    for (r, row) in c.rows.iter_mut().enumerate() {
        let family = row_family(&row.key, &row.label);
        let floor = family.map(|(_, f)| f);
        for (k, versus) in row.versus.iter_mut().enumerate() {
            let col = k + 1;
            let (Some(v), Some(Some(run))) = (versus.as_mut(), single.get(col)) else {
                continue;
            };
            let held = widened.get(r).and_then(|w| w.get(k)).copied() != Some(true);
            let judged = !matches!(
                v.verdict,
                Judgement::NoInterval { .. } | Judgement::Unknown { .. }
            );
            let Some((lo, hi)) = v.ci.filter(|_| held && judged && run != base) else {
                continue;
            };
            if v.method == NOT_COMPARABLE {
                continue;
            }
            let floor = floor.map(|f| f.max(1.0 + margin));
            v.one_run = Some(Floor {
                family: family.map(|(p, _)| p),
                floor,
            });
            if !beyond(floor, (lo, hi), margin) {
                v.verdict = Judgement::Inconclusive {
                    longer: None,
                    runs: None,
                    one_run: true,
                };
            }
        }
    }
}

/// Whether the interval `(lo, hi)` of a ratio lies wholly beyond `floor` (or its inverse), the floor taken no
/// lower than the margin, so that what lies beyond it is a verdict of the interval alone.
fn beyond(floor: Option<f64>, (lo, hi): (f64, f64), margin: f64) -> bool {
    floor.is_some_and(|f| {
        let f = f.max(1.0 + margin);
        lo > f || hi < 1.0 / f
    })
}

/// The floors the held pairs of `c` were held to, in the order of the table, once per family: (the family,
/// or the measure key where it has none; floor).
pub fn floors_used(c: &Comparison) -> Vec<(&str, Option<f64>)> {
    let mut out: Vec<(&str, Option<f64>)> = Vec::new();
    for r in &c.rows {
        let Some(f) = r.versus.iter().flatten().find_map(|v| v.one_run) else {
            continue;
        };
        let name = f.family.unwrap_or(r.key.as_str());
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, f.floor));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Row, Versus};
    use rtgauge_model::measure::{Better, MeasureUnit};

    /// A row of `key` with one run after the baseline: ratio `r`, interval `ci`, the within-run verdict `v`.
    fn row(key: &str, unit: MeasureUnit, r: f64, ci: Option<(f64, f64)>, v: Judgement) -> Row {
        Row {
            key: key.into(),
            label: key.into(),
            unit,
            better: Better::Lower,
            values: vec![Some(1.0), Some(r)],
            unknown_above: vec![None, None],
            unresolved_within: vec![None, None],
            versus: vec![Some(Versus {
                ratio: r,
                ci,
                verdict: v,
                method: "block bootstrap over time windows (percentile interval)",
                one_run: None,
            })],
        }
    }

    fn comparison(rows: Vec<Row>) -> Comparison {
        Comparison {
            margin: 0.10,
            rows,
            differences: Vec::new(),
            durations_ns: vec![20_000_000_000; 2],
            sets: Vec::new(),
            repeats: Vec::new(),
        }
    }

    fn verdict(c: &Comparison, key: &str) -> Judgement {
        let r = c.rows.iter().find(|r| r.key == key).unwrap();
        r.versus[0].as_ref().unwrap().verdict.clone()
    }

    const HELD: Judgement = Judgement::Inconclusive {
        longer: None,
        runs: None,
        one_run: true,
    };

    fn rows() -> Vec<Row> {
        let ns = MeasureUnit::Nanos;
        vec![
            // The idle pair: p50 13 → 21 µs, a narrow within-run interval that said "worse".
            row("cyclic.p50", ns, 1.62, Some((1.58, 1.66)), Judgement::Worse),
            // Five 200 ms stalls against an idle max of 1 ms.
            row(
                "cyclic.max",
                ns,
                200.0,
                Some((190.0, 210.0)),
                Judgement::Worse,
            ),
            // Far below the baseline: better, beyond the floor the other way.
            row(
                "cyclic.p99.99",
                ns,
                0.001,
                Some((0.0009, 0.0011)),
                Judgement::Better,
            ),
            // Within the margin: an equivalence needs the run-to-run spread as much as a difference does.
            row(
                "cyclic.p99",
                ns,
                1.0,
                Some((0.98, 1.03)),
                Judgement::Equivalent,
            ),
            // No floor measured (no A/A bench for the kind yet): no verdict, however large.
            row(
                "hwnoise.max",
                ns,
                1000.0,
                Some((900.0, 1100.0)),
                Judgement::Worse,
            ),
            row(
                "cyclic.p99.9",
                ns,
                1.0,
                None,
                Judgement::NoInterval { why: "none".into() },
            ),
        ]
    }

    #[test]
    fn one_run_per_platform_decides_only_beyond_the_floor() {
        let mut c = comparison(rows());
        hold_to_floors(&mut c, &[Some(1), Some(2)], &[], 0.10);
        assert_eq!(verdict(&c, "cyclic.p50"), HELD);
        assert_eq!(verdict(&c, "cyclic.max"), Judgement::Worse);
        assert_eq!(verdict(&c, "cyclic.p99.99"), Judgement::Better);
        assert_eq!(verdict(&c, "cyclic.p99"), HELD);
        assert_eq!(verdict(&c, "hwnoise.max"), HELD);
        // A verdict without an interval is not one the floor could change.
        assert!(matches!(
            verdict(&c, "cyclic.p99.9"),
            Judgement::NoInterval { .. }
        ));
        // Each held pair says which floor it was held to; the note lists them in table order.
        let used = floors_used(&c);
        assert_eq!(
            used,
            vec![
                ("cyclic.p50", floor_of("cyclic.p50")),
                ("cyclic.max", floor_of("cyclic.max")),
                ("cyclic.p99.99", floor_of("cyclic.p99.99")),
                ("cyclic.p99", floor_of("cyclic.p99")),
                ("hwnoise.max", None),
            ]
        );
        let note = super::super::single_run_note(&[1, 2], &c).unwrap();
        assert!(
            note.contains("one run per platform")
                && note.contains("run --repeat 3")
                && note.contains("none for hwnoise.* (no verdict)"),
            "{note}"
        );
    }

    #[test]
    fn pairs_judged_by_repeats_sets_and_a_run_against_itself_are_left_alone() {
        let before = comparison(rows());
        // The pair took the spread of stored repeats.
        let mut c = before.clone();
        let widened: Vec<Vec<bool>> = c.rows.iter().map(|_| vec![true]).collect();
        hold_to_floors(&mut c, &[Some(1), Some(2)], &widened, 0.10);
        assert_eq!(c, before);
        // The other column is a set, or the baseline is.
        for single in [[Some(1), None], [None, Some(2)]] {
            let mut c = before.clone();
            hold_to_floors(&mut c, &single, &[], 0.10);
            assert_eq!(c, before);
        }
        // A run against itself reads exactly 1, equivalent.
        let mut c = before.clone();
        hold_to_floors(&mut c, &[Some(3), Some(3)], &[], 0.10);
        assert_eq!(c, before);
        assert!(single_run_note_is_silent(&c));
    }

    fn single_run_note_is_silent(c: &Comparison) -> bool {
        crate::compare::single_run_note(&[3, 3], c).is_none()
    }

    #[test]
    fn the_floor_is_never_below_the_margin() {
        // A floor of 1.05 under a 10 % margin: an interval [1.08, 1.09] is not beyond the margin, so it does
        // not decide; [1.2, 1.3] is beyond both.
        assert!(!beyond(Some(1.05), (1.08, 1.09), 0.10));
        assert!(beyond(Some(1.05), (1.2, 1.3), 0.10));
        assert!(beyond(Some(2.0), (0.3, 0.45), 0.10));
        assert!(!beyond(Some(2.0), (0.3, 0.55), 0.10));
        assert!(!beyond(None, (100.0, 200.0), 0.10));
    }

    /// A floor is a ratio (1 where idle runs never moved: the margin then decides), and every pattern is
    /// reached: none is shadowed by one before it.
    #[test]
    fn every_floor_is_a_ratio_and_every_family_its_own() {
        let all = crate::kind::one_run_floors();
        for (i, (p, f)) in all.iter().enumerate() {
            assert!(*f >= 1.0 && f.is_finite(), "{p}: {f}");
            let shadow = all[..i]
                .iter()
                .find(|(q, _)| of_family(q, &p.replace('*', "x")));
            assert!(shadow.is_none(), "{p} is shadowed by {shadow:?}");
        }
    }

    /// A pattern has at most one `*`, standing alone as a part; its instances with none, one and two parts
    /// there are of it.
    #[test]
    fn every_pattern_has_at_most_one_star_as_a_whole_part() {
        for (p, _) in crate::kind::one_run_floors() {
            assert!(p.matches('*').count() <= 1, "{p}");
            assert!(
                p.split('.').all(|part| part == "*" || !part.contains('*')),
                "{p}"
            );
            if p.contains('*') {
                let none = p.replace(".*", "").replace("*.", "");
                for key in [none, p.replace('*', "x"), p.replace('*', "x.y")] {
                    assert!(of_family(p, &key), "{p} vs {key}");
                }
            }
        }
    }

    #[test]
    fn a_family_pattern_stands_for_any_parts_none_included() {
        assert!(of_family("ops.*.p50", "ops.null_syscall.p50"));
        assert!(!of_family("ops.*.p50", "ops.null_syscall.p99"));
        assert!(of_family("mem.numa.*.bw", "mem.numa.0.1.bw"));
        assert!(of_family("net.throughput.*.rate", "net.throughput.rate"));
        assert!(of_family(
            "net.throughput.*.rate",
            "net.throughput.cpus4.rate"
        ));
        assert!(!of_family(
            "net.throughput.*.rate",
            "net.throughput.bitrate"
        ));
        assert!(!of_family("net.cps.*.latency.p99", "net.cps.latency.p99.9"));
        assert!(of_family("cyclic.p99.9", "cyclic.p99.9"));
        assert!(!of_family("cyclic.p99", "cyclic.p99.9"));
        assert_eq!(
            family_of("ops.pipe_rtt.p50").map(|f| f.0),
            Some("ops.*.p50")
        );
        assert_eq!(family_of("hwnoise.max"), None);
    }

    #[test]
    fn a_floor_from_an_aa_bench_keeps_false_verdicts_rare_and_finds_gross_effects() {
        // Synthetic platform: each run's log value is the platform's plus a run-level shift (a change of
        // conditions, sd 0.3, as min and p99 of idle runs moved on this VM) plus a small within-run error, which
        // is all a within-run interval sees. The floor is the largest ratio among the pairs of 14 "bench" runs
        // (with 8, the range of 8 normal shifts, a new pair lies beyond it 7 % of the time); then 30 pairs of
        // new runs drawn alike are judged against it, for many benches.
        let mut rng = fastrand::Rng::with_seed(29);
        let mut normal = || {
            let (u, v) = (1.0 - rng.f64(), rng.f64());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let (benches, pairs) = (200, 30);
        let (mut decided, mut within_decided, mut gross, mut modest) = (0, 0, 0, 0);
        for _ in 0..benches {
            let bench: Vec<f64> = (0..14).map(|_| 0.3 * normal() + 0.02 * normal()).collect();
            let largest = bench
                .iter()
                .flat_map(|a| bench.iter().map(move |b| (a - b).abs()))
                .fold(0.0, f64::max);
            let floor = Some(largest.exp());
            let w = 1.96 * 0.02 * 2f64.sqrt();
            for _ in 0..pairs {
                let lr = 0.3 * normal() + 0.02 * normal() - (0.3 * normal() + 0.02 * normal());
                let ci = ((lr - w).exp(), (lr + w).exp());
                decided += usize::from(beyond(floor, ci, 0.10));
                within_decided += usize::from(ci.0 > 1.1 || ci.1 < 1.0 / 1.1);
                // A 200× effect (a 200 ms stall against a 1 ms max) and a 1.6× one, on top of the shifts.
                let g = lr + 200f64.ln();
                gross += usize::from(beyond(floor, ((g - w).exp(), (g + w).exp()), 0.10));
                let m = lr + 1.6f64.ln();
                modest += usize::from(beyond(floor, ((m - w).exp(), (m + w).exp()), 0.10));
            }
        }
        let n = (benches * pairs) as f64;
        // Seed 29 gives: 120 of 6000 (2.0 %) decided against the floor, 4332 (72 %) with the within-run
        // interval alone; the 200× effect decided every time, the 1.6× one in 578 (9.6 %): against runs that
        // differ by that much on their own, a 1.6× difference is rarely told apart from one run each.
        assert!(decided as f64 / n <= 0.05, "{decided} of {n}");
        assert!(within_decided as f64 / n > 0.5, "{within_decided} of {n}");
        assert_eq!(gross as f64, n, "{gross} of {n}");
        assert!(modest as f64 / n < 0.2, "{modest} of {n}");
    }
}

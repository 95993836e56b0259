//! The note under a comparison of single runs: how their verdicts took the variation between runs into
//! account (stored repeats, or the one-run floors and what would decide).

use super::{one_run, Comparison, MIN_REPEATS};

/// Under a comparison of single runs: how their verdicts took the variation between runs into account. The
/// window bootstrap sees the variation inside each run, not a change of conditions between runs: on this
/// project's shared VM, idle runs back to back differed 1.6× in p50 and more in the tail (bench/compare_aa).
/// Where the store held repeats of the runs ([`judge_single_runs`](super::judge_single_runs)) their spread covers that, and the note
/// names them; where a pair had none, its verdicts were held to the one-run floors ([`one_run`]), and the
/// note gives the floors and what would decide. `ids` are the columns' run ids. None when neither applied
/// (sets only, or a run against itself).
pub fn single_run_note(ids: &[i64], comparison: &Comparison) -> Option<String> {
    let mut parts = Vec::new();
    let floors = one_run::floors_used(comparison);
    if !floors.is_empty() {
        let mut listed: Vec<String> = floors
            .iter()
            .filter_map(|(k, f)| f.map(|f| format!("{k} {}×", fmt_floor(f))))
            .collect();
        // Measures without a floor: by their probe ("ops.*") where none of its measures has one.
        let probe = |k: &str| k.split('.').next().unwrap_or_default().to_string();
        let floored: Vec<String> = floors
            .iter()
            .filter(|(_, f)| f.is_some())
            .map(|(k, _)| probe(k))
            .collect();
        let mut unfloored: Vec<String> = Vec::new();
        for (k, _) in floors.iter().filter(|(_, f)| f.is_none()) {
            let name = match floored.contains(&probe(k)) {
                true => k.to_string(),
                false => format!("{}.*", probe(k)),
            };
            if !unfloored.contains(&name) {
                unfloored.push(name);
            }
        }
        if !unfloored.is_empty() {
            listed.push(format!("none for {} (no verdict)", unfloored.join(", ")));
        }
        parts.push(format!(
            "one run per platform, judged without stored repeats (fewer than {MIN_REPEATS} runs with the same \
             label, profile, host and conditions, or --no-repeats): intervals cover the variation inside each run, not how much runs of \
             one platform differ, so a measure decides only where its whole interval lies beyond the largest \
             ratio between two idle runs of one platform in the A/A benches (bench/compare_aa, bench/compare_aa_probes, docs/report.md): {}; \
             to judge by the variation between runs, measure each platform several times (rtgauge run --repeat 3 \
             --label NAME) or compare sets (rtgauge compare 1,2,3 4,5,6)",
            listed.join(", ")
        ));
    }
    if !comparison.repeats.iter().all(Vec::is_empty) {
        // Columns with the same repeats are named together ("runs 1, 2: repeats 3, 4, 5").
        let mut groups: Vec<(Vec<i64>, &Vec<i64>)> = Vec::new();
        for (id, rep) in ids.iter().zip(&comparison.repeats) {
            if rep.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(_, r)| *r == rep) {
                Some((cols, _)) => cols.push(*id),
                None => groups.push((vec![*id], rep)),
            }
        }
        let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let named: Vec<String> = groups
            .iter()
            .map(|(cols, rep)| {
                let runs = if cols.len() == 1 { "run" } else { "runs" };
                format!("{runs} {}: repeats {}", list(cols), list(rep))
            })
            .collect();
        parts.push(format!(
            "single runs: intervals cover the variation inside each run and the run-to-run spread of the stored \
             runs that repeat it (same label, profile, host and conditions; a run with fewer than {MIN_REPEATS} \
             borrows the other's) — {}",
            named.join("; ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A floor as the note prints it: two significant digits (1.7, 25).
fn fmt_floor(f: f64) -> String {
    if f < 10.0 {
        format!("{f:.1}")
    } else {
        format!("{f:.0}")
    }
}

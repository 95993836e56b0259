//! `rtgauge compare` with sets of runs: repetitions of one platform judged by the variation between runs.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;
use common::*;

const PROFILE: &str = r#"name = "sets"
duration = "1s"
[[probe]]
kind = "cyclic"
flags = "-m -p10 -i 1000 -h 2000 -a 1 -t 1 --mainaffinity=0 -q"
"#;

/// Four short runs labelled a, a, b, b; returns the database path.
fn four_runs(dir: &std::path::Path) -> String {
    let db = dir.join("sets.db").to_str().unwrap().to_string();
    let profile = dir.join("sets.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    for label in ["a", "a", "b", "b"] {
        run_labelled(&profile, label, &db);
    }
    db
}

fn max_of(db: &str, run: &str) -> f64 {
    export_json(db, run)["probes"][0]["threads"][0]["latency"]["max_ns"]
        .as_f64()
        .unwrap()
}

#[test]
fn sets_of_runs_are_compared_by_their_geometric_means_over_runs() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = four_runs(dir.path());
    let c = compare_in(&db, &["1,2", "3,4"]);
    assert_eq!(c["sets"], serde_json::json!([[1, 2], [3, 4]]), "{c}");
    let max = row(&c, "cyclic.max");
    // The column value is the geometric mean of the runs' maxima.
    let gm = |a: &str, b: &str| (max_of(&db, a) * max_of(&db, b)).sqrt();
    let (va, vb) = (
        max["values"][0].as_f64().unwrap(),
        max["values"][1].as_f64().unwrap(),
    );
    assert!(
        (va - gm("1", "2")).abs() <= 1e-6 * va,
        "{va} vs {}",
        gm("1", "2")
    );
    assert!(
        (vb - gm("3", "4")).abs() <= 1e-6 * vb,
        "{vb} vs {}",
        gm("3", "4")
    );
    let v = &max["versus"][0];
    assert!(
        v["method"].as_str().unwrap().starts_with("repetitions"),
        "{v}"
    );
    let ratio = v["ratio"].as_f64().unwrap();
    assert!(
        (ratio - vb / va).abs() <= 1e-9 * ratio,
        "{ratio} vs {}",
        vb / va
    );
    let (lo, hi) = (v["ci"][0].as_f64().unwrap(), v["ci"][1].as_f64().unwrap());
    assert!(lo <= ratio && ratio <= hi, "{lo} {ratio} {hi}");
    // Selecting by label with --every gives the same sets, and the same verdicts.
    let out = rtgauge_std()
        .args([
            "compare", "--label", "a", "--label", "b", "--every", "--format", "json", "--db", &db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let by_label: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(by_label["sets"], c["sets"]);
    assert_eq!(by_label["rows"], c["rows"]);
    // The terminal names the sets.
    let text = compare_text(&db, &["1,2", "3,4"]);
    assert!(text.contains("baseline: run 1,2 (a)"), "{text}");
    assert!(text.contains("3,4 (b)"), "{text}");
    assert!(!text.contains("one run per platform"), "{text}");
    // Single runs say what their intervals leave out, and point to sets.
    let text = compare_text(&db, &["1", "3"]);
    assert!(
        text.contains("note: one run per platform") && text.contains("compare 1,2,3 4,5,6"),
        "{text}"
    );
    // Single runs keep the within-run comparison (no sets in the JSON).
    let single = compare_in(&db, &["1", "3"]);
    assert!(single.get("sets").is_none(), "{single}");
    assert!(!row(&single, "cyclic.max")["versus"][0]["method"]
        .as_str()
        .unwrap()
        .starts_with("repetitions"));
    // Bad set syntax and unknown labels are usage errors naming the input.
    for (args, what) in [
        (&["1,", "3"][..], "run set '1,'"),
        (&["1,1", "3,4"][..], "run 1 appears twice"),
        (&["1,2", "2,3"][..], "run 2 is in two columns"),
        (
            &["--label", "nope", "--label", "a", "--every"][..],
            "--label nope",
        ),
    ] {
        let out = rtgauge_std()
            .arg("compare")
            .args(args)
            .args(["--db", &db])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what), "{args:?}: {err}");
    }
}

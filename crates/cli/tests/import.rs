//! `rtgauge import` of rt-tests results that hide data, on real outputs (tests/fixtures/rt-tests, taken with
//! rt-tests 2.4 on the development VM) and on outputs made here and now with the real tools:
//! - a histogram whose limit is below every sample (`cyclictest -N -H 50`) or below part of them (`-h 20`):
//!   the percentiles there are unknown, shown as "> limit", warned about on import, and given no verdict in
//!   `compare` (the issue: p50 = p99.99 = 50 ns, and "better" than a real run);
//! - `rtgauge cyclic -N -H 50` warns the same way about its rt-tests histogram;
//! - oslat's text output of a 2-core run stores the same result as its JSON, and exports as rt-tests JSON.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, busy_cpu, export_json, row, rtgauge};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/rt-tests")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

fn db(dir: &Path) -> String {
    dir.join("runs.db").to_str().unwrap().to_string()
}

/// `rtgauge import ARGS… --db DB`: (stdout, stderr).
fn import(db: &str, args: &[&str]) -> (String, String) {
    let out = rtgauge()
        .arg("import")
        .args(args)
        .args(["--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn compare(db: &str, runs: &[&str], json: bool) -> String {
    let out = rtgauge()
        .arg("compare")
        .args(runs)
        .args(if json {
            &["--format", "json"][..]
        } else {
            &[][..]
        })
        .args(["--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// Run 1 is a normal run; run `fully` lost every sample beyond a 50 ns limit: every percentile is unknown,
/// no verdict is given on it, and the min and max (exact) are still compared.
fn assert_all_percentiles_unknown(db: &str, fully: &str, limit: &str) {
    let c: Value = serde_json::from_str(&compare(db, &["1", fully], true)).unwrap();
    for key in ["cyclic.p50", "cyclic.p99", "cyclic.p99.9", "cyclic.p99.99"] {
        let r = row(&c, key);
        let v = &r["versus"][0];
        assert_eq!(v["verdict"]["verdict"], "unknown", "{r}");
        assert_eq!(
            v["verdict"]["why"],
            format!("histogram limit {limit} below the samples"),
            "{r}"
        );
        assert!(v["ratio"].is_null(), "{r}");
        assert_eq!(r["unknown_above"][1].as_f64(), Some(50.0), "{r}");
    }
    // Its overflow count is above 50 ns, the normal run's above its own range: not compared.
    let o = row(&c, "cyclic.overflows");
    let why = o["versus"][0]["verdict"]["why"].as_str().unwrap();
    assert!(why.starts_with("different histogram ranges"), "{o}");
    assert!(why.contains("samples ≥ 50 ns (overflows)"), "{o}");
    let text = compare(db, &["1", fully], false);
    assert!(text.contains("> 50.0 ns"), "{text}");
    assert!(
        text.contains("unknown: histogram limit 50 ns below the samples"),
        "{text}"
    );
    assert!(
        !text.contains("better") && !text.contains("worse"),
        "{text}"
    );
}

#[test]
fn a_histogram_below_every_sample_gives_unknown_percentiles_not_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    import(&db, &[&fixture("cyclictest-h400.json")]);
    let (_, err) = import(&db, &[&fixture("cyclictest-N-H50.json")]);
    assert!(
        err.contains("histogram limit 50 ns is below the recorded min 10.949 µs"),
        "{err}"
    );
    let (_, err) = import(&db, &["--nsecs", &fixture("cyclictest-N-H50.txt")]);
    assert!(
        err.contains("every percentile is unknown (> 50 ns)"),
        "{err}"
    );
    assert_all_percentiles_unknown(&db, "2", "50 ns");
    assert_all_percentiles_unknown(&db, "3", "50 ns");
    // The per-thread table says so too.
    let out = rtgauge()
        .args(["runs", "show", "2", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&out);
    let show = String::from_utf8(out.stdout).unwrap();
    assert!(show.contains(">0.050"), "{show}");
    // The comparison page: imported runs have no timeline, so no empty "largest per interval" chart; the
    // verdicts without an interval say "n/a [k]", their reason given once under the table.
    let page = dir.path().join("cmp.html");
    let out = rtgauge()
        .args([
            "compare",
            "1",
            "2",
            "--html",
            page.to_str().unwrap(),
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("largest per interval"), "an empty chart");
    assert_eq!(
        html.matches("<figure").count(),
        2,
        "histograms and percentiles"
    );
    assert!(html.contains("n/a [1]"));
    assert_eq!(html.matches("per-window maxima").count(), 1, "one footnote");
    let out = rtgauge()
        .args(["report", "2", "--html", page.to_str().unwrap(), "--db", &db])
        .output()
        .unwrap();
    assert_ok(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("per interval"), "an empty chart");
    assert!(html.contains("&gt; 0.050"), "p99 shown as > limit");
    // CSV leaves the unknown percentiles empty; min and max are exact.
    let out = rtgauge()
        .args(["export", "2", "--format", "csv", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&out);
    let csv = String::from_utf8(out.stdout).unwrap();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[4], "10949", "{csv}");
    assert!(row[6..12].iter().all(|v| v.is_empty()), "{csv}");
    assert_eq!(row[12], "123025", "{csv}");
    // Exported as rt-tests JSON, the histogram is still empty and every sample an overflow.
    let out = rtgauge()
        .args(["export", "2", "--format", "rt-tests", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&out);
    let back: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(back["thread"]["0"]["overflows"], 2000);
}

#[test]
fn a_partly_overflowing_histogram_keeps_the_percentiles_below_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    import(&db, &[&fixture("cyclictest-h400.json")]);
    let (_, err) = import(&db, &[&fixture("cyclictest-h20.json")]);
    // 992 of 2,000 samples beyond 20 µs: p50 is known, p99 and above are not.
    assert!(
        err.contains("992 of 2000 samples (49.60 %) overflow the histogram limit 20.000 µs"),
        "{err}"
    );
    let (_, err) = import(&db, &[&fixture("cyclictest-h20.txt")]);
    assert!(
        err.contains("overflow the histogram limit 20.000 µs"),
        "{err}"
    );
    for run in ["2", "3"] {
        let c: Value = serde_json::from_str(&compare(&db, &["1", run], true)).unwrap();
        let p50 = row(&c, "cyclic.p50");
        assert!(p50["unknown_above"].is_null(), "{p50}");
        assert_ne!(p50["versus"][0]["verdict"]["verdict"], "unknown", "{p50}");
        assert!(p50["values"][1].as_f64().unwrap() < 20_000.0, "{p50}");
        for key in ["cyclic.p99", "cyclic.p99.9", "cyclic.p99.99"] {
            let r = row(&c, key);
            assert_eq!(r["versus"][0]["verdict"]["verdict"], "unknown", "{r}");
            assert_eq!(r["unknown_above"][1].as_f64(), Some(20_000.0), "{r}");
        }
    }
}

/// `cyclictest -N -H 50` and `rtgauge cyclic -N -H 50`, here and now: both outputs import with unknown
/// percentiles; rtgauge warns about its own rt-tests histogram when it runs.
#[test]
fn real_cyclictest_and_rtgauge_with_a_50_ns_histogram_import_as_unknown() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let (ct, rg, normal): (PathBuf, PathBuf, PathBuf) = (
        dir.path().join("ct.json"),
        dir.path().join("rg.json"),
        dir.path().join("normal.json"),
    );
    let flags = ["-m", "-p10", "-a", "1", "-i", "1000", "-D", "1", "-q"];
    // The normal run's histogram reaches 200 ms: this VM has ms spikes, which a 2 ms range would lose.
    let out = common::program("cyclictest")
        .args(flags)
        .args(["-h", "200000"])
        .arg(format!("--json={}", normal.display()))
        .output()
        .expect("cyclictest (apt-get install rt-tests)");
    assert_ok(&out);
    let out = common::program("cyclictest")
        .args(flags)
        .args(["-N", "-H", "50"])
        .arg(format!("--json={}", ct.display()))
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .arg("cyclic")
        .args(flags)
        .args(["-N", "-H", "50"])
        .arg(format!("--json={}", rg.display()))
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(
            "rt-tests histogram output: thread 0: histogram limit 50 ns is below the recorded min"
        ),
        "{err}"
    );
    import(&db, &[normal.to_str().unwrap()]);
    for (run, f) in [("2", &ct), ("3", &rg)] {
        let (_, err) = import(&db, &[f.to_str().unwrap()]);
        assert!(
            err.contains("every percentile is unknown (> 50 ns)"),
            "{err}"
        );
        assert_all_percentiles_unknown(&db, run, "50 ns");
    }
}

#[test]
fn oslat_text_and_json_of_one_run_store_the_same_result_and_export_as_rt_tests() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let (out, _) = import(
        &db,
        &[&fixture("oslat-2core.txt"), &fixture("oslat-2core.json")],
    );
    assert!(out.contains("as run 2"), "{out}");
    let (mut text, mut json) = (export_json(&db, "1"), export_json(&db, "2"));
    assert_eq!(text["imported_from"]["format"], "oslat-text");
    assert_eq!(text["imported_from"]["resolution_ns"], 1000);
    assert_eq!(json["imported_from"]["resolution_ns"], 1000);
    assert_eq!(text["tool"]["version"], "2.40");
    // The text prints the average with 3 decimals: the one difference allowed.
    for d in [&mut text, &mut json] {
        for t in d["probes"][0]["threads"].as_array_mut().unwrap() {
            let m = t["gaps"]["mean_ns"].as_f64().unwrap();
            t["gaps"]["mean_ns"] = Value::from((m / 10.0).round() * 10.0);
        }
    }
    assert_eq!(text["probes"], json["probes"]);
    let t = &text["probes"][0]["threads"];
    assert_eq!(t.as_array().unwrap().len(), 2);
    assert_eq!(
        (t[0]["cpu"].as_u64(), t[1]["cpu"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(t[0]["gaps"]["max_ns"], 5_058_000);
    assert_eq!(
        text["probes"][0]["counter"]["frequency_hz"],
        2_597_000_000u64
    );
    // Exported as rt-tests JSON, the text import gives back oslat's own JSON histogram and figures.
    let out = rtgauge()
        .args(["export", "1", "--format", "rt-tests", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&out);
    let back: Value = serde_json::from_slice(&out.stdout).unwrap();
    let orig: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("oslat-2core.json")).unwrap())
            .unwrap();
    for i in ["0", "1"] {
        for key in ["histogram", "cpu", "min", "max", "freq"] {
            assert_eq!(
                back["thread"][i][key], orig["thread"][i][key],
                "thread {i} {key}"
            );
        }
    }
}

/// `rtgauge import FILES… --db DB`, expected to be refused: the one line it printed on stderr.
fn refused(db: &Path, files: &[&Path]) -> String {
    let out = rtgauge()
        .arg("import")
        .args(files)
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{files:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains('\u{1b}'), "{err}");
    assert!(
        !db.exists(),
        "{files:?}: nothing is stored, no store created"
    );
    err
}

#[test]
fn impossible_figures_are_refused_naming_the_file_and_thread_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let real = PathBuf::from(fixture("oslat-2core.json"));
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ct = |t: &str| {
        format!(
            r#"{{"cmdline:": "cyclictest -i 200", "thread": {{"0": {{"cycles": 10, "min": 5, "max": 10, "avg": 7.5}}, "1": {t}}}}}"#
        )
    };
    let oslat: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("oslat-2core.json")).unwrap())
            .unwrap();
    let mut slow_avg = oslat.clone();
    slow_avg["thread"]["1"]["avg"] = serde_json::json!(99999.0);
    let cases = [
        (
            write(
                "avg.json",
                ct(r#"{"cycles": 10, "min": 5, "max": 10, "avg": 50.0}"#),
            ),
            "thread.1: avg 50 > max 10",
        ),
        (
            write(
                "low.json",
                ct(r#"{"cycles": 10, "min": 5, "max": 10, "avg": 1.0}"#),
            ),
            "thread.1: avg 1 < min 5",
        ),
        (
            write(
                "minmax.json",
                ct(r#"{"cycles": 10, "min": 50, "max": 10, "avg": 20}"#),
            ),
            "thread.1: min 50 > max 10",
        ),
        (
            write(
                "neg.json",
                ct(r#"{"cycles": 10, "min": 5, "max": 10, "avg": -2}"#),
            ),
            "thread.1.avg: -2 is not a non-negative number",
        ),
        (
            write(
                "negmin.json",
                ct(r#"{"cycles": 10, "min": -5, "max": 10, "avg": 7}"#),
            ),
            "thread.1.min",
        ),
        (
            write(
                "none.json",
                ct(r#"{"cycles": 0, "min": 3, "max": 9, "avg": 4.0}"#),
            ),
            "thread.1: 0 cycles but min 3, avg 4, max 9",
        ),
        (
            write(
                "t.txt",
                "T: 0 ( 99) P:80 I:1000 C:   1000 Min:   25 Act:   30 Avg:   310 Max:   150\n"
                    .into(),
            ),
            "thread.0: avg 310 > max 150",
        ),
        (
            write("oslat.json", slow_avg.to_string()),
            "thread.1 (CPU 1): avg 99999 > max 4140",
        ),
    ];
    for (file, what) in &cases {
        // With a good file first: every file is checked before anything is stored.
        let err = refused(&db, &[&real, file]);
        assert!(
            err.starts_with(&format!("rtgauge: error: import {}: ", file.display())),
            "{err}"
        );
        assert!(err.contains(what), "{what}: {err}");
    }
    // A thread that never completed a cycle, with all-zero figures or rt-tests' initial min, still imports.
    let idle = write(
        "idle.json",
        ct(r#"{"cycles": 0, "min": 1000000, "max": 0, "avg": 0}"#),
    );
    import(db.to_str().unwrap(), &[idle.to_str().unwrap()]);
    let d = export_json(db.to_str().unwrap(), "1");
    assert_eq!(d["probes"][0]["threads"][1]["latency"]["min_ns"], 0);
}

#[test]
fn a_run_document_with_a_bad_uuid_an_unknown_gate_or_control_characters_in_its_names_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.db");
    import(first.to_str().unwrap(), &[&fixture("cyclictest-h20.json")]);
    let doc = export_json(first.to_str().unwrap(), "1");
    assert!(doc["uuid"].as_str().is_some_and(|u| u.len() == 36));
    let db = dir.path().join("second.db");
    let long = "a".repeat(300);
    let group = doc["uuid"].clone();
    let cases: [(&str, Value, &str); 15] = [
        (
            "verdicts",
            serde_json::json!([{"gate": {"metric": "cyclic_samples_at_or_above", "max": 0}, "observed": 0, "outcome": "pass"}]),
            "verdicts: metric 'cyclic_samples_at_or_above' needs threshold_ns",
        ),
        (
            "verdicts",
            serde_json::json!([{"gate": {"metric": "cyclic_max_ns", "threshold_ns": 5, "max": 1}, "observed": 1, "outcome": "pass"}]),
            "verdicts: metric 'cyclic_max_ns' takes no threshold_ns",
        ),
        (
            "verdicts",
            serde_json::json!([{"gate": {"metric": "cyclic_p99_ns", "max": 1}, "observed": 1, "outcome": "pass"}]),
            "verdicts: unknown metric 'cyclic_p99_ns'",
        ),
        (
            "verdicts",
            serde_json::json!([{"gate": {"metric": "fio_max_ns", "max": 1}, "observed": 1, "outcome": "pass"}]),
            "unknown metric 'fio_max_ns'",
        ),
        (
            "repeat",
            serde_json::json!({"group": "g1", "index": 1, "count": 3}),
            "repeat: group 'g1' is not a UUID in canonical form",
        ),
        (
            "repeat",
            serde_json::json!({"group": group, "index": 4, "count": 3}),
            "repeat: run 4 of 3 is not a place in a group of repeats",
        ),
        (
            "repeat",
            serde_json::json!({"group": group, "index": 1, "count": 1}),
            "repeat: run 1 of 1 is not",
        ),
        (
            "uuid",
            "not-a-uuid".into(),
            "uuid: 'not-a-uuid' is not a UUID",
        ),
        ("uuid", "".into(), "uuid: '' is not a UUID"),
        (
            "uuid",
            long.as_str().into(),
            "uuid: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…' is not",
        ),
        (
            "uuid",
            doc["uuid"].as_str().unwrap().to_uppercase().into(),
            "is not a UUID in canonical form",
        ),
        (
            "label",
            "a\u{1b}[31mb".into(),
            "label: holds the control character U+001B",
        ),
        (
            "label",
            "two\nlines".into(),
            "label: holds the control character U+000A",
        ),
        (
            "tags",
            serde_json::json!({"site": "x\u{7}"}),
            "tags.site: holds the control character U+0007",
        ),
        (
            "system",
            {
                let mut s = doc["system"].clone();
                s["nodename"] = "host\u{9b}2J".into();
                s
            },
            "system.nodename: holds the control character U+009B",
        ),
    ];
    for (i, (key, value, what)) in cases.iter().enumerate() {
        let mut d = doc.clone();
        d[*key] = value.clone();
        let file = dir.path().join(format!("doc{i}.json"));
        std::fs::write(&file, d.to_string()).unwrap();
        let err = refused(&db, &[&file]);
        assert!(
            err.starts_with(&format!("rtgauge: error: import {}: ", file.display())),
            "{err}"
        );
        assert!(err.contains(what), "{what}: {err}");
    }
    // The document as exported imports, its uuid kept; so does a place in a group of repeats.
    let file = dir.path().join("doc.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    import(db.to_str().unwrap(), &[file.to_str().unwrap()]);
    assert_eq!(export_json(db.to_str().unwrap(), "1")["uuid"], doc["uuid"]);
    let mut d = doc.clone();
    d.as_object_mut().unwrap().remove("uuid");
    d["repeat"] = serde_json::json!({"group": group, "index": 2, "count": 3});
    std::fs::write(&file, d.to_string()).unwrap();
    import(db.to_str().unwrap(), &[file.to_str().unwrap()]);
    assert_eq!(
        export_json(db.to_str().unwrap(), "2")["repeat"],
        d["repeat"]
    );
}

/// What an import does not know is never shown or compared as a figure: cyclictest's missed deadlines
/// (report "-", CSV empty, no compare row), and oslat values finer than its 1 µs buckets (a native 17 ns
/// p50 against an imported "1 µs" bucket is unknown, not 59× worse).
#[test]
fn what_an_import_does_not_know_is_not_compared() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    import(
        &db,
        &[
            &fixture("cyclictest-h400.json"),
            &fixture("oslat-2core.json"),
        ],
    );
    let native = dir.path().join("native.json");
    let out = rtgauge()
        .args(["oslat", "-c", "1", "-D", "1", "-q", "--output"])
        .arg(&native)
        .output()
        .unwrap();
    assert_ok(&out);
    import(&db, &[native.to_str().unwrap()]);
    let text = String::from_utf8_lossy(
        &rtgauge()
            .args(["report", "1", "--db", &db])
            .output()
            .unwrap()
            .stdout,
    )
    .to_string();
    let row_line = text
        .lines()
        .skip_while(|l| !l.contains("missed"))
        .nth(1)
        .unwrap();
    assert!(row_line.trim_end().ends_with('-'), "{text}");
    let csv = rtgauge()
        .args(["export", "1", "--format", "csv", "--db", &db])
        .output()
        .unwrap();
    let csv = String::from_utf8_lossy(&csv.stdout).to_string();
    let line = csv.lines().nth(1).unwrap();
    assert!(line.contains(",,"), "missed left empty: {csv}");
    // Two cyclictest imports (run 1 twice would be refused): compare run 1 with itself has no missed row.
    let c: Value = serde_json::from_str(&compare(&db, &["1", "1"], true)).unwrap();
    assert!(
        c["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["key"] != "cyclic.missed"),
        "{c}"
    );
    // The native oslat run (3) against the imported one (2): the body lies inside one 1 µs bucket.
    let c: Value = serde_json::from_str(&compare(&db, &["3", "2"], true)).unwrap();
    let p50 = row(&c, "oslat.p50");
    assert_eq!(p50["versus"][0]["verdict"]["verdict"], "unknown", "{p50}");
    assert!(
        p50["versus"][0]["verdict"]["why"]
            .as_str()
            .unwrap()
            .contains("resolution"),
        "{p50}"
    );
}

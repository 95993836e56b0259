//! End-to-end tests of `rtgauge run`, the run store, import and export. Real probes, short durations.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, busy_cpu, export_json, rtgauge, rtgauge_std};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const CYCLIC_ONLY: &str = r#"name = "cyc"
duration = "2s"
[[probe]]
kind = "cyclic"
flags = "-m -p90 -i 500 -h 200 -a {cpus} -t --mainaffinity={housekeeping} -q"
[[gate]]
metric = "cyclic.max"
max = "10s"
"#;

const OSLAT_ONLY: &str = r#"name = "osl"
duration = "2s"
[[probe]]
kind = "oslat"
flags = "-c {cpu} -C {housekeeping} -q"
"#;

fn db(dir: &Path) -> String {
    dir.join("runs.db").to_str().unwrap().to_string()
}

#[test]
fn quick_profile_stores_the_run_and_prints_the_summary() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let out = rtgauge()
        .args([
            "run",
            "--db",
            &db,
            "--duration",
            "2s",
            "--no-sample",
            "--label",
            "bare-metal",
            "--tag",
            "site=lab",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let s = String::from_utf8(out.stdout).unwrap();
    for want in [
        "audit:",
        "timer latency (cyclic",
        "OS noise (oslat",
        "stored: run 1 (complete)",
        "report: ",
    ] {
        assert!(s.contains(want), "missing {want:?} in {s}");
    }
    // The report lies beside the database, and names the run's label.
    let report = std::path::Path::new(&db)
        .parent()
        .unwrap()
        .join("reports/run-1.html");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("bare-metal") && html.contains("<svg"));
    let list = String::from_utf8(
        rtgauge()
            .args(["runs", "list", "--db", &db])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        list.lines().any(|l| l.contains("complete")
            && l.contains("bare-metal")
            && l.contains("cyclic,oslat")),
        "{list}"
    );
    let d = export_json(&db, "bare-metal");
    assert_eq!(d["status"], "complete");
    assert_eq!(d["tags"]["site"], "lab");
    // quick: cyclic, oslat, then the short ops, mem and numa probes.
    let kinds: Vec<&str> = d["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["probe"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["cyclic", "oslat", "ops", "mem", "numa"]);
    assert!(
        s.contains("OS primitives (ops") && s.contains("  load latency: "),
        "{s}"
    );
    assert!(d["fingerprint"].is_object() && d["audit"]["findings"].is_array());
    for p in d["probes"].as_array().unwrap().iter().take(2) {
        let a = &p["accounting"];
        assert!(
            a["wall_ns"].as_u64().unwrap() >= 2_000_000_000,
            "accounting covers the probe: {a}"
        );
        assert!(a["tool_user_ns"].as_u64().unwrap() + a["tool_system_ns"].as_u64().unwrap() > 0);
        assert_eq!(
            a["cpus"].as_array().unwrap().len(),
            d["system"]["cpus_online"].as_str().map_or(0, |_| 2)
        );
    }
    // What the system did meanwhile, in a line: steal (or none), IRQ and softirq time, rates per CPU.
    assert!(
        s.lines().any(
            |l| (l.starts_with("  no steal, ") || l.starts_with("  steal "))
                && l.contains("softirqs/s")
        ),
        "{s}"
    );
    // The answer last: the verdict block within the last 15 lines, the figures against the references.
    let last: Vec<&str> = s.lines().rev().take(15).collect();
    assert!(
        last.contains(&"Is this platform fit for quick? NO GATES"),
        "{s}"
    );
    assert!(
        last.iter()
            .any(|l| l.starts_with("  timer latency max (cyclic)")),
        "{s}"
    );
    let csv = String::from_utf8(
        rtgauge()
            .args(["export", "latest", "--format", "csv", "--db", &db])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(csv.starts_with("probe,thread,cpu,samples,min_ns"), "{csv}");
    assert_eq!(
        csv.lines().filter(|l| l.starts_with("cyclic,")).count(),
        d["probes"][0]["threads"].as_array().unwrap().len()
    );
}

#[test]
fn vpr_profile_prints_the_seed_003_table_and_a_verdict() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let out = rtgauge()
        .args([
            "run",
            "--profile",
            "vpr",
            "--duration",
            "2s",
            "--no-sample",
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    for want in ["samples", "min µs", "avg µs", "max µs", "overflows≥120µs"] {
        assert!(s.contains(want), "missing {want:?} in {s}");
    }
    // The verdict block last (within 15 lines), with each gate's bound and outcome.
    let tail = s.lines().rev().take(15).collect::<Vec<_>>().join("\n");
    let max = common::gate_row(&tail, "cyclic max latency").expect(&s);
    let over = common::gate_row(&tail, "cyclic samples ≥ 120 µs").expect(&s);
    assert!(max[1] == "≤ 120.0 µs" && over[1] == "≤ 0", "{s}");
    assert!(err.contains("at least 24.00 h"), "short-run warning: {err}");
    let pass = common::answer(&tail) == Some("FIT");
    assert!(pass || common::answer(&tail) == Some("NOT FIT"), "{s}");
    assert_eq!(
        out.status.code(),
        Some(if pass { 0 } else { 1 }),
        "exit code follows the verdict"
    );
    let d = export_json(&db, "latest");
    // The two cyclic gates, and hwnoise.max: measured, or skipped where the kernel has no hwlat tracer.
    let v = d["verdicts"].as_array().unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[2]["gate"]["metric"], "hwnoise_max_ns");
    let skipped = v[2]["outcome"] == "skipped";
    assert_eq!(
        skipped,
        rtgauge_probe::hwnoise::unavailable(None).is_some(),
        "{}",
        v[2]
    );
    assert_eq!(
        d["probes"][0]["threads"][0]["cycles"], 20_000,
        "2 s at 100 µs"
    );
}

/// Start `profile` for 30 s with 1 s checkpoints, SIGKILL it after `after`, and return the stored document
/// (after checking that it lists as interrupted).
fn kill_run(dir: &Path, db: &str, profile: &str, after: Duration) -> Value {
    let path = dir.join("profile.toml");
    std::fs::write(&path, profile).unwrap();
    let mut child = rtgauge_std()
        .args([
            "run",
            "--profile",
            path.to_str().unwrap(),
            "--duration",
            "30s",
            "--checkpoint",
            "1s",
            "--no-sample",
            "--db",
            db,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let list = String::from_utf8(
        rtgauge()
            .args(["runs", "list", "--db", db])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(list.contains("interrupted"), "{list}");
    let d = export_json(db, "latest");
    assert_eq!(d["status"], "interrupted");
    d
}

fn timeline_count(t: &Value) -> u64 {
    t["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn killed_run_is_interrupted_with_its_last_checkpoint_and_exports() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let d = kill_run(dir.path(), &db, CYCLIC_ONLY, Duration::from_secs(5));
    let t = &d["probes"][0]["threads"][0];
    let samples = t["latency"]["count"].as_u64().unwrap();
    // ~1 s of startup (fingerprint, audit), then 2000 samples/s; checkpoints every second.
    assert!(
        samples >= 4_000,
        "at least ~2 s of data kept, got {samples} samples"
    );
    assert!(
        timeline_count(t) >= samples - 1,
        "the timeline covers the stored histogram"
    );
    let rt = rtgauge()
        .args(["export", "latest", "--format", "rt-tests", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&rt);
    let v: Value = serde_json::from_slice(&rt.stdout).unwrap();
    assert!(v["thread"]["0"]["cycles"].as_u64().unwrap() >= samples);
}

#[test]
fn killed_oslat_run_keeps_its_checkpointed_intervals() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let d = kill_run(dir.path(), &db, OSLAT_ONLY, Duration::from_secs(5));
    let t = &d["probes"][0]["threads"][0];
    let iterations = t["iterations"].as_u64().unwrap();
    let secs = t["duration_ns"].as_u64().unwrap() as f64 / 1e9;
    // Startup and a 1 s preheat, then checkpoints of completed 1 s intervals every second.
    assert!(
        secs >= 1.5 && iterations > 1_000_000,
        "at least ~2 s of data kept, got {iterations} iterations over {secs} s"
    );
    assert_eq!(t["gaps"]["count"].as_u64().unwrap(), iterations);
    assert_eq!(
        timeline_count(t),
        iterations,
        "histogram and timeline hold the same intervals"
    );
    let rt = rtgauge()
        .args(["export", "latest", "--format", "rt-tests", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&rt);
}

#[test]
fn two_runs_at_once_into_one_database_both_complete() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let profile = dir.path().join("cyc.toml");
    std::fs::write(&profile, CYCLIC_ONLY).unwrap();
    let spawn = || {
        rtgauge_std()
            .args([
                "run",
                "--profile",
                profile.to_str().unwrap(),
                "--checkpoint",
                "1s",
                "--no-sample",
                "--db",
                &db,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for c in [a, b] {
        let o = c.wait_with_output().unwrap();
        assert_ok(&o);
    }
    let list = String::from_utf8(
        rtgauge()
            .args(["runs", "list", "--db", &db])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        list.lines().filter(|l| l.contains("complete")).count(),
        2,
        "{list}"
    );
}

const CYCLICTEST_JSON: &str = r##"{
  "file_version": 1,
  "cmdline:": "cyclictest -m -p 80 -t 2 -a -i 200 -D 5 -h 50 -H 50 --json=ct.json -q",
  "rt_test_version:": "2.40",
  "start_time": "Sun, 22 Nov 2026 11:08:50 +0000",
  "end_time": "Sun, 22 Nov 2026 11:08:55 +0000",
  "return_code": 0,
  "sysinfo": { "sysname": "Linux", "nodename": "vm", "release": "6.18.44", "version": "#1 SMP", "machine": "x86_64", "realtime": 0 },
  "num_threads": 2,
  "resolution_in_ns": 0,
  "thread": {
    "0": { "histogram": { "8": 1, "10": 1, "11": 9, "13": 2204 }, "cycles": 2216, "min": 8, "max": 601, "avg": 14.69, "cpu": 0, "node": 0 },
    "1": { "histogram": { "9": 100, "12": 3 }, "cycles": 103, "min": 9, "max": 12, "avg": 9.09, "cpu": 1, "node": 0 }
  }
}"##;

/// A `--output` that cannot be written is an error (exit 2, naming the flag), after the run is stored and
/// reported: the summary, the verdict and the HTML page are not lost with it.
#[test]
fn a_failed_output_file_still_stores_and_reports_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let profile = dir.path().join("cyc.toml");
    std::fs::write(&profile, CYCLIC_ONLY.replace("\"2s\"", "\"1s\"")).unwrap();
    let bad = dir.path().join("no-such-dir").join("run.json");
    let out = rtgauge()
        .args(["run", "--no-sample", "--db", &db, "--profile"])
        .arg(&profile)
        .arg("--output")
        .arg(&bad)
        .output()
        .unwrap();
    let (stdout, err) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{err}");
    assert!(
        err.contains("--output") && err.contains("no-such-dir"),
        "{err}"
    );
    assert!(
        stdout.contains("stored: run 1 (complete)") && stdout.contains("report: "),
        "{stdout}"
    );
    assert!(dir.path().join("reports/run-1.html").exists());
    assert_eq!(export_json(&db, "1")["status"], "complete");
}

#[test]
fn rt_tests_json_import_then_export_keeps_histogram_and_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let file = dir.path().join("ct.json");
    std::fs::write(&file, CYCLICTEST_JSON).unwrap();
    let out = rtgauge()
        .args([
            "import",
            file.to_str().unwrap(),
            "--label",
            "imported",
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let exported = rtgauge()
        .args(["export", "imported", "--format", "rt-tests", "--db", &db])
        .output()
        .unwrap();
    let back: Value = serde_json::from_slice(&exported.stdout).unwrap();
    let orig: Value = serde_json::from_str(CYCLICTEST_JSON).unwrap();
    assert_eq!(back["cmdline:"], orig["cmdline:"]);
    assert_eq!(back["sysinfo"], orig["sysinfo"]);
    for i in ["0", "1"] {
        for key in ["histogram", "cycles", "min", "max", "avg", "cpu", "node"] {
            assert_eq!(
                back["thread"][i][key], orig["thread"][i][key],
                "thread {i} {key}"
            );
        }
    }
    assert_eq!(back["thread"]["0"]["overflows"], 1);
    let show = String::from_utf8(
        rtgauge()
            .args(["runs", "show", "imported", "--db", &db])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        show.contains("imported from") && show.contains("resolution 1000 ns"),
        "{show}"
    );
}

#[test]
fn bad_imports_and_profiles_exit_2_naming_the_input_and_keep_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let good = dir.path().join("good.json");
    std::fs::write(&good, CYCLICTEST_JSON).unwrap();
    assert!(rtgauge()
        .args(["import", good.to_str().unwrap(), "--db", &db])
        .output()
        .unwrap()
        .status
        .success());
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, &CYCLICTEST_JSON[..300]).unwrap();
    let missing = dir.path().join("missing.json");
    for f in [&bad, &missing] {
        let out = rtgauge()
            .args([
                "import",
                good.to_str().unwrap(),
                f.to_str().unwrap(),
                "--db",
                &db,
            ])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(f.file_name().unwrap().to_str().unwrap()),
            "{err}"
        );
        assert!(!err.contains("panicked"));
    }
    let list = String::from_utf8(
        rtgauge()
            .args(["runs", "list", "--db", &db])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        list.lines().count(),
        2,
        "header + the one good import; the failed batch stored nothing: {list}"
    );

    let profile = dir.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = 'p'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\nflags = '-i 0'\n",
    )
    .unwrap();
    for args in [
        vec!["run", "--profile", "nosuch"],
        vec!["run", "--profile", profile.to_str().unwrap()],
        vec!["runs", "show", "77"],
    ] {
        let out = rtgauge().args(&args).args(["--db", &db]).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
    assert!(
        String::from_utf8(
            rtgauge()
                .args(["runs", "list", "--db", &db])
                .output()
                .unwrap()
                .stdout
        )
        .unwrap()
        .lines()
        .count()
            == 2
    );
}

#[test]
fn real_cyclictest_text_and_json_and_oslat_json_import_alike() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let (json, text, osl) = (
        dir.path().join("ct.json"),
        dir.path().join("ct.txt"),
        dir.path().join("os.json"),
    );
    // The rt-tests installed by CI (Debian's 2.4 here): one run, written both ways.
    let ct = common::program("cyclictest")
        .args([
            "-m", "-p80", "-t", "2", "-a", "0-1", "-i", "500", "-l", "400", "-h", "60", "-q",
        ])
        .arg(format!("--json={}", json.display()))
        .output()
        .expect("cyclictest (apt-get install rt-tests)");
    assert_ok(&ct);
    std::fs::write(&text, &ct.stdout).unwrap();
    let os = common::program("oslat")
        .args(["-c", "1", "-D", "1", "-q"])
        .arg(format!("--json={}", osl.display()))
        .output()
        .unwrap();
    assert_ok(&os);
    let out = rtgauge()
        .args([
            "import",
            text.to_str().unwrap(),
            json.to_str().unwrap(),
            osl.to_str().unwrap(),
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let export = |run: &str| -> Value {
        let o = rtgauge()
            .args(["export", run, "--format", "rt-tests", "--db", &db])
            .output()
            .unwrap();
        assert_ok(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let orig: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (from_text, from_json) = (export("1"), export("2"));
    for i in ["0", "1"] {
        for key in ["histogram", "cycles", "min", "max"] {
            assert_eq!(
                from_json["thread"][i][key], orig["thread"][i][key],
                "json thread {i} {key}"
            );
            assert_eq!(
                from_text["thread"][i][key], orig["thread"][i][key],
                "text thread {i} {key}"
            );
        }
        assert_eq!(from_json["thread"][i]["avg"], orig["thread"][i]["avg"]);
    }
    let o: Value = serde_json::from_str(&std::fs::read_to_string(&osl).unwrap()).unwrap();
    let back = export("3");
    assert_eq!(
        back["thread"]["0"]["histogram"], o["thread"]["0"]["histogram"],
        "oslat buckets survive"
    );
    assert_eq!(back["thread"]["0"]["max"], o["thread"]["0"]["max"]);
    // Imported results compare like any run: the text and the JSON of one cyclictest run are the same
    // data (ratio 1); without time windows, percentiles get order-statistic intervals.
    let c = rtgauge()
        .args(["compare", "1", "2", "--format", "json", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&c);
    let c: Value = serde_json::from_slice(&c.stdout).unwrap();
    for r in c["rows"].as_array().unwrap() {
        let v = &r["versus"][0];
        // The same data, closer than an imported result's 1 µs buckets can tell apart (a p50 of 9 µs on a
        // quiet machine): ratio 1, no verdict.
        if v["verdict"]["verdict"] == "unknown"
            && v["verdict"]["why"]
                .as_str()
                .is_some_and(|w| w.contains("resolution"))
        {
            assert_eq!(v["ratio"].as_f64(), Some(1.0), "{r}");
            continue;
        }
        // A percentile beyond the 60 µs range (this VM has spikes) is unknown in both, and not compared.
        if v["verdict"]["verdict"] == "unknown" {
            assert_eq!(r["unknown_above"][0], r["unknown_above"][1], "{r}");
            assert!(v["ratio"].is_null(), "{r}");
            continue;
        }
        assert_eq!(v["ratio"].as_f64().unwrap(), 1.0, "{r}");
        match r["key"].as_str().unwrap() {
            "cyclic.p50" => {
                let m = v["method"].as_str().unwrap();
                assert!(m.starts_with("order statistics"), "{r}")
            }
            // 800 samples: fewer than 100 beyond p99, so p99 and the max are extremes; without time windows
            // there is nothing to give them an interval from ("n/a", not a verdict from one observation).
            "cyclic.p99" | "cyclic.max" => {
                assert_eq!(v["verdict"]["verdict"], "no_interval", "{r}");
                let why = v["verdict"]["why"].as_str().unwrap();
                assert!(why.contains("per-window maxima"), "{r}");
            }
            _ => {}
        }
    }
}

//! `rtgauge compare` of single runs widened by the run-to-run spread of their stored repeats (runs with the
//! same label, profile, host and conditions).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;
use common::*;

const PROFILE: &str = r#"name = "repeats"
duration = "1s"
[[probe]]
kind = "cyclic"
flags = "-m -p10 -i 1000 -h 2000 -a 1 -t 1 --mainaffinity=0 -q"
"#;

fn p50_of(db: &str, run: &str) -> f64 {
    let t = &export_json(db, run)["probes"][0]["threads"][0]["latency"];
    let p = t["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["percentile"].as_f64() == Some(50.0))
        .unwrap();
    p["value_ns"].as_f64().unwrap()
}

#[test]
fn single_runs_are_widened_by_the_spread_of_their_repeats() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").to_str().unwrap().to_string();
    let profile = dir.path().join("r.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    // Runs 1–5 repeat platform "a"; run 6 is platform "b", measured once.
    for label in ["a", "a", "a", "a", "a", "b"] {
        run_labelled(&profile, label, &db);
    }
    // Same label, profile and host, but not the same conditions, so no repeat: run 7, an imported copy of
    // run 5 under another kernel command line; run 8, a copy without a fingerprint (as an rt-tests import
    // has none: nothing says how it was taken); run 9, the same profile name measuring CPU 0.
    for (name, change) in [("cmdline", true), ("nofp", false)] {
        let mut copy = export_json(&db, "5");
        copy.as_object_mut().unwrap().remove("uuid");
        if change {
            copy["fingerprint"]["kernel"]["cmdline"] = "isolcpus=1 nohz_full=1".into();
        } else {
            copy.as_object_mut().unwrap().remove("fingerprint");
        }
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, copy.to_string()).unwrap();
        let out = rtgauge_std()
            .args(["import", file.to_str().unwrap(), "--db", &db])
            .output()
            .unwrap();
        assert_ok(&out);
    }
    let cpu0 = dir.path().join("cpu0.toml");
    std::fs::write(&cpu0, PROFILE.replace("-a 1", "-a 0")).unwrap();
    let out = rtgauge_std()
        .args(["run", "--profile", cpu0.to_str().unwrap(), "--no-sample"])
        .args(["--label", "a", "--db", &db])
        .output()
        .unwrap();
    assert_ok(&out);
    let c = compare_in(&db, &["1", "9"]);
    let settings = c["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["what"] == "probe settings")
        .unwrap_or_else(|| panic!("no probe settings difference: {c}"));
    assert!(
        settings["values"][0].as_str().unwrap().contains("CPUs 1")
            && settings["values"][1].as_str().unwrap().contains("CPUs 0"),
        "{settings}"
    );

    let c = compare_in(&db, &["1", "2"]);
    assert_eq!(
        c["repeats"],
        serde_json::json!([[3, 4, 5], [3, 4, 5]]),
        "{c}"
    );
    // The p50 interval holds ln(B/A) ± t(2)·√2·s, s the spread of the repeats' log p50.
    let logs: Vec<f64> = ["3", "4", "5"]
        .iter()
        .map(|r| p50_of(&db, r).ln())
        .collect();
    let mean = logs.iter().sum::<f64>() / 3.0;
    let s = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = 4.303 * 2f64.sqrt() * s;
    let p50 = row(&c, "cyclic.p50");
    let lr = (p50_of(&db, "2") / p50_of(&db, "1")).ln();
    let v = &p50["versus"][0];
    let (lo, hi) = (v["ci"][0].as_f64().unwrap(), v["ci"][1].as_f64().unwrap());
    assert!(
        lo <= (lr - half).exp() * (1.0 + 1e-9) && hi >= (lr + half).exp() * (1.0 - 1e-9),
        "[{lo}, {hi}] does not hold ln ratio {lr} ± {half}: {v}"
    );
    // Without the repeats the interval is the within-run one, no wider.
    let out = rtgauge_std()
        .args([
            "compare",
            "1",
            "2",
            "--no-repeats",
            "--format",
            "json",
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let within: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(within.get("repeats").is_none(), "{within}");
    let w = &row(&within, "cyclic.p50")["versus"][0];
    assert!(w["ci"][0].as_f64().unwrap() >= lo && w["ci"][1].as_f64().unwrap() <= hi);
    for r in c["rows"].as_array().unwrap() {
        let (v, w) = (
            &r["versus"][0],
            &row(&within, r["key"].as_str().unwrap())["versus"][0],
        );
        if let (Some(c), Some(d)) = (v["ci"].as_array(), w["ci"].as_array()) {
            assert!(
                c[0].as_f64() <= d[0].as_f64() && c[1].as_f64() >= d[1].as_f64(),
                "{r}"
            );
        }
    }

    // Platform b, measured once, borrows a's spread; the terminal names the repeats used.
    let c = compare_in(&db, &["1", "6"]);
    assert_eq!(c["repeats"], serde_json::json!([[2, 3, 4, 5], []]), "{c}");
    let text = compare_text(&db, &["1", "6"]);
    assert!(
        text.contains("run 1: repeats 2, 3, 4, 5") && text.contains("borrows the other's"),
        "{text}"
    );
    // A run against itself is not widened: exactly 1, equivalent, on every measure.
    let c = compare_in(&db, &["1", "1"]);
    assert!(c.get("repeats").is_none(), "{c}");
    for r in c["rows"].as_array().unwrap() {
        let v = &r["versus"][0];
        assert_eq!(
            (v["ratio"].as_f64(), v["verdict"]["verdict"].as_str()),
            (Some(1.0), Some("equivalent")),
            "{r}"
        );
    }
    // With fewer than 3 repeats left the note says what the intervals leave out.
    let text = compare_text(&db, &["1", "2", "3"]);
    assert!(
        text.contains("fewer than 3 runs with the same") && text.contains("compare 1,2,3 4,5,6"),
        "{text}"
    );
}

/// Every verdict of a comparison of single runs without repeats was held to its one-run floor: a better or
/// worse only with the whole interval beyond the floor, anything else "inconclusive: one run per platform".
fn assert_held_to_floors(c: &serde_json::Value) {
    for r in c["rows"].as_array().unwrap() {
        let v = &r["versus"][0];
        let verdict = v["verdict"]["verdict"].as_str().unwrap();
        if matches!(verdict, "no_interval" | "unknown") {
            continue;
        }
        let floor = v["one_run"]["floor"].as_f64();
        assert!(v["one_run"].is_object(), "not held to a floor: {r}");
        match verdict {
            "better" | "worse" => {
                let f = floor.unwrap().max(1.1);
                let (lo, hi) = (v["ci"][0].as_f64().unwrap(), v["ci"][1].as_f64().unwrap());
                assert!(lo > f || hi < 1.0 / f, "decided within the floor: {r}");
            }
            "inconclusive" => assert_eq!(v["verdict"]["one_run"], true, "{r}"),
            _ => panic!("one run per platform cannot be {verdict}: {r}"),
        }
    }
}

#[test]
fn run_repeat_stores_a_platforms_repeats_and_compare_takes_them_as_a_set() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db").to_str().unwrap().to_string();
    let profile = dir.path().join("g.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    let run = |profile: &std::path::Path, extra: &[&str]| {
        let out = rtgauge_std()
            .args(["run", "--profile", profile.to_str().unwrap(), "--no-sample"])
            .args(extra)
            .args(["--db", &db])
            .output()
            .unwrap();
        assert_ok(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Runs 1–3: platform x measured three times by one command.
    let out = run(&profile, &["--repeat", "3", "--label", "x"]);
    assert!(
        out.contains("rtgauge run 1 (repeat 1 of 3)")
            && out.contains("rtgauge run 3 (repeat 3 of 3)")
            && out.contains("repeats: runs 1, 2, 3 (3 of 3 stored)"),
        "{out}"
    );
    let group = export_json(&db, "1")["repeat"]["group"].clone();
    assert_eq!(group.as_str().map(str::len), Some(36), "{group}");
    for i in 1..=3 {
        let d = export_json(&db, &i.to_string());
        assert_eq!(
            d["repeat"],
            serde_json::json!({"group": group, "index": i, "count": 3})
        );
        assert_eq!(
            (d["label"].as_str(), d["status"].as_str()),
            (Some("x"), Some("complete"))
        );
    }
    // Runs 4–5: platform y, two runs asked for by the profile itself; run 6: platform z, once.
    let twice = dir.path().join("twice.toml");
    std::fs::write(&twice, PROFILE.replace("duration", "repeat = 2\nduration")).unwrap();
    run(&twice, &["--label", "y"]);
    let y = export_json(&db, "5")["repeat"].clone();
    assert_eq!(
        (y["index"].as_u64(), y["count"].as_u64()),
        (Some(2), Some(2)),
        "{y}"
    );
    assert_ne!(y["group"], group);
    run(&profile, &["--label", "z"]);
    assert!(export_json(&db, "6").get("repeat").is_none());

    // A label stands for its repeats: sets, judged by the variation between runs, by --label or positionally.
    let c = compare_in(&db, &["--label", "x", "--label", "y"]);
    assert_eq!(c["sets"], serde_json::json!([[1, 2, 3], [4, 5]]), "{c}");
    assert_eq!(compare_in(&db, &["x", "y"])["rows"], c["rows"]);
    for r in c["rows"].as_array().unwrap() {
        let v = &r["versus"][0];
        assert!(v.get("one_run").is_none(), "{r}");
        if v["ci"].is_array() {
            assert!(
                v["method"].as_str().unwrap().starts_with("repetitions"),
                "{r}"
            );
        }
    }
    // Against a platform measured once, the set lends its spread: no one-run floor either.
    let c = compare_in(&db, &["--label", "x", "--label", "z"]);
    assert_eq!(c["sets"], serde_json::json!([[1, 2, 3], [6]]), "{c}");
    assert!(c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["versus"][0].get("one_run").is_none()));

    // Runs by id are single runs; run 1 has two stored repeats (fewer than 3), so the pair is one run per
    // platform: held to the floors, and the note says how to get a verdict.
    let c = compare_in(&db, &["1", "6"]);
    assert!(c.get("sets").is_none() && c.get("repeats").is_none(), "{c}");
    assert_held_to_floors(&c);
    let text = compare_text(&db, &["1", "6"]);
    assert!(
        text.contains("one run per platform") && text.contains("rtgauge run --repeat 3"),
        "{text}"
    );
    // --no-repeats judges single runs without their repeats: held to the floors too.
    let out = rtgauge_std()
        .args([
            "compare",
            "2",
            "3",
            "--no-repeats",
            "--format",
            "json",
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_held_to_floors(&serde_json::from_slice(&out.stdout).unwrap());

    // A newer run --repeat of x is the one its label stands for.
    run(&profile, &["--repeat", "2", "--label", "x"]);
    let c = compare_in(&db, &["--label", "x", "--label", "y"]);
    assert_eq!(c["sets"], serde_json::json!([[7, 8], [4, 5]]), "{c}");

    // Bad counts, and one file for several runs, are refused before anything is measured.
    let p = profile.to_str().unwrap();
    let html = dir.path().join("r.html");
    let html = html.to_str().unwrap();
    assert_usage_errors(
        "run",
        &["--profile", p, "--no-sample", "--db", &db],
        &[
            (&["--repeat", "0"], "--repeat"),
            (&["--repeat", "1001"], "--repeat"),
            (&["--repeat", "three"], "--repeat"),
            (&["--repeat", "2", "--html", html], "--html"),
            (&["--repeat", "2", "--output", html], "--output"),
        ],
    );
    let zero = dir.path().join("zero.toml");
    std::fs::write(&zero, PROFILE.replace("duration", "repeat = 0\nduration")).unwrap();
    assert_usage_errors(
        "run",
        &["--no-sample", "--db", &db],
        &[(&["--profile", zero.to_str().unwrap()], "repeat")],
    );
    let out = rtgauge_std()
        .args(["runs", "list", "--db", &db])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        9,
        "8 runs stored, no more"
    );
}

#[test]
fn a_signal_ends_the_repeat_in_progress_and_starts_no_more() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("i.db").to_str().unwrap().to_string();
    let profile = dir.path().join("i.toml");
    std::fs::write(&profile, PROFILE.replace("\"1s\"", "\"4s\"")).unwrap();
    // Run 1 takes ~5 s (start-up, 4 s of measuring, the report): the signal falls in run 2.
    let (out, took) = interrupt(
        &[
            "run",
            "--profile",
            profile.to_str().unwrap(),
            "--no-sample",
            "--repeat",
            "3",
            "--label",
            "x",
            "--db",
            &db,
        ],
        std::time::Duration::from_millis(7_000),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        took.as_secs_f64() < 3.0,
        "{took:?} after the signal: {stdout}"
    );
    assert!(
        !stdout.contains("(repeat 3 of 3)"),
        "a third run started: {stdout}"
    );
    let listed = rtgauge_std()
        .args(["runs", "list", "--db", &db])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&listed.stdout).into_owned();
    let statuses: Vec<&str> = list
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert!((1..=2).contains(&statuses.len()), "{list}");
    assert!(!statuses.contains(&"running"), "{list}");
    assert!(
        statuses[..statuses.len() - 1]
            .iter()
            .all(|s| *s == "complete"),
        "{list}"
    );
}

/// One run per platform of the OS-primitive, memory and NUMA probes: every verdict is held to the floor of
/// its measure's family, named in the document (`ops.*.p50`, `mem.latency.*`); the NUMA locality rows have
/// no floor (the A/A bench had one node) and say so on their own row.
#[test]
fn single_runs_of_ops_mem_and_numa_are_held_to_their_familys_floor() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("f.db").to_str().unwrap().to_string();
    let profile = dir.path().join("f.toml");
    std::fs::write(
        &profile,
        "name = 'families'\nduration = '1s'\n\
         [[probe]]\nkind = 'ops'\nflags = '--cpu 1 -r 7 --sample-time 200us'\n\
         [[probe]]\nkind = 'mem'\nflags = '--cpu 1 --max-size 1M -r 3 --loads 20000 --bw-size 8M --numa-size 8M'\n\
         [[probe]]\nkind = 'numa'\nflags = '--all --interval 0'\n",
    )
    .unwrap();
    for label in ["p", "q"] {
        run_labelled(&profile, label, &db);
    }
    let c = compare_in(&db, &["p", "q"]);
    assert_held_to_floors(&c);
    let family = |key: &str| row(&c, key)["versus"][0]["one_run"]["family"].clone();
    assert_eq!(family("ops.null_syscall.p50"), "ops.*.p50");
    assert_eq!(family("mem.latency.4k"), "mem.latency.*");
    assert_eq!(family("mem.bw.read"), "mem.bw.*");
    let numa = row(&c, "numa.resident_local_pct");
    assert!(numa["versus"][0]["one_run"]["floor"].is_null(), "{numa}");
    let text = compare_text(&db, &["p", "q"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("resident memory on local nodes"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.ends_with("inconclusive: one run per platform, and no A/A floor for this measure (repeat with --repeat 3)"), "{line}");
    // The note names each family once, with its floor.
    assert!(
        text.contains("ops.*.p50 1.8×")
            && text.contains("mem.latency.* 11×")
            && text.contains("none for numa.* (no verdict)"),
        "{text}"
    );
}

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
        let out = rtgauge_std()
            .args(["run", "--profile", profile.to_str().unwrap(), "--no-sample"])
            .args(["--label", label, "--db", &db])
            .output()
            .unwrap();
        assert_ok(&out);
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
        .args(["compare", "1", "2", "--no-repeats", "--json", "--db", &db])
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
        text.contains("fewer than 3 stored repeats") && text.contains("compare 1,2,3 4,5,6"),
        "{text}"
    );
}

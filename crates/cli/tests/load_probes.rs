//! `--load` on the probes beyond cyclic and oslat: ops and net store the load achieved beside their
//! figures, like the latency probes do.

#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_ok, read_json, rtgauge_std};

fn load_of(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    let o = rtgauge_std()
        .args(args)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("rtgauge: load achieved:"));
    read_json(&out)["probes"][0]["load"].clone()
}

#[test]
fn ops_records_its_load() {
    let _cpu = common::busy_cpu();
    let l = load_of(&[
        "ops",
        "--ops",
        "null_syscall",
        "-r",
        "5",
        "--cpu",
        "1",
        "--load",
        "cpu",
    ]);
    assert_eq!(l["spec"], "cpu:100@housekeeping", "{l}");
    assert_eq!(
        l["cpus"], "0",
        "the housekeeping CPU is the one ops does not use"
    );
    assert!(l["generators"][0]["ops"].as_u64().unwrap() > 0, "{l}");
}

#[test]
fn net_records_its_load() {
    let _cpu = common::busy_cpu();
    let l = load_of(&[
        "net",
        "cps",
        "--serve-cpus",
        "0",
        "--cpus",
        "1",
        "-D",
        "1s",
        "--no-store",
        "--load",
        "timer@all",
    ]);
    assert_eq!(l["spec"], "timer:100@all", "{l}");
    assert_eq!(
        l["generators"].as_array().unwrap().len(),
        2,
        "one timer per CPU: {l}"
    );
    for g in l["generators"].as_array().unwrap() {
        assert!(g["ops"].as_u64().unwrap() > 0, "{g}");
    }
}

/// `run --load MIX` loads every probe of the profile (the NUMA locality probe excepted) and records the
/// achieved load with each result, as a profile's own `--load` is recorded.
#[test]
fn run_load_reaches_every_probe_of_the_profile() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.toml");
    std::fs::write(
        &profile,
        r#"name = "loaded"
duration = "1s"
[[probe]]
kind = "cyclic"
flags = "-m -p90 -i 1000 -a {cpus} -t -q"
[[probe]]
kind = "oslat"
flags = "-c {cpu} -q"
[[probe]]
kind = "ops"
flags = "--ops null_syscall -r 5 --cpu {cpu}"
[[probe]]
kind = "numa"
flags = ""
"#,
    )
    .unwrap();
    let db = dir.path().join("runs.db");
    let out = dir.path().join("run.json");
    let o = rtgauge_std()
        .args([
            "run",
            "--profile",
            profile.to_str().unwrap(),
            "--cpus",
            "1",
            "--no-sample",
        ])
        .args([
            "--load",
            "cpu:30@housekeeping",
            "--db",
            db.to_str().unwrap(),
            "--output",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_ok(&o);
    let doc = read_json(&out);
    let probes = doc["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 4);
    for p in probes {
        let (kind, load) = (p["probe"].as_str().unwrap_or("?"), &p["load"]);
        if kind == "numa" {
            assert!(
                load.is_null(),
                "the locality probe observes, it is not loaded: {load}"
            );
            continue;
        }
        assert_eq!(load["spec"], "cpu:30@housekeeping", "{kind}: {load}");
        assert_eq!(load["cpus"], "0", "{kind}: the housekeeping CPU");
        assert!(
            load["generators"][0]["ops"].as_u64().unwrap() > 0,
            "{kind}: {load}"
        );
    }
}

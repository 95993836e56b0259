//! `rtgauge numa`: local shares on the two- and four-node fixture trees (tests/fixtures/numa-*, written by
//! generate_numa.py) against values computed by hand, and a live `--all` run.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn run_on(name: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("numa.json");
    let o = rtgauge()
        .args(["numa", "--all", "--interval", "0", "--root"])
        .arg(fixture(name))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read_json(&out)["probes"][0].clone()
}

fn local(v: &serde_json::Value, key: &str, name: &str) -> f64 {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {key}"))["local_pct"]
        .as_f64()
        .unwrap()
}

#[test]
fn two_nodes_match_hand_computed_shares() {
    let v = run_on("numa-2node");
    // dbserver, CPUs 0-3 (node 0): N0 = 256 + 512 pages, N1 = 256 pages → 768/1024.
    assert!((local(&v, "processes", "dbserver") - 75.0).abs() < 1e-9);
    // dbworker, CPUs 0-3: everything on node 1.
    assert_eq!(local(&v, "processes", "dbworker"), 0.0);
    // vdu, CPUs 4-7 (node 1): N0 = 100·4 KiB; N1 = 300·4 KiB + one 2 MiB page.
    let want = (300.0 * 4096.0 + 2097152.0) / (400.0 * 4096.0 + 2097152.0) * 100.0;
    assert!(
        (local(&v, "processes", "vdu") - want).abs() < 1e-9,
        "{want}"
    );
    // spread may run anywhere: all local.
    assert_eq!(local(&v, "processes", "spread"), 100.0);
    // kthreadd has no user memory: not listed.
    assert_eq!(v["processes"].as_array().unwrap().len(), 4);
    // cgroup of dbserver + dbworker: 768 of 2048 pages on node 0.
    assert!((local(&v, "cgroups", "/kubepods/podA/c1") - 37.5).abs() < 1e-9);
    // numastat: local 900 + 400, other 100 + 100.
    let doc_pct = 1300.0 / 1500.0 * 100.0;
    let c = v["counters"].as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(c[1]["total"]["other_node"], 100);
    let (l, o): (u64, u64) = c.iter().fold((0, 0), |(l, o), x| {
        (
            l + x["total"]["local_node"].as_u64().unwrap(),
            o + x["total"]["other_node"].as_u64().unwrap(),
        )
    });
    assert!((l as f64 * 100.0 / (l + o) as f64 - doc_pct).abs() < 1e-9);
}

#[test]
fn four_nodes_match_hand_computed_shares() {
    let v = run_on("numa-4node");
    assert_eq!(v["nodes"].as_array().unwrap().len(), 4);
    // rt-app on CPUs 2-3 = node 1: 300 of 500 pages.
    assert!((local(&v, "processes", "rt-app") - 60.0).abs() < 1e-9);
    // vcpu on CPUs 4-7 = nodes 2 and 3: 100 + 200 of 400 pages.
    assert!((local(&v, "processes", "vcpu") - 75.0).abs() < 1e-9);
    assert_eq!(v["processes"][1]["local_nodes"], serde_json::json!([2, 3]));
}

#[test]
fn text_output_shows_shares_and_counters() {
    let o = rtgauge()
        .args(["numa", "100", "200", "--interval", "0", "--root"])
        .arg(fixture("numa-2node"))
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(t.contains("dbserver") && t.contains("75.0"), "{t}");
    assert!(!t.contains("spread"), "only the listed PIDs: {t}");
    assert!(t.contains("node-local allocations: 86.67 %"), "{t}");
}

#[test]
fn live_all_runs_here() {
    let o = rtgauge()
        .args(["numa", "--all", "--interval", "200ms"])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t.contains("node 0"), "{t}");
    assert!(t.contains("over 200"), "{t}");
}

#[test]
fn bad_input_names_the_flag() {
    assert_usage_errors(
        "numa",
        &[],
        &[
            (&[], "--all"),
            (&["0"], "PID"),
            (&["abc"], "PID"),
            (&["--all", "--interval", "soon"], "--interval"),
            (&["--all", "--root", "/nonexistent/tree"], "--root"),
            (&["999999999"], "PID 999999999"),
            (&["--all", "1"], "--all"),
        ],
    );
}

//! `net cps --rate` for real on loopback: the open loop holds the offered rate (±2 %), latency rises when
//! the offered rate passes what the server can take, and `--p99-max` gives the capacity or says none holds.
//!
//! The reference server runs on CPU 0, the client loop on CPU 1. Connections end by RST (`--close reset`):
//! the overload point opens tens of thousands of connections, whose TIME_WAIT entries would otherwise
//! slow every loopback connection test for the next minute (1 s SYN retransmissions).

#![allow(clippy::unwrap_used)]

mod common;

use common::{read_json, rtgauge_std};

fn cps(extra: &[&str], out: &std::path::Path) -> (std::process::Output, Vec<serde_json::Value>) {
    let o = rtgauge_std()
        .args([
            "net",
            "cps",
            "--serve-cpus",
            "0",
            "--cpus",
            "1",
            "-D",
            "2s",
            "--no-store",
            "--close",
            "reset",
            "--output",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let doc = read_json(out);
    (o, doc["probes"].as_array().unwrap().clone())
}

fn p50(r: &serde_json::Value) -> u64 {
    r["total"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["percentile"].as_f64() == Some(50.0))
        .unwrap()["value_ns"]
        .as_u64()
        .unwrap()
}

#[test]
fn the_open_loop_holds_the_offered_rate_and_latency_rises_past_capacity() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let (o, points) = cps(
        &["--rate", "500,2000,200000", "--p99-max", "10s"],
        &dir.path().join("n.json"),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    eprintln!("{stdout}");
    assert_eq!(points.len(), 3, "{stdout}");
    for (r, offered) in points.iter().zip([500.0, 2000.0]) {
        let achieved = r["rate_per_s"].as_f64().unwrap();
        assert_eq!(r["open_loop"]["offered_per_s"].as_f64().unwrap(), offered);
        assert_eq!(r["open_loop"]["missed_starts"], 0, "{r}");
        assert!(
            (achieved / offered - 1.0).abs() <= 0.02,
            "offered {offered}/s, achieved {achieved:.1}/s"
        );
    }
    // 200 000/s is far beyond one loopback server CPU: starts are missed and connections queue.
    let over = &points[2];
    assert!(
        over["open_loop"]["missed_starts"].as_u64().unwrap() > 0,
        "{over}"
    );
    assert!(over["rate_per_s"].as_f64().unwrap() < 200_000.0 * 0.98);
    assert!(
        p50(over) > p50(&points[0]),
        "p50 at 200000/s {} ns vs at 500/s {} ns",
        p50(over),
        p50(&points[0])
    );
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("capacity: 2000 connections/s offered"),
        "{stdout}"
    );
}

#[test]
fn no_rate_holds_an_impossible_bound() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let (o, points) = cps(
        &["--rate", "300", "--p99-max", "1us"],
        &dir.path().join("n.json"),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("capacity: no offered rate holds p99 ≤"),
        "{stdout}"
    );
    assert_eq!(points.len(), 1);
}

#[test]
fn bad_rates_are_usage_errors() {
    for bad in ["0", "x", "1,,2"] {
        let o = rtgauge_std()
            .args(["net", "cps", "--serve-cpus", "0", "--rate", bad])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--rate {bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--rate"), "{err}");
    }
}

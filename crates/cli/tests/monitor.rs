//! `rtgauge monitor` against a real Prometheus (Debian's package, started here on loopback with its own
//! storage in a temporary directory and killed at the end, also when the test fails), the rules checked and
//! unit-tested with promtool, drift from a captured tree, and a clean stop on SIGTERM.
//!
//! Needs root (SCHED_FIFO measuring threads); CI runs as root.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::rtgauge_std;
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when the test ends, however it ends.
struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from 127.0.0.1:`port`; the body, or `None` when nothing answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Instant query against Prometheus' HTTP API: the result vector.
fn query(port: u16, q: &str) -> Vec<Value> {
    let Some(body) = http_get(port, &format!("/api/v1/query?query={}", encode(q))) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn sample_value(v: &Value) -> f64 {
    v["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(x) = f() {
            return Some(x);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn start_monitor(args: &[&str]) -> Killed {
    Killed(
        rtgauge_std()
            .arg("monitor")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn stderr_of(mut k: Killed) -> String {
    let _ = k.0.kill();
    let _ = k.0.wait();
    let mut s = String::new();
    if let Some(mut e) = k.0.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/prometheus")
        .join(file)
}

#[test]
fn prometheus_scrapes_latency_and_audit_series_and_sees_a_stall_within_two_scrapes() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let (mport, pport) = (free_port(), free_port());
    // Priority 40: below the test's SCHED_FIFO 50 spinner, which must be able to delay the measuring thread.
    let _monitor = start_monitor(&[
        "--cpus",
        "1",
        "--priority",
        "40",
        "--interval",
        "1ms",
        "--listen",
        &format!("127.0.0.1:{mport}"),
        "--audit-every",
        "5s",
        "--window",
        "5s",
    ]);
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: rtgauge\n    \
             static_configs:\n      - targets: ['127.0.0.1:{mport}']\n"
        ),
    )
    .unwrap();
    let _prom = Killed(
        common::program("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{pport}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package 'prometheus'; scripts/test installs it)"),
    );
    let up = wait_for(Duration::from_secs(30), || {
        query(pport, "up{job=\"rtgauge\"} == 1").first().map(|_| ())
    });
    assert!(up.is_some(), "Prometheus never scraped the monitor");

    // The histogram (after the first 10 s segment) and the audit series reach Prometheus.
    let buckets = wait_for(Duration::from_secs(25), || {
        let r = query(pport, "rtgauge_latency_seconds_count{cpu=\"1\"} > 0");
        (!r.is_empty()).then_some(r)
    });
    assert!(buckets.is_some(), "no latency histogram in Prometheus");
    let b = query(pport, "rtgauge_latency_seconds_bucket{cpu=\"1\"}");
    assert_eq!(b.len(), 17, "16 buckets and +Inf: {b:?}");
    let audit = query(pport, "rtgauge_audit_finding");
    assert!(
        audit.iter().any(|v| v["metric"]["rule"] == "clocksource"),
        "audit series missing: {audit:?}"
    );

    // A 60 ms stall on the monitored CPU shows in the window max within two scrapes (2 s). The measuring
    // thread's next intended wake-up falls up to one period (1 ms) after the stall began, so it sees 59-60 ms.
    // 60 ms, not 5: this VM's host stalls its vCPUs for 5-21 ms now and then (bench/compare_aa), and in a
    // full-suite run no 5 s window stayed below 15 ms for 40 s. First a window (5 s) without a 40 ms sample,
    // so that only the stall can set the max (up to 40 s).
    let calm = wait_for(Duration::from_secs(40), || {
        let v = query(pport, "rtgauge_latency_window_max_seconds{cpu=\"1\"}")
            .first()
            .map(sample_value)?;
        (v < 0.040).then_some(v)
    });
    assert!(
        calm.is_some(),
        "CPU 1 never went 5 s without a 40 ms sample"
    );
    common::spinner(
        1,
        Duration::ZERO,
        Duration::from_millis(60),
        1,
        Duration::ZERO,
    )
    .join()
    .unwrap();
    let stalled = Instant::now();
    let seen = wait_for(Duration::from_secs(6), || {
        query(
            pport,
            "rtgauge_latency_window_max_seconds{cpu=\"1\"} >= 0.050",
        )
        .first()
        .map(|v| (stalled.elapsed(), sample_value(v)))
    });
    let (after, value) = seen.expect("the 60 ms stall never showed in Prometheus");
    eprintln!("stall seen in Prometheus after {after:?}: window max {value} s");
    assert!(after <= Duration::from_millis(2500), "seen after {after:?}");
}

#[test]
fn promtool_checks_and_unit_tests_the_rules() {
    let check = common::program("promtool")
        .arg("check")
        .arg("rules")
        .arg(deploy("rtgauge-rules.yml"))
        .output()
        .expect("promtool (Debian package 'prometheus')");
    assert!(check.status.success(), "{check:?}");
    let test = common::program("promtool")
        .arg("test")
        .arg("rules")
        .arg(deploy("rtgauge-rules.test.yml"))
        .output()
        .unwrap();
    assert!(test.status.success(), "{test:?}");
    assert!(String::from_utf8_lossy(&test.stdout).contains("SUCCESS"));
}

#[test]
fn a_tuning_change_in_the_tree_flips_the_drift_series_and_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("host");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tuned-rt-2socket");
    assert!(common::program("cp")
        .arg("-a")
        .arg(&src)
        .arg(&tree)
        .status()
        .unwrap()
        .success());
    let port = free_port();
    let monitor = start_monitor(&[
        "--cpus",
        "1",
        "--root",
        tree.to_str().unwrap(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--audit-every",
        "1s",
        "-D",
        "30s",
    ]);
    let first = wait_for(Duration::from_secs(15), || {
        let m = http_get(port, "/metrics")?;
        m.lines()
            .find(|l| l.starts_with("rtgauge_audit_finding{rule=\"cpufreq-governor-epb\""))
            .map(str::to_string)
    });
    let first = first.expect("no audit pass");
    assert!(first.contains("status=\"pass\""), "{first}");
    // Somebody switches the governor back to powersave on the captured host.
    for entry in walk(&tree.join("sys/devices/system/cpu")) {
        if entry.ends_with("scaling_governor") {
            std::fs::write(&entry, "powersave\n").unwrap();
        }
    }
    let drift = wait_for(Duration::from_secs(15), || {
        let m = http_get(port, "/metrics")?;
        m.lines()
            .find(|l| {
                l.starts_with("rtgauge_audit_drift{rule=\"cpufreq-governor-epb\"")
                    && l.ends_with(" 1")
            })
            .map(str::to_string)
    });
    let err = stderr_of(monitor);
    assert!(drift.is_some(), "no drift series; stderr: {err}");
    assert!(
        err.contains("drift: rule cpufreq-governor-epb: pass at start, fail now"),
        "{err}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => out.extend(walk(&p)),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn sigterm_stops_within_a_second_and_stores_the_last_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let prom = dir.path().join("prom");
    std::fs::create_dir(&prom).unwrap();
    let mut monitor = start_monitor(&[
        "--cpus",
        "1",
        "--interval",
        "1ms",
        "--listen",
        "off",
        "--textfile",
        prom.to_str().unwrap(),
        "--audit-every",
        "0",
        "--store-every",
        "1h",
        "--label",
        "watch",
        "--db",
        db.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        // SAFETY: kill(2) takes plain integers; the pid is our own child's, not yet waited for, so it
        // cannot have been reused by another process.
        unsafe { libc::kill(monitor.0.id() as i32, libc::SIGTERM) },
        0
    );
    let t = Instant::now();
    let status = wait_for(Duration::from_secs(5), || monitor.0.try_wait().unwrap());
    let took = t.elapsed();
    eprintln!("stopped {took:?} after SIGTERM");
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");

    let doc = common::export_json(db.to_str().unwrap(), "watch");
    let thread = &doc["probes"][0]["threads"][0];
    let samples = thread["latency"]["count"].as_u64().unwrap();
    assert!(samples > 2000, "3 s at 1 ms: {samples} samples");
    assert_eq!(doc["tags"]["source"], "monitor");
    // The textfile holds the same series, in the format node_exporter's textfile collector reads.
    let text = std::fs::read_to_string(prom.join("rtgauge.prom")).unwrap();
    assert!(
        text.contains("rtgauge_latency_seconds_count{cpu=\"1\"}"),
        "{text}"
    );
    let check = common::program("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(prom.join("rtgauge.prom")).unwrap())
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
}

#[test]
fn a_non_loopback_address_needs_allow_remote() {
    let out = rtgauge_std()
        .args([
            "monitor",
            "--cpus",
            "1",
            "--listen",
            "0.0.0.0:9464",
            "-D",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen 0.0.0.0:9464") && err.contains("--allow-remote"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

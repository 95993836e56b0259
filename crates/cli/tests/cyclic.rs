//! End-to-end tests of `rtgauge cyclic`, run for real (this project's CI runs as root with SCHED_FIFO,
//! mlockall and /dev/cpu_dma_latency available). Runs are kept to a few seconds.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, assert_usage_errors, interrupt, is_root, read_json, rtgauge};
use serde_json::Value;

/// A tree with CPUs 0-31, to resolve the seed documents' 30-CPU command lines on this 2-CPU machine.
fn fixture_32_cpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu5/node1")).unwrap();
    std::fs::write(cpu.join("online"), "0-31\n").unwrap();
    std::fs::write(cpu.join("possible"), "0-31\n").unwrap();
    dir
}

#[test]
fn issue_command_prints_summary_and_writes_json_whose_counts_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let native = dir.path().join("native.json");
    let out = rtgauge()
        .args([
            "cyclic", "-m", "-p90", "-i", "200", "-t", "2", "-a", "0-1", "-h", "400", "-D", "2",
            "-q",
        ])
        .args(["--mainaffinity=0", "--json"])
        .arg(&json)
        .arg("--output")
        .arg(&native)
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let t_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("T:")).collect();
    assert_eq!(t_lines.len(), 2, "{stdout}");
    assert!(
        t_lines[0].starts_with("T: 0 (") && t_lines[0].contains("I:200 C:  10000"),
        "{}",
        t_lines[0]
    );
    assert!(
        stdout.contains("# Histogram\n") && stdout.contains("# Max Latencies:"),
        "{stdout}"
    );
    if is_root() {
        assert!(t_lines[0].contains("P:90"), "{}", t_lines[0]);
    }

    // rt-tests JSON: same keys as cyclictest, counts add up.
    let v = read_json(&json);
    for key in [
        "file_version",
        "cmdline:",
        "rt_test_version:",
        "start_time",
        "end_time",
        "return_code",
        "sysinfo",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["num_threads"], 2);
    assert_eq!(v["resolution_in_ns"], 0);
    for (i, t) in v["thread"].as_object().unwrap() {
        let hist: u64 = t["histogram"]
            .as_object()
            .unwrap()
            .values()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(
            hist + t["overflows"].as_u64().unwrap(),
            t["cycles"].as_u64().unwrap(),
            "thread {i}"
        );
        assert_eq!(t["cycles"], 10_000);
        assert_eq!(t["cpu"].as_i64().unwrap(), i.parse::<i64>().unwrap());
        assert!(t["min"].as_u64().unwrap() <= t["max"].as_u64().unwrap());
    }

    // Native document: versioned, ns, HDR histogram that decodes to the cycle count, full timeline.
    let d = read_json(&native);
    assert_eq!(d["schema_version"], 1);
    assert_eq!(d["status"], "complete");
    let p = &d["probes"][0];
    assert_eq!(p["probe"], "cyclic");
    assert_eq!(p["config"]["interval_ns"], 200_000);
    for t in p["threads"].as_array().unwrap() {
        let lat = &t["latency"];
        assert_eq!(lat["count"], 10_000);
        let blob = rtgauge_model::latency::HdrBlob(lat["hdr"].as_str().unwrap().to_string());
        let h = blob.decode().unwrap();
        assert_eq!(h.len(), 10_000);
        let tl: u64 = t["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["count"].as_u64().unwrap())
            .sum();
        assert_eq!(tl, 10_000);
        assert!(
            t["timeline"].as_array().unwrap().len() >= 2,
            "1 s intervals over 2 s"
        );
        assert!(lat["percentiles"].as_array().unwrap().len() >= 6);
        if is_root() {
            assert_eq!(t["conditions"]["policy"]["achieved"], "fifo");
            assert_eq!(t["conditions"]["priority"]["achieved"], 90);
            assert_eq!(
                t["conditions"]["cpu"]["achieved"],
                t["conditions"]["cpu"]["requested"]
            );
        }
    }
    if is_root() {
        assert_eq!(p["conditions"]["mlockall"]["achieved"], true);
        assert_eq!(p["conditions"]["cpu_dma_latency_us"]["achieved"], 0);
        assert_eq!(p["conditions"]["main_affinity"]["achieved"], "0");
    }
}

#[test]
fn seed_000_command_resolves_as_cyclictest_would() {
    let fx = fixture_32_cpus();
    let out = rtgauge()
        .args([
            "cyclic",
            "-m",
            "-p99",
            "-D",
            "1h",
            "-i",
            "100",
            "-h",
            "100",
            "-a",
            "2-29",
            "-t",
            "28",
            "--mainaffinity=1",
        ])
        .arg("--root")
        .arg(fx.path())
        .arg("--dry-run")
        .output()
        .unwrap();
    assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["config"];
    assert_eq!(c["threads"], 28);
    assert_eq!(c["interval_ns"], 100_000);
    assert_eq!(c["distance_ns"], 0, "-h forces the distance to 0");
    assert_eq!(c["policy"], "fifo");
    assert_eq!(c["priority"], 99);
    assert_eq!(c["hist_buckets"], 100);
    assert_eq!(c["duration_ns"], 3_600_000_000_000u64);
    let cpus: Vec<u64> = c["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(cpus, (2..=29).collect::<Vec<u64>>());
    assert_eq!(v["main_cpus"], "1");
    assert_eq!(v["mlockall"], true);
    assert_eq!(v["cpu_dma_latency_us"], 0);
}

#[test]
fn seed_003_command_runs_here() {
    // The vPAC guide's command, shortened from 1 minute to 1 second.
    let fx = fixture_32_cpus();
    let dry = rtgauge()
        .args([
            "cyclic",
            "-m",
            "-p",
            "99",
            "-i",
            "100",
            "-t",
            "1",
            "-a",
            "1",
            "-h",
            "120",
            "-D",
            "1m",
            "--mainaffinity=0",
            "-q",
        ])
        .arg("--root")
        .arg(fx.path())
        .arg("--dry-run")
        .output()
        .unwrap();
    assert!(dry.status.success());
    let v: Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(v["config"]["cpus"][0], 1);
    assert_eq!(v["config"]["duration_ns"], 60_000_000_000u64);
    assert_eq!(v["main_cpus"], "0");

    let out = rtgauge()
        .args([
            "cyclic",
            "-m",
            "-p",
            "99",
            "-i",
            "100",
            "-t",
            "1",
            "-a",
            "1",
            "-h",
            "120",
            "-D",
            "1",
            "--mainaffinity=0",
            "-q",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("I:100 C:  10000"), "{s}");
    assert!(s.contains("# Histogram Overflows:"), "{s}");
}

#[test]
fn bad_input_is_one_line_naming_the_flag_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["-a", "99"], "-a/--affinity"),
        (&["-i", "0"], "-i/--interval"),
        (&["-D", "-5"], "-D/--duration"),
        (&["-p", "200"], "-p/--priority"),
        (&["--no-such-flag"], "--no-such-flag"),
        (&["-t", "x"], "-t/--threads"),
        (&["-a", "3-1"], "-a/--affinity"),
        (&["--mainaffinity", "64"], "--mainaffinity"),
        (&["-D", "1x"], "-D/--duration"),
    ];
    assert_usage_errors("cyclic", &["-D", "1", "-q"], cases);
}

#[test]
fn sigint_ends_the_run_with_summary_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("int.json");
    let native = dir.path().join("int-native.json");
    let (j, n) = (json.to_str().unwrap(), native.to_str().unwrap());
    let args = [
        "cyclic", "-p", "80", "-i", "1000", "-h", "100", "-D", "60", "-q", "--json", j, "--output",
        n,
    ];
    let (out, took) = interrupt(&args, std::time::Duration::from_millis(1500));
    assert!(took < std::time::Duration::from_secs(5), "stopped promptly");
    assert_ok(&out);
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.lines().any(|l| l.starts_with("T: 0 (")), "{s}");
    let v = read_json(&json);
    let cycles = v["thread"]["0"]["cycles"].as_u64().unwrap();
    assert!(
        (1_000..3_000).contains(&cycles),
        "about 1.5 s of 1 ms cycles, got {cycles}"
    );
    let d = read_json(&native);
    assert_eq!(d["status"], "interrupted");
    assert_eq!(d["probes"][0]["stop_reason"], "signal");
}

#[test]
fn loops_nsecs_and_spikes() {
    let out = rtgauge()
        .args([
            "cyclic", "-l", "300", "-i", "500", "-N", "-h", "1000", "--spike", "0", "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("C:    300"), "{s}");
    // -N: values in ns, so Min is well above the µs figures.
    let min: u64 = s
        .split("Min:")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(min >= 100, "ns expected, got {min}");
    assert!(
        s.contains("spikes = 300"),
        "every sample is above a 0 µs spike threshold: {s}"
    );
}

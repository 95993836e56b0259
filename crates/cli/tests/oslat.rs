//! End-to-end tests of `rtgauge oslat`, run for real (root, SCHED_FIFO). Runs are kept to a few seconds.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, assert_usage_errors, busy_cpu, interrupt, read_json, rtgauge};

#[test]
fn issue_command_writes_json_whose_counts_add_up() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let native = dir.path().join("o-native.json");
    let out = rtgauge()
        .args(["oslat", "-c", "1", "-f", "99", "-D", "2", "--json"])
        .arg(&json)
        .arg("--output")
        .arg(&native)
        .output()
        .unwrap();
    assert_ok(&out);
    let s = String::from_utf8(out.stdout).unwrap();
    for line in [
        "Pre-heat for 1 seconds...",
        "Test starts...",
        "        Core:\t 1",
        "     Maximum:\t",
    ] {
        assert!(s.contains(line), "missing {line:?} in {s}");
    }
    assert!(
        s.contains("(including overflows)") && s.contains("# Worst gaps on CPU 1"),
        "{s}"
    );

    let v = read_json(&json);
    for key in [
        "file_version",
        "cmdline:",
        "rt_test_version:",
        "start_time",
        "sysinfo",
        "num_threads",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    let t = &v["thread"]["0"];
    assert_eq!(t["cpu"], 1);
    let hist: u64 = t["histogram"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(hist, t["iterations"].as_u64().unwrap());
    assert!(
        hist > 10_000_000,
        "a busy loop runs millions of iterations in 2 s, got {hist}"
    );
    assert!((t["duration"].as_f64().unwrap() - 2.0).abs() < 0.05);
    assert!(t["min"].as_u64().unwrap() <= t["max"].as_u64().unwrap());

    let d = read_json(&native);
    assert_eq!(d["schema_version"], 1);
    let p = &d["probes"][0];
    assert_eq!(p["probe"], "oslat");
    let th = &p["threads"][0];
    assert_eq!(th["gaps"]["count"], th["iterations"]);
    let tl: u64 = th["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    assert_eq!(tl, th["iterations"].as_u64().unwrap());
    assert_eq!(th["conditions"]["policy"]["achieved"], "fifo");
    assert_eq!(th["conditions"]["priority"]["achieved"], 99);
    assert_eq!(th["over_thresholds"].as_array().unwrap().len(), 4);
    let f = p["counter"]["frequency_hz"].as_u64().unwrap();
    assert!(f > 100_000_000, "counter frequency {f}");
    assert!(p["counter"]["cross_check_ppm"].as_f64().unwrap().abs() < 1_000.0);
}

#[test]
fn sigint_prints_the_summary_and_writes_the_json() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("int.json");
    let args = [
        "oslat",
        "-c",
        "1",
        "-D",
        "60",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    let (out, took) = interrupt(&args, std::time::Duration::from_millis(2500));
    assert!(took < std::time::Duration::from_secs(3), "stopped promptly");
    assert_ok(&out);
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("    Duration:\t"));
    let v = read_json(&json);
    let d = v["thread"]["0"]["duration"].as_f64().unwrap();
    assert!(
        d > 0.5 && d < 2.0,
        "interrupted about 1.25 s into the measurement, got {d}"
    );
}

#[test]
fn trace_threshold_still_prints_summary_and_json() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let out = rtgauge()
        .args([
            "oslat",
            "-c",
            "1",
            "-D",
            "30",
            "-q",
            "-T",
            "1",
            "--preheat",
            "100ms",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_ok(&out);
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(
        s.contains("Trace threshold (1 us) triggered on cpu 1"),
        "{s}"
    );
    assert!(s.contains("     Maximum:\t"), "{s}");
    let v = read_json(&json);
    assert!(v["thread"]["0"]["duration"].as_f64().unwrap() < 29.0);
}

#[test]
fn bad_input_is_one_line_naming_the_flag_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["-c", "99"], "-c/--cpu-list"),
        (&["-b", "2"], "-b/--bucket-size"),
        (&["-f", "0"], "-f/--rtprio"),
        (&["-D", "-5"], "-D/--duration"),
        (&["-w", "fork"], "-w/--workload"),
        (&["-m", "12Q"], "-m/--workload-mem"),
        (&["-C", "77"], "-C/--cpu-main-thread"),
    ];
    assert_usage_errors("oslat", &[], cases);
}

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

/// Where thread `tid` of `pid` may run (`Cpus_allowed_list`) and last ran (stat's `processor`).
fn placement(pid: u32, tid: u32) -> (String, String) {
    let task = format!("/proc/{pid}/task/{tid}");
    let status = std::fs::read_to_string(format!("{task}/status")).unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let stat = std::fs::read_to_string(format!("{task}/stat")).unwrap();
    // Fields after the command (which may hold spaces) start at field 3; processor is field 39.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let processor = after.split_whitespace().nth(39 - 3).unwrap().to_string();
    (allowed, processor)
}

/// oslat pins its main thread to `-C` (default 0), which is measured when `-c` includes it; rtgauge's main
/// thread does more (drains, merges, /proc samples, checkpoints), so by default it goes to a CPU not
/// measured, seen from /proc while the loops run and in the run document.
#[test]
fn the_main_thread_is_off_the_measured_cpus_by_default() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("o.json");
    let child = common::rtgauge_std()
        .args([
            "oslat",
            "-c",
            "1",
            "-D",
            "2",
            "-q",
            "--preheat",
            "100ms",
            "--output",
        ])
        .arg(&native)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let pid = child.id();
    let main = placement(pid, pid);
    let loops: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let tid: u32 = e.unwrap().file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            comm.starts_with("rtgauge-osl").then(|| placement(pid, tid))
        })
        .collect();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    assert_eq!(main, ("0".to_string(), "0".to_string()), "main thread");
    assert_eq!(
        loops,
        [("1".to_string(), "1".to_string())],
        "measuring thread"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("main thread shares"), "{err}");
    let p = &read_json(&native)["probes"][0];
    assert_eq!(p["config"]["main_cpu"], 0);
    assert_eq!(p["conditions"]["main_affinity"]["achieved"], "0");
}

/// Pinned onto the measured CPU, the main thread's work is that CPU's noise: the run says so, on stderr and
/// among the stored run's warnings.
#[test]
fn a_main_thread_on_a_measured_cpu_is_said() {
    let _cpu = busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let profile = dir.path().join("osl.toml");
    std::fs::write(
        &profile,
        "name = \"osl\"\nduration = \"1s\"\n[[probe]]\nkind = \"oslat\"\n\
         flags = \"-c 1 -C 1 -q --preheat 100ms\"\n",
    )
    .unwrap();
    let out = rtgauge()
        .args(["run", "--no-sample", "--db"])
        .arg(&db)
        .arg("--profile")
        .arg(&profile)
        .output()
        .unwrap();
    assert_ok(&out);
    let said = "the main thread shares CPU 1 with a measuring thread";
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("rtgauge: warning: {said}")), "{err}");
    let d = common::export_json(db.to_str().unwrap(), "latest");
    let warnings = d["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with(said)),
        "{warnings:?}"
    );
}

/// The same from `rtgauge oslat`.
#[test]
fn oslat_says_its_main_thread_shares_a_measured_cpu() {
    let _cpu = busy_cpu();
    let out = rtgauge()
        .args([
            "oslat",
            "-c",
            "1",
            "-C",
            "1",
            "-D",
            "1",
            "-q",
            "--preheat",
            "100ms",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("rtgauge: warning: the main thread shares CPU 1 with a measuring thread"),
        "{err}"
    );
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
        (&["-C", "one"], "--cpu-main-thread"),
    ];
    assert_usage_errors("oslat", &[], cases);
}

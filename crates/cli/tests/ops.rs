//! `rtgauge ops`: bad input is one line and exit 2; a short real run measures every requested operation
//! and its run document carries the comparable measures with replicates.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;

#[test]
fn bad_input_names_the_flag() {
    assert_usage_errors(
        "ops",
        &[],
        &[
            (&["--ops", "null_syscall,teleport"], "--ops"),
            (&["-r", "0"], "--repetitions"),
            (&["--sample-time", "1ns"], "--sample-time"),
            (&["--sample-time", "20s"], "--sample-time"),
            (&["--ctx-procs", "1"], "--ctx-procs"),
            (&["--mmap-size", "4K"], "--mmap-size"),
            (&["--sleep", "10us,forever"], "--sleep"),
            (&["--cpu", "4000"], "--cpu"),
            (&["--scratch-dir", "/nonexistent/dir"], "--scratch-dir"),
        ],
    );
}

#[test]
fn short_run_measures_the_requested_operations() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ops.json");
    let o = rtgauge()
        .args([
            "ops",
            "--ops",
            "null_syscall,pipe_rtt,fork_exit,fork_exec,fork_sh,sleep",
            "-r",
            "7",
            "--sample-time",
            "200us",
            "--sleep",
            "50us",
            "--cpu",
            "0",
            "--output",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_ok(&o);
    assert!(text.contains("null syscall (getppid)"), "{text}");
    assert!(text.contains("sleep 50 µs overshoot"), "{text}");
    assert!(
        !text.contains("stat"),
        "only the requested operations: {text}"
    );
    let doc = read_json(&out);
    let p = &doc["probes"][0];
    assert_eq!(p["probe"], "ops");
    assert_eq!(p["cpu"]["achieved"], 0);
    let names: Vec<&str> = p["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "null_syscall",
            "pipe_rtt",
            "fork_exit",
            "fork_exec",
            "fork_sh",
            "sleep_50us"
        ]
    );
    for op in p["ops"].as_array().unwrap() {
        assert_eq!(op["samples_ns"].as_array().unwrap().len(), 7);
        assert_eq!(op["latency"]["count"], 7);
    }
    // Process creation costs far more than a syscall on any machine, and each step adds work: execve loads a
    // program, sh -c loads the shell and then the program. Compared on the fastest sample (noise only adds).
    let fastest = |i: usize| {
        p["ops"][i]["samples_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        fastest(2) > 10.0 * fastest(0),
        "fork {} vs syscall {}",
        fastest(2),
        fastest(0)
    );
    assert!(
        fastest(3) > fastest(2),
        "fork+execve {} vs fork+exit {}",
        fastest(3),
        fastest(2)
    );
    assert!(
        fastest(4) > fastest(3),
        "sh -c {} vs fork+execve {}",
        fastest(4),
        fastest(3)
    );
    assert!(
        fastest(1) > fastest(0),
        "pipe {} vs syscall {}",
        fastest(1),
        fastest(0)
    );
}

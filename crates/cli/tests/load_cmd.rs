//! `--load-cmd` for real: the command runs beside the probe on the CPUs not measured, its CPU use is
//! recorded, and it never outlives rtgauge — stopped at the end, on SIGINT, and after kill -9 (the kernel
//! kills it by PR_SET_PDEATHSIG; a grandchild left in its process group is killed by the next start).
//!
//! Needs root (SCHED_FIFO); CI runs as root. CPU 1 is measured, the command runs on CPU 0.

#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_ok, read_json, rtgauge_std};
use std::time::Duration;

/// Pids of processes whose command line is exactly `cmdline` (NUL-separated words joined by spaces).
fn processes(cmdline: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&raw).replace('\0', " ");
        if text.trim_end() == cmdline {
            out.push(pid);
        }
    }
    out
}

/// Wait up to 3 s for no process running `cmdline`.
fn gone(cmdline: &str) -> bool {
    for _ in 0..300 {
        if processes(cmdline).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A 60 s `cyclic` on CPU 1 with `--load-cmd command` (temporary files under `tmp`), once the process whose
/// command line is `started` runs beside it.
fn cyclic_beside(
    command: &str,
    started: &str,
    tmp: &std::path::Path,
    stderr: std::process::Stdio,
) -> std::process::Child {
    let child = rtgauge_std()
        .args([
            "cyclic",
            "-a",
            "1",
            "-q",
            "-D",
            "60s",
            "--load-cmd",
            command,
        ])
        .env("TMPDIR", tmp)
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(processes(started).len(), 1, "the command did not start");
    child
}

#[test]
fn the_command_runs_beside_the_probe_and_its_cpu_use_is_recorded() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    let stress = common::program_line("stress-ng", "--cpu 1 --quiet");
    let o = rtgauge_std()
        .args([
            "cyclic",
            "-m",
            "-p",
            "80",
            "-a",
            "1",
            "-q",
            "-D",
            "2s",
            "--load-cmd",
            &stress,
            "--output",
        ])
        .arg(&out)
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert_ok(&o);
    let doc = read_json(&out);
    let c = &doc["probes"][0]["load"]["command"];
    eprintln!("{c}");
    assert_eq!(c["command"], stress.as_str());
    assert_eq!(c["exited_early"], false);
    // One stress-ng worker spins on CPU 0 for the whole run: its share is recorded (what it gets depends
    // on what else CPU 0 runs, so only a spinning share is required, not a full CPU).
    let pct = c["cpu_percent"].as_f64().unwrap();
    assert!(
        pct > 20.0 && pct < 110.0,
        "stress-ng --cpu 1 used {pct:.1} % CPU"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("command '{stress}'")));
    assert!(gone(&stress), "stress-ng outlived the run");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rtgauge-load-"))
        .collect();
    assert!(left.is_empty(), "scratch left: {left:?}");
}

#[test]
fn sigint_stops_the_command() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let sleep = common::program_line("sleep", "4241.5");
    let child = cyclic_beside(&sleep, &sleep, dir.path(), std::process::Stdio::piped());
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(gone(&sleep), "the command outlived SIGINT");
}

#[test]
fn kill_9_takes_the_command_along_and_the_next_start_kills_its_group() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    // The shell gets PR_SET_PDEATHSIG; the background sleep (its child) does not and is left in the group.
    let line = format!(
        "{} & {}; wait",
        common::program_line("sleep", "4242.5"),
        common::program_line("sleep", "4243.5")
    );
    let mut child = cyclic_beside(
        &line,
        "sleep 4242.5",
        dir.path(),
        std::process::Stdio::null(),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        gone("/bin/sh -c sleep 4242.5 & sleep 4243.5; wait"),
        "the shell outlived kill -9 (PR_SET_PDEATHSIG)"
    );
    assert_eq!(
        processes("sleep 4242.5").len(),
        1,
        "the orphaned grandchild is still there for the next start to find"
    );
    // The next start of any load kills what is left of the dead run's group and removes its directory.
    assert_ok(
        &rtgauge_std()
            .args(["load", "timer:10", "--cpus", "0", "-D", "100ms"])
            .env("TMPDIR", dir.path())
            .output()
            .unwrap(),
    );
    assert!(
        gone("sleep 4242.5"),
        "a grandchild of the killed run remains"
    );
    assert!(
        gone("sleep 4243.5"),
        "a grandchild of the killed run remains"
    );
    let left = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, 0, "the killed run's scratch directory remains");
}

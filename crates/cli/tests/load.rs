//! Load generators for real: the achieved duty cycle matches the level (the generator's own CPU time and
//! /proc/stat), a SCHED_FIFO probe keeps its median under load on its own CPU at lower priority, the
//! achieved load is recorded with the latency, and no load outlives rtgauge (SIGINT, kill -9) while its
//! scratch files go (at once, or at the next start after a kill).
//!
//! Needs root (SCHED_FIFO); CI runs as root. CPU 0 is the housekeeping CPU, CPU 1 the measured one.

#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_ok, read_json, rtgauge_std};
use std::path::Path;
use std::time::Duration;

/// Busy and total ticks of `cpu` from /proc/stat.
fn cpu_ticks(cpu: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let line = stat
        .lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .unwrap();
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let idle = v[3] + v[4];
    let total: u64 = v.iter().take(8).sum();
    (total - idle, total)
}

#[test]
fn cpu_load_at_level_50_holds_half_a_cpu() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.json");
    let (b0, t0) = cpu_ticks(0);
    let o = rtgauge_std()
        .args(["load", "cpu:50", "--cpus", "0", "-D", "4s", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    let (b1, t1) = cpu_ticks(0);
    assert_ok(&o);
    let r = read_json(&out);
    let g = &r["generators"][0];
    let achieved = g["cpu_percent"].as_f64().unwrap();
    let busy = (b1 - b0) as f64 / (t1 - t0).max(1) as f64 * 100.0;
    eprintln!(
        "cpu:50 achieved {achieved:.1} % (thread CPU time); CPU 0 busy {busy:.1} % (/proc/stat)"
    );
    assert!((45.0..=55.0).contains(&achieved), "{r}");
    // /proc/stat sees the same load less the time the VM's host took the vCPU (steal), and other tenants'
    // bursts move it by a few points (44.6 % and 39 % seen on this VM while the thread itself held 50 %):
    // the bound tells a real half-CPU load from none, not the host's share.
    assert!(busy >= 35.0, "/proc/stat says CPU 0 was busy {busy:.1} %");
    assert!(g["rate"].as_f64().unwrap() > 0.0);
}

fn cyclic_p50(extra: &[&str], out: &Path) -> (f64, serde_json::Value) {
    let o = rtgauge_std()
        .args([
            "cyclic", "-m", "-p", "80", "-i", "500", "-a", "1", "-q", "-D", "2s", "--output",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert_ok(&o);
    let doc = read_json(out);
    let p = &doc["probes"][0];
    let p50 = p["threads"][0]["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["percentile"].as_f64() == Some(50.0))
        .unwrap()["value_ns"]
        .as_f64()
        .unwrap();
    (p50, p.clone())
}

#[test]
fn a_fifo_probe_keeps_its_median_under_load_on_its_own_cpu() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let f = |n: &str| dir.path().join(n);
    // Alternate idle and loaded twice; each side's least disturbed run is compared.
    let mut idle = Vec::new();
    let mut loaded = Vec::new();
    let mut last = serde_json::Value::Null;
    for i in 0..2 {
        idle.push(cyclic_p50(&[], &f(&format!("idle{i}.json"))).0);
        // A CPU-bound load below the probe tests the scheduling class: the FIFO probe must preempt it at
        // once. (A memory hog on the same core is another matter: it evicts the probe's cache lines and
        // doubles p50 here — cache interference, documented in docs/load.md, not a scheduling failure.)
        let (p, probe) = cyclic_p50(&["--load", "cpu@measured"], &f(&format!("load{i}.json")));
        loaded.push(p);
        last = probe;
    }
    let (i, l) = (
        idle.iter().copied().fold(f64::MAX, f64::min),
        loaded.iter().copied().fold(f64::MAX, f64::min),
    );
    eprintln!(
        "p50 idle {idle:?} ns, with cpu@measured {loaded:?} ns: ratio {:.3}",
        l / i
    );
    assert!(
        l <= 1.2 * i,
        "p50 {l} ns under co-located load vs {i} ns idle"
    );
    // The run document holds the load achieved beside the latency.
    let load = &last["load"];
    assert_eq!(load["spec"], "cpu:100@measured", "{last}");
    assert_eq!(load["cpus"], "1");
    for g in load["generators"].as_array().unwrap() {
        assert!(g["ops"].as_u64().unwrap() > 0, "{g}");
    }
}

#[test]
fn housekeeping_load_is_recorded_with_the_latency() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let (_, probe) = cyclic_p50(
        &["--load", "cpu,memory@housekeeping"],
        &dir.path().join("hk.json"),
    );
    let load = &probe["load"];
    assert_eq!(load["cpus"], "0", "{probe}");
    let kinds: Vec<&str> = load["generators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["cpu", "memory"]);
    assert!(probe["threads"][0]["latency"]["count"].as_u64().unwrap() > 1000);
    // compare puts the loads side by side: an idle run and a loaded one are not alike.
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (_, _) = cyclic_p50(&[], &dir.path().join("idle.json"));
    for f in ["idle.json", "hk.json"] {
        assert_ok(
            &rtgauge_std()
                .args(["import", dir.path().join(f).to_str().unwrap(), "--db", db])
                .output()
                .unwrap(),
        );
    }
    let c = common::compare_in(db, &["1", "2"]);
    let row = common::difference(&c, "load");
    assert_eq!(row["values"][0], "none (idle)");
    assert!(
        row["values"][1]
            .as_str()
            .unwrap()
            .starts_with("cpu,memory:100@housekeeping on CPU 0"),
        "{row}"
    );
}

/// rtgauge measures the platform, not itself: under each load kind on the housekeeping CPU (and under the
/// loaded profiles' mix) the measuring thread takes no page fault and is never preempted while it measures.
/// A `fork` load inside the probe's process write-protected every page of it: each fork cost the
/// measuring thread a fault at its next store (see rtgauge_probe::load).
#[test]
fn no_load_kind_disturbs_the_measuring_thread() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let mixes = [
        "cpu",
        "memory",
        "io",
        "fork",
        "timer",
        "msg",
        "ipi",
        "cpu,memory,io,fork,timer",
    ];
    for mix in mixes {
        let out = dir.path().join(format!("{mix}.json"));
        let o = rtgauge_std()
            .args([
                "cyclic", "-m", "-p", "95", "-a", "1", "-i", "200", "-D", "2", "-q",
            ])
            .args(["--load", &format!("{mix}@0"), "--output"])
            .arg(&out)
            .output()
            .unwrap();
        assert_ok(&o);
        let r = read_json(&out);
        let probe = &r["probes"][0];
        let generators = probe["load"]["generators"].as_array().unwrap();
        assert!(
            generators.iter().all(|g| g["ops"].as_u64().unwrap() > 0),
            "{mix}: a generator did nothing: {generators:?}"
        );
        for t in probe["threads"].as_array().unwrap() {
            let d = &t["disturbance"];
            let faults = d["minor_faults"].as_u64().unwrap() + d["major_faults"].as_u64().unwrap();
            let preempted = d["involuntary_switches"].as_u64().unwrap();
            eprintln!(
                "--load {mix}@0: thread on CPU 1 took {faults} faults, {preempted} preemptions"
            );
            assert!(
                faults <= 2,
                "{mix}: {faults} faults in the measuring thread: {d}"
            );
            assert!(preempted <= 2, "{mix}: preempted {preempted} times: {d}");
        }
    }
}

/// A load whose worker is killed from outside mid-run: the run says that it was not loaded throughout,
/// with how the worker ended, and the result records it (`lost`).
#[test]
fn a_load_that_did_not_last_the_run_is_a_shortfall() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let child = rtgauge_std()
        .args([
            "cyclic", "-m", "-p", "95", "-a", "1", "-i", "1000", "-D", "3", "-q",
        ])
        .args(["--load", "cpu@0", "--output"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let workers = children_of(child.id());
    assert_eq!(workers.len(), 1, "{workers:?}");
    // SAFETY: SIGKILL to the worker this test's rtgauge started.
    unsafe { libc::kill(workers[0] as i32, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    assert_ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: load cpu:100@0: the worker ended before it was stopped")
            && err.contains("SIGKILL")
            && err.contains("it may not have covered the run"),
        "{err}"
    );
    let r = read_json(&out);
    let lost = r["probes"][0]["load"]["lost"].as_str().unwrap();
    assert!(lost.contains("before it was stopped"), "{lost}");
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state, ppid, …
        let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        if after.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            out.push(p);
        }
    }
    out
}

#[test]
fn no_load_outlives_rtgauge() {
    let _cpu = common::busy_cpu();
    let scratch = std::env::temp_dir();
    // SIGINT: the run ends cleanly and removes its scratch directory.
    let (o, took) = common::interrupt(
        &["load", "io,fork,cpu:50", "--cpus", "0"],
        Duration::from_millis(1500),
    );
    assert_ok(&o);
    assert!(took < Duration::from_secs(1), "{took:?}");
    // kill -9: the generators' worker process sees its stdin close and ends; the fork generator's
    // children die with their generator.
    let mut child = rtgauge_std()
        .args(["load", "io,fork", "--cpus", "0"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(1500));
    let dir = scratch.join(format!("rtgauge-load-{pid}"));
    assert!(dir.exists(), "no scratch directory while loading");
    let workers = children_of(pid);
    assert_eq!(workers.len(), 1, "one worker process: {workers:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    // Gone, or a zombie its new parent has not reaped yet (a container's PID 1 may never reap).
    let gone = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |st| {
            st.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    let t0 = std::time::Instant::now();
    while !workers.iter().all(gone) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        workers.iter().all(gone),
        "the worker {workers:?} outlived the killed rtgauge"
    );
    // Its fork generator's children die with their generator (PR_SET_PDEATHSIG): none is left.
    assert!(
        workers.iter().all(|w| children_of(*w).is_empty()),
        "children of the worker remain"
    );
    eprintln!("worker gone {:?} after the kill -9", t0.elapsed());
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    // Its scratch directory is a leftover until the next start, which removes it.
    assert_ok(
        &rtgauge_std()
            .args(["load", "io", "--cpus", "0", "-D", "200ms"])
            .output()
            .unwrap(),
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn bad_load_specs_are_usage_errors() {
    common::assert_usage_errors(
        "load",
        &[],
        &[
            (&["gpu"], "'gpu' is not a load kind"),
            (&["cpu:0"], "level '0'"),
            (&["cpu@moon"], "placement 'moon'"),
        ],
    );
    let o = rtgauge_std()
        .args([
            "cyclic",
            "-a",
            "0-1",
            "-t",
            "-D",
            "1",
            "--load",
            "cpu@housekeeping",
        ])
        .output()
        .unwrap();
    // Both CPUs of this machine measured: no housekeeping CPU is left to load.
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no CPU to load"), "{err}");
}

//! `rtgauge mem`: bad input is one line and exit 2; a small sweep finds the L1 step at the size sysfs
//! reports and stores curve, bandwidth and the one-node NUMA matrix.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;

#[test]
fn bad_input_names_the_flag() {
    assert_usage_errors(
        "mem",
        &[],
        &[
            (&["--max-size", "8G"], "--max-size"),
            (&["--max-size", "1K"], "--max-size"),
            (&["--min-size", "1M", "--max-size", "64K"], "--min-size"),
            (&["--bw-size", "100"], "--bw-size"),
            (&["-r", "0"], "--repetitions"),
            (&["--loads", "5"], "--loads"),
            (&["--cpu", "4000"], "--cpu"),
        ],
    );
}

fn l1d_bytes() -> Option<u64> {
    let dir = "/sys/devices/system/cpu/cpu0/cache";
    for e in std::fs::read_dir(dir).ok()? {
        let p = e.ok()?.path();
        let r = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        if r("level").trim() == "1" && r("type").trim() == "Data" {
            let s = r("size");
            return s
                .trim()
                .trim_end_matches('K')
                .parse::<u64>()
                .ok()
                .map(|k| k << 10);
        }
    }
    None
}

/// The sweep up to five times, 3 s apart: this VM's vCPUs share their host cores with other guests, and a
/// sibling busy in L1 shrinks the L1 this vCPU sees for a while (the step then appears at 16 KiB of a
/// 32 KiB L1; on 2026-11-28 three attempts within 1.2 s all put it at 8 KiB, and a minute later it was at
/// 32 KiB again). Every failed attempt is printed; the structure of the result is checked on every attempt.
#[test]
fn small_sweep_finds_the_l1_step() {
    let mut errs = Vec::new();
    for attempt in 1..=5 {
        match sweep() {
            Ok(()) => return,
            Err(e) => {
                eprintln!("attempt {attempt}: {e}");
                errs.push(e);
                std::thread::sleep(std::time::Duration::from_secs(3));
            }
        }
    }
    panic!("every attempt failed: {errs:#?}");
}

fn sweep() -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mem.json");
    let o = rtgauge()
        .args([
            "mem",
            "--cpu",
            "0",
            "--max-size",
            "2M",
            "-r",
            "3",
            "--loads",
            "200000",
            "--bw-size",
            "4M",
            "--numa-size",
            "4M",
            "--output",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_ok(&o);
    let doc = read_json(&out);
    let m = &doc["probes"][0];
    assert_eq!(m["probe"], "mem");
    assert_eq!(m["latency"][0]["size_bytes"], 4096);
    assert_eq!(m["bandwidth"].as_array().unwrap().len(), 3);
    assert_eq!(m["numa"][0]["verified_node"], 0, "{}", m["numa"]);
    if let Some(l1) = l1d_bytes() {
        let first = m["steps"][0]["capacity_bytes"].as_u64().unwrap() as f64;
        let r = first / l1 as f64;
        if !(1.0 / 1.52..=1.52).contains(&r) || m["steps"][0]["matches"] != "L1" {
            return Err(format!("first step {first} vs L1d {l1}: {text}"));
        }
    }
    Ok(())
}

//! `rtgauge hwnoise` on this machine's kernel, and the `ran` profile's hwnoise stage: measured where the
//! kernel has the hwlat tracer, said and skipped (never failed) where it has not. The tracer itself is
//! exercised on a real PREEMPT_RT kernel in `lab_hwnoise.rs`.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use serde_json::Value;

/// Whether this kernel offers the hwlat tracer (tracefs mounted for the look, and left as found).
fn has_hwlat() -> bool {
    rtgauge_probe::hwnoise::unavailable(None).is_none()
}

/// One test at a time: the tracer has one user (a second run is refused), and tracefs is mounted for a look.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_verb_measures_or_names_what_the_kernel_lacks() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hw.json");
    let (code, stdout, stderr) = common::run(&[
        "hwnoise",
        "-c",
        "0",
        "-D",
        "1",
        "--output",
        out.to_str().unwrap(),
    ]);
    if has_hwlat() {
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(stdout.contains("CPU 0: "), "{stdout}");
        let doc = common::read_json(&out);
        assert_eq!(doc["probes"][0]["probe"], "hwnoise");
    } else {
        assert_eq!(code, 2, "{stdout}{stderr}");
        assert!(
            stderr.contains(
                "has no hwlat tracer and no osnoise tracer with OSNOISE_IRQ_DISABLE (available_tracers: "
            )
                && stderr.contains("CONFIG_HWLAT_TRACER"),
            "{stderr}"
        );
        assert!(!out.exists(), "nothing measured, nothing written");
    }
    // Either way, the tracer is off and no marker is left.
    assert!(!std::path::Path::new("/run/rtgauge/hwlat-saved").exists());
    // rtla hwnoise's method, asked for: measured, or what is missing named.
    let (code, stdout, stderr) =
        common::run(&["hwnoise", "--tracer", "osnoise", "-c", "0", "-D", "1"]);
    match rtgauge_probe::hwnoise::unavailable(Some(rtgauge_model::hwnoise::HwTracer::Osnoise)) {
        None => assert!(code == 0 && stdout.contains("CPU 0: "), "{stdout}{stderr}"),
        Some(why) => {
            assert_eq!(code, 2, "{stdout}{stderr}");
            assert!(
                why.contains("osnoise") && stderr.contains(&why) && stderr.contains("Linux 6.3"),
                "{stderr}"
            );
        }
    }
    assert!(!std::path::Path::new("/run/rtgauge/hwlat-saved").exists());
    // Bad input: named, exit 2.
    let (code, _, stderr) =
        common::run(&["hwnoise", "--tracer", "osnoise", "--mode", "round-robin"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--mode round-robin is the hwlat tracer's"),
        "{stderr}"
    );
    let (code, _, stderr) = common::run(&["hwnoise", "--width", "2000000", "--window", "1000000"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--width") && stderr.contains("longer than --window"),
        "{stderr}"
    );
}

#[test]
fn the_ran_profile_skips_hwnoise_where_the_kernel_has_no_tracer() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let (code, stdout, stderr) = common::run(&[
        "run",
        "--profile",
        "ran",
        "--duration",
        "1s",
        "--no-sample",
        "--db",
        &p("rtgauge.db"),
        "--html",
        &p("run.html"),
        "--output",
        &p("run.json"),
    ]);
    let doc: Value = common::read_json(&dir.path().join("run.json"));
    let gate = doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["gate"]["metric"] == "hwnoise_max_ns")
        .unwrap_or_else(|| panic!("no hwnoise gate: {doc:#}"))
        .clone();
    assert_eq!(doc["status"], "complete", "{stderr}");
    if has_hwlat() {
        assert_ne!(gate["outcome"], "skipped", "{gate}");
        assert!(doc["probes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["probe"] == "hwnoise"));
    } else {
        assert!(
            stderr.contains("rtgauge: hwnoise skipped: this kernel"),
            "{stderr}"
        );
        assert_eq!(gate["outcome"], "skipped", "{gate}");
        assert_eq!(doc["skipped"][0]["kind"], "hwnoise", "{doc:#}");
        assert!(stdout.contains("SKIPPED"), "{stdout}");
        // Its other probes ran; a skipped gate alone never makes the exit code 1 (the others decide).
        let kinds: Vec<&str> = doc["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["probe"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["cyclic", "oslat"], "{stderr}");
        let others_pass = doc["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["outcome"] != "skipped")
            .all(|v| v["outcome"] == "pass");
        assert_eq!(code, if others_pass { 0 } else { 1 }, "{stdout}{stderr}");
    }
}

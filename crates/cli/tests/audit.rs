//! End-to-end tests of `rtgauge audit` and `rtgauge fingerprint`: exit codes, formats, linters' errors,
//! capture → root replay, and the wall-time budget (< 0.5 s without sampling, < 0.5 s + interval with it).
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn rtgauge() -> Command {
    common::rtgauge_std()
}

mod common;
use common::{fixture, run};

#[test]
fn exit_codes_follow_the_verdict() {
    let (code, out, _) = run(&[
        "audit",
        "--root",
        &fixture("tuned-rt-2socket"),
        "--no-sample",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASS") && out.contains("cmdline-isolcpus"));
    let (code, out, _) = run(&["audit", "--root", &fixture("untuned-server"), "--no-sample"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL") && out.contains("fix: "));
    // A host with no CPU set aside for real-time work fails isolation, with the fix, instead of reading
    // as n/a everywhere.
    let iso: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.contains("cmdline-isolcpus"))
        .take_while(|l| l.starts_with(' ') || l.contains("cmdline-isolcpus"))
        .collect();
    assert!(
        iso[0].starts_with("FAIL") && iso[0].contains("no CPU is set aside for real-time work"),
        "{iso:?}"
    );
    assert!(
        iso.iter().any(|l| l.contains("fix: Add isolcpus=")),
        "{iso:?}"
    );
}

#[test]
fn json_report_carries_ids_statuses_and_evidence() {
    let (code, out, _) = run(&[
        "audit",
        "--root",
        &fixture("photon-rt-esxi-guest"),
        "--format",
        "json",
        "--target",
        "rt-guest",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["target"], "rt-guest");
    assert_eq!(v["isolated"], "1");
    let f = v["findings"].as_array().unwrap();
    assert!(f.len() >= 47);
    let steal = f.iter().find(|x| x["id"] == "guest-steal-time").unwrap();
    assert_eq!(steal["status"], "pass");
    assert!(steal["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["source"] == "/proc/stat"));
    assert!(f.iter().any(|x| x["status"] == "n/a"));
}

#[test]
fn operator_isolated_set_and_target_override() {
    let (_, out, _) = run(&[
        "audit",
        "--root",
        &fixture("untuned-server"),
        "--no-sample",
        "--isolated",
        "4-7",
        "--target",
        "bare-metal-rt-host",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["isolated"], "4-7");
    assert_eq!(v["isolated_source"], "operator (--isolated)");
    assert_eq!(v["target_source"], "operator");
}

#[test]
fn usage_and_runtime_errors_exit_2() {
    let (code, _, err) = run(&["audit", "--root", "/nonexistent/rtgauge"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a directory"), "{err}");
    assert_eq!(run(&["audit", "--target", "desktop"]).0, 2);
    assert_eq!(run(&["audit", "--isolated", "3-1"]).0, 2);
    assert_eq!(run(&["audit", "--vmx", "a.vmx", "--root", "/"]).0, 2);
    assert_eq!(run(&["audit", "--vmx", "/nonexistent.vmx"]).0, 2);
}

#[test]
fn malformed_definitions_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("bad.vmx", "--vmx", "this is not a key value\n", "bad.vmx:1"),
        (
            "bad.xml",
            "--libvirt",
            "<domain>\n  <vcpu>2</vcpu>\n  <cputune>\n</domain>\n",
            "bad.xml:4",
        ),
        (
            "bad.yaml",
            "--k8s",
            "kind: Pod\nspec:\n  containers:\n  - name: a\n   bad: [\n",
            "bad.yaml:",
        ),
    ];
    for (name, flag, text, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let (code, out, err) = run(&["audit", flag, p.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(!err.contains("panicked"));
    }
}

/// One malformed line in a .vmx is one failing finding naming file:line; every other rule is still judged
/// on the rest of the file, and the exit status is 1 (a rule failed), not 2.
#[test]
fn a_malformed_vmx_line_is_a_finding_and_the_rest_is_linted() {
    let dir = tempfile::tempdir().unwrap();
    let good =
        std::fs::read_to_string(fixture("vmx/seed003-latency-sensitivity-high.vmx")).unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(3, "sched.cpu.min 24000");
    let p = dir.path().join("vpr.vmx");
    std::fs::write(&p, lines.join("\n")).unwrap();
    let (code, out, err) = run(&["audit", "--vmx", p.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let syntax: Vec<&Value> = findings
        .iter()
        .filter(|f| f["id"] == "vmx-syntax")
        .collect();
    assert_eq!(syntax.len(), 1, "{out}");
    assert_eq!(syntax[0]["status"], "fail");
    let want = format!("{}:4", p.display());
    assert!(
        syntax[0]["summary"].as_str().unwrap().contains(&want),
        "{out}"
    );
    // The other rules were judged on the rest of the file (the guide's settings pass).
    let ls = findings
        .iter()
        .find(|f| f["id"] == "vmx-latency-sensitivity")
        .unwrap();
    assert_eq!(ls["status"], "pass", "{out}");
    assert!(findings.len() > 5, "{out}");
}

/// A syntax error in one document of a multi-document manifest is one finding with its position; the other
/// documents are linted.
#[test]
fn a_broken_yaml_document_is_a_finding_and_the_others_are_linted() {
    let dir = tempfile::tempdir().unwrap();
    let pod = std::fs::read_to_string(fixture("k8s/rt-pod.yaml")).unwrap();
    let text = format!(
        "{pod}\n---\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n   bad: [\n"
    );
    let broken_at = pod.lines().count() + 2;
    let p = dir.path().join("two.yaml");
    std::fs::write(&p, &text).unwrap();
    let (code, out, err) = run(&["audit", "--k8s", p.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let syntax: Vec<&Value> = findings
        .iter()
        .filter(|f| f["id"] == "k8s-yaml-syntax")
        .collect();
    assert_eq!(syntax.len(), 1, "{out}");
    let summary = syntax[0]["summary"].as_str().unwrap();
    let line: usize = summary.split(':').nth(1).unwrap().parse().unwrap();
    assert!(
        line > broken_at && line <= text.lines().count(),
        "{summary}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["id"] == "k8s-pod-guaranteed-qos" && f["status"] == "pass"),
        "{out}"
    );
}

#[test]
fn linters_pass_the_seed_definitions() {
    for (flag, f) in [
        ("--vmx", "vmx/seed000-ran-exclusive-pinning.vmx"),
        ("--vmx", "vmx/seed003-latency-sensitivity-high.vmx"),
        ("--libvirt", "libvirt/rt-guest.xml"),
        ("--k8s", "k8s/rt-pod.yaml"),
    ] {
        let (code, out, err) = run(&["audit", flag, &fixture(f)]);
        assert_eq!(code, 0, "{f}: {out}{err}");
    }
}

#[test]
fn capture_then_root_gives_the_same_findings() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("cap");
    let (c1, live, err) = run(&[
        "audit",
        "--no-sample",
        "--format",
        "json",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert!(c1 == 0 || c1 == 1, "{err}");
    assert!(err.contains("captured"), "{err}");
    let (c2, replay, _) = run(&[
        "audit",
        "--no-sample",
        "--format",
        "json",
        "--root",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(c1, c2);
    let a: Value = serde_json::from_str(&live).unwrap();
    let b: Value = serde_json::from_str(&replay).unwrap();
    assert_eq!(a["findings"], b["findings"]);
    assert_eq!(a["target"], b["target"]);
    // The fingerprint replays from the same capture.
    let (code, fp, _) = run(&[
        "fingerprint",
        "--format",
        "json",
        "--root",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let (_, fp_live, _) = run(&["fingerprint", "--format", "json"]);
    let (x, y): (Value, Value) = (
        serde_json::from_str(&fp).unwrap(),
        serde_json::from_str(&fp_live).unwrap(),
    );
    assert_eq!(x["cpu"], y["cpu"]);
    assert_eq!(x["virt"], y["virt"]);
    assert_eq!(x["kernel"], y["kernel"]);
}

#[test]
fn audit_is_fast() {
    // Best of three, to keep a busy machine's scheduling out of the figure.
    let best = (0..3)
        .map(|_| {
            let t = Instant::now();
            let o = rtgauge().args(["audit", "--no-sample"]).output().unwrap();
            assert!(matches!(o.status.code(), Some(0 | 1)));
            t.elapsed()
        })
        .min()
        .unwrap();
    assert!(
        best < Duration::from_millis(500),
        "audit --no-sample took {best:?}"
    );
    let t = Instant::now();
    let o = rtgauge()
        .args(["audit", "--interval", "300ms"])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(matches!(o.status.code(), Some(0 | 1)));
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(800),
        "{took:?}"
    );
}

#[test]
fn fingerprint_of_fixture_trees() {
    let (code, out, _) = run(&[
        "fingerprint",
        "--format",
        "json",
        "--root",
        &fixture("tuned-rt-2socket"),
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cpu"]["sockets"], 2);
    assert_eq!(v["cpu"]["cores"], 16);
    assert_eq!(v["cpu"]["threads"], 32);
    assert_eq!(v["cpu"]["smt_active"], true);
    assert_eq!(v["kernel"]["preempt"]["model"], "rt");
    assert_eq!(v["numa"].as_array().unwrap().len(), 2);
    assert_eq!(v["tuned"]["active_profile"], "realtime");
    assert_eq!(v["memory"]["hugepages"][0]["total"], 16);
    let (_, out, _) = run(&["fingerprint", "--root", &fixture("photon-rt-esxi-guest")]);
    assert!(out.contains("vmware"), "{out}");
    let (_, out, _) = run(&[
        "fingerprint",
        "--format",
        "json",
        "--root",
        &fixture("kvm-guest"),
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kernel"]["preempt"]["dynamic_mode"], "full");
    assert_eq!(v["virt"]["platform"], "kvm");
    assert_eq!(run(&["fingerprint", "--root", "/nonexistent/x"]).0, 2);
}

/// A captured tree that tries to leave itself: absolute and relative links to a sentinel outside it, a link
/// to /dev/zero, a loop, a FIFO and the whole CPU directory linked to the live machine's. Audit and
/// fingerprint finish quickly, never open the sentinel (watched with inotify), report the tree's CPUs (none)
/// instead of this machine's, and name every bad path.
#[test]
fn a_root_that_points_outside_itself_is_never_left() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let sentinel = outside.join("sentinel");
    std::fs::write(&sentinel, b"isolcpus=0-63 nohz_full=0-63\n").unwrap();
    let tree = dir.path().join("tree");
    assert!(common::program("cp")
        .arg("-a")
        .arg(fixture("untuned-server"))
        .arg(&tree)
        .status()
        .unwrap()
        .success());
    let put = |rel: &str, target: &std::path::Path| {
        let p = tree.join(rel);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, &p).unwrap();
    };
    put("proc/cmdline", &sentinel);
    put(
        "etc/tuned/active_profile",
        std::path::Path::new("/dev/zero"),
    );
    let up = "../".repeat(12) + sentinel.strip_prefix("/").unwrap().to_str().unwrap();
    put("proc/sys/kernel/osrelease", std::path::Path::new(&up));
    put("proc/interrupts", std::path::Path::new("softirqs"));
    put("proc/softirqs", std::path::Path::new("interrupts"));
    put(
        "sys/devices/system/cpu",
        std::path::Path::new("/sys/devices/system/cpu"),
    );
    let fifo = tree.join("proc/meminfo");
    let _ = std::fs::remove_file(&fifo);
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    // SAFETY: inotify on a path we own; the descriptor is read non-blocking and closed at the end.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(fd >= 0);
    let s = std::ffi::CString::new(sentinel.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: as above.
    let wd = unsafe { libc::inotify_add_watch(fd, s.as_ptr(), libc::IN_OPEN | libc::IN_ACCESS) };
    assert!(wd >= 0);

    let root = tree.to_str().unwrap();
    let t = std::time::Instant::now();
    let (code, out, err) = run(&["audit", "--root", root, "--format", "json"]);
    let audit_took = t.elapsed();
    let t = std::time::Instant::now();
    let (fcode, fout, ferr) = run(&["fingerprint", "--root", root, "--format", "json"]);
    let fp_took = t.elapsed();
    eprintln!("audit {audit_took:?}, fingerprint {fp_took:?}");
    assert!(
        audit_took < std::time::Duration::from_secs(2),
        "{audit_took:?}"
    );
    assert!(fp_took < std::time::Duration::from_secs(2), "{fp_took:?}");
    assert!(code == 0 || code == 1, "{code}: {err}");
    assert_eq!(fcode, 0, "{ferr}");
    let mut buf = [0u8; 4096];
    // SAFETY: reading into a buffer we own, from the descriptor opened above.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    assert!(n <= 0, "the sentinel outside the tree was opened or read");

    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(!v["findings"].as_array().unwrap().is_empty());
    let fp: serde_json::Value = serde_json::from_str(&fout).unwrap();
    let live = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = fp["cpu"]["online"].as_str().unwrap();
    assert_ne!(
        online,
        live.trim(),
        "fingerprint reported the live machine's CPUs: {fout}"
    );
    assert_eq!(fp["cpu"]["threads"], 0, "{fout}");
    for (bad, why) in [
        ("/proc/cmdline", "points out of the tree"),
        ("/proc/interrupts", "loop"),
        ("/proc/meminfo", "a FIFO"),
        ("/proc/sys/kernel/osrelease", "points out of the tree"),
    ] {
        assert!(
            err.lines().any(|l| l.contains(bad) && l.contains(why)),
            "{bad} not named ({why}): {err}"
        );
    }
    assert!(ferr.contains("/sys/devices/system/cpu"), "{ferr}");
}

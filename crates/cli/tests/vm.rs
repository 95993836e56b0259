//! `rtgauge vm observe` on a real QEMU (its vCPU threads are real host threads, `CPU n/TCG`): no tracing
//! is left on in the host after a normal end, an error, SIGINT and a kill -9 of the observer (the next start
//! cleans up), and tracefs is left mounted or not as it was found; bad input is one line and exit 2. A test
//! binary of its own: it unmounts tracefs, which no other test of this process may be using. The join
//! itself, with a guest measuring, is tested in the kernel lab (tests/lab_vm.rs).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const INSTANCES: &str = "/sys/kernel/tracing/instances";

fn mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/sys/kernel/tracing"))
}

/// A paused QEMU with two vCPU threads (`-S`: they exist and sleep), killed when dropped.
struct Qemu(std::process::Child);

impl Qemu {
    fn start() -> Qemu {
        let child = common::program("qemu-system-x86_64")
            .args([
                "-name",
                "rtgauge-vm-test,debug-threads=on",
                "-nodefaults",
                "-display",
                "none",
                "-accel",
                "tcg,thread=multi",
                "-smp",
                "2",
                "-m",
                "64",
                "-S",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let q = Qemu(child);
        let t = Instant::now();
        while q.vcpus() < 2 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(q.vcpus(), 2, "QEMU made no vCPU threads");
        q
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }

    fn vcpus(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.0.id()))
            .map(|d| {
                d.flatten()
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.starts_with("CPU ") && c.contains("/TCG"))
                    })
                    .count()
            })
            .unwrap_or(0)
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn instance(pid: u32) -> PathBuf {
    Path::new(INSTANCES).join(format!("rtgauge-{pid}"))
}

/// Start `vm observe` (no -D) and wait until its trace instance records the scheduler.
fn start_observer(qemu: &Qemu, output: &Path) -> std::process::Child {
    let child = common::rtgauge_std()
        .args(["vm", "observe", "--pid", &qemu.pid(), "--record"])
        .arg(output)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let inst = instance(child.id());
    let reads_1 = |f: &str| std::fs::read_to_string(inst.join(f)).is_ok_and(|v| v.trim() == "1");
    // A new instance records from its mkdir until the observer turns it off to set it up: tracing_on
    // alone can read 1 before any event is enabled (seen once on a loaded host).
    let on = || reads_1("tracing_on") && reads_1("events/sched/sched_switch/enable");
    let t = Instant::now();
    while !on() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(on(), "the observer did not start tracing sched_switch");
    child
}

#[test]
fn no_tracing_is_left_on_after_a_normal_end_an_error_sigint_or_kill_9() {
    let was_mounted = mounted();
    if was_mounted {
        rtgauge_probe::trace::unmount_tracefs();
        assert!(
            !mounted(),
            "tracefs is busy (another tracer?): cannot start from a fresh state"
        );
    }
    let qemu = Qemu::start();
    let dir = tempfile::tempdir().unwrap();

    // A normal end: the record written, the instance gone, tracefs unmounted again.
    let out_file = dir.path().join("host.json");
    let child = common::rtgauge_std()
        .args(["vm", "observe", "--pid", &qemu.pid(), "-D", "1", "--record"])
        .arg(&out_file)
        .output()
        .unwrap();
    common::assert_ok(&child);
    let text = String::from_utf8_lossy(&child.stdout);
    assert!(text.contains("vCPU 1: thread"), "{text}");
    assert!(text.contains("ended: duration reached"), "{text}");
    let rec = common::read_json(&out_file);
    assert_eq!(rec["kind"], "rtgauge-vm-host");
    assert_eq!(rec["vcpus"].as_array().unwrap().len(), 2);
    assert_eq!(rec["vm"]["name"], "rtgauge-vm-test");
    assert_eq!(rec["vm"]["accel"], "TCG");
    assert!(rec["trace"]["events"].as_u64().unwrap() > 0, "{rec}");
    assert!(!mounted(), "tracefs left mounted after a normal end");
    // QEMU started plainly: its vCPU threads run at SCHED_OTHER, which the observer says first and the
    // record keeps; one made FIFO 1, as a real-time VM's are, is no longer named.
    let err = String::from_utf8_lossy(&child.stderr);
    assert!(
        err.contains("rtgauge: NOT MET: vCPU threads 0 (other 0), 1 (other 0) of 2 run at no real-time policy on this host"),
        "{err}"
    );
    assert_eq!(rec["vcpus"][0]["sched"], "other 0", "{rec}");
    let tid = rec["vcpus"][0]["tid"].as_i64().unwrap() as i32;
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain libc call on a thread of our own child.
    let rc = unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &p) };
    assert_eq!(rc, 0);
    let again = common::rtgauge_std()
        .args(["vm", "observe", "--pid", &qemu.pid(), "-D", "1", "--record"])
        .arg(&out_file)
        .output()
        .unwrap();
    common::assert_ok(&again);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("NOT MET: vCPU threads 1 (other 0) of 2"),
        "{err}"
    );
    assert_eq!(common::read_json(&out_file)["vcpus"][0]["sched"], "fifo 1");

    // An error after tracing started (the record cannot be written: its path is a directory).
    let blocked = dir.path().join("blocked");
    std::fs::create_dir(&blocked).unwrap();
    let out = common::rtgauge_std()
        .args(["vm", "observe", "--pid", &qemu.pid(), "-D", "1", "--record"])
        .arg(&blocked)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--record"), "{err}");
    assert!(!mounted(), "tracefs left mounted after an error");

    // SIGINT: the normal path, the record written.
    let sig = dir.path().join("sigint.json");
    let child = start_observer(&qemu, &sig);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    common::assert_ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ended: stopped (SIGINT/SIGTERM)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(common::read_json(&sig)["kind"], "rtgauge-vm-host");
    assert!(!instance(pid).exists(), "instance left after SIGINT");
    assert!(!mounted(), "tracefs left mounted after SIGINT");

    // kill -9: the instance (still recording) and the mount stay; the next start removes both.
    let mut child = start_observer(&qemu, &dir.path().join("killed.json"));
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        instance(pid).exists() && mounted(),
        "kill -9 leaves the instance and the mount"
    );
    assert_eq!(
        std::fs::read_to_string(instance(pid).join("tracing_on"))
            .unwrap()
            .trim(),
        "1",
        "the killed observer's instance is still recording"
    );
    let next = common::rtgauge_std()
        .args(["vm", "observe", "--pid", &qemu.pid(), "-D", "1", "--record"])
        .arg(dir.path().join("next.json"))
        .output()
        .unwrap();
    common::assert_ok(&next);
    assert!(
        !mounted(),
        "the next start did not undo the killed observer's mount"
    );
    assert!(
        !Path::new("/run/rtgauge/tracefs-mounted-by").exists(),
        "the mount marker is cleared"
    );

    if was_mounted {
        // Back as it was: mounted, owned by nobody.
        rtgauge_probe::trace::mount_tracefs().unwrap();
        std::fs::remove_file("/run/rtgauge/tracefs-mounted-by").unwrap();
        assert!(
            !instance(pid).exists(),
            "the killed observer's instance was removed"
        );
    }
}

#[test]
fn bad_input_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    std::fs::write(&run, "{}").unwrap();
    let not_record = dir.path().join("not-record.json");
    std::fs::write(&not_record, r#"{"kind": "something else"}"#).unwrap();
    let missing = dir.path().join("missing.json");
    let (run, not_record, missing) = (
        run.to_str().unwrap(),
        not_record.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    common::assert_usage_errors(
        "vm",
        &[],
        &[
            (&["observe"], "--pid"),
            (&["observe", "--pid", "x"], "--pid"),
            (
                &["observe", "--pid", "4294967295"],
                "--pid 4294967295: no such process",
            ),
            (&["observe", "--pid", "1"], "debug-threads=on"),
            (&["observe", "--domain", "../etc/passwd"], "--domain"),
            (
                &["observe", "--domain", "no-such-domain"],
                "--domain no-such-domain",
            ),
            (
                &["observe", "--pid", "1", "--clock", "serial"],
                "--clock serial",
            ),
            (
                &[
                    "observe",
                    "--pid",
                    "1",
                    "--record",
                    "/nonexistent/dir/h.json",
                ],
                "--record",
            ),
            (
                &["observe", "--pid", "1", "--sync-interval", "1ms"],
                "--sync-interval",
            ),
            (&["clock-serve", "ttyS3"], "CHANNEL ttyS3"),
            (&["clock-serve", "/nonexistent/port"], "/nonexistent/port"),
            (&["join", missing, missing], "GUEST_RUN"),
            (&["join", run, missing], "GUEST_RUN"),
            (&["join", missing, not_record], "GUEST_RUN"),
        ],
    );
    // A real run document (a 1 s timer probe) against files that are not host records.
    let doc = dir.path().join("cyclic.json");
    let out = common::rtgauge_std()
        .args([
            "cyclic", "-a", "0", "-i", "1000", "-D", "1", "-q", "--output",
        ])
        .arg(&doc)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let doc = doc.to_str().unwrap();
    common::assert_usage_errors(
        "vm",
        &[],
        &[
            (&["join", doc, not_record], "HOST_RECORD"),
            (&["join", doc, missing], "HOST_RECORD"),
            (&["join", doc, run], "HOST_RECORD"),
        ],
    );
}

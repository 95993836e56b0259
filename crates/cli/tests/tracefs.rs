//! A freshly booted machine has no tracefs mounted: `--trace` mounts it itself and leaves the kernel as it
//! found it — unmounted after a normal end, and after a kill -9 by the next traced run (the killed run's
//! mount is adopted through its marker and undone). A test binary of its own: it unmounts tracefs, which no
//! other test of this process may be using.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

fn mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/sys/kernel/tracing"))
}

fn traced_run(seconds: &str) -> std::process::Output {
    common::rtgauge_std()
        .args([
            "cyclic", "-m", "-a", "1", "-i", "1000", "-D", seconds, "-q", "--trace",
        ])
        .output()
        .unwrap()
}

#[test]
fn trace_mounts_tracefs_itself_and_unmounts_it_on_every_exit_path() {
    let was_mounted = mounted();
    if was_mounted {
        rtgauge_probe::trace::unmount_tracefs();
        assert!(
            !mounted(),
            "tracefs is busy (another tracer?): cannot start from a fresh state"
        );
    }

    // A normal end: mounted for the run, unmounted after it.
    let out = traced_run("1");
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("events read"), "the trace ran: {text}");
    assert!(!mounted(), "tracefs left mounted after a normal end");

    // kill -9: the mount stays behind with its owner's marker; the next traced run adopts and undoes it.
    let mut child = common::rtgauge_std()
        .args([
            "cyclic", "-a", "1", "-i", "1000", "-D", "30", "-q", "--trace",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let inst = Path::new("/sys/kernel/tracing/instances").join(format!("rtgauge-{}", child.id()));
    let t = std::time::Instant::now();
    while !inst.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(inst.exists(), "the traced run did not start tracing");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        mounted() && inst.exists(),
        "kill -9 leaves the mount and the instance"
    );
    let out = traced_run("1");
    common::assert_ok(&out);
    assert!(
        !mounted(),
        "the next run did not undo the killed run's mount"
    );
    assert!(
        !Path::new("/run/rtgauge/tracefs-mounted-by").exists(),
        "the mount marker is cleared"
    );

    if was_mounted {
        // Back as it was: mounted, and owned by nobody (no marker), as before the test.
        rtgauge_probe::trace::mount_tracefs().unwrap();
        std::fs::remove_file("/run/rtgauge/tracefs-mounted-by").unwrap();
    }
}

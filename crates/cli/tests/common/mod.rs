//! Helpers shared by the end-to-end tests.

#![allow(dead_code, clippy::unwrap_used)] // each test binary uses a subset; a failed unwrap is a failed test

use serde_json::Value;
use std::path::Path;

pub mod chrony;
pub mod hostnoise;
pub mod tap;

pub fn rtgauge() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("rtgauge").unwrap()
}

pub fn rtgauge_std() -> std::process::Command {
    rtgauge_programs::command(assert_cmd::cargo::cargo_bin("rtgauge"))
}

/// A command that starts `name`, which must be listed in deps/programs.tsv: the manifest scripts/test
/// installs from on a fresh machine. Every program a test starts goes through here (or [`program_line`]),
/// which is what `tests/programs.rs` scans for.
pub fn program(name: &str) -> std::process::Command {
    assert_listed(name);
    rtgauge_programs::command(name)
}

/// `name ARGS` as one command line for another program to run (`--load-cmd`, `sh -c`), `name` listed in
/// deps/programs.tsv like [`program`]'s.
pub fn program_line(name: &str, args: &str) -> String {
    assert_listed(name);
    format!("{name} {args}")
}

/// `ip netns exec NS NAME`: `name` started inside network namespace `ns`, both `ip` and `name` listed in
/// deps/programs.tsv like [`program`]'s (the manifest test scans for this call form too).
pub fn program_in_netns(name: &str, ns: &str) -> std::process::Command {
    assert_listed(name);
    let mut c = program("ip");
    c.args(["netns", "exec", ns, name]);
    c
}

fn assert_listed(name: &str) {
    assert!(
        rtgauge_programs::entry(name).is_some(),
        "{name} is started by a test but not listed in deps/programs.tsv (add it with its Debian package)"
    );
}

/// `rel` under the repository's tests/fixtures, as a command-line argument.
pub fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

/// `rtgauge ARGS`: its exit code (−1 when a signal ended it), stdout and stderr.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let o = rtgauge_std().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The command exited 0; otherwise the test fails showing its exit status, stdout and stderr.
pub fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `rtgauge export RUN --format json --db DB`, parsed.
pub fn export_json(db: &str, run: &str) -> Value {
    let out = rtgauge()
        .args(["export", run, "--format", "json", "--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Start `args` with stdout/stderr captured, send SIGINT after `after`, and return its output and how long
/// it took to end after the signal.
pub fn interrupt(
    args: &[&str],
    after: std::time::Duration,
) -> (std::process::Output, std::time::Duration) {
    let child = rtgauge_std()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    (out, t.elapsed())
}

/// Busy-loop probes monopolise their CPU (at SCHED_FIFO 99 for up to a second at a time, until RT
/// throttling steps in); tests that run them hold this lock so they do not starve each other.
pub static BUSY_CPU: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn busy_cpu() -> std::sync::MutexGuard<'static, ()> {
    BUSY_CPU.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every case of `rtgauge VERB ARGS… EXTRA…` must exit 2 with one line on stderr naming the flag, no panic,
/// and nothing on stdout (nothing measured).
pub fn assert_usage_errors(verb: &str, extra: &[&str], cases: &[(&[&str], &str)]) {
    for (args, flag) in cases {
        let out = rtgauge()
            .arg(verb)
            .args(*args)
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?}: one line expected, got: {err}"
        );
        assert!(
            err.contains(flag),
            "{args:?}: error does not name {flag}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing measured on bad input"
        );
    }
}

/// A thread that spins on `cpu` at SCHED_FIFO 50 for `stall`, `count` times, `gap` apart, starting after
/// `delay`: an injected stall for any lower-priority probe on that CPU. Needs root.
pub fn spinner(
    cpu: usize,
    delay: std::time::Duration,
    stall: std::time::Duration,
    count: u32,
    gap: std::time::Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // SAFETY: plain libc calls on the calling thread with valid arguments.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
            let p = libc::sched_param { sched_priority: 50 };
            assert_eq!(
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &p),
                0,
                "needs root"
            );
        }
        std::thread::sleep(delay);
        for _ in 0..count {
            let t = std::time::Instant::now();
            while t.elapsed() < stall {
                std::hint::spin_loop();
            }
            std::thread::sleep(gap);
        }
    })
}

/// `rtgauge run --profile PROFILE --no-sample --label LABEL --db DB`, which must succeed.
pub fn run_labelled(profile: &Path, label: &str, db: &str) {
    let out = rtgauge_std()
        .args(["run", "--profile", profile.to_str().unwrap(), "--no-sample"])
        .args(["--label", label, "--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
}

/// `rtgauge compare RUNS… --format json --db DB`, parsed.
pub fn compare_in(db: &str, runs: &[&str]) -> Value {
    let out = rtgauge_std()
        .arg("compare")
        .args(runs)
        .args(["--format", "json", "--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `rtgauge compare RUNS… --db DB` as the terminal shows it.
pub fn compare_text(db: &str, runs: &[&str]) -> String {
    let out = rtgauge_std()
        .arg("compare")
        .args(runs)
        .args(["--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The row of measure `key` in a comparison.
pub fn row<'a>(c: &'a Value, key: &str) -> &'a Value {
    c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row {key} in {c}"))
}

/// The difference of a comparison whose `what` starts with `prefix`.
pub fn difference<'a>(c: &'a Value, prefix: &str) -> &'a Value {
    c["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["what"].as_str().unwrap_or("").starts_with(prefix))
        .unwrap_or_else(|| panic!("no difference '{prefix}…' in {c}"))
}

/// tracefs, mounted through rtgauge's own code path when this freshly booted machine has none (tests must not
/// assume it: a fresh machine has no tracefs mounted). A mount made here is undone when the test process
/// exits, so the suite leaves the kernel as it found it.
pub fn tracefs() -> &'static Path {
    static MOUNT: std::sync::Once = std::sync::Once::new();
    MOUNT.call_once(|| {
        let mounted = rtgauge_probe::trace::mount_tracefs()
            .expect("mounting tracefs (the tests run as root)");
        if mounted {
            extern "C" fn unmount() {
                rtgauge_probe::trace::unmount_tracefs();
            }
            // SAFETY: registers a plain extern "C" function with no captured state.
            unsafe { libc::atexit(unmount) };
        }
    });
    Path::new(rtgauge_probe::trace::TRACEFS)
}

/// Run `attempt(n)` for n = 1, and once more (n = 2) when it panics, printing the first panic under `what`: for
/// lab scenarios that a busy shared host can spoil (a race between the injected noise and what it must hit).
/// The second attempt's panic fails the test.
#[allow(dead_code)]
pub fn twice(what: &str, attempt: impl Fn(u32) + std::panic::RefUnwindSafe) {
    if let Err(e) = std::panic::catch_unwind(|| attempt(1)) {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        eprintln!("{what}: failed once, trying again: {msg}");
        attempt(2);
    }
}

/// An empty folder `NAME-PID` under cargo's scratch folder for integration tests (target/tmp), for a fixture
/// held in a `static`: a static is never dropped, so a `TempDir` there would leave one folder in /tmp per
/// run of the suite. This one stays within target/, and the `NAME-*` folders of processes gone (earlier
/// runs) are removed first; a run beside this one (the same test binary started twice) keeps its own.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    let prefix = format!("{name}-");
    for e in std::fs::read_dir(base).unwrap().flatten() {
        let file = e.file_name();
        let pid = file.to_str().and_then(|f| f.strip_prefix(&prefix));
        if let Some(pid) = pid.filter(|p| p.parse::<u32>().is_ok()) {
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let d = base.join(format!("{name}-{}", std::process::id()));
    match std::fs::remove_dir_all(&d) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{}: {e}", d.display()),
        _ => {}
    }
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The answer of the verdict block `run`, `report` and `runs show` end with: the word after "Is this
/// platform fit for PROFILE?" (FIT, NOT FIT, NO GATES, NOT JUDGED, INCONCLUSIVE).
pub fn answer(out: &str) -> Option<&str> {
    out.lines()
        .rev()
        .find(|l| l.starts_with("Is this platform fit for "))
        .and_then(|l| l.split_once("? "))
        .map(|(_, w)| w.trim())
}

/// The cells of the verdict block's row for `gate` (gate, bound, observed, outcome), split where the
/// columns are two spaces apart.
pub fn gate_row(out: &str, gate: &str) -> Option<Vec<String>> {
    out.lines().rev().find_map(|l| {
        let cells: Vec<String> = l
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        (cells.first().map(String::as_str) == Some(gate)).then_some(cells)
    })
}

/// `out` with its white space collapsed: a sentence the terminal wrapped reads as one line.
pub fn unwrapped(out: &str) -> String {
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

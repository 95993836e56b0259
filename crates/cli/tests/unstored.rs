//! A store that stops taking the run while it measures never costs the measurement: on a tmpfs that fills
//! up, on one remounted read-only, and under another writer's lock — real kernel state and a real SQLite
//! lock, each arriving after the run has started. The run measures to its end, prints its summary, keeps
//! its document in a file the error names (exit 4 when the store refused the finished run), counts its
//! refused checkpoints, and `rtgauge import` completes the stored run afterwards.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::rtgauge_std;
use serde_json::Value;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// One cyclic thread for 6 s, checkpointed every second, with a gate any machine passes.
const PROFILE: &str = "name = 'unstored'\nduration = '6s'\n[[probe]]\nkind = 'cyclic'\n\
    flags = '-m -i 1000 -t 1 -a {cpu} -q'\n[[gate]]\nmetric = 'cyclic.max'\nmax = '1s'\n";

/// A tmpfs of `kib` KiB at `dir`, unmounted when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, kib: u64) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let (src, target, fs, opts) = (
            c("rtgauge-test"),
            c(dir.to_str().unwrap()),
            c("tmpfs"),
            c(&format!("size={kib}k")),
        );
        // SAFETY: NUL-terminated strings that outlive the call.
        let r = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fs.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        Tmpfs(dir.to_path_buf())
    }

    /// Remount read-only (`true`) or read-write.
    fn remount(&self, ro: bool) {
        let target = std::ffi::CString::new(self.0.to_str().unwrap()).unwrap();
        let flags = libc::MS_REMOUNT | if ro { libc::MS_RDONLY } else { 0 };
        // SAFETY: NUL-terminated path; no data.
        let r = unsafe {
            libc::mount(
                std::ptr::null(),
                target.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "remount: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.0.to_str().unwrap()).unwrap();
        // SAFETY: NUL-terminated path.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// `rtgauge run` of [`PROFILE`] on CPU 0 into `db`, its temporary directory `tmp`, started; it returns
/// once the run has said its first line (it is stored and measuring) and two checkpoints were stored.
fn start_run(dir: &Path, db: &Path, tmp: &Path) -> Running {
    std::fs::create_dir_all(tmp).unwrap();
    let profile = dir.join("unstored.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    let mut child = rtgauge_std()
        .args([
            "run",
            "--profile",
            profile.to_str().unwrap(),
            "--cpus",
            "0",
            "--checkpoint",
            "1s",
            "--no-sample",
            "--db",
            db.to_str().unwrap(),
        ])
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("rtgauge run 1:"), "{first}");
    // The rest of stdout is read as it comes (a full pipe would stop the run).
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).unwrap();
        s
    });
    // The store takes the first checkpoints (at 1 s and 2 s) before the test takes it away.
    std::thread::sleep(Duration::from_millis(2500));
    Running {
        child: Some(child),
        stdout: Some(stdout),
    }
}

/// A run started by [`start_run`]; killed if the test fails before it ends.
struct Running {
    child: Option<Child>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    /// Wait for the run: exit code, stdout after its first line, stderr.
    fn finish(mut self) -> (i32, String, String) {
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            self.stdout.take().unwrap().join().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The count N of the run's warning "N of M checkpoints not stored …".
fn refused(doc: &Value) -> u64 {
    let w = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|w| w.contains("checkpoints not stored"))
        .unwrap_or_else(|| panic!("refusals not counted: {doc}"));
    w.split(' ').next().unwrap().parse().unwrap()
}

/// The measurement survived a store that refused it: summary printed, exit 4, one warning for the first
/// refused checkpoint, the document in the named file under `tmp` with every refused checkpoint counted.
/// The file, for the import.
fn assert_kept(code: i32, stdout: &str, stderr: &str, tmp: &Path) -> PathBuf {
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        common::answer(stdout) == Some("FIT") && stdout.contains("not stored: run 1 (complete)"),
        "{stdout}"
    );
    assert_eq!(
        stderr.matches("checkpoint not stored: ").count(),
        1,
        "the first refusal said once: {stderr}"
    );
    let named = stderr
        .split("Its document is in ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .unwrap_or_else(|| panic!("no file named: {stderr}"));
    let file = PathBuf::from(named);
    assert!(
        file.starts_with(tmp),
        "{named}: the store's own disk refused it"
    );
    let doc: Value = common::read_json(&file);
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["probes"][0]["probe"], "cyclic");
    let n = refused(&doc);
    assert!(n >= 2, "{n} refused");
    assert!(
        stdout.contains(&format!("checkpoint ({n} of ")),
        "the summary says how many were refused: {stdout}"
    );
    file
}

/// `rtgauge import FILE --db DB`, which must succeed.
fn import(db: &Path, file: &Path) -> std::process::Output {
    let out = common::rtgauge()
        .args([
            "import",
            file.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    out
}

/// Import `file` into `db` once the store takes it: it completes run 1.
fn assert_importable(db: &Path, file: &Path) {
    let out = import(db, file);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("it completes run 1"), "{said}");
    let doc = common::export_json(db.to_str().unwrap(), "1");
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["verdicts"][0]["outcome"], "pass", "{}", doc["verdicts"]);
}

#[test]
fn a_store_that_fills_up_mid_run_costs_no_measurement() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("store"), 1024);
    let db = fs.0.join("rtgauge.db");
    let tmp = dir.path().join("tmp");
    let run = start_run(dir.path(), &db, &tmp);
    // Fill the rest of the disk.
    let filler = fs.0.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    let (code, stdout, stderr) = run.finish();
    assert!(stderr.contains("database or disk is full"), "{stderr}");
    eprintln!("full disk:\n{stdout}{stderr}");
    let file = assert_kept(code, &stdout, &stderr, &tmp);
    std::fs::remove_file(&filler).unwrap();
    assert_importable(&db, &file);
}

/// A store on a read-only filesystem is refused before anything is measured, and left as it was. (A
/// filesystem cannot be remounted read-only under the run: the kernel refuses while the store is open for
/// writing, EBUSY; the run meets a full disk or a lock mid-run, tested above and below.)
#[test]
fn a_read_only_store_is_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("store"), 8192);
    let db = fs.0.join("rtgauge.db");
    let out = common::rtgauge()
        .args(["import", &common::fixture("rt-tests/cyclictest-h20.json")])
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    common::assert_ok(&out);
    fs.remount(true);
    let before = std::fs::read(&db).unwrap();
    let profile = dir.path().join("unstored.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    let out = common::rtgauge()
        .args(["run", "--profile", profile.to_str().unwrap(), "--cpus", "0"])
        .args(["--no-sample", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    fs.remount(false);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(db.to_str().unwrap()) && stderr.contains("mounted read-only"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("rtgauge run"),
        "nothing measured"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// Another writer holds the store's lock for 3 s mid-run: the checkpoints in that time are refused at once
/// (counted, not waited for: the run ends on time), and the finished run is stored.
#[test]
fn a_store_locked_mid_run_delays_nothing_and_stores_the_run() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rtgauge.db");
    let tmp = dir.path().join("tmp");
    let started = Instant::now();
    let run = start_run(dir.path(), &db, &tmp);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    conn.execute_batch("ROLLBACK").unwrap();
    let (code, stdout, stderr) = run.finish();
    let wall = started.elapsed();
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("checkpoint not stored: ") && stderr.contains("database is locked"),
        "{stderr}"
    );
    assert!(stdout.contains("stored: run 1 (complete)"), "{stdout}");
    let doc = common::export_json(db.to_str().unwrap(), "1");
    let n = refused(&doc);
    // 3 s of lock, a checkpoint a second, each refused after at most 0.2 s.
    assert!((2..=4).contains(&n), "{n} refused");
    // 6 s of measuring plus start and end; a checkpoint that waited out SQLite's 30 s would show. And
    // the main thread kept draining the rings meanwhile: nothing the thread handed over was dropped.
    assert!(wall < Duration::from_secs(20), "{wall:?}");
    let t = &doc["probes"][0]["threads"][0];
    assert_eq!(
        (
            t["timeline_dropped"].as_u64(),
            t["late_dropped"].as_u64(),
            t["late_coalesced"].as_u64()
        ),
        (Some(0), None, None),
        "{t}"
    );
    eprintln!("locked store: {n} of the checkpoints refused; run wall time {wall:?}");
}

/// `rtgauge net` on a store whose disk is full when it ends: the results are printed, the document goes to
/// a fallback file named in the error (the temporary directory: the store's own is full too), exit 4, and
/// `import` stores it once there is room.
#[test]
fn a_net_run_the_store_refuses_is_kept_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("store"), 1024);
    let db = fs.0.join("rtgauge.db");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = common::rtgauge()
        .args(["import", &common::fixture("rt-tests/cyclictest-h20.json")])
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let child = rtgauge_std()
        .args(["net", "cps", "--serve-cpus", "0", "--cpus", "1", "-D", "2"])
        .args(["--db", db.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once it measures (the store is open), fill what is left of the disk.
    std::thread::sleep(Duration::from_millis(700));
    let filler = fs.0.join("filler");
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(4), "{stdout}{stderr}");
    assert!(
        stdout.contains("connections/s"),
        "the results shown: {stdout}"
    );
    assert!(
        stderr.contains("measured but not stored") && stderr.contains("full"),
        "{stderr}"
    );
    let file = stderr
        .split("Its document is in ")
        .nth(1)
        .and_then(|r| r.split(": `").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("a file named: {stderr}"));
    assert!(file.starts_with(&tmp), "in TMPDIR: {}", file.display());
    std::fs::remove_file(&filler).unwrap();
    import(&db, &file);
    let doc = common::export_json(db.to_str().unwrap(), "2");
    assert_eq!(doc["probes"][0]["probe"], "net", "{doc}");
}

//! `rtgauge push` and `--db postgresql://…` end to end, against a real PostgreSQL server started by the test
//! (../../store/tests/common/pg.rs): idempotence, a server stopped in the middle of a push, 20 concurrent
//! pushers, and the store verbs on the central store.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;
#[path = "../../store/tests/common/pg.rs"]
mod pg;

use common::{assert_ok, busy_cpu, export_json, rtgauge, rtgauge_std};
use rtgauge_model::run::RunDocument;
use rtgauge_store::RunStore as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// A finished run document of host `host` (nothing measured: the store and push do not look inside).
fn doc(host: &str, label: &str) -> RunDocument {
    serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "uuid": rtgauge_model::run::new_uuid(),
        "tool": {"name": "rtgauge", "version": "0"},
        "command_line": ["rtgauge", "run"],
        "started_at": "2026-11-23T00:00:00Z",
        "ended_at": "2026-11-23T00:00:10Z",
        "system": {"sysname": "Linux", "nodename": host, "release": "6", "version": "#1",
                   "machine": "x86_64", "realtime": true, "cpus_online": "0-1", "clocksource": "tsc"},
        "probes": [],
        "status": "complete",
        "label": label,
        "tags": {"site": "lab"},
        "profile": "quick"
    }))
    .unwrap()
}

/// A local SQLite store at `path` holding `n` finished runs of `host`.
fn local_store(path: &Path, host: &str, n: usize) {
    let mut s = rtgauge_store::SqliteStore::open(path).unwrap();
    for i in 0..n {
        s.insert(&doc(host, &format!("{host}-{i}"))).unwrap();
    }
}

fn push(local: &Path, to: &str, runs: &[&str]) -> std::process::Output {
    rtgauge()
        .args(["push", "--to", to, "--db", local.to_str().unwrap()])
        .args(runs)
        .output()
        .unwrap()
}

fn count(srv: &pg::PgServer, url: &str, q: &str) -> i64 {
    srv.client(url).query_one(q, &[]).unwrap().get(0)
}

#[test]
fn push_twice_stores_each_run_once_and_skips_running_runs() {
    let srv = pg::PgServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.db");
    local_store(&local, "node-a", 3);
    // A run still being measured (our own live process is its writer): not pushed.
    let mut running = doc("node-a", "live");
    running.status = rtgauge_model::run::RunStatus::Running;
    rtgauge_store::SqliteStore::open(&local)
        .unwrap()
        .insert(&running)
        .unwrap();

    let out = push(&local, &url, &[]);
    assert_ok(&out);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("push: 3 runs pushed to postgresql://rtgauge@127.0.0.1:"),
        "{s}"
    );
    assert!(s.contains("1 still running (not pushed)"), "{s}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("run 4 is still running"));

    let again = push(&local, &url, &[]);
    assert_ok(&again);
    let s = String::from_utf8_lossy(&again.stdout);
    assert!(
        s.contains("push: 0 runs pushed") && s.contains("3 there already"),
        "{s}"
    );
    assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 3);

    // Named runs: one already there, nothing new.
    let named = push(&local, &url, &["1", "node-a-2"]);
    assert_ok(&named);
    assert!(String::from_utf8_lossy(&named.stdout).contains("0 runs pushed to"));
    assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 3);

    // The central copy is the local document, byte for byte once parsed (uuid included).
    let l = export_json(local.to_str().unwrap(), "node-a-1");
    let c = export_json(&url, "node-a-1");
    assert_eq!(l, c);
    assert!(l["uuid"].as_str().is_some_and(|u| u.len() == 36));
}

#[test]
fn push_to_a_stopped_server_fails_in_one_line_and_keeps_the_local_runs() {
    let mut srv = pg::PgServer::start();
    let url = srv.url();
    srv.stop();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.db");
    local_store(&local, "node-b", 2);
    let before = export_json(local.to_str().unwrap(), "node-b-1");
    let out = push(&local, &url, &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("rtgauge: error: push: nothing pushed; the local runs are untouched: database postgresql://rtgauge@127.0.0.1:"),
        "{err}"
    );
    assert!(
        err.contains("cannot connect: error connecting to server: Connection refused"),
        "{err}"
    );
    assert_eq!(export_json(local.to_str().unwrap(), "node-b-1"), before);
    assert_eq!(
        rtgauge_store::SqliteStore::open(&local)
            .unwrap()
            .list()
            .unwrap()
            .len(),
        2
    );
}

/// Wait until some backend of the server waits on a lock (the push blocked on the test's transaction).
fn wait_for_lock_wait(srv: &pg::PgServer, url: &str) {
    let mut c = srv.client(url);
    let t0 = Instant::now();
    loop {
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
                &[],
            )
            .unwrap()
            .get(0);
        if n > 0 {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "push never blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn server_stopped_during_a_push_then_the_push_resumes_and_stores_each_run_once() {
    let mut srv = pg::PgServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.db");
    local_store(&local, "node-c", 6);
    let local_s = local.to_str().unwrap();
    let before: Vec<_> = (1..=6)
        .map(|i| export_json(local_s, &i.to_string()))
        .collect();
    assert_ok(&push(&local, &url, &["1"]));

    // Hold run 3's uuid in an open transaction: the push stores run 2, then waits on run 3 (the unique
    // index makes it wait for our transaction), and the server is stopped under it.
    let uuid3 = before[2]["uuid"].as_str().unwrap().to_string();
    let mut holder = srv.client(&url);
    let mut tx = holder.transaction().unwrap();
    tx.execute(
        "INSERT INTO runs (started_at, ended_at, status, host, probes, document, writer_pid, writer_start, writer_boot, uuid)
         VALUES ('s', 'e', 'complete', 'h', '', '{}', 0, 0, 'b', $1)",
        &[&uuid3],
    )
    .unwrap();
    let child = rtgauge_std()
        .args(["push", "--to", &url, "--db", local_s])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lock_wait(&srv, &url);
    srv.stop();
    drop(tx);
    drop(holder);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("run 3 not pushed (1 pushed before it); the local runs are untouched, push again to resume"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("pushed run 2 "));
    // Local runs intact.
    for (i, b) in before.iter().enumerate() {
        assert_eq!(&export_json(local_s, &(i + 1).to_string()), b);
    }

    srv.resume();
    let out = push(&local, &url, &[]);
    assert_ok(&out);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("push: 4 runs pushed") && s.contains("2 there already"),
        "{s}"
    );
    assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 6);
    assert_eq!(
        count(&srv, &url, "SELECT count(DISTINCT uuid) FROM runs"),
        6
    );
    for b in &before {
        let u = b["uuid"].as_str().unwrap();
        let n: i64 = srv
            .client(&url)
            .query_one("SELECT count(*) FROM runs WHERE uuid = $1", &[&u])
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "run {u} stored exactly once");
    }
}

#[test]
fn twenty_concurrent_pushers_of_five_runs_store_one_hundred() {
    let srv = pg::PgServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let locals: Vec<_> = (0..20)
        .map(|i| {
            let p = dir.path().join(format!("host{i}.db"));
            local_store(&p, &format!("host{i}"), 5);
            p
        })
        .collect();
    for round in 0..2 {
        let children: Vec<_> = locals
            .iter()
            .map(|p| {
                rtgauge_std()
                    .args(["push", "--to", &url, "--db", p.to_str().unwrap()])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert_ok(&out);
            let want = if round == 0 {
                "push: 5 runs pushed"
            } else {
                "push: 0 runs pushed"
            };
            assert!(String::from_utf8_lossy(&out.stdout).contains(want));
        }
        assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 100);
        assert_eq!(
            count(&srv, &url, "SELECT count(DISTINCT uuid) FROM runs"),
            100
        );
        assert_eq!(
            count(&srv, &url, "SELECT count(DISTINCT host) FROM runs"),
            20
        );
    }
}

#[test]
fn store_verbs_work_on_postgresql_by_flag_and_by_rtgauge_db() {
    let srv = pg::PgServer::start();
    let url = srv.new_database("central");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/rt-tests");
    let out = rtgauge()
        .args(["import", "--db", &url, "--label", "imported"])
        .arg(fixtures.join("cyclictest-h400.json"))
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("as run 1 into postgresql://"));
    // RTGAUGE_DB selects the store when --db is absent.
    let out = rtgauge()
        .env("RTGAUGE_DB", &url)
        .args(["import", "--label", "second"])
        .arg(fixtures.join("cyclictest-h20.json"))
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .env("RTGAUGE_DB", &url)
        .args(["runs", "list"])
        .output()
        .unwrap();
    assert_ok(&out);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.contains("imported") && list.contains("second"),
        "{list}"
    );
    for args in [
        vec!["runs", "show", "imported"],
        vec!["report", "latest"],
        vec!["compare", "1", "2"],
        vec!["export", "1", "--format", "csv"],
    ] {
        let out = rtgauge().args(&args).args(["--db", &url]).output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {out:?}"
        );
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    let doc = export_json(&url, "imported");
    assert_eq!(doc["label"], "imported");
    assert!(doc["uuid"].as_str().is_some());
    let out = rtgauge()
        .args(["runs", "delete", "1", "--db", &url])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 1);
    // A bad URL is one line naming --db, exit 2.
    let out = rtgauge()
        .args([
            "runs",
            "list",
            "--db",
            "postgresql://u:secret@127.0.0.1:notaport/x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("rtgauge: error: --db postgresql://u:***@127.0.0.1:notaport/x"),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn run_push_stores_locally_then_pushes() {
    let _cpu = busy_cpu();
    let srv = pg::PgServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.db");
    let out = rtgauge()
        .args([
            "run",
            "--db",
            local.to_str().unwrap(),
            "--duration",
            "1s",
            "--no-sample",
        ])
        .args(["--label", "pushed", "--push", &url])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("stored: run 1 (complete)") && s.contains("pushed run 1 ("),
        "{s}"
    );
    let l = export_json(local.to_str().unwrap(), "pushed");
    assert_eq!(export_json(&url, "pushed"), l);
    // Pushing it again adds nothing.
    assert_ok(&push(&local, &url, &[]));
    assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 1);
}

#[test]
fn run_writes_straight_into_postgresql() {
    let _cpu = busy_cpu();
    let srv = pg::PgServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let out = rtgauge()
        .env("XDG_DATA_HOME", dir.path())
        .args(["run", "--db", &url, "--duration", "1s", "--no-sample"])
        .args(["--label", "central", "--checkpoint", "200ms"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("stored: run 1 (complete) in postgresql://rtgauge@127.0.0.1:"),
        "{s}"
    );
    // The report goes beside the default local database, not into a directory named after the URL.
    assert!(
        dir.path().join("rtgauge/reports/run-1.html").exists(),
        "{s}"
    );
    let d = export_json(&url, "central");
    assert_eq!(d["status"], "complete");
    assert!(d["probes"].as_array().is_some_and(|p| !p.is_empty()));
    assert_eq!(count(&srv, &url, "SELECT count(*) FROM runs"), 1);
}

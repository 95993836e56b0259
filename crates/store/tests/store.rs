//! The store's behaviour, run on both backends: every test takes a [`Backend`] and is instantiated for
//! SQLite (a temp file) and PostgreSQL (a real server started by the test, see common/pg.rs).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "common/pg.rs"]
mod pg;

use rtgauge_model::run::{RunDocument, RunStatus, SystemInfo, ToolInfo};
use rtgauge_store::{open_store, RunStore, Selector, StoreError};
use std::path::{Path, PathBuf};

fn doc(label: &str) -> RunDocument {
    RunDocument {
        schema_version: 1,
        uuid: None,
        tool: ToolInfo {
            name: "rtgauge".into(),
            version: "0".into(),
        },
        command_line: vec!["rtgauge".into(), "run".into()],
        started_at: "2026-11-22T00:00:00Z".into(),
        ended_at: "2026-11-22T00:00:10Z".into(),
        system: SystemInfo {
            sysname: "Linux".into(),
            nodename: "h".into(),
            release: "6".into(),
            version: "#1".into(),
            machine: "x86_64".into(),
            realtime: false,
            cpus_online: rtgauge_model::CpuSet::new([0, 1]),
            clocksource: None,
        },
        probes: vec![],
        status: RunStatus::Running,
        warnings: vec![],
        label: Some(label.into()),
        tags: [("site".to_string(), "lab".to_string())].into(),
        profile: Some("quick".into()),
        fingerprint: None,
        audit: None,
        verdicts: vec![],
        imported_from: None,
        repeat: None,
        unmet: Vec::new(),
        degraded_allowed_by: None,
        skipped: Vec::new(),
    }
}

/// One store location on one backend, with raw access for the checks made behind the store's back.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(pg::PgServer, String),
}

impl Backend {
    fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().expect("tempdir"))
    }
    fn postgres() -> Backend {
        let s = pg::PgServer::start();
        let url = s.new_database("runs");
        Backend::Postgres(s, url)
    }
    fn spec(&self) -> PathBuf {
        match self {
            Backend::Sqlite(d) => d.path().join("sub/r.db"),
            Backend::Postgres(_, url) => PathBuf::from(url),
        }
    }
    fn open(&self) -> Box<dyn RunStore> {
        open_store(&self.spec()).expect("open store")
    }
    /// Run one SQL statement directly (`$1`-free SQL both dialects accept).
    fn sql(&self, stmt: &str) {
        match self {
            Backend::Sqlite(_) => {
                rusqlite::Connection::open(self.spec())
                    .expect("open")
                    .execute_batch(stmt)
                    .expect("sql");
            }
            Backend::Postgres(s, url) => {
                s.client(url).batch_execute(stmt).expect("sql");
            }
        }
    }
    /// Number of rows of a `SELECT count(*)`.
    fn count(&self, query: &str) -> i64 {
        match self {
            Backend::Sqlite(_) => rusqlite::Connection::open(self.spec())
                .expect("open")
                .query_row(query, [], |r| r.get(0))
                .expect("count"),
            Backend::Postgres(s, url) => s.client(url).query_one(query, &[]).expect("count").get(0),
        }
    }
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { super::$name(super::Backend::sqlite()); })*
        }
        mod postgres {
            $(#[test] fn $name() { super::$name(super::Backend::postgres()); })*
        }
    };
}

both!(
    insert_update_list_select_delete,
    dead_writer_means_interrupted,
    newer_schema_is_refused_and_left_alone,
    concurrent_writers_all_land,
    many_writers_creating_the_same_new_store_all_succeed,
    uuid_is_unique_and_kept_by_updates,
    insert_if_absent_is_idempotent_under_concurrency,
    version_1_store_gets_derived_uuids,
    version_2_store_gets_the_status_index,
);

fn insert_update_list_select_delete(b: Backend) {
    let mut s = b.open();
    let a = s.insert(&doc("bare-metal")).unwrap();
    let mut d = doc("guest");
    let id_b = s.insert(&d).unwrap();
    d.status = RunStatus::Complete;
    s.update(id_b, &d).unwrap();
    let l = s.list().unwrap();
    assert_eq!(l.len(), 2);
    assert_eq!(
        l[0].status,
        RunStatus::Running,
        "our own process is alive: still running"
    );
    assert_eq!(l[1].status, RunStatus::Complete);
    assert_eq!(l[1].label.as_deref(), Some("guest"));
    assert_eq!(l[1].host, "h");
    assert_eq!(s.find(&Selector::Latest).unwrap(), id_b);
    assert_eq!(s.find(&Selector::parse("bare-metal")).unwrap(), a);
    assert_eq!(s.find(&Selector::parse(&a.to_string())).unwrap(), a);
    assert!(matches!(
        s.find(&Selector::Label("nope".into())),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.find(&Selector::Id(9999)),
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(s.get(id_b).unwrap().tags["site"], "lab");
    s.delete(a).unwrap();
    assert!(matches!(s.get(a), Err(StoreError::NotFound(_))));
    assert!(matches!(s.delete(a), Err(StoreError::NotFound(_))));
    assert_eq!(s.list().unwrap().len(), 1);
    assert_eq!(
        b.count("SELECT count(*) FROM tags"),
        1,
        "a deleted run's tags go with it"
    );
}

fn dead_writer_means_interrupted(b: Backend) {
    let mut s = b.open();
    let id = s.insert(&doc("x")).unwrap();
    // Pretend the writer was another process of this boot that is gone.
    b.sql(&format!(
        "UPDATE runs SET writer_pid = 999999999 WHERE id = {id}"
    ));
    let l = s.list().unwrap();
    assert_eq!(l[0].status, RunStatus::Interrupted);
    let d = s.get(id).unwrap();
    assert_eq!(d.status, RunStatus::Interrupted);
    assert!(d.warnings.iter().any(|w| w.contains("last checkpoint")));
}

fn newer_schema_is_refused_and_left_alone(b: Backend) {
    let mut s = b.open();
    s.insert(&doc("kept")).unwrap();
    drop(s);
    match &b {
        Backend::Sqlite(_) => b.sql("PRAGMA user_version = 99"),
        Backend::Postgres(..) => b.sql("UPDATE schema_version SET version = 99"),
    }
    assert!(matches!(
        open_store(&b.spec()),
        Err(StoreError::TooNew { found: 99, .. })
    ));
    assert_eq!(b.count("SELECT count(*) FROM runs"), 1);
}

fn concurrent_writers_all_land(b: Backend) {
    drop(b.open());
    let spec = b.spec();
    let hs: Vec<_> = (0..4)
        .map(|i| {
            let p = spec.clone();
            std::thread::spawn(move || {
                let mut s = open_store(&p).unwrap();
                for _ in 0..20 {
                    let id = s.insert(&doc(&format!("w{i}"))).unwrap();
                    s.update(id, &doc(&format!("w{i}"))).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(b.open().list().unwrap().len(), 80);
}

fn many_writers_creating_the_same_new_store_all_succeed(b: Backend) {
    // The store does not exist yet (SQLite: no file; PostgreSQL: an empty database): all create it at once.
    let spec = b.spec();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
    let hs: Vec<_> = (0..6)
        .map(|i| {
            let (p, bar) = (spec.clone(), barrier.clone());
            std::thread::spawn(move || {
                bar.wait();
                let mut s = open_store(&p).unwrap();
                s.insert(&doc(&format!("w{i}"))).unwrap();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(b.open().list().unwrap().len(), 6);
}

fn uuid_is_unique_and_kept_by_updates(b: Backend) {
    let mut s = b.open();
    let id = s.insert(&doc("a")).unwrap();
    let stored = s.get(id).unwrap();
    let uuid = stored.uuid.clone().expect("a stored run has a uuid");
    assert_eq!(uuid.len(), 36, "{uuid}");
    assert_eq!(s.list().unwrap()[0].uuid, uuid);
    // A checkpoint written from a copy without (or with another) uuid keeps the stored one.
    let mut d = doc("a");
    d.uuid = Some("00000000-0000-4000-8000-000000000000".into());
    s.update(id, &d).unwrap();
    assert_eq!(s.get(id).unwrap().uuid.as_deref(), Some(uuid.as_str()));
    // Inserting the same run again is refused by the unique constraint.
    assert!(matches!(s.insert(&stored), Err(StoreError::Duplicate(u)) if u == uuid));
    // Two documents without uuid are two runs.
    s.insert(&doc("a")).unwrap();
    assert_eq!(s.list().unwrap().len(), 2);
    assert!(s.known_uuids(&[uuid.clone(), "nope".into()]).unwrap() == [uuid].into());
}

fn insert_if_absent_is_idempotent_under_concurrency(b: Backend) {
    drop(b.open());
    let docs: Vec<RunDocument> = (0..10)
        .map(|i| {
            let mut d = doc(&format!("r{i}"));
            d.uuid = Some(rtgauge_model::run::new_uuid());
            d.status = RunStatus::Complete;
            d
        })
        .collect();
    let spec = b.spec();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(5));
    // Five pushers of the same ten runs at once: each run is stored exactly once.
    let hs: Vec<_> = (0..5)
        .map(|_| {
            let (p, bar, docs) = (spec.clone(), barrier.clone(), docs.clone());
            std::thread::spawn(move || {
                let mut s = open_store(&p).unwrap();
                bar.wait();
                docs.iter()
                    .filter(|d| s.insert_if_absent(d).unwrap().is_some())
                    .count()
            })
        })
        .collect();
    let stored: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(stored, 10, "each run inserted by exactly one pusher");
    assert_eq!(b.count("SELECT count(*) FROM runs"), 10);
    assert_eq!(b.count("SELECT count(DISTINCT uuid) FROM runs"), 10);
    let mut s = b.open();
    assert_eq!(s.insert_if_absent(&docs[3]).unwrap(), None);
    let r3 = s.find(&Selector::parse("r3")).unwrap();
    let got = s.get(r3).unwrap();
    assert_eq!(got, docs[3], "the pushed document comes back whole");
}

/// A store at schema version 1 (before `uuid`) with three runs, two of them byte-identical.
fn make_version_1(b: &Backend) {
    let json = serde_json::to_string(&doc("old")).unwrap();
    let other = serde_json::to_string(&doc("other")).unwrap();
    let v1 = match b {
        Backend::Sqlite(_) => {
            std::fs::create_dir_all(b.spec().parent().unwrap()).unwrap();
            "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, ended_at TEXT NOT NULL, status TEXT NOT NULL, profile TEXT, label TEXT, host TEXT NOT NULL, probes TEXT NOT NULL, document TEXT NOT NULL, writer_pid INTEGER NOT NULL, writer_start INTEGER NOT NULL, writer_boot TEXT NOT NULL);
             CREATE INDEX runs_label ON runs(label);
             CREATE TABLE tags (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key));
             PRAGMA user_version = 1;"
        }
        Backend::Postgres(..) => {
            "CREATE TABLE runs (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, started_at TEXT NOT NULL, ended_at TEXT NOT NULL, status TEXT NOT NULL, profile TEXT, label TEXT, host TEXT NOT NULL, probes TEXT NOT NULL, document TEXT NOT NULL, writer_pid BIGINT NOT NULL, writer_start BIGINT NOT NULL, writer_boot TEXT NOT NULL);
             CREATE INDEX runs_label ON runs(label);
             CREATE TABLE tags (run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key));
             CREATE TABLE schema_version (version BIGINT NOT NULL);
             INSERT INTO schema_version VALUES (1);"
        }
    };
    b.sql(v1);
    for j in [&json, &json, &other] {
        b.sql(&format!(
            "INSERT INTO runs (started_at, ended_at, status, profile, label, host, probes, document, writer_pid, writer_start, writer_boot)
             VALUES ('s', 'e', 'complete', 'quick', 'old', 'h', '', '{}', 1, 1, 'b')",
            j.replace('\'', "''")
        ));
    }
}

fn version_1_store_gets_derived_uuids(b: Backend) {
    make_version_1(&b);
    let mut s = b.open();
    let l = s.list().unwrap();
    assert_eq!(l.len(), 3);
    let json = serde_json::to_string(&doc("old")).unwrap();
    // Derived from the stored text: the same in any store, so a push of an old run is idempotent too.
    assert_eq!(l[0].uuid, RunDocument::derived_uuid(&json, None));
    assert_eq!(
        l[1].uuid,
        RunDocument::derived_uuid(&json, Some(l[1].id)),
        "a byte-identical twin is salted with its row id"
    );
    assert_ne!(l[0].uuid, l[2].uuid);
    assert_eq!(
        s.get(l[0].id).unwrap().uuid.as_deref(),
        Some(l[0].uuid.as_str()),
        "the document carries its id from now on"
    );
    drop(s);
    assert_eq!(
        b.count("SELECT count(DISTINCT uuid) FROM runs"),
        3,
        "unique after the migration"
    );
    // Idempotent: opening again changes nothing.
    let l2 = b.open().list().unwrap();
    assert_eq!(l, l2);
}

/// Whether the index `name` exists.
fn has_index(b: &Backend, name: &str) -> bool {
    let q = match b {
        Backend::Sqlite(_) => {
            format!("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = '{name}'")
        }
        Backend::Postgres(..) => {
            format!("SELECT count(*) FROM pg_indexes WHERE indexname = '{name}'")
        }
    };
    b.count(&q) == 1
}

fn schema_version(b: &Backend) -> i64 {
    match b {
        Backend::Sqlite(_) => b.count("SELECT user_version FROM pragma_user_version"),
        Backend::Postgres(..) => b.count("SELECT max(version) FROM schema_version"),
    }
}

/// Migration 3 (index on `runs(status)`, which the reaping of dead writers reads on every access): a store
/// at version 2 — today's schema without that index — gets it on open, its runs intact, and reaping works.
fn version_2_store_gets_the_status_index(b: Backend) {
    let mut s = b.open();
    let done = s.insert(&doc("done")).unwrap();
    let mut d = s.get(done).unwrap();
    d.status = RunStatus::Complete;
    s.update(done, &d).unwrap();
    let dead = s.insert(&doc("dead")).unwrap();
    drop(s);
    assert_eq!(schema_version(&b), 3);
    assert!(has_index(&b, "runs_status"));
    // Back to version 2: what a store written by the previous release looks like.
    b.sql("DROP INDEX runs_status");
    match &b {
        Backend::Sqlite(_) => b.sql("PRAGMA user_version = 2"),
        Backend::Postgres(..) => b.sql("UPDATE schema_version SET version = 2"),
    }
    b.sql(&format!(
        "UPDATE runs SET writer_pid = 999999999 WHERE id = {dead}"
    ));
    assert!(!has_index(&b, "runs_status"));

    let mut s = b.open();
    assert_eq!(schema_version(&b), 3);
    assert!(has_index(&b, "runs_status"));
    let l = s.list().unwrap();
    assert_eq!(l.len(), 2);
    assert_eq!(l[0].status, RunStatus::Complete);
    assert_eq!(
        l[1].status,
        RunStatus::Interrupted,
        "the dead writer is reaped"
    );
    assert_eq!(s.get(done).unwrap(), d);
    drop(s);
    if let Backend::Sqlite(_) = b {
        // The reaping query uses the index instead of scanning the table.
        let plan: String = rusqlite::Connection::open(b.spec())
            .unwrap()
            .query_row(
                "EXPLAIN QUERY PLAN SELECT id, writer_pid, writer_start, writer_boot FROM runs WHERE status = 'running'",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("USING INDEX runs_status"), "{plan}");
    }
    // Idempotent: opening again changes nothing.
    drop(b.open());
    assert_eq!(schema_version(&b), 3);
}

#[test]
fn garbage_file_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    std::fs::write(
        &path,
        b"this is not a database, just text that is long enough to be a header.....",
    )
    .unwrap();
    assert!(open_store(&path).is_err());
}

#[test]
fn postgres_server_down_is_one_clear_error() {
    let mut srv = pg::PgServer::start();
    let url = srv.url();
    srv.stop();
    let e = match open_store(Path::new(&url)) {
        Err(e) => rtgauge_model::error::one_line(&e),
        Ok(_) => panic!("connected to a stopped server"),
    };
    assert!(e.contains("cannot connect"), "{e}");
    assert!(e.contains("127.0.0.1"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn bad_postgres_url_is_named() {
    let e = match open_store(Path::new("postgresql://u:pw@host:notaport/db")) {
        Err(e) => rtgauge_model::error::one_line(&e),
        Ok(_) => panic!("opened a bad URL"),
    };
    assert!(e.contains("not a valid PostgreSQL URL"), "{e}");
    assert!(!e.contains("pw"), "the password is not printed: {e}");
}

/// TLS: `sslmode=require` connects through TLS when the server's certificate is trusted (here through
/// `RTGAUGE_DB_CA`), and is refused, in one line, when it is not. One test, since it sets the variable.
#[test]
fn postgres_over_tls_verifies_the_server_certificate() {
    let srv = pg::PgServer::start_tls();
    let url = srv.url().replace("sslmode=disable", "sslmode=require");
    std::env::remove_var("RTGAUGE_DB_CA");
    let e = match open_store(Path::new(&url)) {
        Err(e) => rtgauge_model::error::one_line(&e),
        Ok(_) => panic!("trusted a self-signed certificate without being told to"),
    };
    assert!(
        e.contains("cannot connect") && e.contains("certificate"),
        "{e}"
    );
    std::env::set_var("RTGAUGE_DB_CA", srv.ca());
    let mut s = open_store(Path::new(&url)).expect("TLS connection with the CA");
    std::env::remove_var("RTGAUGE_DB_CA");
    s.insert(&doc("over-tls")).unwrap();
    let ssl: i64 = srv
        .client(&srv.url())
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE s.ssl AND a.backend_type = 'client backend'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ssl, 1, "the store's connection is the one encrypted");
    assert_eq!(s.list().unwrap()[0].label.as_deref(), Some("over-tls"));
}

/// `select`: what each selector stands for, and each refusal naming the run or selector at fault, on a
/// store of: runs 1–3 labelled `a` (complete), runs 4–6 one `run --repeat 3` labelled `r` (the last
/// interrupted), run 7 of a host that gave no name.
#[test]
fn selection_takes_sets_groups_hosts_and_repeats_and_names_what_it_refuses() {
    use rtgauge_model::run::RepeatOf;
    use rtgauge_store::select::{self, SelectError};
    let dir = tempfile::tempdir().unwrap();
    let mut s = open_store(&dir.path().join("r.db")).unwrap();
    let mut stored = |label: &str, status, repeat: Option<u32>, host: &str| {
        let mut d = doc(label);
        d.status = status;
        d.system.nodename = host.into();
        d.repeat = repeat.map(|index| RepeatOf {
            group: "0b7a8f0e-7d2c-4c61-9d5e-2f8c4e6b1a90".into(),
            index,
            count: 3,
        });
        let id = s.insert(&d).unwrap();
        s.update(id, &d).unwrap();
        id
    };
    for _ in 0..3 {
        stored("a", RunStatus::Complete, None, "h");
    }
    for i in 1..=3 {
        let status = if i == 3 {
            RunStatus::Interrupted
        } else {
            RunStatus::Complete
        };
        stored("r", status, Some(i), "h");
    }
    let nameless = stored("a", RunStatus::Complete, None, "");
    // Label r again, from another group: not a repeat of runs 4–6.
    let mut other = doc("r");
    other.status = RunStatus::Complete;
    other.system.nodename = "h".into();
    other.repeat = Some(RepeatOf {
        group: "5d3c1b2a-0e9f-4a8b-b7c6-d5e4f3a2b1c0".into(),
        index: 1,
        count: 2,
    });
    let other_group = s.insert(&other).unwrap();
    s.update(other_group, &other).unwrap();
    // The newest run labelled r (other_group) stands for its own group only.
    assert_eq!(select::fetch(s.as_mut(), "r").unwrap().0, other_group);
    let ids = |sets: &[select::Stored]| -> Vec<Vec<i64>> {
        sets.iter()
            .map(|set| set.iter().map(|(id, _)| *id).collect())
            .collect()
    };
    let cols = |s: &mut dyn RunStore, runs: &[&str], labels: &[&str], every| {
        let runs: Vec<String> = runs.iter().map(|r| r.to_string()).collect();
        let labels: Vec<String> = labels.iter().map(|r| r.to_string()).collect();
        select::column_sets(s, &runs, &labels, every)
    };

    // A label stands for its newest run's group (another group's runs and the interrupted run left out);
    // --every for all its complete runs.
    let sets = cols(s.as_mut(), &["6", "1,2"], &["a"], false).unwrap();
    assert_eq!(ids(&sets), [vec![6], vec![1, 2], vec![nameless]]);
    let sets = cols(s.as_mut(), &["r", "4,5"], &[], false).unwrap();
    assert_eq!(ids(&sets), [vec![other_group], vec![4, 5]]);
    let sets = cols(s.as_mut(), &[], &["a", "r"], true).unwrap();
    assert_eq!(
        ids(&sets),
        [vec![1, 2, 3, nameless], vec![4, 5, other_group]]
    );
    // The interrupted run's group, by its label alone: its complete runs.
    s.delete(other_group).unwrap();
    let sets = cols(s.as_mut(), &["r", "1"], &[], false).unwrap();
    assert_eq!(ids(&sets), [vec![4, 5], vec![1]]);
    // A single run against itself reads exactly 1: allowed.
    assert_eq!(
        ids(&cols(s.as_mut(), &["1", "1"], &[], false).unwrap()),
        [vec![1], vec![1]]
    );

    fn refused<T: std::fmt::Debug>(r: Result<T, SelectError>) -> String {
        r.unwrap_err().to_string()
    }
    assert_eq!(
        refused(cols(s.as_mut(), &["1,,2", "3"], &[], false)),
        "run set '1,,2': an empty entry (write runs as 1,2,3)"
    );
    assert!(refused(cols(s.as_mut(), &["1,1", "3"], &[], false)).contains("run 1 appears twice"));
    assert!(
        refused(cols(s.as_mut(), &["1,2", "2"], &[], false)).contains("run 2 is in two columns")
    );
    assert!(refused(cols(s.as_mut(), &["4,6", "1"], &[], false))
        .contains("run 6 is interrupted; a set holds complete runs"));
    assert_eq!(
        refused(cols(s.as_mut(), &[], &["nosuch"], true)),
        "--label nosuch: no complete stored run has this label"
    );
    let e = select::fetch(s.as_mut(), "99").unwrap_err();
    assert_eq!(e.to_string(), "run 99");
    let cause = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(
        cause.as_deref(),
        Some("run 99 not found"),
        "the CLI prints the cause after the selector"
    );
    assert!(matches!(
        e,
        SelectError::Run {
            cause: StoreError::NotFound(_),
            ..
        }
    ));

    // --host: the latest run of each host, by the name fleet shows ("(unknown host)" for no name).
    let hosts = ["h".to_string(), "(unknown host)".to_string()];
    assert_eq!(
        select::latest_of_hosts(s.as_mut(), &hosts).unwrap(),
        [6, nameless]
    );
    assert_eq!(
        refused(select::latest_of_hosts(s.as_mut(), &["zz".into()])),
        "--host zz: no run of this host in the store"
    );

    // Repeats of a single run: the complete runs alike in label, profile, host and probes, under the same
    // conditions, never a compared run; none for a set column, nothing at all when every column is a set.
    let sets = cols(s.as_mut(), &["1", "4,5"], &[], false).unwrap();
    let (loaded, found) = select::repeats(s.as_mut(), &sets, |_, _| true).unwrap();
    assert_eq!(found, [Some(vec![2, 3]), None]);
    assert_eq!(loaded.keys().copied().collect::<Vec<_>>(), [2, 3]);
    let (loaded, found) = select::repeats(s.as_mut(), &sets, |_, _| false).unwrap();
    assert_eq!(found, [Some(vec![]), None]);
    assert!(loaded.is_empty());
    let sets = cols(s.as_mut(), &["1", "2"], &[], false).unwrap();
    let (_, found) = select::repeats(s.as_mut(), &sets, |_, _| true).unwrap();
    assert_eq!(
        found,
        [Some(vec![3]), Some(vec![3])],
        "a compared run repeats neither"
    );
    let sets = cols(s.as_mut(), &["1,2", "4,5"], &[], false).unwrap();
    assert_eq!(
        select::repeats(s.as_mut(), &sets, |_, _| true).unwrap().1,
        []
    );
}

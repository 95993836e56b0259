//! SQLite implementation of [`RunStore`](crate::RunStore).

use crate::{RunStore, RunSummary, Selector, StoreError};
use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};

/// Schema migrations, applied in order; index + 1 is the `user_version` after each.
const MIGRATIONS: &[&str] = &[r"
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at    TEXT NOT NULL,
    ended_at      TEXT NOT NULL,
    status        TEXT NOT NULL,
    profile       TEXT,
    label         TEXT,
    host          TEXT NOT NULL,
    probes        TEXT NOT NULL,
    document      TEXT NOT NULL,
    writer_pid    INTEGER NOT NULL,
    writer_start  INTEGER NOT NULL,
    writer_boot   TEXT NOT NULL
);
CREATE INDEX runs_label ON runs(label);
CREATE TABLE tags (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
"];

/// How long a writer waits for another one before giving up.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Run `f` until it does not fail with SQLITE_BUSY/LOCKED, for up to [`BUSY_WAIT`].
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let start = std::time::Instant::now();
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && start.elapsed() < BUSY_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// A run store in one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    path: String,
}

/// Identity of the writing process: pid, its start time (so a reused pid is not mistaken for it) and the
/// boot id (so a reboot is detected).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Writer {
    pid: i64,
    start: i64,
    boot: String,
}

/// Start time of a live process: field 22 of /proc/PID/stat (proc(5)), counted after the last ')' since
/// comm may contain spaces. A zombie (state Z or X: killed, not yet reaped — common under a container init
/// that does not reap) is not alive.
fn parse_live_start_time(stat: &str) -> Option<i64> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut f = rest.split_whitespace();
    if matches!(f.next()?, "Z" | "X" | "x") {
        return None;
    }
    f.nth(18)?.parse().ok()
}

fn proc_start_time(pid: i64) -> Option<i64> {
    parse_live_start_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Writer {
    fn current() -> Writer {
        let pid = i64::from(std::process::id());
        Writer {
            pid,
            start: proc_start_time(pid).unwrap_or(0),
            boot: boot_id(),
        }
    }
    fn is_alive(&self) -> bool {
        self.boot == boot_id() && proc_start_time(self.pid) == Some(self.start)
    }
}

fn probes_of(doc: &RunDocument) -> String {
    let names: Vec<&str> = doc
        .probes
        .iter()
        .map(|p| match p {
            ProbeResult::Cyclic(_) => "cyclic",
            ProbeResult::Oslat(_) => "oslat",
            ProbeResult::Net(_) => "net",
            ProbeResult::Ops(_) => "ops",
            ProbeResult::Mem(_) => "mem",
            ProbeResult::Numa(_) => "numa",
        })
        .collect();
    names.join(",")
}

fn status_from(s: &str) -> RunStatus {
    match s {
        "running" => RunStatus::Running,
        "complete" => RunStatus::Complete,
        _ => RunStatus::Interrupted,
    }
}

impl SqliteStore {
    /// The default database: `$XDG_DATA_HOME/rtgauge/rtgauge.db` (or `~/.local/share/...`).
    pub fn default_path() -> PathBuf {
        let base = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("rtgauge").join("rtgauge.db")
    }

    /// Open (creating if needed) and migrate.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let p = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|cause| StoreError::Io {
                path: dir.display().to_string(),
                cause,
            })?;
        }
        let sq = |cause| StoreError::Sqlite {
            path: p.clone(),
            cause,
        };
        let conn = Connection::open(path).map_err(sq)?;
        conn.busy_timeout(BUSY_WAIT).map_err(sq)?;
        // Switching to WAL needs an exclusive lock and SQLite may answer BUSY without calling the busy
        // handler (while another process is creating the same database), so retry here.
        retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(sq)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sq)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sq)?;
        let mut store = SqliteStore { conn, path: p };
        store.migrate()?;
        Ok(store)
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |cause| StoreError::Sqlite {
            path: self.path.clone(),
            cause,
        }
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sq = |cause| StoreError::Sqlite {
            path: path.clone(),
            cause,
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sq)?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sq)?;
        let supported = MIGRATIONS.len() as i64;
        if version > supported {
            return Err(StoreError::TooNew {
                path,
                found: version,
                supported,
            });
        }
        for (i, m) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(m).map_err(sq)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)
                .map_err(sq)?;
        }
        tx.commit().map_err(sq)
    }

    fn write_tags(
        tx: &rusqlite::Transaction<'_>,
        id: i64,
        doc: &RunDocument,
    ) -> rusqlite::Result<()> {
        tx.execute("DELETE FROM tags WHERE run_id = ?1", params![id])?;
        for (k, v) in &doc.tags {
            tx.execute(
                "INSERT INTO tags (run_id, key, value) VALUES (?1, ?2, ?3)",
                params![id, k, v],
            )?;
        }
        Ok(())
    }

    /// Mark `running` runs whose writer is gone as interrupted (their document keeps the last checkpoint).
    fn reap(&mut self) -> Result<(), StoreError> {
        let rows: Vec<(i64, i64, i64, String)> = {
            let mut st = self
                .conn
                .prepare("SELECT id, writer_pid, writer_start, writer_boot FROM runs WHERE status = 'running'")
                .map_err(self.err())?;
            let it = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .map_err(self.err())?;
            it.collect::<Result<_, _>>().map_err(self.err())?
        };
        for (id, pid, start, boot) in rows {
            if !(Writer { pid, start, boot }).is_alive() {
                let mut doc = self.get_raw(id)?;
                doc.status = RunStatus::Interrupted;
                doc.warnings.push("the measuring process ended without finishing the run; data up to its last checkpoint".into());
                let json = serde_json::to_string(&doc).map_err(|e| StoreError::Corrupt {
                    id,
                    reason: e.to_string(),
                })?;
                self.conn
                    .execute("UPDATE runs SET status = 'interrupted', document = ?2 WHERE id = ?1 AND status = 'running'", params![id, json])
                    .map_err(self.err())?;
            }
        }
        Ok(())
    }

    fn get_raw(&mut self, id: i64) -> Result<RunDocument, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT document FROM runs WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err())?;
        let text = text.ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            id,
            reason: e.to_string(),
        })
    }
}

impl RunStore for SqliteStore {
    fn insert(&mut self, doc: &RunDocument) -> Result<i64, StoreError> {
        let w = Writer::current();
        let json = serde_json::to_string(doc).map_err(|e| StoreError::Corrupt {
            id: 0,
            reason: e.to_string(),
        })?;
        let path = self.path.clone();
        let sq = |cause| StoreError::Sqlite {
            path: path.clone(),
            cause,
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sq)?;
        tx.execute(
            "INSERT INTO runs (started_at, ended_at, status, profile, label, host, probes, document, writer_pid, writer_start, writer_boot)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                doc.started_at,
                doc.ended_at,
                doc.status.as_str(),
                doc.profile,
                doc.label,
                doc.system.nodename,
                probes_of(doc),
                json,
                w.pid,
                w.start,
                w.boot
            ],
        )
        .map_err(sq)?;
        let id = tx.last_insert_rowid();
        Self::write_tags(&tx, id, doc).map_err(sq)?;
        tx.commit().map_err(sq)?;
        Ok(id)
    }

    fn update(&mut self, id: i64, doc: &RunDocument) -> Result<(), StoreError> {
        let json = serde_json::to_string(doc).map_err(|e| StoreError::Corrupt {
            id,
            reason: e.to_string(),
        })?;
        let path = self.path.clone();
        let sq = |cause| StoreError::Sqlite {
            path: path.clone(),
            cause,
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sq)?;
        let n = tx
            .execute(
                "UPDATE runs SET ended_at = ?2, status = ?3, profile = ?4, label = ?5, probes = ?6, document = ?7 WHERE id = ?1",
                params![id, doc.ended_at, doc.status.as_str(), doc.profile, doc.label, probes_of(doc), json],
            )
            .map_err(sq)?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Self::write_tags(&tx, id, doc).map_err(sq)?;
        tx.commit().map_err(sq)
    }

    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError> {
        self.reap()?;
        let mut st = self
            .conn
            .prepare("SELECT id, started_at, ended_at, status, profile, label, host, probes FROM runs ORDER BY id")
            .map_err(self.err())?;
        let it = st
            .query_map([], |r| {
                Ok(RunSummary {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    ended_at: r.get(2)?,
                    status: status_from(&r.get::<_, String>(3)?),
                    profile: r.get(4)?,
                    label: r.get(5)?,
                    host: r.get(6)?,
                    probes: r.get(7)?,
                })
            })
            .map_err(|cause| StoreError::Sqlite {
                path: self.path.clone(),
                cause,
            })?;
        it.collect::<Result<_, _>>()
            .map_err(|cause| StoreError::Sqlite {
                path: self.path.clone(),
                cause,
            })
    }

    fn get(&mut self, id: i64) -> Result<RunDocument, StoreError> {
        self.reap()?;
        self.get_raw(id)
    }

    fn resolve(&mut self, sel: &Selector) -> Result<i64, StoreError> {
        let (sql, arg): (&str, Option<String>) = match sel {
            Selector::Latest => ("SELECT max(id) FROM runs", None),
            Selector::Id(id) => ("SELECT id FROM runs WHERE id = ?1", Some(id.to_string())),
            Selector::Label(l) => ("SELECT max(id) FROM runs WHERE label = ?1", Some(l.clone())),
        };
        let found: Option<i64> = match &arg {
            None => self.conn.query_row(sql, [], |r| r.get(0)),
            Some(a) => self.conn.query_row(sql, params![a], |r| r.get(0)),
        }
        .optional()
        .map_err(self.err())?
        .flatten();
        found.ok_or_else(|| {
            StoreError::NotFound(match sel {
                Selector::Latest => "latest (the store is empty)".into(),
                Selector::Id(id) => id.to_string(),
                Selector::Label(l) => format!("with label '{l}'"),
            })
        })
    }

    fn delete(&mut self, id: i64) -> Result<(), StoreError> {
        let n = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", params![id])
            .map_err(self.err())?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::run::{SystemInfo, ToolInfo};

    fn doc(label: &str) -> RunDocument {
        RunDocument {
            schema_version: 1,
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
        }
    }

    #[test]
    fn insert_update_list_select_delete() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("sub/r.db")).unwrap();
        let a = s.insert(&doc("bare-metal")).unwrap();
        let mut d = doc("guest");
        let b = s.insert(&d).unwrap();
        d.status = RunStatus::Complete;
        s.update(b, &d).unwrap();
        let l = s.list().unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(
            l[0].status,
            RunStatus::Running,
            "our own process is alive: still running"
        );
        assert_eq!(l[1].status, RunStatus::Complete);
        assert_eq!(s.resolve(&Selector::Latest).unwrap(), b);
        assert_eq!(s.resolve(&Selector::parse("bare-metal")).unwrap(), a);
        assert_eq!(s.resolve(&Selector::parse(&a.to_string())).unwrap(), a);
        assert!(matches!(
            s.resolve(&Selector::Label("nope".into())),
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(s.get(b).unwrap().tags["site"], "lab");
        s.delete(a).unwrap();
        assert!(matches!(s.get(a), Err(StoreError::NotFound(_))));
        assert_eq!(s.list().unwrap().len(), 1);
    }

    #[test]
    fn zombies_and_odd_comms_in_proc_stat() {
        let live = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 3 0 777 1000 10";
        assert_eq!(parse_live_start_time(live), Some(777));
        assert_eq!(parse_live_start_time(&live.replace(") S ", ") Z ")), None);
        assert_eq!(parse_live_start_time("42 (x) R 1"), None);
        assert_eq!(parse_live_start_time(""), None);
        assert_eq!(parse_live_start_time("(("), None);
    }

    #[test]
    fn dead_writer_means_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let mut s = SqliteStore::open(&path).unwrap();
        let id = s.insert(&doc("x")).unwrap();
        // Pretend the writer was another process that is gone.
        s.conn
            .execute(
                "UPDATE runs SET writer_pid = 999999999 WHERE id = ?1",
                params![id],
            )
            .unwrap();
        let l = s.list().unwrap();
        assert_eq!(l[0].status, RunStatus::Interrupted);
        let d = s.get(id).unwrap();
        assert_eq!(d.status, RunStatus::Interrupted);
        assert!(d.warnings.iter().any(|w| w.contains("last checkpoint")));
    }

    #[test]
    fn newer_schema_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        drop(SqliteStore::open(&path).unwrap());
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        assert!(matches!(
            SqliteStore::open(&path),
            Err(StoreError::TooNew { found: 99, .. })
        ));
    }

    #[test]
    fn concurrent_writers_both_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        drop(SqliteStore::open(&path).unwrap());
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let p = path.clone();
                std::thread::spawn(move || {
                    let mut s = SqliteStore::open(&p).unwrap();
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
        assert_eq!(SqliteStore::open(&path).unwrap().list().unwrap().len(), 80);
    }

    #[test]
    fn many_writers_creating_the_same_new_database_all_succeed() {
        for round in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(format!("new{round}.db"));
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
            let hs: Vec<_> = (0..6)
                .map(|i| {
                    let (p, b) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        b.wait();
                        let mut s = SqliteStore::open(&p).unwrap();
                        s.insert(&doc(&format!("w{i}"))).unwrap();
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(SqliteStore::open(&path).unwrap().list().unwrap().len(), 6);
        }
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
        assert!(SqliteStore::open(&path).is_err());
    }
}

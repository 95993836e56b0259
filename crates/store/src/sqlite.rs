//! SQLite implementation of [`RunStore`].

use crate::common::{
    backfill_uuid, insert_new, insert_pushed, mark_interrupted, not_found, parse_document,
    probes_of, status_from, to_json, updated_json, Writer, LIST_SQL,
};
use crate::{ClientError, RunStore, RunSummary, Selector, StoreError};
use rtgauge_model::run::RunDocument;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};

/// Schema migrations, applied in order; index + 1 is the `user_version` after each. The same steps, in the
/// same order, as PostgreSQL's (pg.rs), so a version number means one schema on both.
const MIGRATIONS: &[&str] = &[
    r"
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
",
    // 2: the run's globally unique id; existing rows get theirs from `backfill_uuid` before the index.
    "ALTER TABLE runs ADD COLUMN uuid TEXT;",
    // 3: every read first looks for `running` runs whose writer died (`reap`); without an index on `status`
    // that is a scan of the table per read, so `fleet` (one read per host) was quadratic in the runs.
    "CREATE INDEX runs_status ON runs(status);",
];

/// SQL run after migration 2's column is filled in.
const UUID_INDEX: &str = "CREATE UNIQUE INDEX runs_uuid ON runs(uuid);";

/// How long a writer waits for another one before giving up.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a checkpoint waits for another writer: a run's main thread takes it between draining its
/// probe's samples, so it gives up quickly and tries again at the next checkpoint.
const CHECKPOINT_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

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

/// Whether the filesystem holding `path` (or its directory, when the file does not exist yet) is mounted
/// read-only: opening it for writing (or creating a directory beside it) fails with EROFS. Nothing is
/// written or left behind.
fn read_only_fs(path: &Path) -> bool {
    let r = if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
    } else {
        let probe = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(format!(".rtgauge-write-probe-{}", std::process::id()));
        std::fs::create_dir(&probe).map(|_| {
            let _ = std::fs::remove_dir(&probe);
        })
    };
    r.is_err_and(|e| e.raw_os_error() == Some(libc::EROFS))
}

/// A SQLite error as a store error naming the database file.
fn sqlite_error(path: &str) -> impl Fn(rusqlite::Error) -> StoreError + Copy + '_ {
    move |e| StoreError::Sqlite {
        path: path.to_string(),
        cause: ClientError::new(e.to_string(), Box::new(e)),
    }
}

/// Begin an IMMEDIATE transaction (the write lock at once, so two writers wait on the busy timeout rather
/// than failing at their first write).
fn begin_immediate<'c>(
    conn: &'c mut Connection,
    path: &str,
) -> Result<rusqlite::Transaction<'c>, StoreError> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_error(path))
}

/// A run store in one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    path: String,
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
        // SQLite says "unable to open database file" or "readonly database" without the cause: a read-only
        // filesystem is said (it is the usual one, and `--db` elsewhere the fix).
        let sq = |e: rusqlite::Error| {
            let mut e = sqlite_error(&p)(e);
            if let StoreError::Sqlite { cause, .. } = &mut e {
                if read_only_fs(path) {
                    cause
                        .line
                        .push_str(" (its filesystem is mounted read-only)");
                }
            }
            e
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

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + Copy + '_ {
        sqlite_error(&self.path)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let sq = sqlite_error(&self.path);
        let tx = begin_immediate(&mut self.conn, &self.path)?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sq)?;
        let supported = MIGRATIONS.len() as i64;
        if version > supported {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                supported,
            });
        }
        for (i, m) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(m).map_err(sq)?;
            if i == 1 {
                let rows: Vec<(i64, String)> = {
                    let mut st = tx
                        .prepare("SELECT id, document FROM runs ORDER BY id")
                        .map_err(sq)?;
                    let it = st
                        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                        .map_err(sq)?;
                    it.collect::<Result<_, _>>().map_err(sq)?
                };
                let mut taken = std::collections::HashSet::new();
                for (id, text) in rows {
                    let (uuid, json) = backfill_uuid(id, &text, &mut taken)?;
                    tx.execute(
                        "UPDATE runs SET uuid = ?2, document = ?3 WHERE id = ?1",
                        params![id, uuid, json],
                    )
                    .map_err(sq)?;
                }
                tx.execute_batch(UUID_INDEX).map_err(sq)?;
            }
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
                mark_interrupted(&mut doc);
                let json = to_json(&doc, id)?;
                self.conn
                    .execute("UPDATE runs SET status = 'interrupted', document = ?2 WHERE id = ?1 AND status = 'running'", params![id, json])
                    .map_err(self.err())?;
            }
        }
        Ok(())
    }

    /// Insert a run with its `uuid` and JSON text; `None` when `if_absent` and the uuid is stored already.
    fn insert_row(
        &mut self,
        doc: &RunDocument,
        uuid: &str,
        json: &str,
        if_absent: bool,
    ) -> Result<Option<i64>, StoreError> {
        let w = Writer::current();
        let sq = sqlite_error(&self.path);
        let tx = begin_immediate(&mut self.conn, &self.path)?;
        let n = tx.execute(
            &format!(
                "INSERT INTO runs (started_at, ended_at, status, profile, label, host, probes, document, writer_pid, writer_start, writer_boot, uuid)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12){}",
                if if_absent { " ON CONFLICT(uuid) DO NOTHING" } else { "" }
            ),
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
                w.boot,
                uuid
            ],
        );
        let n = match n {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
            {
                return Err(StoreError::Duplicate(uuid.to_string()))
            }
            other => other.map_err(sq)?,
        };
        if n == 0 {
            return Ok(None);
        }
        let id = tx.last_insert_rowid();
        Self::write_tags(&tx, id, doc).map_err(sq)?;
        tx.commit().map_err(sq)?;
        Ok(Some(id))
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
        parse_document(id, &text)
    }
}

impl RunStore for SqliteStore {
    fn location(&self) -> &str {
        &self.path
    }

    fn insert(&mut self, document: &RunDocument) -> Result<i64, StoreError> {
        insert_new(document, &mut |uuid, json, if_absent| {
            self.insert_row(document, uuid, json, if_absent)
        })
    }

    fn insert_if_absent(&mut self, document: &RunDocument) -> Result<Option<i64>, StoreError> {
        insert_pushed(document, &mut |uuid, json, if_absent| {
            self.insert_row(document, uuid, json, if_absent)
        })
    }

    fn known_uuids(
        &mut self,
        uuids: &[String],
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT 1 FROM runs WHERE uuid = ?1")
            .map_err(sqlite_error(&self.path))?;
        let mut found = std::collections::HashSet::new();
        for u in uuids {
            if st.exists(params![u]).map_err(sqlite_error(&self.path))? {
                found.insert(u.clone());
            }
        }
        Ok(found)
    }

    fn update(&mut self, id: i64, document: &RunDocument) -> Result<(), StoreError> {
        // The run keeps the id it was stored with, whatever the caller's copy says.
        let uuid: Option<String> = self
            .conn
            .query_row("SELECT uuid FROM runs WHERE id = ?1", params![id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.err())?;
        let uuid = uuid.ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let json = updated_json(document, id, uuid)?;
        let sq = sqlite_error(&self.path);
        let tx = begin_immediate(&mut self.conn, &self.path)?;
        let n = tx
            .execute(
                "UPDATE runs SET ended_at = ?2, status = ?3, profile = ?4, label = ?5, probes = ?6, document = ?7 WHERE id = ?1",
                params![id, document.ended_at, document.status.as_str(), document.profile, document.label, probes_of(document), json],
            )
            .map_err(sq)?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Self::write_tags(&tx, id, document).map_err(sq)?;
        tx.commit().map_err(sq)
    }

    /// A checkpoint waits for another writer's lock [`CHECKPOINT_WAIT`] at most, not [`BUSY_WAIT`].
    fn checkpoint(&mut self, id: i64, document: &RunDocument) -> Result<(), StoreError> {
        let _ = self.conn.busy_timeout(CHECKPOINT_WAIT);
        let r = self.update(id, document);
        let _ = self.conn.busy_timeout(BUSY_WAIT);
        r
    }

    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError> {
        self.reap()?;
        let mut st = self.conn.prepare(LIST_SQL).map_err(self.err())?;
        let it = st
            .query_map([], |r| {
                Ok(RunSummary {
                    id: r.get(0)?,
                    uuid: r.get(1)?,
                    started_at: r.get(2)?,
                    ended_at: r.get(3)?,
                    status: status_from(&r.get::<_, String>(4)?),
                    profile: r.get(5)?,
                    label: r.get(6)?,
                    host: r.get(7)?,
                    probes: r.get(8)?,
                })
            })
            .map_err(sqlite_error(&self.path))?;
        it.collect::<Result<_, _>>()
            .map_err(sqlite_error(&self.path))
    }

    fn get(&mut self, id: i64) -> Result<RunDocument, StoreError> {
        self.reap()?;
        self.get_raw(id)
    }

    fn find(&mut self, selector: &Selector) -> Result<i64, StoreError> {
        let (sql, arg): (&str, Option<String>) = match selector {
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
        found.ok_or_else(|| not_found(selector))
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

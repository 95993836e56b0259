//! The run store. A run is stored as its whole run document (JSON, the same bytes `--output` writes) plus a
//! few indexed columns for listing and selection. Every view is rendered from what is stored.
//!
//! Invariants:
//! - the schema is versioned with `PRAGMA user_version` and migrated forward on open, never backward;
//! - WAL journal and a busy timeout, so several rtgauge processes can write one database at once;
//! - a run is inserted as `running` when it starts and overwritten by each checkpoint; a `running` run whose
//!   writer process is gone (killed, machine rebooted) is reported — and marked — `interrupted`, with the
//!   data of its last checkpoint;
//! - deleting is explicit (`runs delete`); nothing else removes a stored run.

#![forbid(unsafe_code)]

pub mod import;
mod sqlite;

pub use sqlite::SqliteStore;

use rtgauge_model::run::{RunDocument, RunStatus};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    // The cause is part of the message and deliberately not an error `source`: with both, a chained
    // report (anyhow's `{:#}`) printed it twice ("… is malformed: … is malformed").
    #[error("database {path}: {cause}")]
    Sqlite {
        path: String,
        cause: rusqlite::Error,
    },
    #[error("cannot create {path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("run {0} not found")]
    NotFound(String),
    #[error("stored run {id} is not a valid run document: {reason}")]
    Corrupt { id: i64, reason: String },
    #[error("database {path} has schema version {found}, newer than this rtgauge understands ({supported})")]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
}

/// One line of `runs list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub id: i64,
    pub started_at: String,
    pub ended_at: String,
    pub status: RunStatus,
    pub profile: Option<String>,
    pub label: Option<String>,
    pub host: String,
    /// The probes in the run (`cyclic,oslat`).
    pub probes: String,
}

/// How a run is chosen on the command line: `latest`, a numeric id, or a label (the newest run with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Latest,
    Id(i64),
    Label(String),
}

impl Selector {
    /// `latest`, `42`, or `label:NAME` / any other text as a label.
    pub fn parse(s: &str) -> Selector {
        if s == "latest" {
            Selector::Latest
        } else if let Ok(id) = s.parse() {
            Selector::Id(id)
        } else {
            Selector::Label(s.strip_prefix("label:").unwrap_or(s).to_string())
        }
    }
}

/// The operations rtgauge needs from a run store (SQLite today; PostgreSQL can implement the same).
pub trait RunStore {
    /// Store a new run (usually `running`) and return its id.
    fn insert(&mut self, doc: &RunDocument) -> Result<i64, StoreError>;
    /// Replace a run's document (a checkpoint, or the final result).
    fn update(&mut self, id: i64, doc: &RunDocument) -> Result<(), StoreError>;
    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError>;
    fn get(&mut self, id: i64) -> Result<RunDocument, StoreError>;
    fn resolve(&mut self, sel: &Selector) -> Result<i64, StoreError>;
    fn delete(&mut self, id: i64) -> Result<(), StoreError>;
}

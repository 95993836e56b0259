//! The run store. A run is stored as its whole run document (JSON, the same bytes `--output` writes) plus a
//! few indexed columns for listing and selection. Every view is rendered from what is stored.
//!
//! Two backends implement [`RunStore`]: SQLite (one file, the default on a host) and PostgreSQL (a central
//! store a fleet pushes to). [`open_store`] picks one from `--db` / `RTGAUGE_DB`. [`select`] says which
//! stored runs a selector, a comparison's column or a host stands for.
//!
//! Invariants:
//! - the schema is versioned (SQLite: `PRAGMA user_version`; PostgreSQL: the `schema_version` table; the
//!   same numbered migrations) and migrated forward on open, never backward; a newer schema is refused;
//! - several rtgauge processes can write one store at once (SQLite: WAL and a busy timeout; PostgreSQL: row
//!   inserts, migrations under an advisory lock);
//! - every run has a globally unique `uuid`, unique in each store: [`RunStore::insert_if_absent`] makes a
//!   push idempotent and resumable;
//! - a run is inserted as `running` when it starts and overwritten by each checkpoint; a `running` run whose
//!   writer process is gone (killed, machine rebooted) is reported — and marked — `interrupted`, with the
//!   data of its last checkpoint;
//! - deleting is explicit (`runs delete`); nothing else removes a stored run.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod common;
#[cfg(feature = "postgres")]
mod pg;
pub mod select;
mod sqlite;

#[cfg(feature = "postgres")]
pub use pg::PgStore;
pub use sqlite::SqliteStore;

use rtgauge_model::run::{RunDocument, RunStatus};

/// Why a store operation failed.
///
/// A message does not repeat its cause: the cause is the error's `source`, and the binary prints the chain
/// (anyhow's `{:#}`: "database PATH: CAUSE"); [`rtgauge_model::error::one_line`] gives the same line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("database {path}")]
    Sqlite {
        /// The database file.
        path: String,
        /// SQLite's error (a `rusqlite::Error`).
        #[source]
        cause: ClientError,
    },
    /// The PostgreSQL server or client refused an operation.
    #[error("database {url}")]
    Postgres {
        /// The server's URL, without its password.
        url: String,
        /// The client's error (a `postgres::Error`; setting up TLS, a `native_tls::Error` or the
        /// `std::io::Error` of reading `RTGAUGE_DB_CA`).
        #[source]
        cause: ClientError,
    },
    /// The database file's directory could not be created.
    #[error("cannot create {path}")]
    Io {
        /// The directory.
        path: String,
        /// The OS error.
        #[source]
        cause: std::io::Error,
    },
    /// A run with this uuid is stored already (the uuid is the payload).
    #[error("a run with uuid {0} is stored already")]
    Duplicate(String),
    /// No run matches the id or label given (the payload, as given).
    #[error("run {0} not found")]
    NotFound(String),
    /// A stored document does not parse as a run document.
    #[error("stored run {id} is not a valid run document")]
    Corrupt {
        /// The run's id in the store.
        id: i64,
        /// The parser's error.
        #[source]
        cause: serde_json::Error,
    },
    /// A `scheme://` store other than PostgreSQL.
    #[error("--db/--to {url}: '{scheme}://' is not a store rtgauge knows (postgresql:// or a SQLite file path)")]
    UnsupportedUrl {
        /// The spec, its password hidden.
        url: String,
        /// The scheme given.
        scheme: String,
    },
    /// A PostgreSQL store named to a binary built without its client (the caller names the URL).
    #[error("{NO_POSTGRES}")]
    NoPostgres,
    /// The store was migrated by a newer rtgauge; it is not opened rather than misread.
    #[error("database {path} has schema version {found}, newer than this rtgauge understands ({supported})")]
    TooNew {
        /// The store (file path, or URL without its password).
        path: String,
        /// The store's schema version.
        found: i64,
        /// The newest schema version this rtgauge knows.
        supported: i64,
    },
}

/// What a database client said when a store operation failed: its error kept whole for a caller that
/// inspects it ([`ClientError::error`], to downcast: an SQLite busy code, a PostgreSQL SQLSTATE), and the
/// one line rtgauge prints for it.
///
/// It ends a store error's chain (no `source`): the clients' errors return their own cause as their
/// `source` although their message already says it — rusqlite's adds the SQLite code ("… is malformed:
/// Error code 11: The database disk image is malformed"), postgres's the I/O error its message quotes — so
/// a chained report printed it twice. The line says it once.
#[derive(Debug)]
pub struct ClientError {
    line: String,
    error: Box<dyn std::error::Error + Send + Sync>,
}

impl ClientError {
    /// `error`, shown as `line`.
    fn new(
        line: impl Into<String>,
        error: Box<dyn std::error::Error + Send + Sync>,
    ) -> ClientError {
        ClientError {
            line: line.into(),
            error,
        }
    }

    /// The client's own error: a `rusqlite::Error`, a `postgres::Error`, a `native_tls::Error` or a
    /// `std::io::Error` (see the [`StoreError`] variant that holds it).
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for ClientError {}

/// One line of `runs list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// The run's id in this store (not shared across stores; see `uuid`).
    pub id: i64,
    /// The run's globally unique id (see [`RunStore::insert_if_absent`]).
    pub uuid: String,
    /// RFC 3339 timestamp of the start.
    pub started_at: String,
    /// RFC 3339 timestamp of the end (of the last checkpoint while running).
    pub ended_at: String,
    /// Whether the run finished (a `running` run whose writer is gone reads `interrupted`).
    pub status: RunStatus,
    /// Profile that was run; `None` for single-probe verbs and imports.
    pub profile: Option<String>,
    /// The run's label (`--label`); `None` when not given.
    pub label: Option<String>,
    /// Host name of the machine measured (`uname -n`).
    pub host: String,
    /// The probes in the run (`cyclic,oslat`).
    pub probes: String,
}

/// How a run is chosen on the command line: `latest`, a numeric id, or a label (the newest run with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The newest run.
    Latest,
    /// The run with this id.
    Id(i64),
    /// The newest run with this label.
    Label(String),
}

impl Selector {
    /// `latest`, `42`, or `label:NAME` / any other text as a label.
    pub fn parse(text: &str) -> Selector {
        if text == "latest" {
            Selector::Latest
        } else if let Ok(id) = text.parse() {
            Selector::Id(id)
        } else {
            Selector::Label(text.strip_prefix("label:").unwrap_or(text).to_string())
        }
    }
}

/// The operations rtgauge needs from a run store (SQLite and PostgreSQL).
pub trait RunStore: Send {
    /// Where the store is, for messages (a file path, or a URL without its password).
    fn location(&self) -> &str;
    /// Store a new run (usually `running`) and return its id. A document without `uuid` is given a new one;
    /// a `uuid` already stored is an error.
    fn insert(&mut self, document: &RunDocument) -> Result<i64, StoreError>;
    /// Store a run unless a run with its `uuid` is already stored: `Some(new id)`, or `None` when it was there.
    /// What makes `push` idempotent: the unique constraint on `uuid` decides, even between concurrent pushers.
    /// A document without `uuid` is given the derived one ([`RunDocument::derived_uuid`]).
    fn insert_if_absent(&mut self, document: &RunDocument) -> Result<Option<i64>, StoreError>;
    /// Which of `uuids` are stored.
    fn known_uuids(
        &mut self,
        uuids: &[String],
    ) -> Result<std::collections::HashSet<String>, StoreError>;
    /// Replace a run's document (a checkpoint, or the final result). The run keeps its `uuid`.
    fn update(&mut self, id: i64, document: &RunDocument) -> Result<(), StoreError>;
    /// [`RunStore::update`] for a checkpoint taken while a probe measures: it must not hold up the thread
    /// that drains the probe, so a store that would wait for another writer's lock may fail at once (the
    /// next checkpoint tries again). By default the same as `update`.
    fn checkpoint(&mut self, id: i64, document: &RunDocument) -> Result<(), StoreError> {
        self.update(id, document)
    }
    /// Every stored run, in id (insertion) order.
    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError>;
    /// The document of run `id` (a `running` run whose writer is gone comes back `interrupted`).
    fn get(&mut self, id: i64) -> Result<RunDocument, StoreError>;
    /// The id of the run `selector` names; [`StoreError::NotFound`] when none does.
    fn find(&mut self, selector: &Selector) -> Result<i64, StoreError>;
    /// Remove run `id`; [`StoreError::NotFound`] when there is none.
    fn delete(&mut self, id: i64) -> Result<(), StoreError>;
}

/// Whether a `--db` value names a PostgreSQL server rather than a file.
pub fn is_postgres_url(spec: &str) -> bool {
    let lower = spec.get(..13).unwrap_or(spec).to_ascii_lowercase();
    lower.starts_with("postgresql://") || lower.starts_with("postgres://")
}

/// A `scheme://…` spec that is not PostgreSQL (`http://`, `mysql://`): refused rather than taken for a SQLite
/// file path (it would create `./http:/…` and report the runs pushed).
fn unsupported_url(spec: &str) -> Option<String> {
    let (scheme, _) = spec.split_once("://")?;
    (!scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
    .then(|| scheme.to_string())
}

/// Whether this binary has the PostgreSQL client (the `postgres` feature): without it a `postgresql://`
/// store is refused, naming how to build it in.
pub const POSTGRES: bool = cfg!(feature = "postgres");

/// Why a `postgresql://` store is refused by a binary without the client.
pub const NO_POSTGRES: &str =
    "this rtgauge was built without PostgreSQL (build it with `cargo build --release --features postgres`)";

/// The store a `--db` value names: a `postgresql://` / `postgres://` URL, otherwise a SQLite file path.
/// Without `--db`, the `RTGAUGE_DB` environment variable, then the default SQLite file
/// ([`SqliteStore::default_path`]).
pub fn store_spec(database: Option<&std::path::Path>) -> std::path::PathBuf {
    database
        .map(std::path::Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("RTGAUGE_DB")
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from)
        })
        .unwrap_or_else(SqliteStore::default_path)
}

/// Open the store `spec` names (see [`store_spec`]), creating and migrating it as needed.
pub fn open_store(spec: &std::path::Path) -> Result<Box<dyn RunStore>, StoreError> {
    match spec.to_str().filter(|s| is_postgres_url(s)) {
        #[cfg(feature = "postgres")]
        Some(url) => Ok(Box::new(PgStore::connect(url)?)),
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(StoreError::NoPostgres),
        None => {
            if let Some(scheme) = spec.to_str().and_then(unsupported_url) {
                return Err(StoreError::UnsupportedUrl {
                    url: display_spec(spec),
                    scheme,
                });
            }
            Ok(Box::new(SqliteStore::open(spec)?))
        }
    }
}

/// `url` with any password replaced by `***` (in the user-info part and in a `password=` parameter).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(scheme_end);
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let auth = match auth.rfind('@') {
        Some(at) => {
            let (user_info, host) = auth.split_at(at);
            match user_info.find(':') {
                Some(c) => format!("{}:***{host}", &user_info[..c]),
                None => auth.to_string(),
            }
        }
        None => auth.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let q: Vec<String> = query
                .split('&')
                .map(|kv| {
                    if kv.starts_with("password=") {
                        "password=***".to_string()
                    } else {
                        kv.to_string()
                    }
                })
                .collect();
            format!("{path}?{}", q.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{head}{auth}{tail}")
}

/// `spec` for messages: a URL loses its password.
pub fn display_spec(spec: &std::path::Path) -> String {
    match spec.to_str().filter(|s| s.contains("://")) {
        Some(url) => redact_url(url),
        None => spec.display().to_string(),
    }
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact_url("postgresql://rt:s3cret@db.example:5432/runs?sslmode=require"),
            "postgresql://rt:***@db.example:5432/runs?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://rt@db/runs?password=x&sslmode=disable"),
            "postgres://rt@db/runs?password=***&sslmode=disable"
        );
        assert_eq!(redact_url("postgres://db"), "postgres://db");
        assert_eq!(redact_url("nonsense"), "nonsense");
    }

    #[test]
    fn other_schemes_are_refused_not_taken_for_file_paths() {
        let spec = std::path::PathBuf::from("http://u:SECRETPW@x/db");
        let err = match open_store(&spec) {
            Err(e) => rtgauge_model::error::one_line(&e),
            Ok(_) => String::from("opened"),
        };
        assert!(err.contains("'http://' is not a store"), "{err}");
        assert!(!err.contains("SECRETPW"), "{err}");
        assert!(!std::path::Path::new("http:").exists());
        assert!(is_postgres_url("PostgreSQL://h/db"));
        assert!(!is_postgres_url("/var/lib/rtgauge.db"));
    }
}

//! What both backends share: the identity of a writing process (to tell a live `running` run from one
//! whose writer died), the indexed columns derived from a document, the run id (`uuid`) rules, and the
//! SQL and messages that do not depend on the database's dialect.

use crate::{Selector, StoreError};
use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus};

/// The columns of `runs list`, in [`crate::RunSummary`]'s order (plain SQL both databases read alike).
pub(crate) const LIST_SQL: &str =
    "SELECT id, uuid, started_at, ended_at, status, profile, label, host, probes FROM runs ORDER BY id";

/// Identity of the writing process: pid, its start time (so a reused pid is not mistaken for it) and the
/// boot id (so a reboot is detected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Writer {
    pub pid: i64,
    pub start: i64,
    pub boot: String,
}

/// Start time of a live process: field 22 of /proc/PID/stat (proc(5)), counted after the last ')' since
/// comm may contain spaces. A zombie (state Z or X: killed, not yet reaped — common under a container init
/// that does not reap) is not alive.
pub(crate) fn parse_live_start_time(stat: &str) -> Option<i64> {
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

pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Writer {
    pub fn current() -> Writer {
        let pid = i64::from(std::process::id());
        Writer {
            pid,
            start: proc_start_time(pid).unwrap_or(0),
            boot: boot_id(),
        }
    }
    pub fn is_alive(&self) -> bool {
        self.boot == boot_id() && proc_start_time(self.pid) == Some(self.start)
    }
}

pub(crate) fn probes_of(document: &RunDocument) -> String {
    let names: Vec<&str> = document.probes.iter().map(ProbeResult::name).collect();
    names.join(",")
}

pub(crate) fn status_from(text: &str) -> RunStatus {
    match text {
        "running" => RunStatus::Running,
        "complete" => RunStatus::Complete,
        _ => RunStatus::Interrupted,
    }
}

/// A backend's row insert: the run's uuid, its JSON text and whether a stored uuid is skipped (`true`) or
/// an error; the new id, or `None` when skipped.
pub(crate) type InsertRow<'a> =
    &'a mut dyn FnMut(&str, &str, bool) -> Result<Option<i64>, StoreError>;

/// [`crate::RunStore::insert`] over a backend's row insert: the run keeps its own uuid or gets a fresh
/// one; a uuid already stored is [`StoreError::Duplicate`].
pub(crate) fn insert_new(
    document: &RunDocument,
    insert_row: InsertRow<'_>,
) -> Result<i64, StoreError> {
    let (uuid, json) = with_uuid(document, 0, rtgauge_model::run::new_uuid)?;
    insert_row(&uuid, &json, false)?.ok_or_else(|| StoreError::Duplicate(uuid))
}

/// [`crate::RunStore::insert_if_absent`] over a backend's row insert: the run keeps its own uuid or gets
/// the one derived from its text, so pushing the same document twice stores it once.
pub(crate) fn insert_pushed(
    document: &RunDocument,
    insert_row: InsertRow<'_>,
) -> Result<Option<i64>, StoreError> {
    let (uuid, json) = with_uuid(document, 0, || {
        RunDocument::derived_uuid(&to_json(document, 0).unwrap_or_default(), None)
    })?;
    insert_row(&uuid, &json, true)
}

/// The JSON text of run `id`'s new document, which keeps the `uuid` it was stored with (`update`).
pub(crate) fn updated_json(
    document: &RunDocument,
    id: i64,
    uuid: String,
) -> Result<String, StoreError> {
    let mut d = document.clone();
    d.uuid = Some(uuid);
    to_json(&d, id)
}

/// Mark a `running` run whose writer is gone as interrupted; its data are those of its last checkpoint.
pub(crate) fn mark_interrupted(document: &mut RunDocument) {
    document.status = RunStatus::Interrupted;
    document.warnings.push(
        "the measuring process ended without finishing the run; data up to its last checkpoint"
            .into(),
    );
}

/// Stored run `id`'s JSON text as a document.
pub(crate) fn parse_document(id: i64, text: &str) -> Result<RunDocument, StoreError> {
    serde_json::from_str(text).map_err(|cause| StoreError::Corrupt { id, cause })
}

/// The error for a selector that matched no run, naming what was asked for.
pub(crate) fn not_found(selector: &Selector) -> StoreError {
    StoreError::NotFound(match selector {
        Selector::Latest => "latest (the store is empty)".into(),
        Selector::Id(id) => id.to_string(),
        Selector::Label(l) => format!("with label '{l}'"),
    })
}

/// `doc` with its `uuid` set (kept if it has one, else `fallback()`), and its JSON text.
fn with_uuid(
    doc: &RunDocument,
    id: i64,
    fallback: impl FnOnce() -> String,
) -> Result<(String, String), StoreError> {
    let mut d = doc.clone();
    let uuid = d.uuid.get_or_insert_with(fallback).clone();
    Ok((uuid, to_json(&d, id)?))
}

pub(crate) fn to_json(document: &RunDocument, id: i64) -> Result<String, StoreError> {
    serde_json::to_string(document).map_err(|cause| StoreError::Corrupt { id, cause })
}

/// The migration that gives runs stored before `uuid` existed their derived id (in the column and in the
/// document, so it never has to be derived again). Byte-identical documents get the same derived id; the
/// second and later are salted with their row id so the unique constraint holds.
pub(crate) fn backfill_uuid(
    id: i64,
    text: &str,
    taken: &mut std::collections::HashSet<String>,
) -> Result<(String, String), StoreError> {
    let mut doc = parse_document(id, text)?;
    let mut uuid = doc
        .uuid
        .clone()
        .unwrap_or_else(|| RunDocument::derived_uuid(text, None));
    if taken.contains(&uuid) {
        uuid = RunDocument::derived_uuid(text, Some(id));
    }
    taken.insert(uuid.clone());
    doc.uuid = Some(uuid.clone());
    Ok((uuid, to_json(&doc, id)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombies_and_odd_comms_in_proc_stat() {
        let live = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 3 0 777 1000 10";
        assert_eq!(parse_live_start_time(live), Some(777));
        assert_eq!(parse_live_start_time(&live.replace(") S ", ") Z ")), None);
        assert_eq!(parse_live_start_time("42 (x) R 1"), None);
        assert_eq!(parse_live_start_time(""), None);
        assert_eq!(parse_live_start_time("(("), None);
    }
}

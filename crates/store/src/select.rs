//! Which stored runs a command stands for: one run by its selector ([`fetch`]), the columns of a comparison
//! (a run, a set `1,2,3`, a label with its `run --repeat` group or every run of a label: [`column_sets`]), a
//! host's latest run ([`latest_of_hosts`]), and the stored repeats of a single run ([`repeats`]).
//!
//! What is selected is decided here, from the store's summaries and documents; what the selection means
//! (how runs are compared, whether two runs were taken under the same conditions) is the caller's.

use crate::{RunStore, RunSummary, Selector, StoreError};
use rtgauge_model::run::{host_name, RunDocument, RunStatus};
use std::collections::{BTreeMap, BTreeSet};

/// Stored runs: (id in the store, document).
pub type Stored = Vec<(i64, RunDocument)>;

/// Documents loaded from the store, by id.
pub type Loaded = BTreeMap<i64, RunDocument>;

/// Per column, the ids of the stored runs that repeat its single run; `None` for a set column.
pub type RepeatIds = Vec<Option<Vec<i64>>>;

/// Repeats looked at per compared run: the nearest stored runs (by id) with the same label, profile, host
/// and probes are loaded until this many also share its conditions.
const MAX_REPEATS: usize = 8;

/// Candidates loaded per compared run at most, so that a store of many alike-named runs under other
/// conditions (a changed kernel command line) stays quick.
const MAX_CANDIDATES: usize = 24;

/// Why runs could not be selected. Each message names the selector or run at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// The store could not find or read the run a selector names (the selector as given).
    #[error("run {selector}")]
    Run {
        /// The selector as given (`42`, `latest`, a label).
        selector: String,
        /// The store's error ([`StoreError::NotFound`] for no such run).
        #[source]
        cause: StoreError,
    },
    /// The store could not list or read runs.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A run set with an empty entry (`1,,2`); the set as given.
    #[error("run set '{0}': an empty entry (write runs as 1,2,3)")]
    EmptyEntry(String),
    /// `--every --label L` where no complete run has label L.
    #[error("--label {0}: no complete stored run has this label")]
    NoCompleteRun(String),
    /// `--host H` where no stored run is of host H.
    #[error("--host {0}: no run of this host in the store")]
    NoHost(String),
    /// A run in two columns of which one is a set.
    #[error(
        "run set: run {0} is in two columns; sets compared with each other hold distinct runs"
    )]
    InTwoColumns(i64),
    /// A run in a set that did not complete.
    #[error("run set: run {id} is {status}; a set holds complete runs (repetitions)")]
    NotComplete {
        /// The run's id.
        id: i64,
        /// Its status (`interrupted`, `running`).
        status: &'static str,
    },
    /// A run twice in one set.
    #[error("run set: run {0} appears twice; a set holds distinct runs (repetitions)")]
    Twice(i64),
}

/// The run `selector` names (an id, a label, `latest`) and its document.
pub fn fetch(store: &mut dyn RunStore, selector: &str) -> Result<(i64, RunDocument), SelectError> {
    let named = |cause| SelectError::Run {
        selector: selector.to_string(),
        cause,
    };
    let id = store.find(&Selector::parse(selector)).map_err(named)?;
    let doc = store.get(id).map_err(named)?;
    Ok((id, doc))
}

/// One set of (id, document) per column, in order: first each of `runs` (a selector, or a set `1,2,3`; a
/// label alone stands for its newest run with that run's `run --repeat` group), then each of `labels` (its
/// newest run with its group, or with `every` every complete run of the label). Refused, besides a selector
/// that names no run: an empty entry in a set, `every` with a label no complete run has, a run twice in one
/// set, a run in two columns of which one is a set, and a set holding a run that did not complete.
pub fn column_sets(
    store: &mut dyn RunStore,
    runs: &[String],
    labels: &[String],
    every: bool,
) -> Result<Vec<Stored>, SelectError> {
    let mut sets: Vec<Stored> = Vec::new();
    for s in runs {
        // A label alone stands for its newest run's repeats, as --label does.
        if !s.contains(',') && matches!(Selector::parse(s.trim()), Selector::Label(_)) {
            let run = fetch(store, s.trim())?;
            sets.push(with_its_repeats(store, run)?);
            continue;
        }
        let mut set = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(SelectError::EmptyEntry(s.clone()));
            }
            set.push(fetch(store, part)?);
        }
        sets.push(set);
    }
    for l in labels {
        if every {
            let ids: Vec<i64> = store
                .list()?
                .into_iter()
                .filter(|r| {
                    r.label.as_deref() == Some(l.as_str()) && r.status == RunStatus::Complete
                })
                .map(|r| r.id)
                .collect();
            if ids.is_empty() {
                return Err(SelectError::NoCompleteRun(l.clone()));
            }
            let set = ids
                .into_iter()
                .map(|id| fetch(store, &id.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            sets.push(set);
        } else {
            let run = fetch(store, &format!("label:{l}"))?;
            sets.push(with_its_repeats(store, run)?);
        }
    }
    // A run in two columns of which one is a set would be counted on both sides of the interval: the
    // sets are not independent. (A single run against itself is allowed: it reads exactly 1.)
    for (i, a) in sets.iter().enumerate() {
        for b in sets
            .iter()
            .skip(i + 1)
            .filter(|b| a.len() > 1 || b.len() > 1)
        {
            if let Some((id, _)) = a.iter().find(|(id, _)| b.iter().any(|(x, _)| x == id)) {
                return Err(SelectError::InTwoColumns(*id));
            }
        }
    }
    // A run cut short is not a repetition of the others: its extremes and counts cover less time.
    for set in sets.iter().filter(|s| s.len() > 1) {
        if let Some((id, d)) = set.iter().find(|(_, d)| d.status != RunStatus::Complete) {
            return Err(SelectError::NotComplete {
                id: *id,
                status: d.status.as_str(),
            });
        }
    }
    // A run twice in one set would count as two repetitions that agree exactly: a false certainty.
    for set in &sets {
        let mut seen = BTreeSet::new();
        if let Some((id, _)) = set.iter().find(|(id, _)| !seen.insert(*id)) {
            return Err(SelectError::Twice(*id));
        }
    }
    Ok(sets)
}

/// A run selected by its label, with the other runs of its `run --repeat` (the same repeat group, label, host
/// and profile), as one platform's set: its complete runs, by id (one complete run stands alone). The run
/// itself when it was not repeated, or when none of its group completed.
fn with_its_repeats(
    store: &mut dyn RunStore,
    (id, doc): (i64, RunDocument),
) -> Result<Stored, StoreError> {
    let Some(group) = doc.repeat.clone() else {
        return Ok(vec![(id, doc)]);
    };
    let list = store.list()?;
    let Some(me) = list.iter().find(|r| r.id == id) else {
        return Ok(vec![(id, doc)]);
    };
    // The runs of one group were stored back to back: the nearest alike runs by id are looked at first, and
    // no more than the group's other runs plus MAX_CANDIDATES (another process may have stored runs between).
    let mut candidates: Vec<&RunSummary> = list
        .iter()
        .filter(|r| {
            r.id != id
                && r.status == RunStatus::Complete
                && (&r.host, &r.profile, &r.label) == (&me.host, &me.profile, &me.label)
        })
        .collect();
    candidates.sort_by_key(|r| (r.id - id).abs());
    let others = group.count.saturating_sub(1) as usize;
    let mut set: Stored = Vec::new();
    for r in candidates.into_iter().take(others + MAX_CANDIDATES) {
        let other = store.get(r.id)?;
        if other
            .repeat
            .as_ref()
            .is_some_and(|o| o.group == group.group)
        {
            set.push((r.id, other));
            if set.len() == others {
                break;
            }
        }
    }
    if doc.status == RunStatus::Complete {
        set.push((id, doc));
    } else if set.is_empty() {
        // An interrupted run whose group has no complete run: the run itself, as without --repeat.
        return Ok(vec![(id, doc)]);
    }
    // An interrupted run (a signal ended its --repeat) is left out: it covers less time than its siblings.
    set.sort_by_key(|(id, _)| *id);
    Ok(set)
}

/// Per column, the ids of the stored runs that repeat its single run (None for a set column): complete runs
/// with the same label, profile, host and probes, taken under the same conditions (`same_conditions`),
/// nearest by id first, none of them a compared run. Beside them, the repeats' documents, each loaded once:
/// columns of one platform look at the same candidates, and a week-long run's document takes about a second
/// to load. Empty when every column is a set.
pub fn repeats(
    store: &mut dyn RunStore,
    sets: &[Stored],
    same_conditions: impl Fn(&RunDocument, &RunDocument) -> bool,
) -> Result<(Loaded, RepeatIds), StoreError> {
    let mut loaded = Loaded::new();
    if sets.iter().all(|s| s.len() > 1) {
        return Ok((loaded, Vec::new()));
    }
    let list = store.list()?;
    let compared: BTreeSet<i64> = sets.iter().flatten().map(|(id, _)| *id).collect();
    let mut out = Vec::new();
    for set in sets {
        let [(id, doc)] = set.as_slice() else {
            out.push(None);
            continue;
        };
        let Some(me) = list.iter().find(|r| r.id == *id) else {
            out.push(Some(Vec::new()));
            continue;
        };
        let mut candidates: Vec<&RunSummary> = list
            .iter()
            .filter(|r| {
                r.status == RunStatus::Complete
                    && !compared.contains(&r.id)
                    && (&r.host, &r.profile, &r.label, &r.probes)
                        == (&me.host, &me.profile, &me.label, &me.probes)
            })
            .collect();
        candidates.sort_by_key(|r| (r.id - id).abs());
        let mut found = Vec::new();
        for r in candidates.into_iter().take(MAX_CANDIDATES) {
            // A repeat of an earlier column is reused; a candidate that repeats nothing is dropped at once
            // (24 week-long documents held together would be gigabytes).
            let matches = match loaded.get(&r.id) {
                Some(other) => same_conditions(doc, other),
                None => {
                    let other = store.get(r.id)?;
                    let matches = same_conditions(doc, &other);
                    if matches {
                        loaded.insert(r.id, other);
                    }
                    matches
                }
            };
            if matches {
                found.push(r.id);
                if found.len() == MAX_REPEATS {
                    break;
                }
            }
        }
        found.sort_unstable();
        out.push(Some(found));
    }
    Ok((loaded, out))
}

/// Each host's latest run (the highest id), by the name `fleet` shows ([`host_name`]), in order.
pub fn latest_of_hosts(
    store: &mut dyn RunStore,
    hosts: &[String],
) -> Result<Vec<i64>, SelectError> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    let runs = store.list()?;
    hosts
        .iter()
        .map(|h| {
            runs.iter()
                .filter(|r| host_name(&r.host) == h)
                .map(|r| r.id)
                .max()
                .ok_or_else(|| SelectError::NoHost(h.clone()))
        })
        .collect()
}

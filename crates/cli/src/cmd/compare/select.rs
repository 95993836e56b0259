//! Which runs each column of `compare` stands for, read from the store: a run, a set, a label with its
//! `run --repeat` group or every run (--every), a host's latest; and each single run's stored repeats.

use crate::cmd::runs::find_run;
use anyhow::bail;
use rtgauge_flags::report::CompareArgs;
use rtgauge_flags::DbArg;
use rtgauge_model::run::{RunDocument, RunStatus};
use rtgauge_report::compare;
use rtgauge_store::{RunStore, RunSummary, Selector};

/// Stored runs: (id in the store, document).
pub(super) type Stored = Vec<(i64, RunDocument)>;

/// Documents loaded from the store, by id.
pub(super) type Loaded = std::collections::BTreeMap<i64, RunDocument>;

/// Repeats looked at per compared run: the nearest stored runs (by id) with the same label, profile, host
/// and probes are loaded until this many also share its conditions.
const MAX_REPEATS: usize = 8;

/// Candidates loaded per compared run at most, so that a store of many alike-named runs under other
/// conditions (a changed kernel command line) stays quick.
const MAX_CANDIDATES: usize = 24;

/// Per column, the ids of the stored runs that repeat its single run (None for a set column): complete runs
/// with the same label, profile, host and probes, taken under the same conditions
/// (`compare::same_conditions`), nearest by id first, none of them a compared run. Beside them, the repeats'
/// documents, each loaded once: columns of one platform look at the same candidates, and a week-long run's
/// document takes about a second to load.
pub(super) fn repeats(
    store: &mut dyn RunStore,
    sets: &[Stored],
) -> anyhow::Result<(Loaded, Vec<Option<Vec<i64>>>)> {
    let mut loaded = Loaded::new();
    if sets.iter().all(|s| s.len() > 1) {
        return Ok((loaded, Vec::new()));
    }
    let list = store.list()?;
    let compared: std::collections::BTreeSet<i64> =
        sets.iter().flatten().map(|(id, _)| *id).collect();
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
                Some(other) => compare::same_conditions(doc, other),
                None => {
                    let other = store.get(r.id)?;
                    let matches = compare::same_conditions(doc, &other);
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

/// A run selected by its label, with the other runs of its `run --repeat` (the same repeat group, label, host
/// and profile), as one platform's set: its complete runs, by id (one complete run stands alone). The run
/// itself when it was not repeated, or when none of its group completed.
fn with_its_repeats(
    store: &mut dyn RunStore,
    (id, doc): (i64, RunDocument),
) -> anyhow::Result<Stored> {
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

/// One set of (id, document) per column: a single run, or the repetitions of one platform (`1,2,3`, or
/// every run of a label with --every). A run twice in one set is refused.
pub(super) fn column_sets(
    a: &CompareArgs,
    store: &mut dyn RunStore,
) -> anyhow::Result<Vec<Stored>> {
    let mut sets: Vec<Stored> = Vec::new();
    for s in &a.runs {
        // A label alone stands for its newest run's repeats, as --label does.
        if !s.contains(',') && matches!(Selector::parse(s.trim()), Selector::Label(_)) {
            let run = find_run(store, s.trim())?;
            sets.push(with_its_repeats(store, run)?);
            continue;
        }
        let mut set = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                bail!("run set '{s}': an empty entry (write runs as 1,2,3)");
            }
            set.push(find_run(store, part)?);
        }
        sets.push(set);
    }
    for l in &a.labels {
        if a.every {
            let ids: Vec<i64> = store
                .list()?
                .into_iter()
                .filter(|r| {
                    r.label.as_deref() == Some(l.as_str()) && r.status == RunStatus::Complete
                })
                .map(|r| r.id)
                .collect();
            if ids.is_empty() {
                bail!("--label {l}: no complete stored run has this label");
            }
            let set = ids
                .into_iter()
                .map(|id| find_run(store, &id.to_string()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            sets.push(set);
        } else {
            let run = find_run(store, &format!("label:{l}"))?;
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
                bail!("run set: run {id} is in two columns; sets compared with each other hold distinct runs");
            }
        }
    }
    // A run cut short is not a repetition of the others: its extremes and counts cover less time.
    for set in sets.iter().filter(|s| s.len() > 1) {
        if let Some((id, d)) = set.iter().find(|(_, d)| d.status != RunStatus::Complete) {
            bail!(
                "run set: run {id} is {}; a set holds complete runs (repetitions)",
                d.status.as_str()
            );
        }
    }
    // A run twice in one set would count as two repetitions that agree exactly: a false certainty.
    for set in &sets {
        let mut seen = std::collections::BTreeSet::new();
        if let Some((id, _)) = set.iter().find(|(id, _)| !seen.insert(*id)) {
            bail!("run set: run {id} appears twice; a set holds distinct runs (repetitions)");
        }
    }
    Ok(sets)
}

/// `compare --host NAME…`: the arguments with each host's latest run appended to the positional runs (as its
/// id), so the compare code sees only run selectors.
pub(super) fn with_hosts(a: &CompareArgs) -> anyhow::Result<CompareArgs> {
    let mut a = a.clone();
    let hosts = std::mem::take(&mut a.hosts);
    a.runs.extend(host_selectors(&a.db, &hosts)?);
    Ok(a)
}

fn host_selectors(db: &DbArg, hosts: &[String]) -> anyhow::Result<Vec<String>> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    let (mut store, _) = db.open_existing()?;
    let runs = store.list()?;
    let mut sels = Vec::with_capacity(hosts.len());
    for h in hosts {
        // As `fleet` names it: a run without a host name is `(unknown host)`.
        let Some(id) = runs
            .iter()
            .filter(|r| rtgauge_report::fleet::host_name(&r.host) == h)
            .map(|r| r.id)
            .max()
        else {
            bail!("--host {h}: no run of this host in the store");
        };
        sels.push(id.to_string());
    }
    Ok(sels)
}

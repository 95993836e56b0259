//! `rtgauge push --to URL [RUN…]`: copy runs from the local store (the source of truth on a host whose
//! uplink may be down) to a central one, usually PostgreSQL.
//!
//! Idempotence comes from the run's globally unique `uuid` alone, nothing is recorded locally: the central
//! store is asked which of the candidate runs it holds, and each missing one is inserted in its own
//! transaction with "insert unless the uuid is there" (the unique constraint decides, even against another
//! pusher of the same run). So pushing twice stores nothing twice, and a push cut off half-way (server
//! stopped, link lost) resumes where it stopped when run again. The local store is only read (its listing
//! marks runs whose writer died as interrupted, as every listing does).

use anyhow::Context as _;
use rtgauge_flags::push::*;
use rtgauge_model::run::RunStatus;
use rtgauge_store::{RunStore, Selector};
use std::process::ExitCode;

/// What a push did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    pub stored: usize,
    pub already: usize,
    pub running: usize,
}

/// Push the local runs `ids` (all when `None`) to the store `to` names. Errors name the central store and
/// say that pushing again resumes.
pub fn push(
    local: &mut dyn RunStore,
    ids: Option<&[i64]>,
    to: &std::path::Path,
) -> anyhow::Result<Pushed> {
    let mut done = Pushed::default();
    let mut central = rtgauge_store::open_store(to)
        .context("push: nothing pushed; the local runs are untouched")?;
    let summaries = local.list().context("reading the local runs")?;
    let mut todo = Vec::new();
    for s in summaries {
        if ids.is_some_and(|ids| !ids.contains(&s.id)) {
            continue;
        }
        if s.status == RunStatus::Running {
            // A run still being measured would be pushed as a checkpoint and then never replaced: it goes
            // once it has ended.
            eprintln!(
                "rtgauge: warning: run {} is still running: not pushed (push it when it has ended)",
                s.id
            );
            done.running += 1;
            continue;
        }
        todo.push(s);
    }
    let uuids: Vec<String> = todo.iter().map(|s| s.uuid.clone()).collect();
    let known = central
        .known_uuids(&uuids)
        .context("push: nothing pushed; the local runs are untouched")?;
    for s in todo {
        if known.contains(&s.uuid) {
            done.already += 1;
            continue;
        }
        let doc = local
            .get(s.id)
            .with_context(|| format!("reading local run {}", s.id))?;
        let resume = || {
            format!(
                "push: run {} not pushed ({} pushed before it); the local runs are untouched, push again to resume",
                s.id, done.stored
            )
        };
        match central.insert_if_absent(&doc).with_context(resume)? {
            Some(cid) => {
                println!("pushed run {} ({}) as run {cid}", s.id, s.uuid);
                done.stored += 1;
            }
            None => done.already += 1,
        }
    }
    Ok(done)
}

pub fn run(a: &PushArgs) -> anyhow::Result<ExitCode> {
    let (mut local, local_name) = a.db.open_existing()?;
    let ids = a
        .runs
        .iter()
        .map(|r| {
            local
                .find(&Selector::parse(r))
                .with_context(|| format!("run {r} in {local_name}"))
        })
        .collect::<anyhow::Result<Vec<i64>>>()?;
    let p = push(
        local.as_mut(),
        (!a.runs.is_empty()).then_some(ids.as_slice()),
        &a.to,
    )?;
    println!(
        "push: {} run{} pushed to {}, {} there already{}",
        p.stored,
        if p.stored == 1 { "" } else { "s" },
        rtgauge_store::display_spec(&a.to),
        p.already,
        if p.running > 0 {
            format!(", {} still running (not pushed)", p.running)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

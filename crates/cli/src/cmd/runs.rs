//! `rtgauge runs list|show|delete|export`, `rtgauge export` and `rtgauge import`: the stored runs.
//! Every view is rendered from the stored document.

use anyhow::Context as _;
use rtgauge_flags::runs::*;
use rtgauge_flags::DbArg;
use rtgauge_formats::import::{limit_warnings, AnyRtTests};
use rtgauge_formats::Importer;
use rtgauge_model::run::RunDocument;
use rtgauge_model::run::RunStatus;
use rtgauge_store::RunStore;
use std::io::Write as _;
use std::process::ExitCode;

/// The run `run` names (an id, a label, `latest`) and its document; the error as anyhow's, whose `{:#}`
/// prints the store's cause after the selector.
pub fn find_run(store: &mut dyn RunStore, run: &str) -> anyhow::Result<(i64, RunDocument)> {
    Ok(rtgauge_store::select::fetch(store, run)?)
}

pub fn run(a: &RunsArgs) -> anyhow::Result<ExitCode> {
    match &a.action {
        RunsAction::List => {
            let (mut store, _) = a.db.open_existing()?;
            use rtgauge_report::escape::visible_field;
            use std::fmt::Write as _;
            let mut out = String::new();
            let _ = writeln!(
                out,
                "{:>5}  {:<24}  {:<11}  {:<8}  {:<16}  {:<14}  host",
                "id", "started", "status", "profile", "label", "probes"
            );
            for r in store.list()? {
                let _ = writeln!(
                    out,
                    "{:>5}  {:<24}  {:<11}  {:<8}  {:<16}  {:<14}  {}",
                    r.id,
                    r.started_at,
                    r.status.as_str(),
                    visible_field(r.profile.as_deref().unwrap_or("-")),
                    visible_field(r.label.as_deref().unwrap_or("-")),
                    if r.probes.is_empty() { "-" } else { &r.probes },
                    visible_field(&r.host)
                );
            }
            super::print_text(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        RunsAction::Show { run, verbose } => {
            let (mut store, _) = a.db.open_existing()?;
            let (id, doc) = find_run(store.as_mut(), run)?;
            let opts = rtgauge_report::text::TextOptions::for_stdout(verbose.verbose);
            super::print_text(&rtgauge_report::terminal::render_show(id, &doc, opts))?;
            super::print_text(&rtgauge_report::terminal::render_verdict(&doc, opts))?;
            Ok(ExitCode::SUCCESS)
        }
        RunsAction::Delete { run } => {
            let (mut store, path) = a.db.open_existing()?;
            let (id, _) = find_run(store.as_mut(), run)?;
            store.delete(id)?;
            println!("deleted run {id} from {path}");
            Ok(ExitCode::SUCCESS)
        }
        RunsAction::Export(e) => export(e, &a.db),
    }
}

/// `rtgauge export` (also `rtgauge runs export`).
pub fn export(e: &ExportArgs, outer: &DbArg) -> anyhow::Result<ExitCode> {
    let db = if e.db.db.is_some() { &e.db } else { outer };
    let (mut store, _) = db.open_existing()?;
    let (_, doc) = find_run(store.as_mut(), &e.run)?;
    let text = e
        .format
        .exporter()
        .export(&doc)
        .map_err(|err| anyhow::anyhow!("--format {}: {err}", e.format.name()))?;
    match &e.output.output {
        // Atomically, as every --output: an interrupted export leaves no half file ('-' = stdout).
        Some(p) => crate::output::write_atomic(p, &text)
            .with_context(|| format!("--output {}", p.display()))?,
        None => std::io::stdout().lock().write_all(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `rtgauge import`: every file is parsed before anything is stored, so a bad file stores nothing.
pub fn import(a: &ImportArgs) -> anyhow::Result<ExitCode> {
    let mut docs = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let name = f.display().to_string();
        let bytes = rtgauge_flags::read_user_file(f, "import", rtgauge_flags::MAX_IMPORT_BYTES)?;
        let text = String::from_utf8_lossy(&bytes);
        let mut doc = AnyRtTests {
            text_unit_ns: if a.nsecs { 1 } else { 1000 },
        }
        .import(&text, &name)
        .map_err(|e| anyhow::anyhow!("import {name}: {e}"))?;
        if a.label.is_some() {
            doc.label = a.label.clone();
        }
        // A histogram too narrow for the samples loses their values: said on stderr, not only stored.
        for w in limit_warnings(&doc) {
            eprintln!("warning: {name}: {w}");
        }
        docs.push((name, doc));
    }
    let (mut store, path) = a.db.open()?;
    // A run the store refused at its end (`rtgauge run` kept its document in a file) is stored as it was at
    // its last checkpoint under the same uuid; once its writer is gone `list` reaps it to `interrupted`.
    // A finished document of that run (the same uuid and start) completes it. A run still `running` after
    // the reap has a live writer and is never touched.
    let interrupted: std::collections::HashMap<String, (i64, String)> = store
        .list()
        .with_context(|| format!("reading {path}"))?
        .into_iter()
        .filter(|r| r.status == RunStatus::Interrupted)
        .map(|r| (r.uuid, (r.id, r.started_at)))
        .collect();
    for (name, doc) in docs {
        let completes = doc
            .uuid
            .as_ref()
            .and_then(|u| interrupted.get(u))
            .filter(|(_, started)| *started == doc.started_at && doc.status != RunStatus::Running);
        match completes {
            Some(&(id, _)) => {
                store
                    .update(id, &doc)
                    .with_context(|| format!("storing {name} as run {id}"))?;
                println!(
                    "imported {name} into {path}: it completes run {id} (stored interrupted at its last checkpoint)"
                );
            }
            None => {
                let id = store
                    .insert(&doc)
                    .with_context(|| format!("storing {name}"))?;
                println!("imported {name} as run {id} into {path}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

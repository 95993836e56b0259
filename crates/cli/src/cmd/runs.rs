//! `rtgauge runs list|show|delete|export`, `rtgauge export` and `rtgauge import`: the stored runs.
//! Every view is rendered from the stored document.

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use rtgauge_formats::csv::Csv;
use rtgauge_formats::import::{limit_warnings, AnyRtTests};
use rtgauge_formats::native::NativeJson;
use rtgauge_formats::rttests::RtTestsJson;
use rtgauge_formats::{Exporter, Importer};
use rtgauge_model::run::RunDocument;
use rtgauge_store::{RunStore, Selector};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which database.
#[derive(Debug, Clone, Args)]
pub struct DbArg {
    /// Results database: a SQLite file or a postgresql:// URL (default: $RTGAUGE_DB, else
    /// $XDG_DATA_HOME/rtgauge/rtgauge.db).
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub db: Option<PathBuf>,
}

impl DbArg {
    /// The store and its name for messages (see [`super::open_store`]), created when missing: for verbs
    /// that store runs.
    pub fn open(&self) -> anyhow::Result<(Box<dyn RunStore>, String)> {
        super::open_store(self.db.as_deref())
    }

    /// The store for a verb that only reads (or deletes) runs: a SQLite file that does not exist is refused,
    /// not created (see [`super::open_existing_store`]).
    pub fn open_existing(&self) -> anyhow::Result<(Box<dyn RunStore>, String)> {
        super::open_existing_store(self.db.as_deref())
    }
}

/// List, show, delete or export stored runs.
#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub action: RunsAction,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Clone, Subcommand)]
pub enum RunsAction {
    /// One line per stored run.
    List,
    /// A run's conditions, results and verdicts.
    Show {
        /// Run id, label, or `latest`.
        run: String,
    },
    /// Delete a run.
    Delete {
        /// Run id (a label or `latest` is accepted too).
        run: String,
    },
    /// Export a run.
    Export(ExportArgs),
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The native run document.
    Json,
    /// One row per probe thread: samples, min, avg, percentiles, max (ns), missed, overflows.
    Csv,
    /// rt-tests JSON (cyclictest's schema, or oslat's for a run with only oslat).
    RtTests,
}

impl Format {
    /// The format's writer.
    fn exporter(self) -> &'static dyn Exporter {
        match self {
            Format::Json => &NativeJson,
            Format::Csv => &Csv,
            Format::RtTests => &RtTestsJson,
        }
    }

    /// The format as `--format` spells it.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// Export one run.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Run id, label, or `latest`.
    pub run: String,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Write to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn resolve(store: &mut dyn RunStore, run: &str) -> anyhow::Result<(i64, RunDocument)> {
    let id = store
        .resolve(&Selector::parse(run))
        .with_context(|| format!("run {run}"))?;
    let doc = store.get(id).with_context(|| format!("run {run}"))?;
    Ok((id, doc))
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
        RunsAction::Show { run } => {
            let (mut store, _) = a.db.open_existing()?;
            let (id, doc) = resolve(store.as_mut(), run)?;
            super::print_text(&rtgauge_report::terminal::render_show(id, &doc))?;
            Ok(ExitCode::SUCCESS)
        }
        RunsAction::Delete { run } => {
            let (mut store, path) = a.db.open_existing()?;
            let (id, _) = resolve(store.as_mut(), run)?;
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
    let (_, doc) = resolve(store.as_mut(), &e.run)?;
    let text = e
        .format
        .exporter()
        .export(&doc)
        .map_err(|err| anyhow::anyhow!("--format {}: {err}", e.format.name()))?;
    match &e.output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("--output {}", p.display()))?,
        None => std::io::stdout().lock().write_all(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Bring rt-tests results into the store.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// cyclictest `--json` or text output (summary lines and/or the -h histogram, rt-tests 2.x layouts),
    /// oslat `--json` or text summary, or an rtgauge run document (`export --format json`).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Label for the imported runs (e.g. bare-metal).
    #[arg(long, value_parser = super::parse_name)]
    pub label: Option<String>,
    /// cyclictest text files were written with -N (values in ns; JSON says so itself).
    #[arg(long)]
    pub nsecs: bool,
    #[command(flatten)]
    pub db: DbArg,
}

/// `rtgauge import`: every file is parsed before anything is stored, so a bad file stores nothing.
pub fn import(a: &ImportArgs) -> anyhow::Result<ExitCode> {
    let mut docs = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let name = f.display().to_string();
        let bytes = super::read_user_file(f, "import", super::MAX_IMPORT_BYTES)?;
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
    for (name, doc) in docs {
        let id = store
            .insert(&doc)
            .with_context(|| format!("storing {name}"))?;
        println!("imported {name} as run {id} into {path}");
    }
    Ok(ExitCode::SUCCESS)
}

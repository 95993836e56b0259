//! `rtgauge runs list|show|delete|export`, `rtgauge export` and `rtgauge import`: the stored runs.
//! Every view is rendered from the stored document.

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use rtgauge_model::run::{ProbeResult, RunDocument};
use rtgauge_report::rttests;
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
    /// The store and its name for messages (see [`super::open_store`]).
    pub fn open(&self) -> anyhow::Result<(Box<dyn RunStore>, String)> {
        super::open_store(self.db.as_deref())
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
            let (mut store, _) = a.db.open()?;
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
            let (mut store, _) = a.db.open()?;
            let (id, doc) = resolve(store.as_mut(), run)?;
            super::print_text(&rtgauge_report::terminal::render_show(id, &doc))?;
            Ok(ExitCode::SUCCESS)
        }
        RunsAction::Delete { run } => {
            let (mut store, path) = a.db.open()?;
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
    let (mut store, _) = db.open()?;
    let (_, doc) = resolve(store.as_mut(), &e.run)?;
    let text = match e.format {
        Format::Json => serde_json::to_string_pretty(&doc)? + "\n",
        Format::Csv => render_csv(&doc),
        Format::RtTests => serde_json::to_string_pretty(&render_rt_tests(&doc)?)? + "\n",
    };
    match &e.output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("--output {}", p.display()))?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

fn rfc2822(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.to_rfc2822())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// rt-tests JSON of the run's first cyclic probe (or first oslat probe).
pub fn render_rt_tests(doc: &RunDocument) -> anyhow::Result<serde_json::Value> {
    let cmdline = doc.command_line.join(" ");
    let (start, end) = (rfc2822(&doc.started_at), rfc2822(&doc.ended_at));
    let env = rttests::Envelope {
        cmdline: &cmdline,
        version: &doc.tool.version,
        start_time: &start,
        end_time: &end,
        return_code: 0,
        system: &doc.system,
    };
    let cyclic = doc.probes.iter().find_map(|p| match p {
        ProbeResult::Cyclic(c) => Some(c),
        _ => None,
    });
    if let Some(c) = cyclic {
        return Ok(rttests::render_cyclictest_json(c, &env));
    }
    let oslat = doc.probes.iter().find_map(|p| match p {
        ProbeResult::Oslat(o) => Some(o),
        _ => None,
    });
    match oslat {
        Some(o) => Ok(rttests::render_oslat_json(o, &env)),
        None => anyhow::bail!("--format rt-tests: the run has no cyclic or oslat result"),
    }
}

/// CSV, one row per probe thread.
pub fn render_csv(doc: &RunDocument) -> String {
    let ps = rtgauge_model::latency::DEFAULT_PERCENTILES;
    let mut s = String::from("probe,thread,cpu,samples,min_ns,mean_ns");
    for p in ps {
        s.push_str(&format!(",p{p}_ns"));
    }
    s.push_str(",max_ns,missed_deadlines,overflows\n");
    let row = |s: &mut String,
               probe: &str,
               idx: u32,
               cpu: Option<u32>,
               l: &rtgauge_model::latency::LatencyStats,
               missed: u64,
               over: Option<u64>| {
        s.push_str(&format!(
            "{probe},{idx},{},{},{},{:.1}",
            cpu.map_or(String::new(), |c| c.to_string()),
            l.count,
            l.min_ns,
            l.mean_ns
        ));
        for p in ps {
            // A percentile beyond an imported histogram's limit is unknown: left empty, never the limit.
            let v = match l.unknown_above(*p) {
                Some(_) => None,
                None => l.percentile(*p),
            };
            s.push_str(&format!(",{}", v.map_or(String::new(), |v| v.to_string())));
        }
        s.push_str(&format!(
            ",{},{missed},{}\n",
            l.max_ns,
            over.map_or(String::new(), |o| o.to_string())
        ));
    };
    for p in &doc.probes {
        match p {
            ProbeResult::Cyclic(c) => {
                for t in &c.threads {
                    row(
                        &mut s,
                        "cyclic",
                        t.index,
                        t.conditions.cpu.achieved,
                        &t.latency,
                        t.missed_deadlines,
                        t.linear.as_ref().map(|l| l.overflows),
                    );
                }
            }
            ProbeResult::Oslat(o) => {
                for t in &o.threads {
                    let over = t.over_thresholds.last().map(|x| x.count);
                    row(&mut s, "oslat", t.index, Some(t.cpu), &t.gaps, 0, over);
                }
            }
            // One row per net result: the transaction-time distribution, failed attempts as "missed".
            ProbeResult::Net(n) => row(
                &mut s,
                &n.key_prefix(),
                0,
                None,
                &n.total,
                n.errors.total(),
                None,
            ),
            // Not per-thread latency distributions: their figures leave through `measures()`.
            ProbeResult::Ops(_) | ProbeResult::Mem(_) | ProbeResult::Numa(_) => {}
        }
    }
    s
}

/// Warnings for rt-tests histograms whose limit lost samples (below the min, or > 0.1 % overflowing).
pub fn limit_warnings(doc: &RunDocument) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: String, s: &rtgauge_model::latency::LatencyStats| {
        if let Some(b) = s.beyond {
            out.extend(rtgauge_model::latency::limit_warning(
                &what, s, b.limit_ns, b.count,
            ));
        }
    };
    for p in &doc.probes {
        match p {
            ProbeResult::Cyclic(c) => {
                for t in &c.threads {
                    check(format!("thread {}", t.index), &t.latency);
                }
            }
            ProbeResult::Oslat(o) => {
                for t in &o.threads {
                    check(format!("CPU {}", t.cpu), &t.gaps);
                }
            }
            ProbeResult::Net(_)
            | ProbeResult::Ops(_)
            | ProbeResult::Mem(_)
            | ProbeResult::Numa(_) => {}
        }
    }
    out
}

/// Bring rt-tests results into the store.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// cyclictest `--json` or text output (summary lines and/or the -h histogram, rt-tests 2.x layouts),
    /// oslat `--json`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Label for the imported runs (e.g. bare-metal).
    #[arg(long)]
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
        let mut doc =
            rtgauge_store::import::parse_rt_tests(&text, &name, if a.nsecs { 1 } else { 1000 })
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

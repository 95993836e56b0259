//! `rtgauge report RUN` and `rtgauge compare A B [C…]`: render stored runs, on the terminal and as a
//! self-contained HTML page.

use super::runs::{resolve, DbArg};
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_model::run::RunDocument;
use rtgauge_report::compare::{self, Options};
use rtgauge_report::html;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Render one stored run.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Run id, label, or `latest` (default: latest; or use --label).
    pub run: Option<String>,
    /// Select the run by label (the most recent run with it).
    #[arg(long, conflicts_with = "run")]
    pub label: Option<String>,
    /// Also write the HTML report to FILE (self-contained, opens from file://).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
}

/// Compare stored runs with the first (the baseline).
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Runs: id, label, or `latest`; the first is the baseline. `1,2,3` is one platform measured three
    /// times: a set of repetitions, judged by the variation between its runs.
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    /// Select a run by label (repeatable; appended after the positional runs).
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Each --label selects every run with that label, as a set of repetitions (not only the newest).
    #[arg(long, requires = "labels")]
    pub every: bool,
    /// Equivalence margin, percent: a ratio whose 95 % interval lies within ±MARGIN is "equivalent".
    #[arg(long, default_value = "10", value_parser = parse_margin)]
    pub margin: f64,
    /// Also write the HTML comparison to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Select a host's latest run (repeatable; appended after the positional runs, before the labels).
    #[arg(long = "host", value_name = "NAME")]
    pub hosts: Vec<String>,
    #[command(flatten)]
    pub db: DbArg,
}

fn parse_margin(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(v > 0.0 && v < 100.0) {
        return Err(format!("{v} is not between 0 and 100 (exclusive)"));
    }
    Ok(v / 100.0)
}

fn write_html(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::doc::write_atomic(path, text.as_bytes())
        .with_context(|| format!("--html {}", path.display()))
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let (mut store, _) = a.db.open()?;
    let sel = match (&a.run, &a.label) {
        (Some(r), _) => r.clone(),
        (None, Some(l)) => format!("label:{l}"),
        (None, None) => "latest".into(),
    };
    let (id, doc) = resolve(store.as_mut(), &sel)?;
    if let Some(path) = &a.html {
        write_html(path, &html::render_report(id, &doc))?;
    }
    let mut out = std::io::stdout().lock();
    super::print_text(&rtgauge_report::terminal::render_show(id, &doc))?;
    if let Some(p) = &a.html {
        writeln!(out, "report: {}", p.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    // --host NAME: each host's latest run, appended to the positional runs as its id.
    let a = &super::fleet::with_hosts(a)?;
    let sels: Vec<String> = a
        .runs
        .iter()
        .cloned()
        .chain(a.labels.iter().map(|l| format!("label:{l}")))
        .collect();
    if sels.len() < 2 {
        bail!(
            "compare needs at least two runs (RUN…, --label or --host), got {}",
            sels.len()
        );
    }
    let (mut store, _) = a.db.open()?;
    // One set of (id, document) per column: a single run, or the repetitions of one platform.
    let mut sets: Vec<Vec<(i64, RunDocument)>> = Vec::new();
    for s in &a.runs {
        let mut set = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                bail!("run set '{s}': an empty entry (write runs as 1,2,3)");
            }
            set.push(resolve(store.as_mut(), part)?);
        }
        sets.push(set);
    }
    for l in &a.labels {
        if a.every {
            let ids: Vec<i64> = store
                .list()?
                .into_iter()
                .filter(|r| r.label.as_deref() == Some(l.as_str()))
                .map(|r| r.id)
                .collect();
            if ids.is_empty() {
                bail!("--label {l}: no stored run has this label");
            }
            let set = ids
                .into_iter()
                .map(|id| resolve(store.as_mut(), &id.to_string()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            sets.push(set);
        } else {
            sets.push(vec![resolve(store.as_mut(), &format!("label:{l}"))?]);
        }
    }
    let ids: Vec<i64> = sets.iter().map(|s| s[0].0).collect();
    let refs: Vec<&RunDocument> = sets.iter().map(|s| &s[0].1).collect();
    let set_refs: Vec<Vec<&RunDocument>> = sets
        .iter()
        .map(|s| s.iter().map(|(_, d)| d).collect())
        .collect();
    let mut c = compare::compare_sets(
        &set_refs,
        &Options {
            margin: a.margin,
            ..Options::default()
        },
    );
    if sets.iter().any(|s| s.len() > 1) {
        c.sets = sets
            .iter()
            .map(|s| s.iter().map(|(id, _)| *id).collect())
            .collect();
    }
    if let Some(path) = &a.html {
        write_html(path, &html::render_compare(&ids, &refs, &c))?;
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &c)?;
        writeln!(out)?;
    } else {
        super::print_text(&rtgauge_report::terminal::render_compare(&ids, &refs, &c))?;
        if let Some(p) = &a.html {
            writeln!(out, "report: {}", p.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

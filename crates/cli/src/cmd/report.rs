//! `rtgauge report RUN` and `rtgauge compare A B [C…]`: render stored runs, on the terminal and as a
//! self-contained HTML page.

use super::runs::{resolve, DbArg};
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_model::run::RunDocument;
use rtgauge_report::compare::{self, Options};
use rtgauge_report::html;
use rtgauge_store::Selector;
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
    /// Also write the qualification record to FILE as PDF (rendered by headless Chromium; check it later
    /// with `rtgauge verify FILE`).
    #[arg(long, value_name = "FILE")]
    pub pdf: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
}

/// Compare stored runs with the first (the baseline).
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Runs: id, label, or `latest`; the first is the baseline. `1,2,3` is one platform measured three
    /// times: a set of repetitions, judged by the variation between its runs. A label whose newest run was
    /// made by `run --repeat N` stands for all N runs, as a set.
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    /// Select a run by label (repeatable; appended after the positional runs): the newest run with it, or,
    /// when that run was made by `run --repeat N`, every complete run of its N, as a set.
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Each --label selects every run with that label, as a set of repetitions (not only the newest).
    #[arg(long)]
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
    /// Judge single runs without their stored repeats. By default, where the store holds at least 3 other
    /// runs of the same label, profile and host under the same conditions (repeats), their run-to-run spread
    /// widens the intervals; without (or with this flag) one run per platform decides a measure only beyond
    /// the largest ratio idle runs showed in the A/A bench (docs/report.md).
    #[arg(long)]
    pub no_repeats: bool,
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
    crate::output::write_atomic(path, text.as_bytes())
        .with_context(|| format!("--html {}", path.display()))
}

/// Headless Chromium on PATH, under the names distributions give it.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
    .find(|p| p.is_file())
}

/// Print the record page to PDF with headless Chromium: the page goes to a private temporary directory
/// (Chromium reads a file:// URL; its profile goes there too, so nothing of the user's is touched), and
/// the PDF is written beside the target and renamed into place, so a failed print leaves no half file.
fn write_pdf(path: &Path, html_text: &str) -> anyhow::Result<()> {
    let what = || format!("--pdf {}", path.display());
    let Some(browser) = chromium() else {
        bail!(
            "{}: headless Chromium is needed to print the record and none was found on PATH (install chromium)",
            what()
        );
    };
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!("{}: no directory {}", what(), parent.display());
    }
    let dir = std::env::temp_dir().join(format!("rtgauge-pdf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: {}", what(), dir.display()))?;
    let result = (|| -> anyhow::Result<()> {
        let page = dir.join("record.html");
        std::fs::write(&page, html_text)
            .with_context(|| format!("{}: {}", what(), page.display()))?;
        let file_name = path
            .file_name()
            .map_or_else(|| "record.pdf".into(), |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
        let out = rtgauge_probe::programs::command(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-pdf-header-footer",
                // The record makes no request; make sure of it while printing.
                "--proxy-server=127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND",
            ])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .arg(format!("--print-to-pdf={}", tmp.display()))
            .arg(format!("file://{}", page.display()))
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("{}: running {}", what(), browser.display()))?;
        let printed = std::fs::metadata(&tmp).is_ok_and(|m| m.len() > 0);
        if !out.status.success() || !printed {
            let _ = std::fs::remove_file(&tmp);
            let last = super::last_stderr_line(&out.stderr);
            bail!(
                "{}: {} did not print the record ({}): {last}",
                what(),
                browser.display(),
                out.status
            );
        }
        std::fs::rename(&tmp, path).with_context(what)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let (mut store, _) = a.db.open_existing()?;
    let sel = match (&a.run, &a.label) {
        (Some(r), _) => r.clone(),
        (None, Some(l)) => format!("label:{l}"),
        (None, None) => "latest".into(),
    };
    let (id, doc) = resolve(store.as_mut(), &sel)?;
    if let Some(path) = &a.html {
        write_html(path, &html::render_report(id, &doc))?;
    }
    if let Some(path) = &a.pdf {
        let record = html::render_report_with(id, &doc, html::ReportOptions { record: true });
        write_pdf(path, &record)?;
    }
    let mut out = std::io::stdout().lock();
    super::print_text(&rtgauge_report::terminal::render_show(id, &doc))?;
    if let Some(p) = &a.html {
        writeln!(out, "report: {}", p.display())?;
    }
    if let Some(p) = &a.pdf {
        writeln!(out, "record: {}", p.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    // --host NAME: each host's latest run, appended to the positional runs as its id.
    let a = &super::fleet::with_hosts(a)?;
    let columns = a.runs.len() + a.labels.len();
    if columns < 2 {
        bail!("compare needs at least two runs (RUN…, --label or --host), got {columns}");
    }
    if a.every && a.labels.is_empty() {
        bail!("--every needs --label LABEL: every run with that label forms one set");
    }
    let (mut store, _) = a.db.open_existing()?;
    let sets = column_sets(a, store.as_mut())?;
    let ids: Vec<i64> = sets.iter().map(|s| s[0].0).collect();
    let refs: Vec<&RunDocument> = sets.iter().map(|s| &s[0].1).collect();
    let set_refs: Vec<Vec<&RunDocument>> = sets
        .iter()
        .map(|s| s.iter().map(|(_, d)| d).collect())
        .collect();
    let options = Options {
        margin: a.margin,
        ..Options::default()
    };
    let mut c = compare::compare_sets(&set_refs, &options);
    // Single runs are judged by how much runs of their platform differ: their stored repeats' spread, or
    // without any (or with --no-repeats) the one-run floors.
    let (loaded, found) = match a.no_repeats {
        false => repeats(store.as_mut(), &sets)?,
        true => (Loaded::new(), Vec::new()),
    };
    let repeats: Vec<Option<compare::Repeats>> = sets
        .iter()
        .enumerate()
        .map(|(i, set)| {
            let ids = match found.get(i) {
                Some(f) => f.clone()?,
                None if set.len() > 1 => return None,
                None => Vec::new(),
            };
            Some(compare::Repeats {
                run: set[0].0,
                runs: ids.iter().filter_map(|id| loaded.get(id)).collect(),
                ids,
            })
        })
        .collect();
    compare::judge_single_runs(&mut c, &repeats, &options);
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

/// Stored runs: (id in the store, document).
type Stored = Vec<(i64, RunDocument)>;
/// Documents loaded from the store, by id.
type Loaded = std::collections::BTreeMap<i64, RunDocument>;

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
fn repeats(
    store: &mut dyn rtgauge_store::RunStore,
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
        let mut candidates: Vec<&rtgauge_store::RunSummary> = list
            .iter()
            .filter(|r| {
                r.status == rtgauge_model::run::RunStatus::Complete
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
/// and profile), as one platform's set: its complete runs, by id. The run alone when it was not repeated, or
/// when fewer than two runs of its group completed (a signal ended the others).
fn with_its_repeats(
    store: &mut dyn rtgauge_store::RunStore,
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
    let mut candidates: Vec<&rtgauge_store::RunSummary> = list
        .iter()
        .filter(|r| {
            r.id != id
                && r.status == rtgauge_model::run::RunStatus::Complete
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
    if doc.status == rtgauge_model::run::RunStatus::Complete {
        set.push((id, doc));
    } else if set.len() < 2 {
        // An interrupted newest run with fewer than two complete siblings: the run itself, as before.
        return Ok(vec![(id, doc)]);
    }
    set.sort_by_key(|(id, _)| *id);
    Ok(set)
}

/// One set of (id, document) per column: a single run, or the repetitions of one platform (`1,2,3`, or
/// every run of a label with --every). A run twice in one set is refused.
fn column_sets(
    a: &CompareArgs,
    store: &mut dyn rtgauge_store::RunStore,
) -> anyhow::Result<Vec<Stored>> {
    let mut sets: Vec<Stored> = Vec::new();
    for s in &a.runs {
        // A label alone stands for its newest run's repeats, as --label does.
        if !s.contains(',') && matches!(Selector::parse(s.trim()), Selector::Label(_)) {
            let run = resolve(store, s.trim())?;
            sets.push(with_its_repeats(store, run)?);
            continue;
        }
        let mut set = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                bail!("run set '{s}': an empty entry (write runs as 1,2,3)");
            }
            set.push(resolve(store, part)?);
        }
        sets.push(set);
    }
    for l in &a.labels {
        if a.every {
            let ids: Vec<i64> = store
                .list()?
                .into_iter()
                .filter(|r| {
                    r.label.as_deref() == Some(l.as_str())
                        && r.status == rtgauge_model::run::RunStatus::Complete
                })
                .map(|r| r.id)
                .collect();
            if ids.is_empty() {
                bail!("--label {l}: no complete stored run has this label");
            }
            let set = ids
                .into_iter()
                .map(|id| resolve(store, &id.to_string()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            sets.push(set);
        } else {
            let run = resolve(store, &format!("label:{l}"))?;
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
        if let Some((id, d)) = set
            .iter()
            .find(|(_, d)| d.status != rtgauge_model::run::RunStatus::Complete)
        {
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

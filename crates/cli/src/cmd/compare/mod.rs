//! `rtgauge compare`: the runs each column stands for and each single run's stored repeats, selected by
//! `rtgauge_store::select`; the comparison of `rtgauge_analysis::compare`, printed (text or JSON) or written as HTML.

use anyhow::bail;
use rtgauge_analysis::compare::{self, Options};
use rtgauge_flags::report::CompareArgs;
use rtgauge_model::run::RunDocument;
use rtgauge_report::html;
use rtgauge_store::select::{self, Loaded};
use std::io::Write as _;
use std::process::ExitCode;

pub fn compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    let columns = a.runs.len() + a.hosts.len() + a.labels.len();
    if columns < 2 {
        bail!("compare needs at least two runs (RUN…, --label or --host), got {columns}");
    }
    if a.every && a.labels.is_empty() {
        bail!("--every needs --label LABEL: every run with that label forms one set");
    }
    let (mut store, _) = a.db.open_existing()?;
    // --host NAME: each host's latest run, after the positional runs and before the labels.
    let mut runs = a.runs.clone();
    let hosts = select::latest_of_hosts(store.as_mut(), &a.hosts)?;
    runs.extend(hosts.iter().map(i64::to_string));
    let sets = without_empty_runs(select::column_sets(
        store.as_mut(),
        &runs,
        &a.labels,
        a.every,
    )?)?;
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
        false => select::repeats(store.as_mut(), &sets, compare::same_conditions)?,
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
    if let Some(path) = &a.html.html {
        super::report::write_html(path, &html::render_compare(&ids, &refs, &c))?;
    }
    let mut out = std::io::stdout().lock();
    if a.format.json() {
        serde_json::to_writer_pretty(&mut out, &c)?;
        writeln!(out)?;
    } else {
        super::print_text(&rtgauge_report::terminal::render_compare(&ids, &refs, &c))?;
        if let Some(p) = &a.html.html {
            writeln!(out, "report: {}", p.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Each column's runs without those that hold no measurement (a run stopped before its first probe
/// ended): one left out of a set is named; a column left with none is an error naming it, as a column of
/// "-" would compare nothing without a word.
fn without_empty_runs(
    sets: Vec<Vec<(i64, RunDocument)>>,
) -> anyhow::Result<Vec<Vec<(i64, RunDocument)>>> {
    let name = |id: i64, d: &RunDocument| {
        let label = d
            .label
            .as_ref()
            .map_or(String::new(), |l| format!(" ({l})"));
        format!(
            "run {id}{label} holds no measurement (stored {})",
            d.status.as_str()
        )
    };
    sets.into_iter()
        .map(|set| {
            let (kept, empty): (Vec<_>, Vec<_>) =
                set.into_iter().partition(|(_, d)| !d.probes.is_empty());
            match (kept.is_empty(), empty.first()) {
                (true, Some((id, d))) => {
                    bail!(
                        "{}: nothing to compare; name a run that measured",
                        name(*id, d)
                    )
                }
                _ => {
                    for (id, d) in &empty {
                        eprintln!("rtgauge: warning: {}: left out of its set", name(*id, d));
                    }
                    Ok(kept)
                }
            }
        })
        .collect()
}

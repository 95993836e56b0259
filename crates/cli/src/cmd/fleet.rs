//! `rtgauge fleet`: every host of the store with its latest run per profile and the hosts that differ from the
//! fleet's majority (the aggregation is `rtgauge_report::fleet`); and `compare --host NAME`, which picks a
//! host's latest run. Works on the `RunStore` trait only, so any backend serves.

use anyhow::Context as _;
use rtgauge_flags::fleet::*;
use rtgauge_report::fleet::{self, FleetRun};
use rtgauge_store::RunSummary;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;

/// The newest run id per [`fleet::group_key`] (host, profile, or the probes of a run without one) of the
/// store's runs. Takes the list rather than the store so that it is the same code whatever box the store
/// comes in.
fn latest_per_host(runs: Vec<RunSummary>, profile: Option<&str>) -> Vec<i64> {
    type Key = (String, Option<String>, Option<String>);
    let mut latest: BTreeMap<Key, i64> = BTreeMap::new();
    for r in runs {
        if profile.is_some_and(|p| r.profile.as_deref() != Some(p)) {
            continue;
        }
        let key = fleet::group_key(&r.host, r.profile.as_deref(), &r.probes);
        let e = latest.entry(key).or_insert(r.id);
        *e = (*e).max(r.id);
    }
    latest.into_values().collect()
}

/// Seconds from `at` (RFC 3339) to `now`.
fn age(at: &str, now: chrono::DateTime<chrono::Utc>) -> Option<i64> {
    let t = chrono::DateTime::parse_from_rfc3339(at).ok()?;
    Some((now - t.with_timezone(&chrono::Utc)).num_seconds())
}

pub fn run(a: &FleetArgs) -> anyhow::Result<ExitCode> {
    let (mut store, _) = a.db.open_existing()?;
    let ids = latest_per_host(store.list()?, a.profile.as_deref());
    let mut docs = Vec::with_capacity(ids.len());
    for id in ids {
        docs.push((id, store.get(id).with_context(|| format!("run {id}"))?));
    }
    let now = chrono::Utc::now();
    let runs: Vec<FleetRun<'_>> = docs
        .iter()
        .map(|(id, doc)| FleetRun {
            id: *id,
            doc,
            age_s: age(
                if doc.ended_at.is_empty() {
                    &doc.started_at
                } else {
                    &doc.ended_at
                },
                now,
            ),
        })
        .collect();
    let f = fleet::aggregate(&runs);
    if let Some(path) = &a.html.html {
        crate::output::write_atomic(path, fleet::render_html(&f).as_bytes())
            .with_context(|| format!("--html {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if a.format.json() {
        serde_json::to_writer_pretty(&mut out, &f)?;
        writeln!(out)?;
    } else {
        super::print_text(&fleet::render_text(&f))?;
        if let Some(p) = &a.html.html {
            writeln!(out, "report: {}", p.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

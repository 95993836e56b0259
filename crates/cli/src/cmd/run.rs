//! `rtgauge run`: the main job. Today: the platform's system facts, then the `quick` profile's timer probe
//! on every online CPU, a summary table in the layout of the VMware vPAC guide (samples, min, avg, max,
//! overflows per CPU, plus percentiles and missed deadlines) and the run document written to disk.
//! Profiles state their probes in the flags users already know (cyclictest syntax), so a profile reads like
//! the command a white paper prints.

use super::cyclic::{self, CyclicArgs};
use anyhow::{bail, Context as _};
use clap::{Args, Parser};
use rtgauge_host::HostRoot;
use rtgauge_model::units::parse_duration;
use rtgauge_model::Nanos;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run a profile of probes and write the run document.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Profile to run. `quick`: timer latency on every online CPU (-m -p95 -i 200 -h 400), 10 s.
    #[arg(long, default_value = "quick")]
    pub profile: String,

    /// Override the profile's duration (e.g. 30s, 15m, 24h).
    #[arg(long, value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    pub duration: Option<Nanos>,

    /// Where to write the run document (default: rtgauge-run-<time>.json in the current directory).
    #[arg(long)]
    pub output: Option<PathBuf>,
}

/// A profile's timer probe, in cyclictest's syntax.
fn profile_cyclic_flags(profile: &str) -> anyhow::Result<(&'static str, Nanos)> {
    match profile {
        "quick" => Ok(("-m -p95 -i 200 -h 400 -a -t -q", Nanos::from_secs(10))),
        other => bail!("--profile {other}: unknown profile (available: quick)"),
    }
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct ProfileFlags {
    #[command(flatten)]
    cyclic: CyclicArgs,
}

pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let (flags, default_duration) = profile_cyclic_flags(&a.profile)?;
    let duration = a.duration.unwrap_or(default_duration);
    let mut argv: Vec<String> = flags.split_whitespace().map(String::from).collect();
    argv.push("-D".into());
    argv.push(format!("{}ms", duration.as_ns() / 1_000_000));
    let args = ProfileFlags::try_parse_from(&argv)
        .context("profile flags")?
        .cyclic;

    let root = HostRoot::live();
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::doc::now_rfc3339();
    let resolved = cyclic::resolve(&args, &root)?;
    let mut warnings = resolved.notes;
    println!(
        "rtgauge run --profile {}: {} {} ({}), CPUs {}, clocksource {}; timer latency for {}",
        a.profile,
        system.sysname,
        system.release,
        if system.realtime {
            "PREEMPT_RT"
        } else {
            "not PREEMPT_RT"
        },
        system.cpus_online,
        system.clocksource.as_deref().unwrap_or("?"),
        duration
    );
    let result = cyclic::measure(&resolved.plan, true)?;
    for w in cyclic::shortfalls(&result) {
        eprintln!("rtgauge: warning: {w}");
        warnings.push(w);
    }
    let mut out = std::io::stdout().lock();
    let hist_us = result.config.hist_buckets.unwrap_or(0);
    writeln!(
        out,
        "{:>4} {:>12} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11} {:>7}",
        "CPU",
        "samples",
        "min µs",
        "avg µs",
        "max µs",
        "p99.9 µs",
        "p99.99 µs",
        format!("over {hist_us}µs"),
        "missed"
    )?;
    for t in &result.threads {
        let us = |ns: u64| ns as f64 / 1000.0;
        writeln!(
            out,
            "{:>4} {:>12} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>10.1} {:>11} {:>7}",
            t.conditions
                .cpu
                .achieved
                .map_or("-".to_string(), |c| c.to_string()),
            t.cycles,
            us(t.latency.min_ns),
            t.latency.mean_ns / 1000.0,
            us(t.latency.max_ns),
            us(t.latency.percentile(99.9).unwrap_or(0)),
            us(t.latency.percentile(99.99).unwrap_or(0)),
            t.linear.as_ref().map_or(0, |l| l.overflows),
            t.missed_deadlines
        )?;
    }
    let path = a.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "rtgauge-run-{}.json",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        ))
    });
    let doc = cyclic::document(started, system, result, warnings);
    crate::doc::write_json(&path, &doc).with_context(|| format!("--output {}", path.display()))?;
    writeln!(out, "run document: {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

//! `rtgauge report` and `rtgauge compare`'s flags.

use super::DbArg;
use clap::Args;
use std::path::PathBuf;

/// Render one stored run.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Run id, label, or `latest` (default: latest; or use --label).
    pub run: Option<String>,
    /// Select the run by label (the most recent run with it).
    #[arg(long, conflicts_with = "run")]
    pub label: Option<String>,
    #[command(flatten)]
    pub html: super::HtmlArg,
    /// Also write the qualification record to FILE as PDF (rendered by headless Chromium; check it later
    /// with `rtgauge verify FILE`).
    #[arg(long, value_name = "FILE")]
    pub pdf: Option<PathBuf>,
    #[command(flatten)]
    pub verbose: super::VerboseArg,
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
    #[command(flatten)]
    pub html: super::HtmlArg,
    #[command(flatten)]
    pub format: super::FormatArg,
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

//! `rtgauge runs`, `export` and `import`'s flags: which store, which run, which format.

use super::DbArg;
use clap::{Args, Subcommand, ValueEnum};
use rtgauge_formats::csv::Csv;
use rtgauge_formats::native::NativeJson;
use rtgauge_formats::rttests::RtTestsJson;
use rtgauge_formats::Exporter;
use std::path::PathBuf;

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
        #[command(flatten)]
        verbose: super::VerboseArg,
    },
    /// Delete a run.
    Delete {
        /// Run id (a label or `latest` is accepted too).
        run: String,
    },
    /// Export a run.
    Export(ExportArgs),
}

/// The export formats: the one registry of the file formats a stored run is written in (each an
/// `rtgauge_formats::Exporter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The native run document.
    Json,
    /// One row per probe thread: samples, min, avg, percentiles, max (ns), missed, overflows.
    Csv,
    /// rt-tests JSON (cyclictest's schema, or oslat's for a run with only oslat).
    RtTests,
}

impl ExportFormat {
    /// The format's writer.
    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            ExportFormat::Json => &NativeJson,
            ExportFormat::Csv => &Csv,
            ExportFormat::RtTests => &RtTestsJson,
        }
    }

    /// The format as `--format` spells it.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// Export one run.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("output", |a| a.short('o').help("Write the export to FILE instead of standard output ('-' = standard output)")))]
pub struct ExportArgs {
    /// Run id, label, or `latest`.
    pub run: String,
    /// The file format: the native run document, CSV, or rt-tests JSON.
    #[arg(long, value_enum, default_value = "json")]
    pub format: ExportFormat,
    #[command(flatten)]
    pub output: super::OutputArg,
    #[command(flatten)]
    pub db: DbArg,
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

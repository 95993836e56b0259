//! `rtgauge verify`'s flags.

use super::DbArg;
use clap::Args;
use std::path::PathBuf;

/// Check a report or record against the stored run.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// A report page (`report --html`) or a qualification record (`report --pdf`).
    pub file: PathBuf,
    #[command(flatten)]
    pub db: DbArg,
}

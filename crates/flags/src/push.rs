//! `rtgauge push`'s flags.

use clap::Args;
use std::path::PathBuf;

/// Copy local runs to a central store.
#[derive(Debug, Clone, Args)]
pub struct PushArgs {
    /// Central store: a postgresql:// URL (or a SQLite file). From the environment, a password in it stays
    /// out of the process list.
    #[arg(
        long,
        value_name = "URL",
        env = "RTGAUGE_PUSH_TO",
        hide_env_values = true
    )]
    pub to: PathBuf,
    /// Runs to push: ids, labels or `latest` (default: every finished run the central store lacks).
    pub runs: Vec<String>,
    #[command(flatten)]
    pub db: super::DbArg,
}

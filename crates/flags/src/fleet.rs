//! `rtgauge fleet`'s flags.

use super::DbArg;
use clap::Args;
use std::path::PathBuf;

/// Every host with its latest run per profile, and the outliers.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// Print the fleet as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the fleet as a self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Only runs of this profile.
    #[arg(long)]
    pub profile: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
}

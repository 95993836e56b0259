//! `rtgauge fleet`'s flags.

use super::DbArg;
use clap::Args;

/// Every host with its latest run per profile, and the outliers.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    #[command(flatten)]
    pub format: super::FormatArg,
    #[command(flatten)]
    pub html: super::HtmlArg,
    /// Only runs of this profile.
    #[arg(long)]
    pub profile: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
}

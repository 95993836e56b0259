//! `rtgauge fingerprint`'s flags.

use clap::Args;

/// Print the platform fingerprint.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("root", |a| a.help("Read a captured tree (DIR/proc, DIR/sys, DIR/etc) instead of this system")))]
pub struct FingerprintArgs {
    #[command(flatten)]
    pub root: super::RootArg,

    #[command(flatten)]
    pub format: super::FormatArg,
}

//! `rtgauge fingerprint`: what machine, kernel, virtualization layer and tuning state this is.

use clap::Args;
use rtgauge_host::fingerprint::{read_fingerprint, render_fingerprint};
use std::process::ExitCode;

/// Print the platform fingerprint.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("root", |a| a.help("Read a captured tree (DIR/proc, DIR/sys, DIR/etc) instead of this system")))]
pub struct FingerprintArgs {
    #[command(flatten)]
    pub root: super::RootArg,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &FingerprintArgs) -> anyhow::Result<ExitCode> {
    let root = a.root.open()?;
    let fp = read_fingerprint(&root);
    super::warn_refused(&root);
    super::warn_topology(&root);
    let out = if a.json {
        serde_json::to_string_pretty(&fp)? + "\n"
    } else {
        render_fingerprint(&fp)
    };
    super::print_text(&out)?;
    Ok(ExitCode::SUCCESS)
}

//! `rtgauge fingerprint`: what machine, kernel, virtualization layer and tuning state this is.

use anyhow::bail;
use clap::Args;
use rtgauge_host::fingerprint::{read_fingerprint, render_fingerprint};
use rtgauge_host::HostRoot;
use std::path::PathBuf;
use std::process::ExitCode;

/// Print the platform fingerprint.
#[derive(Debug, Clone, Args)]
pub struct FingerprintArgs {
    /// Read a captured tree (DIR/proc, DIR/sys, DIR/etc) instead of this system.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &FingerprintArgs) -> anyhow::Result<ExitCode> {
    let root = match &a.root {
        Some(dir) if !dir.is_dir() => bail!("--root {}: not a directory", dir.display()),
        Some(dir) => HostRoot::at(dir),
        None => HostRoot::live(),
    };
    let fp = read_fingerprint(&root);
    super::warn_refused(&root);
    let out = if a.json {
        serde_json::to_string_pretty(&fp)? + "\n"
    } else {
        render_fingerprint(&fp)
    };
    super::print_text(&out)?;
    Ok(ExitCode::SUCCESS)
}

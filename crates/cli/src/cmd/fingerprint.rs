//! `rtgauge fingerprint`: what machine, kernel, virtualization layer and tuning state this is.

use rtgauge_flags::fingerprint::*;
use rtgauge_host::fingerprint::read_fingerprint;
use rtgauge_report::fingerprint::render_text as render_fingerprint;
use std::process::ExitCode;

pub fn run(a: &FingerprintArgs) -> anyhow::Result<ExitCode> {
    let root = a.root.open()?;
    let fp = read_fingerprint(&root);
    super::warn_refused(&root);
    super::warn_topology(&root);
    let out = if a.format.json() {
        serde_json::to_string_pretty(&fp)? + "\n"
    } else {
        render_fingerprint(&fp)
    };
    super::print_text(&out)?;
    Ok(ExitCode::SUCCESS)
}

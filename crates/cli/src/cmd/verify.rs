//! `rtgauge verify FILE.pdf|FILE.html`: check a filed report or qualification record against the stored
//! run it names. The file carries the SHA-256 of the run document's canonical JSON and short hashes of its
//! parts (see [`rtgauge_report::record`]); a PDF's text is read with `pdftotext` (poppler-utils).
//! Exit 0 when the stored run hashes the same, 1 when it does not (naming the parts that differ), 2 when
//! the file cannot be read or holds no hash.

use super::runs::{resolve, DbArg};
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_report::record;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check a report or record against the stored run.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// A report page (`report --html`) or a qualification record (`report --pdf`).
    pub file: PathBuf,
    #[command(flatten)]
    pub db: DbArg,
}

/// The text of the file: a PDF through `pdftotext`, anything else as UTF-8.
fn text_of(a: &VerifyArgs) -> anyhow::Result<String> {
    let what = format!("verify {}", a.file.display());
    let bytes = super::read_user_file(&a.file, "verify", super::MAX_IMPORT_BYTES)?;
    if !bytes.starts_with(b"%PDF") {
        return String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("{what}: neither a PDF nor a UTF-8 HTML report"));
    }
    let out = std::process::Command::new("pdftotext")
        .args(["-enc", "UTF-8"])
        .arg(&a.file)
        .arg("-")
        .output()
        .with_context(|| format!("{what}: pdftotext (poppler-utils) is needed to read a PDF"))?;
    if !out.status.success() {
        let last = super::last_stderr_line(&out.stderr);
        bail!("{what}: not a readable PDF (pdftotext: {})", last.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn run(a: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let name = a.file.display().to_string();
    let text = text_of(a)?;
    let Some(e) = record::extract(&text) else {
        bail!("verify {name}: no rtgauge content hash in it (not a report or record of rtgauge)");
    };
    let Some(id) = e.run else {
        bail!("verify {name}: the content hash names no run");
    };
    let (mut store, _) = a.db.open_existing()?;
    let doc = match resolve(store.as_mut(), &id.to_string()) {
        Ok((_, d)) => d,
        Err(err) => {
            super::print_text(&format!(
                "{name}: MISMATCH: run {id} is not in the database ({err:#})\n"
            ))?;
            return Ok(ExitCode::from(1));
        }
    };
    let now = record::hashes(&doc);
    if now.whole == e.hashes.whole {
        super::print_text(&format!(
            "{name}: OK: matches stored run {id} ({})\n",
            now.whole
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let diff = record::differences(&e.hashes, &now);
    super::print_text(&format!(
        "{name}: MISMATCH: stored run {id} hashes {}, the file records {}; differs: {}\n",
        now.whole,
        e.hashes.whole,
        if diff.is_empty() {
            "the whole document (the parts recorded agree)".to_string()
        } else {
            diff.join(", ")
        }
    ))?;
    Ok(ExitCode::from(1))
}

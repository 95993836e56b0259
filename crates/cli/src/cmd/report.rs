//! `rtgauge report RUN` and `rtgauge compare A B [C…]`: render stored runs, on the terminal and as a
//! self-contained HTML page.

use super::runs::find_run;
use anyhow::{bail, Context as _};
use rtgauge_flags::report::*;
use rtgauge_report::html;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(super) fn write_html(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::output::write_atomic(path, text.as_bytes())
        .with_context(|| format!("--html {}", path.display()))
}

/// Headless Chromium on PATH, under the names distributions give it (deps/programs.tsv lists Debian's
/// `chromium`, which scripts/test installs; the others are other distributions' names for it).
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
    .find(|p| p.is_file())
}

/// Print the record page to PDF with headless Chromium: the page goes to a private temporary directory
/// (Chromium reads a file:// URL; its profile goes there too, so nothing of the user's is touched), and
/// the PDF is written beside the target and renamed into place, so a failed print leaves no half file.
fn write_pdf(path: &Path, html_text: &str) -> anyhow::Result<()> {
    let what = || format!("--pdf {}", path.display());
    let Some(browser) = chromium() else {
        bail!(
            "{}: headless Chromium is needed to print the record and none was found on PATH (install chromium)",
            what()
        );
    };
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!("{}: no directory {}", what(), parent.display());
    }
    let dir = std::env::temp_dir().join(format!("rtgauge-pdf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: {}", what(), dir.display()))?;
    let result = (|| -> anyhow::Result<()> {
        let page = dir.join("record.html");
        std::fs::write(&page, html_text)
            .with_context(|| format!("{}: {}", what(), page.display()))?;
        let file_name = path
            .file_name()
            .map_or_else(|| "record.pdf".into(), |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
        let out = rtgauge_probe::programs::command(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-pdf-header-footer",
                // The record makes no request; make sure of it while printing.
                "--proxy-server=127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND",
            ])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .arg(format!("--print-to-pdf={}", tmp.display()))
            .arg(format!("file://{}", page.display()))
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("{}: running {}", what(), browser.display()))?;
        let printed = std::fs::metadata(&tmp).is_ok_and(|m| m.len() > 0);
        if !out.status.success() || !printed {
            let _ = std::fs::remove_file(&tmp);
            let last = super::last_stderr_line(&out.stderr);
            bail!(
                "{}: {} did not print the record ({}): {last}",
                what(),
                browser.display(),
                out.status
            );
        }
        std::fs::rename(&tmp, path).with_context(what)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let (mut store, _) = a.db.open_existing()?;
    let sel = match (&a.run, &a.label) {
        (Some(r), _) => r.clone(),
        (None, Some(l)) => format!("label:{l}"),
        (None, None) => "latest".into(),
    };
    let (id, doc) = find_run(store.as_mut(), &sel)?;
    if let Some(path) = &a.html {
        write_html(path, &html::render_report(id, &doc))?;
    }
    if let Some(path) = &a.pdf {
        let record = html::render_report_with(id, &doc, html::ReportOptions { record: true });
        write_pdf(path, &record)?;
    }
    let mut out = std::io::stdout().lock();
    super::print_text(&rtgauge_report::terminal::render_show(id, &doc))?;
    if let Some(p) = &a.html {
        writeln!(out, "report: {}", p.display())?;
    }
    if let Some(p) = &a.pdf {
        writeln!(out, "record: {}", p.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

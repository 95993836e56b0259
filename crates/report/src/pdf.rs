//! The qualification record as PDF, and its text read back: the record page (`crate::html` with
//! `ReportOptions { record: true }`) printed by headless Chromium, and a PDF's text extracted by
//! `pdftotext` for `rtgauge verify`. Both programs are started through `rtgauge_programs`, the one
//! registry of the programs rtgauge starts (deps/programs.tsv names their packages).

use rtgauge_programs as programs;
use std::path::{Path, PathBuf};

/// Why a record could not be printed or read.
#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    /// No Chromium on PATH.
    #[error("headless Chromium is needed to print the record and none was found on PATH (install chromium)")]
    NoChromium,
    /// The folder the PDF goes to does not exist.
    #[error("no directory {0}")]
    NoDirectory(PathBuf),
    /// A file of the print could not be written.
    #[error("{}", .0.display())]
    File(PathBuf, #[source] std::io::Error),
    /// The printed record could not be put where it was asked (the caller names that place).
    #[error(transparent)]
    Place(std::io::Error),
    /// Chromium could not be started.
    #[error("running {}", .0.display())]
    Start(PathBuf, #[source] std::io::Error),
    /// Chromium ran but printed nothing.
    #[error("{} did not print the record ({status}): {last}", .browser.display())]
    NotPrinted {
        /// The browser run.
        browser: PathBuf,
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last line it wrote to stderr.
        last: String,
    },
    /// `pdftotext` could not be started.
    #[error("reading a PDF needs {0}")]
    NoPdftotext(String),
    /// `pdftotext` refused the file.
    #[error("not a readable PDF (pdftotext: {0})")]
    Unreadable(String),
}

/// The last non-empty line a tool wrote to `stderr` ("no output" when none): the one line an error about
/// that tool quotes.
fn last_stderr_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .to_string()
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

/// Print the record page `html` to `path` as PDF (`-` = standard output) with headless Chromium: the page
/// goes to a private temporary directory (Chromium reads a file:// URL; its profile goes there too, so
/// nothing of the user's is touched), and the PDF is written beside the target and renamed into place, so
/// a failed print leaves no half file.
pub fn print_record(path: &Path, html: &str) -> Result<(), PdfError> {
    let browser = chromium().ok_or(PdfError::NoChromium)?;
    let stdout = path.as_os_str() == "-";
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !stdout && !parent.is_dir() {
        return Err(PdfError::NoDirectory(parent.to_path_buf()));
    }
    let dir = std::env::temp_dir().join(format!("rtgauge-pdf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| PdfError::File(dir.clone(), e))?;
    let tmp = match stdout {
        true => dir.join("record.pdf"),
        false => {
            let name = path
                .file_name()
                .map_or_else(|| "record.pdf".into(), |n| n.to_string_lossy().into_owned());
            path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
        }
    };
    let result = print_to(&browser, &dir, html, &tmp).and_then(|()| match stdout {
        true => {
            let bytes = std::fs::read(&tmp).map_err(|e| PdfError::File(tmp.clone(), e))?;
            use std::io::Write as _;
            std::io::stdout()
                .lock()
                .write_all(&bytes)
                .map_err(PdfError::Place)
        }
        false => std::fs::rename(&tmp, path).map_err(PdfError::Place),
    });
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Chromium prints `html` (written into `dir`, with its profile) to `pdf`.
fn print_to(browser: &Path, dir: &Path, html: &str, pdf: &Path) -> Result<(), PdfError> {
    let page = dir.join("record.html");
    std::fs::write(&page, html).map_err(|e| PdfError::File(page.clone(), e))?;
    let out = programs::command(browser)
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
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| PdfError::Start(browser.to_path_buf(), e))?;
    let printed = std::fs::metadata(pdf).is_ok_and(|m| m.len() > 0);
    if !out.status.success() || !printed {
        return Err(PdfError::NotPrinted {
            browser: browser.to_path_buf(),
            status: out.status,
            last: last_stderr_line(&out.stderr),
        });
    }
    Ok(())
}

/// The text of the PDF at `path`, through `pdftotext`.
pub fn text_of(path: &Path) -> Result<String, PdfError> {
    let out = programs::command("pdftotext")
        .args(["-enc", "UTF-8"])
        .arg(path)
        .arg("-")
        .output()
        .map_err(|e| PdfError::NoPdftotext(programs::not_found("pdftotext", &e)))?;
    if !out.status.success() {
        return Err(PdfError::Unreadable(
            last_stderr_line(&out.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

//! Writing a verb's documents to files: the run document (`--output`), rt-tests JSON (`--json`), atomically.

use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus, SystemInfo};

// The envelope itself (tool, command line, timestamps) is a format: it lives in rtgauge-formats.
pub use rtgauge_formats::envelope::{command_line, now_rfc2822, now_rfc3339};

/// A run document of this machine (`rtgauge_formats::envelope::document`) with its unmet conditions.
pub fn document(
    started_at: String,
    system: SystemInfo,
    probes: Vec<ProbeResult>,
    status: RunStatus,
    warnings: Vec<String>,
) -> rtgauge_model::run::RunDocument {
    let mut doc = rtgauge_formats::envelope::document(started_at, system, probes, status, warnings);
    doc.unmet = unmet(&doc.probes);
    doc
}

/// The conditions `probes` asked for and did not get, each with the cause this process shows (its
/// capabilities, limits, cgroups: `rtgauge_host::privilege`).
pub fn unmet(probes: &[ProbeResult]) -> Vec<rtgauge_model::conditions::Unmet> {
    explain(rtgauge_analysis::conditions::unmet(probes))
}

/// [`unmet`] of results of one kind, before they are `ProbeResult`s.
pub fn unmet_of<R: rtgauge_analysis::kind::KindData>(
    results: &[R],
) -> Vec<rtgauge_model::conditions::Unmet> {
    explain(rtgauge_analysis::conditions::of_results(
        results
            .iter()
            .map(|r| r as &dyn rtgauge_analysis::kind::KindData),
    ))
}

/// `unmet`, each with the cause this process shows.
pub fn explain(
    mut unmet: Vec<rtgauge_model::conditions::Unmet>,
) -> Vec<rtgauge_model::conditions::Unmet> {
    if !unmet.is_empty() {
        let p = rtgauge_host::privilege::read_privilege(&rtgauge_host::HostRoot::live());
        for u in &mut unmet {
            p.explain(u);
        }
    }
    unmet
}

/// Write a verb's one-probe run document to its `--output` file.
pub fn write_output(
    path: &std::path::Path,
    started_at: String,
    system: SystemInfo,
    probe: ProbeResult,
    status: RunStatus,
    warnings: Vec<String>,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let doc = document(started_at, system, vec![probe], status, warnings);
    write_json(path, &doc).with_context(|| format!("--output {}", path.display()))
}

/// Whether an `--output` path means stdout (`-`).
pub fn is_stdout(path: &std::path::Path) -> bool {
    path.as_os_str() == "-"
}

/// `--output` written in two steps: a file now, before the verb prints (a closed stdout, `| head`, then does
/// not cost the file), the JSON for `-` by [`write_output_to_stdout`] after the verb's text, where it has
/// always been.
pub fn write_output_file(
    path: Option<&std::path::Path>,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    match path {
        Some(p) if !is_stdout(p) => {
            write_json(p, value).with_context(|| format!("--output {}", p.display()))
        }
        _ => Ok(()),
    }
}

/// The second step of [`write_output_file`]: the JSON on stdout when `--output` is `-`.
pub fn write_output_to_stdout(
    path: Option<&std::path::Path>,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    match path {
        Some(p) if is_stdout(p) => write_json(p, value),
        _ => Ok(()),
    }
}

/// Write `value` as pretty JSON to `path` (`-` = stdout), atomically for files (temp file + rename) so an
/// interrupted write never leaves a truncated document behind.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    let mut text = serde_json::to_string_pretty(value).context("serialising JSON")?;
    text.push('\n');
    if is_stdout(path) {
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing JSON to stdout")?;
        return Ok(());
    }
    write_atomic(path, text.as_bytes())
}

/// Write `bytes` to `path` through a temporary file and a rename (`-` = stdout; a device or a pipe is
/// written in place).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    if is_stdout(path) {
        return std::io::stdout()
            .lock()
            .write_all(bytes)
            .context("writing to stdout");
    }
    // A device or a pipe (/dev/stdout, /dev/null, a FIFO, a process substitution) is written in place: a
    // rename over it would replace it with a regular file, or fail where the write would work.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()));
    }
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Write an rt-tests JSON document (`--json`) for a run of this process that started at `start_rfc2822`.
pub fn write_rt_tests_json(
    path: &std::path::Path,
    start_rfc2822: &str,
    system: &SystemInfo,
    render: impl FnOnce(&rtgauge_formats::rttests::Envelope<'_>) -> serde_json::Value,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let cmdline = command_line().join(" ");
    let end = now_rfc2822();
    let env = rtgauge_formats::rttests::Envelope {
        cmdline: &cmdline,
        version: env!("CARGO_PKG_VERSION"),
        start_time: start_rfc2822,
        end_time: &end,
        return_code: 0,
        system,
    };
    write_json(path, &render(&env)).with_context(|| format!("--json {}", path.display()))
}

/// Write a run's document where a refused store is least likely to be: beside the store `db`
/// (`unstored/rtgauge-run-…json`: a locked or read-only database file in a writable directory), else the
/// temporary directory, else the current one. The file written, or why none could be.
pub fn fallback_file(
    db: Option<&std::path::Path>,
    doc: &RunDocument,
) -> anyhow::Result<std::path::PathBuf> {
    let name = format!(
        "rtgauge-run-{}-{}.json",
        doc.started_at.replace([':', '+'], "-"),
        std::process::id()
    );
    let dirs = [
        rtgauge_flags::store_dir(db).join("unstored"),
        std::env::temp_dir(),
        std::path::PathBuf::from("."),
    ];
    let mut tried = Vec::new();
    for d in dirs {
        let p = d.join(&name);
        let r = std::fs::create_dir_all(&d)
            .map_err(anyhow::Error::from)
            .and_then(|_| write_json(&p, doc));
        match r {
            Ok(()) => return Ok(p),
            Err(e) => tried.push(format!("{}: {e:#}", p.display())),
        }
    }
    anyhow::bail!("{}", tried.join("; "))
}

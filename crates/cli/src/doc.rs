//! Building the run document around probe results: tool, command line, timestamps, system facts.

use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus, SystemInfo, ToolInfo};

pub fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "rtgauge".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The command line as the user typed it, one argument per element.
pub fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// RFC 3339 UTC timestamp of now.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// RFC 2822 local timestamp of now, as rt-tests writes it.
pub fn now_rfc2822() -> String {
    chrono::Local::now().to_rfc2822()
}

pub fn document(
    started_at: String,
    system: SystemInfo,
    probes: Vec<ProbeResult>,
    status: RunStatus,
    warnings: Vec<String>,
) -> RunDocument {
    RunDocument {
        schema_version: rtgauge_model::SCHEMA_VERSION,
        uuid: Some(rtgauge_model::run::new_uuid()),
        tool: tool_info(),
        command_line: command_line(),
        started_at,
        ended_at: now_rfc3339(),
        system,
        probes,
        status,
        warnings,
        label: None,
        tags: Default::default(),
        profile: None,
        fingerprint: None,
        audit: None,
        verdicts: Vec::new(),
        imported_from: None,
    }
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

/// Write `value` as pretty JSON to `path` (`-` = stdout), atomically for files (temp file + rename) so an
/// interrupted write never leaves a truncated document behind.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    let mut text = serde_json::to_string_pretty(value).context("serialising JSON")?;
    text.push('\n');
    if path.as_os_str() == "-" {
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing JSON to stdout")?;
        return Ok(());
    }
    write_atomic(path, text.as_bytes())
}

/// Write `bytes` to `path` through a temporary file and a rename (`-` = stdout).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    if path.as_os_str() == "-" {
        return std::io::stdout()
            .lock()
            .write_all(bytes)
            .context("writing to stdout");
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
    render: impl FnOnce(&rtgauge_report::rttests::Envelope<'_>) -> serde_json::Value,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let cmdline = command_line().join(" ");
    let end = now_rfc2822();
    let env = rtgauge_report::rttests::Envelope {
        cmdline: &cmdline,
        version: env!("CARGO_PKG_VERSION"),
        start_time: start_rfc2822,
        end_time: &end,
        return_code: 0,
        system,
    };
    write_json(path, &render(&env)).with_context(|| format!("--json {}", path.display()))
}

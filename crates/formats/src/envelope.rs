//! The run document's envelope: which tool wrote it, the command line, the timestamps, around the probe
//! results and system facts a verb measured.

use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus, SystemInfo, ToolInfo};

/// rtgauge and its version (every crate of the workspace carries the workspace's version).
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

/// A stored RFC 3339 timestamp as rt-tests writes one (RFC 2822); unchanged when it does not parse.
pub fn rfc2822(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.to_rfc2822())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// The document of a run of this process that started at `started_at` and ends now.
pub fn document(
    started_at: String,
    system: SystemInfo,
    probes: Vec<ProbeResult>,
    status: RunStatus,
    warnings: Vec<String>,
) -> RunDocument {
    let mut doc = RunDocument::new(
        tool_info(),
        command_line(),
        started_at,
        now_rfc3339(),
        system,
        probes,
        status,
    );
    // A run of this machine gets its globally unique id at birth (push to a central store relies on it).
    doc.uuid = Some(rtgauge_model::run::new_uuid());
    doc.warnings = warnings;
    doc
}

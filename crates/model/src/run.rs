//! The run document: one self-describing, versioned record of everything a run measured and the conditions
//! it was taken under. Every view (terminal, JSON, HTML, CSV) is rendered from it.

use crate::cyclic::CyclicResult;
use crate::oslat::OslatResult;
use crate::CpuSet;
use serde::{Deserialize, Serialize};

/// Name and version of the tool that wrote a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

/// The minimum system facts every result carries (uname, real-time kernel flag, CPUs). The full platform
/// fingerprint is added by the host crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemInfo {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
    /// `/sys/kernel/realtime` is 1 (PREEMPT_RT kernel).
    pub realtime: bool,
    pub cpus_online: CpuSet,
    pub clocksource: Option<String>,
}

/// One probe's result, tagged by probe kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "probe", rename_all = "snake_case")]
pub enum ProbeResult {
    Cyclic(CyclicResult),
    Oslat(OslatResult),
}

/// Whether a run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Complete,
    Interrupted,
}

/// A run document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// The command line, one element per argument (no quoting ambiguity).
    pub command_line: Vec<String>,
    /// RFC 3339 timestamps.
    pub started_at: String,
    pub ended_at: String,
    pub system: SystemInfo,
    pub probes: Vec<ProbeResult>,
    pub status: RunStatus,
    /// Warnings the run printed (settings not achieved, …), kept with the result.
    #[serde(default)]
    pub warnings: Vec<String>,
}

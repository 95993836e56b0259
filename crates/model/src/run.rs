//! The run document: one self-describing, versioned record of everything a run measured and the conditions
//! it was taken under. Every view (terminal, JSON, HTML, CSV) is rendered from it.

use crate::audit::AuditReport;
use crate::conditions::Unmet;
use crate::fingerprint::Fingerprint;
pub use crate::kind::ProbeResult;
use crate::kind::{ProbeKind, RunFacts};
use crate::verdict::GateVerdict;
use crate::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Name and version of the tool that wrote a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Tool name ("rtgauge", or "cyclictest"/"oslat" for imported runs).
    pub name: String,
    /// Tool version.
    pub version: String,
}

/// The minimum system facts every result carries (uname, real-time kernel flag, CPUs). The full platform
/// fingerprint is added by the host crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemInfo {
    /// Kernel name (`uname -s`).
    pub sysname: String,
    /// Host name (`uname -n`).
    pub nodename: String,
    /// Kernel release (`uname -r`).
    pub release: String,
    /// Kernel build version (`uname -v`).
    pub version: String,
    /// Hardware name (`uname -m`).
    pub machine: String,
    /// `/sys/kernel/realtime` is 1 (PREEMPT_RT kernel).
    pub realtime: bool,
    /// Online logical CPUs.
    pub cpus_online: CpuSet,
    /// Clocksource in use; `None` if unreadable.
    pub clocksource: Option<String>,
}

/// Whether a run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still being measured (a stored checkpoint).
    Running,
    /// Measured to its end.
    Complete,
    /// Ended early: by a signal, or the process died and the run holds its last checkpoint.
    Interrupted,
}

impl RunStatus {
    /// The serialised name: "running", "complete" or "interrupted".
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// Where a run came from when it was not measured by rtgauge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportSource {
    /// `cyclictest-json`, `cyclictest-text`, `oslat-json`, …
    pub format: String,
    /// The file it was read from, as named on the command line.
    pub file: String,
    /// Resolution of the imported values, ns (1000 for µs histograms).
    pub resolution_ns: u64,
}

impl RunDocument {
    /// Whether the run's missed deadlines were counted: not for an imported cyclictest result (cyclictest
    /// skips a period that is already over at wake-up and counts nothing), where they are unknown.
    pub fn missed_deadlines_known(&self) -> bool {
        !self
            .imported_from
            .as_ref()
            .is_some_and(|i| i.format.starts_with("cyclictest"))
    }

    /// What the document knows about its results that no result holds.
    pub fn facts(&self) -> RunFacts {
        RunFacts {
            missed_deadlines_known: self.missed_deadlines_known(),
        }
    }
}

/// A run document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    /// Schema version of the document ([`crate::SCHEMA_VERSION`] when written).
    pub schema_version: u32,
    /// Globally unique id of the run (UUID v4, given when the run starts), so a run pushed to a central store
    /// twice, or from a resumed push, is stored once. Documents written before it existed have none; stores
    /// give them [`RunDocument::derived_uuid`] when they first open them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The tool that wrote the document.
    pub tool: ToolInfo,
    /// The command line, one element per argument (no quoting ambiguity).
    pub command_line: Vec<String>,
    /// RFC 3339 timestamps.
    pub started_at: String,
    /// RFC 3339 timestamp of the end (of the last checkpoint while running).
    pub ended_at: String,
    /// The minimum system facts.
    pub system: SystemInfo,
    /// One result per probe run, in the order run.
    pub probes: Vec<ProbeResult>,
    /// Whether the run finished.
    pub status: RunStatus,
    /// Warnings the run printed (settings not achieved, …), kept with the result.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Free-form name for comparisons (`bare-metal`, `esxi-guest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Free-form `key=value` tags (`--tag`); empty when none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Profile that was run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The full platform fingerprint; `None` for imported runs and single-probe verbs without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
    /// The tuning audit taken with the run; `None` when not audited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditReport>,
    /// One verdict per requirement gate of the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<GateVerdict>,
    /// Where the run came from when it was imported; `None` when rtgauge measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportSource>,
    /// The run is one of several made back to back by `rtgauge run --repeat N`; `None` for a run made alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<RepeatOf>,
    /// The conditions asked for and not got (a real-time policy refused, memory not locked, …), one per
    /// cause; empty when the run got all it asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmet: Vec<Unmet>,
    /// Who accepted judging the run although its conditions fell short (`--allow-degraded`, or the
    /// profile's `allow_degraded`); `None` when nobody did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_allowed_by: Option<String>,
    /// Probes of the profile this platform cannot run (a kernel without the hwlat tracer for `hwnoise`),
    /// with the reason: not measured, and their gates skipped rather than failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedProbe>,
}

/// A probe of the profile that was not run because the platform cannot run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedProbe {
    /// Its kind.
    pub kind: ProbeKind,
    /// Why, and what would make it possible ("this kernel has no hwlat tracer … boot …").
    pub why: String,
}

/// A run's place among the runs of one `rtgauge run --repeat N`: the same profile, label and settings measured
/// N times back to back, so that a comparison can judge the platform by the variation between its runs
/// (one run cannot show it: idle runs of one VM differed 1.6× in p50, docs/report.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatOf {
    /// Shared by every run of the group: a UUID v4 drawn before the first run.
    pub group: String,
    /// This run's place in the group, from 1.
    pub index: u32,
    /// How many runs the group was asked for (fewer are stored when a signal ended it early).
    pub count: u32,
}

impl RepeatOf {
    /// Why a group read from a file is not one rtgauge writes (checked on import): a group id that is not a
    /// canonical UUID, a count below 2, or an index outside 1..=count.
    pub fn check(&self) -> Result<(), String> {
        if !is_canonical_uuid(&self.group) {
            let shown: String = self.group.chars().take(40).collect();
            return Err(format!(
                "group '{}' is not a UUID in canonical form",
                shown.escape_debug()
            ));
        }
        if self.count < 2 || self.index == 0 || self.index > self.count {
            return Err(format!(
                "run {} of {} is not a place in a group of repeats",
                self.index, self.count
            ));
        }
        Ok(())
    }
}

impl RunDocument {
    /// A document of the current schema around `probes`; label, tags, profile, fingerprint, audit,
    /// verdicts, warnings and import source empty, for the caller to fill. The one constructor, so a new
    /// field has one place to get its default.
    pub fn new(
        tool: ToolInfo,
        command_line: Vec<String>,
        started_at: String,
        ended_at: String,
        system: SystemInfo,
        probes: Vec<ProbeResult>,
        status: RunStatus,
    ) -> RunDocument {
        RunDocument {
            schema_version: crate::SCHEMA_VERSION,
            uuid: None,
            tool,
            command_line,
            started_at,
            ended_at,
            system,
            probes,
            status,
            warnings: Vec::new(),
            label: None,
            tags: BTreeMap::new(),
            profile: None,
            fingerprint: None,
            audit: None,
            verdicts: Vec::new(),
            imported_from: None,
            repeat: None,
            unmet: Vec::new(),
            degraded_allowed_by: None,
            skipped: Vec::new(),
        }
    }
}

/// Namespace of the name-based (v5) ids derived for documents that carry no `uuid` (a fixed random UUID:
/// changing it would give every old run a new id, and a second copy in each central store).
const DERIVED_UUID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x5c0e_4a4f_9d2b_4c61_8f3e_27a1_b0d4_e915);

/// How a run whose host gave no node name (an rt-tests text import says none) is shown, grouped and
/// selected (`fleet`, `compare --host`).
pub const UNKNOWN_HOST: &str = "(unknown host)";

/// The host name shown for a run's node name: [`UNKNOWN_HOST`] when it is empty.
pub fn host_name(nodename: &str) -> &str {
    if nodename.trim().is_empty() {
        UNKNOWN_HOST
    } else {
        nodename
    }
}

/// A new random run id (UUID v4).
pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Whether `text` is a run id as rtgauge writes one: a UUID in the canonical RFC 4122 text form (8-4-4-4-12
/// lowercase hex digits), not the nil UUID. Stores and pushes match runs by this string, so another spelling
/// of the same UUID (upper case, braces, a URN) would store the run twice, and the nil UUID would make
/// every run carrying it "the same run".
pub fn is_canonical_uuid(text: &str) -> bool {
    uuid::Uuid::try_parse(text).is_ok_and(|u| !u.is_nil() && u.hyphenated().to_string() == text)
}

/// The first character of a label, host name or tag that may not be in one: a control character (C0 with
/// newline and tab, DEL, C1) or a Unicode format character (general category Cf: the bidirectional
/// controls, zero-width space and joiners, soft hyphen, BOM, tag characters). Shown as it is, such a name
/// recolours or rewrites the terminal, breaks a table row, reorders the line it is in, or looks like another
/// name; it is refused where names come in (the command line, an imported file) rather than stored.
pub fn forbidden_in_name(name: &str) -> Option<char> {
    name.chars().find(|&c| c.is_control() || is_format_char(c))
}

/// Whether `c` is a Unicode format character (general category Cf): invisible, yet it reorders text (the
/// bidi controls), joins or splits it (zero-width joiners, space), or hides in it (BOM, tag characters).
pub fn is_format_char(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory as _};
    c.general_category() == GeneralCategory::Format
}

impl RunDocument {
    /// The id of an old document without `uuid`: UUID v5 of its stored JSON text (`stored_json`, the exact
    /// bytes the store holds), so the same stored run gets the same id in every store and on every push. Two
    /// byte-identical documents get the same id: the store that backfills ids separates them with `salt`.
    pub fn derived_uuid(stored_json: &str, salt: Option<i64>) -> String {
        let name = match salt {
            None => stored_json.to_string(),
            Some(s) => format!("{stored_json}#{s}"),
        };
        uuid::Uuid::new_v5(&DERIVED_UUID_NAMESPACE, name.as_bytes()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_uuids_and_printable_names_pass() {
        assert!(is_canonical_uuid(&new_uuid()));
        assert!(is_canonical_uuid("390f6b66-ba95-43b4-9012-575d3c6e26cd"));
        for bad in [
            "",
            "not-a-uuid",
            "390F6B66-BA95-43B4-9012-575D3C6E26CD",
            "390f6b66ba9543b49012575d3c6e26cd",
            "{390f6b66-ba95-43b4-9012-575d3c6e26cd}",
            "urn:uuid:390f6b66-ba95-43b4-9012-575d3c6e26cd",
            "00000000-0000-0000-0000-000000000000",
            &"a".repeat(300),
        ] {
            assert!(!is_canonical_uuid(bad), "{bad}");
        }
        assert_eq!(forbidden_in_name("esxi-guest µs ü"), None);
        assert_eq!(forbidden_in_name("a\u{1b}[31mb"), Some('\u{1b}'));
        assert_eq!(forbidden_in_name("two\nlines"), Some('\n'));
        assert_eq!(forbidden_in_name("tab\there"), Some('\t'));
        assert_eq!(forbidden_in_name("c1\u{9b}"), Some('\u{9b}'));
        assert_eq!(forbidden_in_name("abc\u{202e}fed"), Some('\u{202e}'));
        // Format characters (Cf) beyond the bidi controls: invisible, a name that looks like another.
        for c in [
            '\u{200b}',
            '\u{200d}',
            '\u{00ad}',
            '\u{feff}',
            '\u{2060}',
            '\u{e0041}',
        ] {
            assert_eq!(
                forbidden_in_name(&format!("host{c}1")),
                Some(c),
                "U+{:04X}",
                c as u32
            );
        }
    }
}

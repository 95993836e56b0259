//! Audit findings: the verdict of one catalogue rule (rule ids of the audit catalogue, e.g. `cmdline-isolcpus`) on one host,
//! guest or definition file, with the evidence that decided it.
//!
//! Invariants: `id` is a catalogue rule id, stable across versions; every finding carries the evidence it was
//! judged on (what, where, value) so a reader can re-check it; `info` severity never yields `fail`.

use crate::{CpuSet, Nanos};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Verdict of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Status {
    /// The system meets the rule.
    #[serde(rename = "pass")]
    Pass,
    /// Acceptable only with a caveat (a weaker setting, or a risk the rule cannot rule out); not a failure.
    #[serde(rename = "warn")]
    Warn,
    /// The system does not meet the rule.
    #[serde(rename = "fail")]
    Fail,
    /// The rule does not apply here (e.g. no RT CPU set declared, guest-only rule on a host).
    #[serde(rename = "n/a")]
    NotApplicable,
    /// The rule applies but its inputs could not be read (permissions, missing debugfs…).
    #[serde(rename = "unavailable")]
    Unavailable,
}

impl Status {
    /// The serialised name: "pass", "warn", "fail", "n/a" or "unavailable".
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::NotApplicable => "n/a",
            Status::Unavailable => "unavailable",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much a failing rule usually costs (catalogue convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Usually breaks isolation or causes spikes of tens of µs or more.
    High,
    /// Measurable jitter.
    Medium,
    /// Hygiene, or a small effect.
    Low,
    /// Evidence only; such a rule never fails.
    Info,
}

impl Severity {
    /// The serialised name: "high", "medium", "low" or "info".
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the audited system is meant to be; several verdicts depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A bare-metal host running real-time workloads itself.
    BareMetalRtHost,
    /// A KVM host whose guests run real-time workloads.
    KvmRtHost,
    /// A virtual machine running a real-time workload.
    RtGuest,
    /// A Kubernetes node running real-time pods.
    K8sRtNode,
}

impl Target {
    /// The name used on the command line and in documents ("bare-metal-rt-host", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Target::BareMetalRtHost => "bare-metal-rt-host",
            Target::KvmRtHost => "kvm-rt-host",
            Target::RtGuest => "rt-guest",
            Target::K8sRtNode => "k8s-rt-node",
        }
    }
    /// The target named `name` (as [`Target::as_str`] writes it), or `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Target> {
        [
            Target::BareMetalRtHost,
            Target::KvmRtHost,
            Target::RtGuest,
            Target::K8sRtNode,
        ]
        .into_iter()
        .find(|t| t.as_str() == name)
    }
    /// Whether the target is a guest (VM), where guest-only rules apply.
    pub fn is_guest(self) -> bool {
        self == Target::RtGuest
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing that was read: what it is, where (kernel path, `file:line`, or `cpuid`), and the value seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was read ("isolcpus", "clocksource", ...).
    pub what: String,
    /// Where it was read: kernel path, `file:line`, or `cpuid`.
    pub source: String,
    /// The value seen, verbatim.
    pub value: String,
}

impl Evidence {
    /// Evidence that `what` read from `source` was `value`.
    pub fn new(
        what: impl Into<String>,
        source: impl Into<String>,
        value: impl Into<String>,
    ) -> Evidence {
        Evidence {
            what: what.into(),
            source: source.into(),
            value: value.into(),
        }
    }
}

/// The verdict of one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Catalogue rule id, verbatim.
    pub id: String,
    /// The rule's verdict.
    pub status: Status,
    /// How much failing this rule usually costs.
    pub severity: Severity,
    /// One line: why this status.
    pub summary: String,
    /// What was read to reach the status.
    pub evidence: Vec<Evidence>,
    /// What the rule expects to see, in one line.
    pub expected: String,
    /// The exact parameter, key or command that fixes it.
    pub remediation: String,
    /// Catalogue source keys (`[T1][K1]`).
    pub source: String,
}

/// What was audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// This host, live or a captured tree (`--root`).
    Host,
    /// A VMware .vmx file.
    Vmx,
    /// A libvirt domain XML file.
    Libvirt,
    /// A Kubernetes pod or kubelet definition (YAML).
    K8s,
}

/// Counts per status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Rules that passed.
    pub pass: u32,
    /// Rules that warned.
    pub warn: u32,
    /// Rules that failed.
    pub fail: u32,
    /// Rules that do not apply here.
    pub not_applicable: u32,
    /// Rules whose inputs could not be read.
    pub unavailable: u32,
}

impl Summary {
    /// Count the findings per status.
    pub fn of(findings: &[Finding]) -> Summary {
        let mut s = Summary::default();
        for f in findings {
            match f.status {
                Status::Pass => s.pass += 1,
                Status::Warn => s.warn += 1,
                Status::Fail => s.fail += 1,
                Status::NotApplicable => s.not_applicable += 1,
                Status::Unavailable => s.unavailable += 1,
            }
        }
        s
    }
}

/// A whole audit: of a host (live or captured tree) or of one definition file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// What kind of thing was audited.
    pub subject: Subject,
    /// Host root directory or definition file path.
    pub location: String,
    /// What the system is meant to be; `None` when neither given nor detected.
    pub target: Option<Target>,
    /// `operator`, or how the target was detected (`auto: …`).
    pub target_source: Option<String>,
    /// The RT CPU set I the isolation rules judged against.
    pub isolated: Option<CpuSet>,
    /// Which input declared I (catalogue §0 order).
    pub isolated_source: Option<String>,
    /// Interval between the two samples of sampled rules; `None` when sampling was skipped.
    pub sample_interval: Option<Nanos>,
    /// One finding per rule, in catalogue order.
    pub findings: Vec<Finding>,
    /// The findings counted per status.
    pub summary: Summary,
}

impl AuditReport {
    /// Whether any rule failed (exit code 1).
    pub fn failed(&self) -> bool {
        self.findings.iter().any(|f| f.status == Status::Fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_serialises_as_catalogue_words() {
        assert_eq!(
            serde_json::to_string(&Status::NotApplicable).unwrap(),
            "\"n/a\""
        );
        assert_eq!(
            serde_json::to_string(&Target::K8sRtNode).unwrap(),
            "\"k8s-rt-node\""
        );
        assert_eq!(Target::parse("rt-guest"), Some(Target::RtGuest));
        assert_eq!(Target::parse("guest"), None);
    }

    #[test]
    fn summary_counts_and_failed() {
        let f = |status| Finding {
            id: "x".into(),
            status,
            severity: Severity::Low,
            summary: String::new(),
            evidence: vec![],
            expected: String::new(),
            remediation: String::new(),
            source: String::new(),
        };
        let findings = vec![f(Status::Pass), f(Status::Fail), f(Status::NotApplicable)];
        let s = Summary::of(&findings);
        assert_eq!((s.pass, s.fail, s.not_applicable), (1, 1, 1));
    }
}

//! Linters of VM and pod definitions: VMware `.vmx`, libvirt domain XML, Kubernetes YAML (pod, Deployment,
//! KubeletConfiguration, PerformanceProfile), with the catalogue's rules for each (sections 9–11).
//!
//! Invariants: pure functions of the file text (the CLI reads the file); a malformed file is a [`LintError`]
//! naming the file and line, never a panic; every finding's evidence names the line it read (`file:line`), or
//! says the key is absent.

pub mod k8s;
pub mod libvirt;
pub mod vmx;

use rtgauge_model::audit::{AuditReport, Evidence, Finding, Severity, Status, Subject, Summary};

/// A definition file that cannot be linted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LintError {
    #[error("{file}:{line}: {reason}")]
    Malformed {
        file: String,
        line: usize,
        reason: String,
    },
    /// The input is beyond the bounds a linter accepts (an alias bomb, nesting too deep, too large).
    #[error("{file}:{line}: refused: {reason}")]
    Refused {
        file: String,
        line: usize,
        reason: String,
    },
}

/// Catalogue metadata of one lint rule.
pub(crate) struct LintRule {
    pub id: &'static str,
    pub severity: Severity,
    pub expected: &'static str,
    pub remediation: &'static str,
    pub source: &'static str,
}

/// Builds one finding of a lint rule.
pub(crate) fn finding(
    rule: &LintRule,
    status: Status,
    summary: impl Into<String>,
    evidence: Vec<Evidence>,
) -> Finding {
    Finding {
        id: rule.id.to_string(),
        status: if rule.severity == Severity::Info && status == Status::Fail {
            Status::Warn
        } else {
            status
        },
        severity: rule.severity,
        summary: summary.into(),
        evidence,
        expected: rule.expected.to_string(),
        remediation: rule.remediation.to_string(),
        source: rule.source.to_string(),
    }
}

pub(crate) fn report(subject: Subject, file: &str, findings: Vec<Finding>) -> AuditReport {
    AuditReport {
        subject,
        location: file.to_string(),
        target: None,
        target_source: None,
        isolated: None,
        isolated_source: None,
        sample_interval: None,
        summary: Summary::of(&findings),
        findings,
    }
}

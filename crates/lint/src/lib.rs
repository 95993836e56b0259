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
    /// The file does not parse as the format the linter reads.
    #[error("{file}:{line}: {reason}")]
    Malformed {
        /// The file as the operator named it.
        file: String,
        /// 1-based line of the fault (0 when the whole file is at fault).
        line: usize,
        /// What is wrong, in one line.
        reason: String,
    },
    /// The input is beyond the bounds a linter accepts (an alias bomb, nesting too deep, too large).
    #[error("{file}:{line}: refused: {reason}")]
    Refused {
        /// The file as the operator named it.
        file: String,
        /// 1-based line where the bound was passed.
        line: usize,
        /// Which bound, in one line.
        reason: String,
    },
}

/// One lint rule, the shape the three linters share: catalogue metadata and the check that judges it. `F` is
/// the linter's check type, `fn(&Facts) -> Vec<LintOutcome>` over what that linter parsed; the audit's
/// rules (rtgauge_audit's `Rule`, returning a `RuleOutcome`) have the same shape over host facts.
pub(crate) struct LintRule<F> {
    pub id: &'static str,
    pub severity: Severity,
    pub expected: &'static str,
    pub remediation: &'static str,
    pub source: &'static str,
    pub check: F,
}

/// What a check found (most rules find one thing; a syntax rule finds one per bad line or document); the
/// rule adds its id, severity, expectation and source.
pub(crate) struct LintOutcome {
    pub status: Status,
    pub summary: String,
    pub evidence: Vec<Evidence>,
}

impl LintOutcome {
    pub fn new(status: Status, summary: impl Into<String>, evidence: Vec<Evidence>) -> LintOutcome {
        LintOutcome {
            status,
            summary: summary.into(),
            evidence,
        }
    }
    pub fn pass(summary: impl Into<String>, evidence: Vec<Evidence>) -> LintOutcome {
        LintOutcome::new(Status::Pass, summary, evidence)
    }
    pub fn warn(summary: impl Into<String>, evidence: Vec<Evidence>) -> LintOutcome {
        LintOutcome::new(Status::Warn, summary, evidence)
    }
    pub fn fail(summary: impl Into<String>, evidence: Vec<Evidence>) -> LintOutcome {
        LintOutcome::new(Status::Fail, summary, evidence)
    }
    pub fn na(summary: impl Into<String>, evidence: Vec<Evidence>) -> LintOutcome {
        LintOutcome::new(Status::NotApplicable, summary, evidence)
    }
    /// Fail with every problem, the warnings after them; warn with the warnings; else pass with `passed`.
    pub fn of_problems(
        mut fails: Vec<String>,
        warns: Vec<String>,
        passed: &str,
        evidence: Vec<Evidence>,
    ) -> LintOutcome {
        if !fails.is_empty() {
            fails.extend(warns);
            LintOutcome::fail(fails.join("; "), evidence)
        } else if !warns.is_empty() {
            LintOutcome::warn(warns.join("; "), evidence)
        } else {
            LintOutcome::pass(passed, evidence)
        }
    }
}

impl<F> LintRule<F> {
    /// The finding of one outcome of this rule; an `info` rule never fails (it warns).
    pub fn finding(&self, outcome: LintOutcome) -> Finding {
        Finding {
            id: self.id.to_string(),
            status: if self.severity == Severity::Info && outcome.status == Status::Fail {
                Status::Warn
            } else {
                outcome.status
            },
            severity: self.severity,
            summary: outcome.summary,
            evidence: outcome.evidence,
            expected: self.expected.to_string(),
            remediation: self.remediation.to_string(),
            source: self.source.to_string(),
        }
    }
}

/// Every rule of a table in order, each through `check` (which calls the rule's check on the linter's facts).
pub(crate) fn run_rules<F>(
    rules: &[LintRule<F>],
    check: impl Fn(&F) -> Vec<LintOutcome>,
) -> Vec<Finding> {
    rules
        .iter()
        .flat_map(|rule| {
            check(&rule.check)
                .into_iter()
                .map(move |outcome| rule.finding(outcome))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_info_rule_warns_where_its_check_fails() {
        let rule = |severity| LintRule {
            id: "x",
            severity,
            expected: "e",
            remediation: "r",
            source: "[s]",
            check: (),
        };
        let failed = || LintOutcome::fail("bad", Vec::new());
        assert_eq!(rule(Severity::Info).finding(failed()).status, Status::Warn);
        assert_eq!(rule(Severity::Low).finding(failed()).status, Status::Fail);
        let f = rule(Severity::Low).finding(LintOutcome::pass("ok", Vec::new()));
        assert_eq!((f.id.as_str(), f.summary.as_str()), ("x", "ok"));
        assert_eq!((f.expected.as_str(), f.source.as_str()), ("e", "[s]"));
    }

    #[test]
    fn problems_fail_before_warnings() {
        let o = LintOutcome::of_problems(vec!["a".into()], vec!["b".into()], "ok", Vec::new());
        assert_eq!((o.status, o.summary.as_str()), (Status::Fail, "a; b"));
        let o = LintOutcome::of_problems(Vec::new(), vec!["b".into()], "ok", Vec::new());
        assert_eq!((o.status, o.summary.as_str()), (Status::Warn, "b"));
        let o = LintOutcome::of_problems(Vec::new(), Vec::new(), "ok", Vec::new());
        assert_eq!((o.status, o.summary.as_str()), (Status::Pass, "ok"));
    }
}

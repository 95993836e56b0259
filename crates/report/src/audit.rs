//! The audit as text (`rtgauge audit`): the findings, their evidence and remediation.

use rtgauge_model::audit::{AuditReport, Status, Subject};

/// Text report: one line per finding, evidence and remediation under every finding that is not a pass.
pub fn render_text(report: &AuditReport, verbose: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!("audit of {} ({:?})\n", report.location, report.subject).to_lowercase());
    if let Some(t) = report.target {
        out.push_str(&format!(
            "target: {} ({})\n",
            t,
            report.target_source.as_deref().unwrap_or("-")
        ));
    }
    if report.subject == Subject::Host {
        out.push_str(&format!(
            "RT CPU set: {}\n",
            match (&report.isolated, &report.isolated_source) {
                (Some(s), Some(src)) => format!("{s} (from {src})"),
                _ => "none declared".into(),
            }
        ));
    }
    out.push('\n');
    for f in &report.findings {
        out.push_str(&format!(
            "{:<11} {:<6} {:<32} {}\n",
            f.status.as_str().to_uppercase(),
            f.severity.as_str(),
            f.id,
            f.summary
        ));
        let detail = verbose || matches!(f.status, Status::Fail | Status::Warn);
        if detail {
            for e in &f.evidence {
                out.push_str(&format!(
                    "            {}: {} = {}\n",
                    e.what, e.source, e.value
                ));
            }
            if matches!(f.status, Status::Fail | Status::Warn) {
                out.push_str(&format!("            expected: {}\n", f.expected));
                out.push_str(&format!("            fix: {}\n", f.remediation));
            }
        }
    }
    let s = &report.summary;
    out.push_str(&format!(
        "\n{} pass, {} warn, {} fail, {} n/a, {} unavailable\n",
        s.pass, s.warn, s.fail, s.not_applicable, s.unavailable
    ));
    out
}

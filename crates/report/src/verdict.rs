//! The verdict-first block at the top of a run page: "is this platform fit for <profile>?" answered with
//! the gates and their figures, the three most important audit failures with their fix, and the worst
//! spike with its cause, before any detail. A profile without gates gets its headline figures set against
//! the seeds' reference requirements (20 µs for RAN, seed 000; 120 µs for a virtual protection relay,
//! seed 003), so the quick profile's page still says where the platform stands.

use crate::spikes::{spike_line, why_of, worst_intervals};
use crate::units::us_label;
use maud::{html, Markup};
use rtgauge_analysis::judge::{is_duration, metric_label};
use rtgauge_analysis::kind::ProbeData;
use rtgauge_model::audit::{Finding, Status};
use rtgauge_model::run::{RunDocument, RunStatus};
use rtgauge_model::verdict::Outcome;

/// Reference requirements for gate-less profiles: (name, bound ns).
pub const REFERENCES: [(&str, u64); 2] = [
    ("RAN (VMware RAN white paper)", 20_000),
    ("VPR (VMware protection-relay guide)", 120_000),
];
/// Audit failures named in the block.
pub const TOP_FINDINGS: usize = 3;

/// The overall answer: a word and its CSS class. A run whose conditions fell short is not judged, whatever
/// its figures (unless a profile or flag accepted the degraded run: then it is judged, and says so).
pub fn answer(doc: &RunDocument) -> (&'static str, &'static str) {
    let v = &doc.verdicts;
    if v.iter().any(|v| v.outcome == Outcome::NotJudged) || (v.is_empty() && not_judged(doc)) {
        ("NOT JUDGED", "fail")
    } else if v.iter().any(|v| v.outcome == Outcome::Fail) {
        ("NOT FIT", "fail")
    } else if v.is_empty() {
        ("NO GATES", "warn")
    } else if v.iter().any(|v| v.outcome == Outcome::NoData)
        || rtgauge_model::verdict::all_skipped(v)
        || doc.status != RunStatus::Complete
    {
        ("INCONCLUSIVE", "warn")
    } else {
        ("FIT", "pass")
    }
}

/// Whether the run's conditions fell short in a way that bears on its figures and nobody accepted it.
pub fn not_judged(doc: &RunDocument) -> bool {
    rtgauge_model::conditions::degrades(&doc.unmet) && doc.degraded_allowed_by.is_none()
}

/// The run's unmet conditions, first in the verdict block: what fell short, its cause and fix, and what
/// that does to the verdict.
fn unmet_html(doc: &RunDocument) -> Markup {
    if doc.unmet.is_empty() {
        return html! {};
    }
    let degrades = rtgauge_model::conditions::degrades(&doc.unmet);
    html! {
        div.unmet {
            p class=(if degrades { "fail" } else { "warn" }) {
                strong { "Conditions not met. " }
                @if !degrades {
                    "The figures stand; what explains them is incomplete:"
                } @else if let Some(by) = &doc.degraded_allowed_by {
                    "The figures are of a run that did not get what it asked for; judged anyway, as " (by) " allows:"
                } @else {
                    "The figures are of a run that did not get what it asked for (not of this platform as \
                     asked): they are not judged."
                }
            }
            ul.unmet { @for u in &doc.unmet { li { (u.line()) } } }
        }
    }
}

/// The headline latency figures of a run: (what, largest value ns).
pub fn headlines(doc: &RunDocument) -> Vec<(String, u64)> {
    doc.probes
        .iter()
        .filter_map(|p| crate::kind::view(p).headline())
        .collect()
}

/// Failed audit findings, most severe first (the catalogue's order among equals).
pub fn top_failures(doc: &RunDocument) -> Vec<&Finding> {
    let mut f: Vec<&Finding> = doc
        .audit
        .iter()
        .flat_map(|a| &a.findings)
        .filter(|f| f.status == Status::Fail)
        .collect();
    f.sort_by_key(|f| f.severity);
    f
}

/// The worst spike of the run in words, when its latency probes carry attribution: the worst explained
/// episode's breakdown, else the worst timeline interval against its CPU's typical interval (what rose, or
/// that nothing in this kernel did and where that points).
pub fn worst_spike(doc: &RunDocument) -> Option<String> {
    let mut best: Option<(u64, String)> = None;
    let mut keep = |ns: u64, s: String| {
        if best.as_ref().is_none_or(|b| ns > b.0) {
            best = Some((ns, s));
        }
    };
    for p in &doc.probes {
        let Some((why, timelines)) = why_of(p.data()) else {
            continue;
        };
        if let Some(b) = why.episodes.iter().max_by_key(|b| b.worst()) {
            keep(b.worst(), spike_line(b));
            continue;
        }
        let normal = crate::kind::sched_shortfall(p.data()).is_some();
        for (cpu, w, sentence) in worst_intervals(why, &timelines, normal) {
            keep(
                w.max_ns,
                format!(
                    "CPU {cpu}, interval at {:.0} s, max {}: {sentence}",
                    w.start_ns as f64 / 1e9,
                    us_label(w.max_ns as f64),
                ),
            );
        }
    }
    best.map(|b| b.1)
}

/// The block itself: `<section id="verdict">`, the first section of every run page.
pub fn html(doc: &RunDocument) -> Markup {
    let profile = doc.profile.as_deref().unwrap_or("this run");
    let (word, cls) = answer(doc);
    let fails = top_failures(doc);
    let heads = headlines(doc);
    html! {
        section #verdict .verdict {
            h2 { "Is this platform fit for " (profile) "? " span class=(cls) { (word) } }
            (unmet_html(doc))
            @if doc.status != RunStatus::Complete {
                p.warn { "The run is " (doc.status.as_str()) ": its figures cover only the time measured." }
            }
            @if !doc.verdicts.is_empty() {
                table {
                    tr { th { "gate" } th { "bound" } th { "observed" } th { "outcome" } }
                    @for v in &doc.verdicts {
                        @let show = |x: u64| if is_duration(&v.gate.metric) { us_label(x as f64) } else { x.to_string() };
                        @let c = match v.outcome {
                            Outcome::Pass => "pass",
                            Outcome::Fail => "fail",
                            Outcome::NoData | Outcome::NotJudged | Outcome::Skipped => "warn",
                        };
                        @let w = v.outcome.word();
                        tr { td { (metric_label(&v.gate.metric)) } td.n { "≤ " (show(v.gate.max)) }
                             td.n { (v.observed.map_or("nothing".to_string(), show)) } td class=(c) { (w) } }
                    }
                }
            } @else if heads.is_empty() {
                p { "The profile sets no latency gate and the run measured no latency." }
            } @else {
                p { "The profile sets no gate; its headline figures against the reference requirements:" }
                table {
                    tr { th { "figure" } th.n { "observed" } @for (n, b) in &REFERENCES { th { (n) " ≤ " (us_label(*b as f64)) } } }
                    @for (what, ns) in &heads {
                        tr { td { (what) } td.n { (us_label(*ns as f64)) }
                             @for (_, b) in &REFERENCES {
                                 @if not_judged(doc) { td.warn { "not judged" } }
                                 @else if ns <= b { td.pass { "within" } } @else { td.fail { "exceeds" } }
                             } }
                    }
                }
            }
            @if doc.audit.is_some() {
                @if fails.is_empty() {
                    p { "Audit: no failed rule." }
                } @else {
                    p { "Audit: " (fails.len()) " failed rule" (if fails.len() == 1 { "" } else { "s" })
                        @if fails.len() > TOP_FINDINGS { "; the " (TOP_FINDINGS) " most severe" } ":" }
                    ol.findings {
                        @for f in fails.iter().take(TOP_FINDINGS) {
                            li { code { (f.id) } " (" (f.severity.as_str()) ") " (f.summary) " " strong { "Fix:" } " " (f.remediation) }
                        }
                    }
                }
            }
            @if let Some(s) = worst_spike(doc) {
                p { strong { "Worst spike: " } (s) }
            }
        }
    }
}

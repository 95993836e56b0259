//! The verdict-first block: "is this platform fit for <profile>?" answered with the gates and their figures,
//! the most severe audit failures with their fix, the worst spike with its cause and what to run next,
//! before any detail. A profile without gates gets its headline figures set against the seeds' reference
//! requirements (20 µs for RAN, seed 000; 120 µs for a virtual protection relay, seed 003), so the quick
//! profile's answer still says where the platform stands.
//!
//! The block is built once ([`block`]) and drawn twice: first on the run page ([`html`]) and last in the
//! terminal ([`text`]: at most [`TEXT_LINES`] lines of at most [`crate::text::TEXT_WIDTH`] columns, the fixes that do
//! not fit named by their rule).

use crate::spikes::{spike_line, why_of, worst_intervals};
use crate::text::{wrap, TextOptions};
use crate::units::us_label;
use maud::{html, Markup};
use rtgauge_analysis::judge::{metric_label, show_value};
use rtgauge_analysis::kind::ProbeData;
use rtgauge_model::attribution::CauseKind;
use rtgauge_model::audit::{Finding, Status};
use rtgauge_model::run::{RunDocument, RunStatus};
use rtgauge_model::verdict::Outcome;

/// A reference requirement for gate-less profiles.
pub struct ReferenceBound {
    /// Its short name, a column's heading.
    pub name: &'static str,
    /// The document it comes from.
    pub source: &'static str,
    /// The latency bound, ns.
    pub bound_ns: u64,
}

/// The seeds' two latency requirements.
pub const REFERENCES: [ReferenceBound; 2] = [
    ReferenceBound {
        name: "RAN",
        source: "VMware RAN white paper",
        bound_ns: 20_000,
    },
    ReferenceBound {
        name: "VPR",
        source: "VMware protection-relay guide",
        bound_ns: 120_000,
    },
];
/// Audit failures named with their fix in the block.
pub const TOP_FINDINGS: usize = 3;
/// The terminal block's lines at most: with the blank line before it, the last 15 of the output.
pub const TEXT_LINES: usize = 14;

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

/// The worst spike of a run, in words.
pub struct Worst {
    /// Where, how large, and its cause.
    pub sentence: String,
    /// Broken down by a trace (or a VM host's record), not only set against the counters.
    pub traced: bool,
    /// Most of it lies outside what the guest's kernel sees (unattributed, or nothing rose).
    pub outside: bool,
}

/// The worst spike of the run, when its latency probes carry attribution: the worst explained episode's
/// breakdown, else the worst timeline interval against its CPU's typical interval (what rose, or that
/// nothing in this kernel did and where that points).
pub fn worst_spike(doc: &RunDocument) -> Option<Worst> {
    let mut best: Option<(u64, Worst)> = None;
    let mut keep = |ns: u64, w: Worst| {
        if best.as_ref().is_none_or(|b| ns > b.0) {
            best = Some((ns, w));
        }
    };
    for p in &doc.probes {
        let Some((why, timelines)) = why_of(p.data()) else {
            continue;
        };
        if let Some(b) = why.episodes.iter().max_by_key(|b| b.worst()) {
            let unattributed: u64 = b
                .causes
                .iter()
                .filter(|c| c.kind == CauseKind::Unattributed)
                .map(|c| c.ns)
                .sum();
            let w = Worst {
                sentence: spike_line(b),
                traced: true,
                outside: 2 * unattributed > b.window_ns,
            };
            keep(b.worst(), w);
            continue;
        }
        let normal = crate::kind::sched_shortfall(p.data()).is_some();
        for w in worst_intervals(why, &timelines, normal) {
            let sentence = format!(
                "CPU {}, max {} in the interval at {:.0} s: {}",
                w.cpu,
                us_label(w.entry.max_ns as f64),
                w.entry.start_ns as f64 / 1e9,
                w.brief
            );
            let outside = w.brief.starts_with("nothing in this kernel");
            let w2 = Worst {
                sentence,
                traced: false,
                outside,
            };
            keep(w.entry.max_ns, w2);
        }
    }
    best.map(|b| b.1)
}

/// What the conditions that fell short do to the verdict.
pub struct ConditionsNote {
    /// `fail` when they bear on the figures, else `warn`.
    pub class: &'static str,
    /// What they do to the verdict.
    pub sentence: String,
    /// Each condition: what, cause, fix.
    pub lines: Vec<String>,
}

/// A judgement in a cell: its word and CSS class (`PASS`, `pass`; `exceeds`, `fail`).
pub type Mark = (&'static str, &'static str);

/// A headline figure: what, its value, and its mark against each of [`REFERENCES`].
pub type HeadlineRow = (String, String, Vec<Mark>);

/// The figures the answer rests on.
pub enum Grounds {
    /// The profile's gates (gate, bound, observed) and their outcomes.
    Gates(Vec<[String; 3]>, Vec<Mark>),
    /// No gate: each headline figure against [`REFERENCES`].
    References(Vec<HeadlineRow>),
    /// Neither gates nor latency measured.
    Nothing,
}

const NO_FIGURES: &str = "The profile sets no latency gate and the run measured no latency.";
const AGAINST: &str =
    "The profile sets no gate; its headline figures against reference requirements:";

/// The audit's part: how many rules failed, the most severe with their fix, the rest by name.
pub struct Audit<'a> {
    /// The [`TOP_FINDINGS`] most severe failures.
    pub top: Vec<&'a Finding>,
    /// The ids of the other failed rules.
    pub also: Vec<&'a str>,
    /// How many rules failed.
    pub failed: usize,
}

/// The block's content, every view's.
pub struct Block<'a> {
    /// "Is this platform fit for ran?"
    pub question: String,
    /// The answer ([`answer`]) and its class.
    pub word: &'static str,
    /// `pass`, `warn` or `fail`.
    pub class: &'static str,
    /// The conditions that fell short.
    pub unmet: Option<ConditionsNote>,
    /// That the run did not complete.
    pub incomplete: Option<String>,
    /// The gates, or the headline figures against the references.
    pub figures: Grounds,
    /// The audit's failures (none when the run was not audited).
    pub audit: Option<Audit<'a>>,
    /// The worst spike with its cause ([`worst_spike`]).
    pub worst: Option<String>,
    /// What to run next.
    pub next: Option<String>,
}

fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::NoData | Outcome::NotJudged | Outcome::Skipped => "warn",
    }
}

/// The block of a run.
pub fn block(doc: &RunDocument) -> Block<'_> {
    let (word, class) = answer(doc);
    let unmet = (!doc.unmet.is_empty()).then(|| {
        let degrades = rtgauge_model::conditions::degrades(&doc.unmet);
        let sentence = if !degrades {
            "The figures stand; what explains them is incomplete:".to_string()
        } else if let Some(by) = &doc.degraded_allowed_by {
            format!("The figures are of a run that did not get what it asked for; judged anyway, as {by} allows:")
        } else {
            "The figures are of a run that did not get what it asked for (not of this platform as asked): \
             they are not judged."
                .to_string()
        };
        ConditionsNote {
            class: if degrades { "fail" } else { "warn" },
            sentence,
            lines: doc.unmet.iter().map(|u| u.line()).collect(),
        }
    });
    let figures = if !doc.verdicts.is_empty() {
        let rows = doc
            .verdicts
            .iter()
            .map(|v| {
                let show = |x: u64| show_value(&v.gate.metric, x);
                let observed = match (v.observed, v.outcome) {
                    (None, Outcome::Skipped) => "not measured (probe skipped)".to_string(),
                    (o, _) => o.map_or("nothing".to_string(), show),
                };
                [
                    metric_label(&v.gate.metric),
                    format!("≤ {}", show(v.gate.max)),
                    observed,
                ]
            })
            .collect();
        let outcomes = doc
            .verdicts
            .iter()
            .map(|v| (v.outcome.word(), outcome_class(v.outcome)))
            .collect();
        Grounds::Gates(rows, outcomes)
    } else {
        let heads = headlines(doc);
        if heads.is_empty() {
            Grounds::Nothing
        } else {
            Grounds::References(
                heads
                    .into_iter()
                    .map(|(what, ns)| {
                        let cells = REFERENCES
                            .iter()
                            .map(|r| {
                                if not_judged(doc) {
                                    ("not judged", "warn")
                                } else if ns <= r.bound_ns {
                                    ("within", "pass")
                                } else {
                                    ("exceeds", "fail")
                                }
                            })
                            .collect();
                        (what, us_label(ns as f64), cells)
                    })
                    .collect(),
            )
        }
    };
    let audit = doc.audit.as_ref().map(|_| {
        let fails = top_failures(doc);
        Audit {
            failed: fails.len(),
            also: fails
                .iter()
                .skip(TOP_FINDINGS)
                .map(|f| f.id.as_str())
                .collect(),
            top: fails.into_iter().take(TOP_FINDINGS).collect(),
        }
    });
    let worst = worst_spike(doc);
    let next = next_step(doc, worst.as_ref());
    Block {
        question: format!(
            "Is this platform fit for {}?",
            doc.profile.as_deref().unwrap_or("this run")
        ),
        word,
        class,
        unmet,
        incomplete: (doc.status != RunStatus::Complete).then(|| {
            format!(
                "The run is {}: its figures cover only the time measured.",
                doc.status.as_str()
            )
        }),
        figures,
        audit,
        worst: worst.map(|w| w.sentence),
        next,
    }
}

/// What to run next: meet the conditions; trace a spike the counters could only place; ask the VM's host
/// about one its guest cannot see; judge a gate-less run against a requirement.
fn next_step(doc: &RunDocument, worst: Option<&Worst>) -> Option<String> {
    let profile = doc.profile.as_deref().unwrap_or("quick");
    let virtualized = doc.fingerprint.as_ref().is_some_and(|f| {
        f.virt.hypervisor_flag || !matches!(f.virt.platform.as_str(), "" | "none")
    });
    if not_judged(doc) {
        return Some("Meet the conditions above (each line names its fix), then run again.".into());
    }
    match worst {
        Some(w) if !w.traced => Some(format!(
            "rtgauge run --profile {profile} --trace names what ran at each spike."
        )),
        Some(w) if w.outside && virtualized => Some(
            "rtgauge vm observe on the VM's host during a guest run, then rtgauge vm join, shows what \
             the host did then (docs/vm.md)."
                .into(),
        ),
        _ if doc.verdicts.is_empty() => Some(
            "rtgauge run --profile ran (1 h a probe) or vpr (24 h) judges the platform against a \
             requirement."
                .into(),
        ),
        _ => None,
    }
}

fn audit_line(a: &Audit<'_>) -> String {
    match a.failed {
        0 => "Audit: no failed rule.".to_string(),
        n => format!(
            "Audit: {n} failed rule{}{}:",
            if n == 1 { "" } else { "s" },
            if n > TOP_FINDINGS {
                format!("; the {TOP_FINDINGS} most severe")
            } else {
                String::new()
            }
        ),
    }
}

/// The block itself: `<section id="verdict">`, the first section of every run page.
pub fn html(doc: &RunDocument) -> Markup {
    let b = block(doc);
    html! {
        section #verdict .verdict {
            h2 { (b.question) " " span class=(b.class) { (b.word) } }
            @if let Some(u) = &b.unmet {
                div.unmet {
                    p class=(u.class) { strong { "Conditions not met. " } (u.sentence) }
                    ul.unmet { @for l in &u.lines { li { (l) } } }
                }
            }
            @if let Some(i) = &b.incomplete { p.warn { (i) } }
            @match &b.figures {
                Grounds::Gates(rows, outcomes) => {
                    table {
                        tr { th { "gate" } th { "bound" } th { "observed" } th { "outcome" } }
                        @for (r, (w, c)) in rows.iter().zip(outcomes) {
                            tr { td { (r[0]) } td.n { (r[1]) } td.n { (r[2]) } td class=(c) { (w) } }
                        }
                    }
                }
                Grounds::References(rows) => {
                    p { (AGAINST) }
                    table {
                        tr { th { "figure" } th.n { "observed" }
                             @for r in &REFERENCES { th { (r.name) " ≤ " (us_label(r.bound_ns as f64)) br; small { "(" (r.source) ")" } } } }
                        @for (what, observed, cells) in rows {
                            tr { td { (what) } td.n { (observed) } @for (w, c) in cells { td class=(c) { (w) } } }
                        }
                    }
                }
                Grounds::Nothing => { p { (NO_FIGURES) } }
            }
            @if let Some(a) = &b.audit {
                p { (audit_line(a)) }
                @if !a.top.is_empty() {
                    ol.findings {
                        @for f in &a.top {
                            li { code { (f.id) } " (" (f.severity.as_str()) ") " (f.summary) " " strong { "Fix:" } " " (f.remediation) }
                        }
                    }
                }
                @if !a.also.is_empty() { p { "Also failed: " (a.also.join(", ")) "." } }
            }
            @if let Some(s) = &b.worst {
                p { strong { "Worst spike: " } (s) }
            }
            @if let Some(n) = &b.next {
                p { strong { "Next: " } (n) }
            }
        }
    }
}

/// Rows of cells in columns two spaces apart, under a two-space indent.
fn columns(rows: &[Vec<String>]) -> Vec<String> {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("  {}", cells.join("  ")).trim_end().to_string()
        })
        .collect()
}

fn paint(word: &str, class: &str, opts: TextOptions) -> String {
    if !opts.color {
        return word.to_string();
    }
    let code = match class {
        "pass" => "1;32",
        "fail" => "1;31",
        _ => "1;33",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

/// The block as terminal lines: the question and its answer, the conditions that fell short, the figures,
/// the worst spike and what to run next; then, in the lines left of [`TEXT_LINES`], the conditions one by
/// one and the failed rules with their fix (those that do not fit named by their rule).
///
/// A sentence wrapped onto more lines continues them indented by four spaces or more; a table's rows and a
/// list's items start two spaces in.
pub fn text(b: &Block<'_>, opts: TextOptions) -> String {
    let mut head = vec![format!("{} {}", b.question, paint(b.word, b.class, opts))];
    if let Some(u) = &b.unmet {
        head.extend(wrap("Conditions not met.", "    ", &u.sentence));
    }
    let mut tail = Vec::new();
    if let Some(i) = &b.incomplete {
        tail.extend(wrap("", "    ", i));
    }
    match &b.figures {
        Grounds::Gates(rows, outcomes) => {
            let mut t = vec![["gate", "bound", "observed", "outcome"]
                .map(String::from)
                .to_vec()];
            for (r, (w, _)) in rows.iter().zip(outcomes) {
                let mut row = r.to_vec();
                row.push(w.to_string());
                t.push(row);
            }
            tail.extend(columns(&t));
        }
        // The columns name the references: the sentence that introduces them on the page is left out.
        Grounds::References(rows) => {
            let mut t = vec![vec!["figure".to_string(), "observed".to_string()]];
            t[0].extend(
                REFERENCES
                    .iter()
                    .map(|r| format!("{} ≤ {}", r.name, us_label(r.bound_ns as f64))),
            );
            for (what, observed, cells) in rows {
                let mut row = vec![what.clone(), observed.clone()];
                row.extend(cells.iter().map(|(w, _)| w.to_string()));
                t.push(row);
            }
            tail.extend(columns(&t));
        }
        Grounds::Nothing => tail.extend(wrap("", "    ", NO_FIGURES)),
    }
    let mut last = Vec::new();
    if let Some(w) = &b.worst {
        last.extend(wrap("Worst spike:", "    ", w));
    }
    if let Some(n) = &b.next {
        last.extend(wrap("Next:", "    ", n));
    }
    // What is left of the budget: first the conditions, then the failed rules.
    let mut room = TEXT_LINES.saturating_sub(head.len() + tail.len() + last.len());
    let mut conditions = Vec::new();
    for l in b.unmet.iter().flat_map(|u| &u.lines) {
        let w = wrap("  -", "    ", l);
        if w.len() > room {
            break;
        }
        room -= w.len();
        conditions.extend(w);
    }
    let mut audit = Vec::new();
    if let Some(a) = &b.audit {
        audit.push(audit_line(a));
        let mut named: Vec<&str> = Vec::new();
        let mut items = Vec::new();
        for (i, f) in a.top.iter().enumerate() {
            let w = wrap(
                &format!("  {}. {} ({}):", i + 1, f.id, f.severity.as_str()),
                "     ",
                &f.remediation,
            );
            // Room for the audit's heading, this rule's lines and a line naming those without their fix.
            if named.is_empty() && 1 + items.len() + w.len() < room {
                items.extend(w);
            } else {
                named.push(&f.id);
            }
        }
        named.extend(a.also.iter().copied());
        // The rules without their fix in the lines left (at least one): those that do not fit counted.
        let left = room.saturating_sub(1 + items.len()).max(1);
        audit.extend(items);
        let mut shown = named.len();
        while shown > 0 {
            let list = if shown == named.len() {
                format!("{}.", named.join(", "))
            } else {
                format!(
                    "{} and {} more (the report lists them).",
                    named[..shown].join(", "),
                    named.len() - shown
                )
            };
            let w = wrap("Also failed:", "    ", &list);
            if w.len() <= left || shown == 1 {
                audit.extend(w);
                break;
            }
            shown -= 1;
        }
        if a.failed == 0 {
            audit.truncate(1);
        }
    }
    let lines = head
        .into_iter()
        .chain(conditions)
        .chain(tail)
        .chain(audit)
        .chain(last);
    lines.map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::audit::Severity;

    fn finding(id: &str) -> Finding {
        Finding {
            id: id.to_string(),
            status: Status::Fail,
            severity: Severity::High,
            summary: "fails".into(),
            evidence: Vec::new(),
            expected: "something".into(),
            remediation:
                "add isolcpus=2-29 nohz_full=2-29 rcu_nocbs=2-29 to the kernel command line and \
                          reboot, then check /sys/devices/system/cpu/isolated"
                    .into(),
            source: String::new(),
        }
    }

    #[test]
    fn the_terminal_block_keeps_its_budget_however_much_failed() {
        let fails: Vec<Finding> = (0..25)
            .map(|i| finding(&format!("kernel.cmdline.rule-number-{i}")))
            .collect();
        let b = Block {
            question: "Is this platform fit for ran?".into(),
            word: "NOT FIT",
            class: "fail",
            unmet: None,
            incomplete: None,
            figures: Grounds::Gates(
                vec![["cyclic.max".into(), "≤ 20.0 µs".into(), "91.2 µs".into()]],
                vec![("FAIL", "fail")],
            ),
            audit: Some(Audit {
                top: fails.iter().take(TOP_FINDINGS).collect(),
                also: fails
                    .iter()
                    .skip(TOP_FINDINGS)
                    .map(|f| f.id.as_str())
                    .collect(),
                failed: fails.len(),
            }),
            worst: Some("CPU 1, max 91.2 µs at 3.0 s: IRQ 24 (eth0) 80.0 µs".into()),
            next: Some("rtgauge run --profile ran --trace names what ran at each spike.".into()),
        };
        let t = text(&b, TextOptions::default());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines.len() <= TEXT_LINES, "{t}");
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() <= crate::text::TEXT_WIDTH),
            "{t}"
        );
        assert!(
            t.contains("Audit: 25 failed rules; the 3 most severe:"),
            "{t}"
        );
        assert!(t.contains("more (the report lists them)."), "{t}");
        assert!(
            t.contains("kernel.cmdline.rule-number-0"),
            "the most severe first: {t}"
        );
        assert!(
            lines.last().unwrap().starts_with("Next:"),
            "what to run next is last: {t}"
        );
    }
}

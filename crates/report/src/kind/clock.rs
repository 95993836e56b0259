//! How well the clock was kept (`rtgauge clock`) in every view: the kernel's steps and state, then per
//! source its last state and reference, when it locked and how close it kept, its holdovers and its
//! events in time order. Its section of the run page is the time section of a qualification record.

use super::KindView;
use crate::markup::ReportOptions;
use crate::text::TextOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::clock::{
    ClockResult, EventKind, KernelClock, Reference, SourceKind, SourceResult,
};
use rtgauge_model::kind::RunFacts;
use rtgauge_model::units::unresolved_upper;
use rtgauge_model::Nanos;

/// Events listed per source in the terminal view (the run page lists them all).
const LISTED: usize = 12;

/// A signed time in the unit that suits it: `+12 ns`, `−3.400 µs`, `+5.001 ms`.
pub fn signed(ns: i64) -> String {
    let sign = if ns < 0 { "−" } else { "+" };
    format!("{sign}{}", magnitude(ns.unsigned_abs()))
}

/// An unsigned time in the unit that suits it (the run's one human form, [`Nanos`]'s).
pub fn magnitude(ns: u64) -> String {
    Nanos(ns).to_string()
}

fn at(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// A reference in words: a PTP grandmaster with its clockClass, a chrony source with its stratum.
fn reference_words(kind: SourceKind, r: &Reference) -> String {
    let class = if kind == SourceKind::Chrony {
        "stratum"
    } else {
        "class"
    };
    match r.class {
        Some(c) => format!("{} ({class} {c})", r.id),
        None => r.id.clone(),
    }
}

/// An event of a source of `kind` in words.
pub fn event_words(kind: SourceKind, e: &EventKind) -> String {
    let reference = |r: &Option<Reference>| {
        r.as_ref()
            .map_or("none".to_string(), |r| reference_words(kind, r))
    };
    match e {
        EventKind::State { from, to } if from.is_empty() => format!("state {to}"),
        EventKind::State { from, to } => format!("state {from} → {to}"),
        EventKind::Reference { from, to } => {
            format!("reference {} → {}", reference(from), reference(to))
        }
        EventKind::Locked { after_ns } => format!("locked after {}", magnitude(*after_ns)),
        EventKind::Unlocked { offset_ns } => format!("lock lost (offset {})", signed(*offset_ns)),
        EventKind::ReferenceLost => "reference lost: holdover".into(),
        EventKind::ReferenceBack { after_ns } => {
            format!("reference back after {}", magnitude(*after_ns))
        }
        EventKind::Unreadable { error } => format!("unreadable: {error}"),
    }
}

/// The kernel's line: steps, and its synchronisation state.
pub fn kernel_line(k: &KernelClock) -> String {
    let steps = match k.step_count() {
        0 => format!(
            "no step of the system clock (each reading ±{})",
            magnitude(k.read_bound_max_ns)
        ),
        n => {
            let listed: Vec<String> = k
                .steps
                .iter()
                .take(4)
                .map(|s| {
                    format!(
                        "{} at {} (±{})",
                        signed(s.by_ns),
                        at(s.at_ns),
                        magnitude(s.bound_ns)
                    )
                })
                .collect();
            format!(
                "{n} step{} of the system clock: {}",
                if n == 1 { "" } else { "s" },
                listed.join(", ")
            )
        }
    };
    let state = match k.last {
        Some(a) if a.synchronised() => format!(
            "synchronised at the end (max error {} µs, TAI − UTC {} s)",
            a.maxerror_us, a.tai_s
        ),
        Some(_) => "the kernel counts the clock unsynchronised at the end".to_string(),
        None => "adjtimex unreadable".to_string(),
    };
    format!("kernel: {steps}; {state}")
}

/// A source's summary: its last state and reference, then how close it kept, its failures and holdovers.
pub fn source_summary(s: &SourceResult) -> Vec<String> {
    let mut out = Vec::new();
    let mut head = s.name();
    if let Some(l) = &s.last {
        head.push_str(&format!(": {}", l.state));
        if let Some(r) = &l.reference {
            head.push_str(&format!(", reference {}", reference_words(s.kind, r)));
        }
        if let Some(d) = l.delay_ns {
            head.push_str(&format!(", delay {}", magnitude(d.unsigned_abs())));
        }
        if let Some(f) = l.freq_ppb {
            head.push_str(&format!(", frequency {f:+.0} ppb"));
        }
    }
    out.push(head);
    // Within the readings' bound an |offset| is unresolved: "≤ figure + bound".
    let bound = s.read_bound_ns();
    let shown = |v: u64| match unresolved_upper(v, bound) {
        Some(most) => format!("≤ {}", magnitude(most)),
        None => magnitude(v),
    };
    let offsets = s.offset.as_ref().map(|o| {
        let p50 = o.percentile(50.0).unwrap_or(0);
        let mut line = format!(
            "|offset| p50 {}, p99 {}, max {} ({} measured)",
            shown(p50),
            shown(o.percentile(99.0).unwrap_or(0)),
            shown(o.max_ns),
            o.count
        );
        if let Some(b) = bound.filter(|_| unresolved_upper(p50, bound).is_some()) {
            line.push_str(&format!(
                "; ≤: within the readings' ± {}, unresolved by them",
                magnitude(b)
            ));
        }
        line
    });
    // Documents from before the bound was kept per source hold 0.
    let lock = if s.lock_ns > 0 {
        s.lock_ns
    } else {
        rtgauge_model::clock::default_lock_ns(s.kind)
    };
    let within = format!("within ±{}", magnitude(lock));
    out.push(match (s.settle_ns, offsets) {
        (Some(t), Some(o)) => format!("  locked {within} after {}; since then {o}", magnitude(t)),
        (Some(t), None) => format!("  locked {within} after {}", magnitude(t)),
        (None, Some(o)) => format!("  never locked {within}; {o}"),
        (None, None) => format!("  no offset measured in {} polls", s.polls),
    });
    if s.errors > 0 {
        out.push(format!("  {} of {} polls failed", s.errors, s.polls));
    }
    for h in &s.holdovers {
        out.push(format!(
            "  holdover from {}{}{}",
            at(h.start_ns),
            h.end_ns.map_or(" to the end".to_string(), |e| format!(
                " for {}",
                magnitude(e - h.start_ns)
            )),
            h.drift_ns
                .map_or(String::new(), |d| format!(": drifted {}", signed(d)))
        ));
    }
    out
}

/// A source's summary, then its first events.
fn source_lines(s: &SourceResult) -> Vec<String> {
    let mut out = source_summary(s);
    for e in s.events.iter().take(LISTED) {
        out.push(format!(
            "  {:>8}  {}",
            at(e.at_ns),
            event_words(s.kind, &e.what)
        ));
    }
    let more = s.events.len().saturating_sub(LISTED) as u64 + s.events_dropped;
    if more > 0 {
        out.push(format!("  … {more} more events"));
    }
    out
}

impl KindView for ClockResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        "Time".into()
    }

    fn terminal_section(&self, _facts: &RunFacts, _opts: TextOptions) -> String {
        let mut s = format!(
            "\nTime ({} Hz for {}):\n  {}\n",
            self.config.rate_hz,
            magnitude(self.elapsed_ns),
            kernel_line(&self.kernel)
        );
        if self.sources.is_empty() {
            s.push_str("  no time source found (no ptp4l or chrony socket, no PHC): only the kernel's view\n");
        }
        for src in &self.sources {
            for l in source_lines(src) {
                s.push_str("  ");
                s.push_str(&l);
                s.push('\n');
            }
        }
        s
    }

    fn html_section(&self, _options: ReportOptions, _facts: &RunFacts) -> Markup {
        html! {
            h2 { (self.section_title()) }
            p { (kernel_line(&self.kernel)) }
            (crate::markup::measures_table(&self.data().measures()))
            @for src in &self.sources {
                h3 { (src.name()) }
                ul {
                    @for l in source_summary(src) {
                        li { (l.trim()) }
                    }
                }
                table {
                    tr { th { "at" } th { "event" } }
                    @for e in &src.events {
                        tr { td { (at(e.at_ns)) } td { (event_words(src.kind, &e.what)) } }
                    }
                }
            }
        }
    }

    /// A source found and left out (unreadable), a source that could not be read at some polls: its
    /// figures miss them.
    fn shortfalls(&self) -> Vec<String> {
        let left_out = self
            .left_out
            .iter()
            .map(|l| format!("found and left out, unreadable: {l}"));
        left_out
            .chain(self.sources.iter().filter(|s| s.errors > 0).map(|s| {
                let first = s.events.iter().find_map(|e| match &e.what {
                    EventKind::Unreadable { error } => Some(error.as_str()),
                    _ => None,
                });
                format!(
                    "{} of {} polls of {} failed{}: its figures miss them",
                    s.errors,
                    s.polls,
                    s.name(),
                    first.map_or(String::new(), |e| format!(" (first: {e})"))
                )
            }))
            .collect()
    }

    fn headline(&self) -> Option<(String, u64)> {
        self.offset_max_ns()
            .map(|m| ("clock |offset| max since locked".to_string(), m))
    }

    fn progress_line(&self) -> Option<String> {
        let parts: Vec<String> = self
            .sources
            .iter()
            .map(|s| {
                let last = s
                    .last
                    .as_ref()
                    .and_then(|l| l.offset_ns)
                    .map_or("no offset yet".to_string(), |o| {
                        format!("offset {}", signed(o))
                    });
                format!(
                    "{} {} {last}",
                    s.name(),
                    s.last.as_ref().map_or("?", |l| l.state.as_str())
                )
            })
            .collect();
        Some(format!(
            "{} step(s); {}",
            self.kernel.step_count(),
            if parts.is_empty() {
                "kernel only".to_string()
            } else {
                parts.join("; ")
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_take_the_unit_that_suits_them() {
        assert_eq!(signed(-12), "−12 ns");
        assert_eq!(signed(5_001_000), "+5.001 ms");
    }
}

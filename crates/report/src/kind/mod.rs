//! A probe kind's views: every view of a run (the terminal summary, the HTML page, the comparison page,
//! the verb's shortfall warnings and progress) reaches a result through its kind's [`KindView`], one
//! module per kind. [`view`], the dispatch, is made from the one list of kinds (`rtgauge_model::with_kinds!`):
//! nothing here names a kind but its own module.

use crate::markup::ReportOptions;
use maud::{html, Markup};
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::run::ProbeResult;

pub mod clock;
pub mod cyclic;
pub mod hwnoise;
pub mod mem;
pub mod net;
pub mod net_latency;
pub mod numa;
pub mod ops;
pub mod oslat;

/// What the threads ran at when it is not what they asked for: `fifo 95 requested, ran at other 0` (the
/// first refused thread's), for a section's heading; `None` when every thread got its policy and priority.
pub fn sched_shortfall(d: &dyn KindData) -> Option<String> {
    d.thread_conditions()
        .into_iter()
        .find(|c| !c.policy.ok() || !c.priority.ok())
        .map(|c| {
            format!(
                "{} {} requested, ran at {} {}",
                c.policy.requested, c.priority.requested, c.policy.achieved, c.priority.achieved
            )
        })
}

/// How a probe kind's result is shown. Every method but the title and the terminal section has a
/// default for kinds without that part.
pub trait KindView {
    /// The result's data (what the views compute from).
    fn data(&self) -> &dyn KindData;

    /// The heading of its section on the run page.
    fn section_title(&self) -> String;

    /// Its section of the terminal summary (`run`, `runs show`, `report`): brief unless `opts.verbose`
    /// (at most [`crate::text::DETAILED_CPUS`] CPUs' rows, its headline figures).
    fn terminal_section(&self, facts: &RunFacts, opts: crate::text::TextOptions) -> String;

    /// Its section of the run page: by default its measures as a table under its title.
    fn html_section(&self, _options: ReportOptions, _facts: &RunFacts) -> Markup {
        html! {
            h2 { (self.section_title()) }
            (crate::markup::measures_table(&self.data().measures()))
        }
    }

    /// Its settings that were requested but not achieved, one sentence each.
    fn shortfalls(&self) -> Vec<String> {
        Vec::new()
    }

    /// Its headline latency for the verdict block: (what, largest value ns).
    fn headline(&self) -> Option<(String, u64)> {
        None
    }

    /// Its part of the comparison page, given the same kind's result of every compared run (`names`, in
    /// column order).
    fn compare_html(&self, _names: &[String], _all: &[&ProbeResult]) -> Markup {
        html! {}
    }

    /// Its progress line from a checkpoint while it measures, for kinds whose progress is not live.
    fn progress_line(&self) -> Option<String> {
        None
    }
}

/// The views of every kind of the list (`rtgauge_model::with_kinds!`): [`view`].
macro_rules! view_dispatch {
    ($($variant:ident => $ty:ty, $name:literal, $doc:literal;)*) => {
        /// The views of `p`'s kind.
        pub fn view(p: &ProbeResult) -> &dyn KindView {
            match p {
                $(ProbeResult::$variant(r) => r,)*
            }
        }
    };
}

rtgauge_model::with_kinds!(view_dispatch);

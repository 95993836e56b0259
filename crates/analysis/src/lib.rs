//! Analysis: what a run's data means, computed from the data alone — pure arithmetic on the run document
//! and its parts, no I/O, no measurement, no rendering of pages.
//!
//! - [`kind`]: what each probe kind's result says about itself (`KindData`: its measures, threads, load,
//!   accounting, "why", export rows) and declares as data (`KindTables`: its gates and one-run floors),
//!   one module per kind, reached through dispatches made from the one list of kinds;
//! - [`episodes`]: late samples grouped into spike episodes, an episode's window broken down over the
//!   trace's spans, the threshold rule for which are explained;
//! - [`interval`]: the always-on counters' verdict on one interval against the CPU's typical one;
//! - [`vm_join`]: a guest's episodes joined with its host's record over their shared clock;
//! - [`compare`]: the comparison of runs — every shared measure's ratio to the baseline with its interval
//!   (window bootstrap, order statistics, sets, stored repeats, one-run floors) and its verdict;
//! - [`judge`]: a run's gate metrics and verdicts; [`capacity`]: the highest load level a gate holds at;
//!   [`monitor`]: the always-on monitor's series and rule drift.
//!
//! Callers: the session engine (a result's load, accounting and "why"), the trace reader (breakdowns),
//! `rtgauge run` (verdicts), `capacity`, `monitor`, `vm join`, `compare`, the file formats and the views.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capacity;
pub mod compare;
pub mod conditions;
pub mod episodes;
pub mod interval;
pub mod judge;
pub mod kind;
pub mod monitor;
pub mod vm_join;

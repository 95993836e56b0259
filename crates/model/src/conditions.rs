//! The conditions a run asked for and did not get, said once per cause: a real-time policy the platform
//! refused, CPUs a thread could not be pinned to, memory that could not be locked, a cpu_dma_latency not
//! held, a trace that could not be taken. Each [`Unmet`] names what fell short (on how many threads), its
//! cause where the host shows one, and the fix. A run with an unmet condition that bears on its figures
//! measured something other than what was asked: its gates are not judged (`verdict::Outcome::NotJudged`)
//! unless the profile or `--allow-degraded` accepts it.

use crate::CpuSet;
use serde::{Deserialize, Serialize};

/// What was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The measuring threads' scheduling policy and priority (SCHED_FIFO 95).
    Priority,
    /// The measuring threads' CPUs.
    Affinity,
    /// `mlockall(MCL_CURRENT|MCL_FUTURE)`.
    Mlockall,
    /// A value held in `/dev/cpu_dma_latency`.
    CpuDmaLatency,
    /// The kernel trace of `--trace` (tracefs).
    Trace,
}

impl Condition {
    /// Every condition, in the order a run says them.
    pub const ALL: [Condition; 5] = [
        Condition::Priority,
        Condition::Affinity,
        Condition::Mlockall,
        Condition::CpuDmaLatency,
        Condition::Trace,
    ];

    /// Whether a run without it measured something other than what was asked: a normal-priority thread, a
    /// thread on other CPUs, memory that can fault, deep C-states. The trace only explains the figures.
    pub fn bears_on_figures(self) -> bool {
        !matches!(self, Condition::Trace)
    }

    /// Its name in a metric label and in the document.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Priority => "priority",
            Condition::Affinity => "affinity",
            Condition::Mlockall => "mlockall",
            Condition::CpuDmaLatency => "cpu_dma_latency",
            Condition::Trace => "trace",
        }
    }
}

/// One condition not met, with what the host shows of its cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmet {
    /// What was asked for.
    pub condition: Condition,
    /// What fell short, in words: `SCHED_FIFO 95 refused on 16 of 16 threads (they ran at other 0)`.
    pub what: String,
    /// The error the kernel gave, as the probe saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The real-time priority asked for ([`Condition::Priority`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// The CPUs asked for and not got ([`Condition::Affinity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// Why, where the host shows it: `this cgroup (/docker/…) has cpu.rt_runtime_us = 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// How to get it: `run the container with --cpu-rt-runtime=950000, …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Unmet {
    /// A condition not met, its cause not looked for yet.
    pub fn new(condition: Condition, what: impl Into<String>) -> Unmet {
        Unmet {
            condition,
            what: what.into(),
            error: None,
            priority: None,
            cpus: None,
            cause: None,
            fix: None,
        }
    }

    /// The one line that says it: what, cause (or the kernel's error when no cause was found), fix.
    pub fn line(&self) -> String {
        let mut s = self.what.clone();
        match (&self.cause, &self.error) {
            (Some(c), _) => s.push_str(&format!(": {c}")),
            (None, Some(e)) => s.push_str(&format!(": {e} (no cause found on this host)")),
            (None, None) => {}
        }
        if let Some(f) = &self.fix {
            s.push_str(&format!(" — {f}"));
        }
        s
    }
}

/// Whether any of `unmet` bears on the figures (the run measured something other than what was asked).
pub fn degrades(unmet: &[Unmet]) -> bool {
    unmet.iter().any(|u| u.condition.bears_on_figures())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_cause_and_the_fix_or_says_none_was_found() {
        let mut u = Unmet::new(
            Condition::Priority,
            "SCHED_FIFO 95 refused on 2 of 2 threads (they ran at other 0)",
        );
        u.error = Some("Operation not permitted (os error 1)".into());
        assert_eq!(
            u.line(),
            "SCHED_FIFO 95 refused on 2 of 2 threads (they ran at other 0): Operation not permitted \
             (os error 1) (no cause found on this host)"
        );
        u.cause = Some("this cgroup (/t) has cpu.rt_runtime_us = 0".into());
        u.fix = Some("give it a budget".into());
        assert_eq!(
            u.line(),
            "SCHED_FIFO 95 refused on 2 of 2 threads (they ran at other 0): this cgroup (/t) has \
             cpu.rt_runtime_us = 0 — give it a budget"
        );
        assert!(degrades(&[u]));
        assert!(!degrades(&[Unmet::new(Condition::Trace, "no trace")]));
    }
}

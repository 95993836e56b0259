//! Judging a run: the value of each gate metric, computed from the stored run document only (so a stored or
//! imported run can be judged again), and the verdict of a gate. It lives apart from [`crate::verdict`]
//! because the run document holds verdicts: the plain types stay a leaf module, and only this one needs to
//! see the whole run.

use crate::run::{ProbeResult, RunDocument};
use crate::verdict::{Gate, GateVerdict, Metric, Outcome};

impl Metric {
    /// The metric's value in a run, `None` if the run has no probe that measures it.
    pub fn observe(self, document: &RunDocument) -> Option<u64> {
        let cyclic = document.probes.iter().filter_map(|p| match p {
            ProbeResult::Cyclic(c) => Some(c),
            _ => None,
        });
        let oslat = document.probes.iter().filter_map(|p| match p {
            ProbeResult::Oslat(o) => Some(o),
            _ => None,
        });
        match self {
            Metric::CyclicMaxNs => cyclic
                .flat_map(|c| c.threads.iter().map(|t| t.latency.max_ns))
                .max(),
            Metric::CyclicMissed => {
                let v: Vec<u64> = cyclic
                    .flat_map(|c| c.threads.iter().map(|t| t.missed_deadlines))
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum())
            }
            Metric::CyclicSamplesAtOrAbove { threshold_ns } => {
                let mut any = false;
                let mut n = 0;
                for c in cyclic {
                    for t in &c.threads {
                        any = true;
                        n += t.samples_at_or_above(threshold_ns);
                    }
                }
                any.then_some(n)
            }
            Metric::OslatMaxNs => oslat
                .flat_map(|o| o.threads.iter().map(|t| t.gaps.max_ns))
                .max(),
        }
    }
}

impl Gate {
    /// Judge `document` against the gate: pass when the observed value is at most `max`, no data when the metric is absent.
    pub fn judge(&self, document: &RunDocument) -> GateVerdict {
        let observed = self.metric.observe(document);
        let outcome = match observed {
            None => Outcome::NoData,
            Some(v) if v <= self.max => Outcome::Pass,
            Some(_) => Outcome::Fail,
        };
        GateVerdict {
            gate: self.clone(),
            observed,
            outcome,
        }
    }
}

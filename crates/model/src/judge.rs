//! Judging a run: the value of each gate metric, computed from the stored run document only (so a stored or
//! imported run can be judged again), and the verdict of a gate. It lives apart from [`crate::verdict`]
//! because the run document holds verdicts: the plain types stay a leaf module, and only this one needs to
//! see the whole run.

use crate::run::RunDocument;
use crate::verdict::{Gate, GateVerdict, Metric, Outcome};

impl Metric {
    /// The metric's value in a run, `None` if the run has no probe that measures it: the largest of its
    /// values for a maximum, their sum for a count.
    pub fn observe(self, document: &RunDocument) -> Option<u64> {
        let values: Vec<u64> = document
            .probes
            .iter()
            .flat_map(|p| p.gate_values(self))
            .collect();
        if values.is_empty() {
            return None;
        }
        Some(match self {
            Metric::CyclicMaxNs | Metric::OslatMaxNs => values.into_iter().max().unwrap_or(0),
            Metric::CyclicMissed | Metric::CyclicSamplesAtOrAbove { .. } => values.iter().sum(),
        })
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

//! Judging a run: the value of each gate metric, computed from the stored run document only (so a stored or
//! imported run can be judged again), the verdict of a gate against it, and how the run ended.

use crate::kind::ProbeData;
use rtgauge_model::kind::StopReason;
use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus};
use rtgauge_model::verdict::{Gate, GateVerdict, Metric, Outcome};

/// The value of `metric` in a run, `None` if the run has no probe that measures it: the largest of its
/// values for a maximum, their sum for a count.
pub fn observe(metric: Metric, document: &RunDocument) -> Option<u64> {
    let values: Vec<u64> = document
        .probes
        .iter()
        .flat_map(|p| p.data().gate_values(metric))
        .collect();
    if values.is_empty() {
        return None;
    }
    Some(match metric {
        Metric::CyclicMaxNs
        | Metric::OslatMaxNs
        | Metric::HwnoiseMaxNs
        | Metric::NetLatencyMaxNs
        | Metric::ClockOffsetMaxNs => values.into_iter().max().unwrap_or(0),
        Metric::CyclicMissed
        | Metric::CyclicSamplesAtOrAbove { .. }
        | Metric::NetLatencyLost
        | Metric::NetLatencyLate
        | Metric::ClockSteps => values.iter().sum(),
    })
}

/// Judge `document` against `gate`: pass when the observed value is at most its bound, skipped when the
/// probe that measures it could not run on the platform (the run says why), no data when the metric is
/// otherwise absent; not judged (the value still observed) when `judged` is false: the run's conditions
/// fell short of what was asked.
pub fn judge(gate: &Gate, document: &RunDocument, judged: bool) -> GateVerdict {
    let observed = observe(gate.metric, document);
    let skipped = document
        .skipped
        .iter()
        .any(|s| s.kind == gate.metric.kind());
    let outcome = match observed {
        None if skipped => Outcome::Skipped,
        _ if !judged => Outcome::NotJudged,
        None => Outcome::NoData,
        Some(v) if v <= gate.max => Outcome::Pass,
        Some(_) => Outcome::Fail,
    };
    GateVerdict {
        gate: gate.clone(),
        observed,
        outcome,
    }
}

/// The one rule from how probes ended to how the run did: `complete` when every planned probe ran
/// (`all_ran`) and none was stopped by a signal, else `interrupted`.
pub fn run_status(probes: &[ProbeResult], all_ran: bool) -> RunStatus {
    let signalled = probes
        .iter()
        .any(|p| p.data().stop_reason() == Some(StopReason::Signal));
    if all_ran && !signalled {
        RunStatus::Complete
    } else {
        RunStatus::Interrupted
    }
}

//! Judging a run: the value of each gate metric, computed from the stored run document only (so a stored or
//! imported run can be judged again), the verdict of a gate against it, and how the run ended.

use crate::kind::{gate_def, gate_values, Aggregate, GateUnit, ProbeData};
use rtgauge_model::kind::StopReason;
use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus};
use rtgauge_model::units::us;
use rtgauge_model::verdict::{Gate, GateVerdict, Metric, Outcome};

/// The value of `metric` in a run, `None` if the run has no probe that measures it: its values over the
/// run's results become one as its gate table says (the largest of them for a maximum, their sum for a
/// count).
pub fn observe(metric: &Metric, document: &RunDocument) -> Option<u64> {
    let def = gate_def(metric)?;
    let values: Vec<u64> = document
        .probes
        .iter()
        .flat_map(|p| gate_values(p, metric))
        .collect();
    if values.is_empty() {
        return None;
    }
    Some(match def.aggregate {
        Aggregate::Max => values.into_iter().max().unwrap_or(0),
        Aggregate::Sum => values.iter().sum(),
    })
}

/// How a verdict names `metric`: its gate's label, with its threshold (`cyclic samples ≥ 120 µs`); the
/// stored name of a metric no kind has.
pub fn metric_label(metric: &Metric) -> String {
    let label = gate_def(metric).map_or_else(
        || format!("{}_{}", metric.kind.as_str(), metric.name),
        |d| d.label.to_string(),
    );
    match metric.threshold_ns {
        Some(t) => format!("{label} {} µs", us(t)),
        None => label,
    }
}

/// Whether `metric` is a duration in ns, a latency or an offset (else a count).
pub fn is_duration(metric: &Metric) -> bool {
    gate_def(metric).is_some_and(|d| d.unit == GateUnit::Nanos)
}

/// A value of `metric` as a verdict shows it: `20.0 µs` for a latency, the count for a count.
pub fn show_value(metric: &Metric, v: u64) -> String {
    if is_duration(metric) {
        format!("{:.1} µs", us(v))
    } else {
        v.to_string()
    }
}

/// Judge `document` against `gate`: pass when the observed value is at most its bound, skipped when the
/// probe that measures it could not run on the platform (the run says why), no data when the metric is
/// otherwise absent; not judged (the value still observed) when `judged` is false: the run's conditions
/// fell short of what was asked.
pub fn judge(gate: &Gate, document: &RunDocument, judged: bool) -> GateVerdict {
    let observed = observe(&gate.metric, document);
    let skipped = document.skipped.iter().any(|s| s.kind == gate.metric.kind);
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

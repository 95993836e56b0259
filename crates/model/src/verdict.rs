//! Requirement gates and their verdicts: a gate names a metric of the run and a bound; a verdict records
//! what was observed against it. These are plain types (the run document holds verdicts); what each metric
//! is, how it is shown and how it is computed from a run is its kind's gate table in `rtgauge_analysis::kind`,
//! judged in `rtgauge_analysis::judge`.

use crate::kind::ProbeKind;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A metric of a run that a gate can bound: one of a kind's gates (its table is the kind's module of
/// `rtgauge_analysis::kind`), by the name the run document stores after the kind's (`max_ns` of
/// `cyclic_max_ns`), with the threshold of a gate that counts the samples at or above one. Stored as
/// `"metric": "<kind>_<name>"` and, where it has one, `"threshold_ns"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "StoredMetric", try_from = "StoredMetric")]
pub struct Metric {
    /// The kind whose probe measures it.
    pub kind: ProbeKind,
    /// Its name after the kind's, as stored (`max_ns`, `samples_at_or_above`).
    pub name: Cow<'static, str>,
    /// The threshold samples are counted at or above, ns, for a gate that takes one.
    pub threshold_ns: Option<u64>,
}

/// A metric as the run document stores it.
#[derive(Serialize, Deserialize)]
struct StoredMetric {
    metric: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threshold_ns: Option<u64>,
}

impl From<Metric> for StoredMetric {
    fn from(m: Metric) -> StoredMetric {
        StoredMetric {
            metric: format!("{}_{}", m.kind.as_str(), m.name),
            threshold_ns: m.threshold_ns,
        }
    }
}

/// A stored metric whose name starts with no kind's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown metric '{0}'")]
pub struct UnknownMetric(String);

impl TryFrom<StoredMetric> for Metric {
    type Error = UnknownMetric;

    /// The kind is the longest kind name the stored name starts with (`net_latency_max_ns` is
    /// `net_latency`'s, not `net`'s).
    fn try_from(s: StoredMetric) -> Result<Metric, UnknownMetric> {
        ProbeKind::ALL
            .into_iter()
            .filter_map(|k| {
                let name = s.metric.strip_prefix(k.as_str())?.strip_prefix('_')?;
                (!name.is_empty()).then_some((k, name))
            })
            .max_by_key(|(k, _)| k.as_str().len())
            .map(|(kind, name)| Metric {
                kind,
                name: Cow::Owned(name.to_string()),
                threshold_ns: s.threshold_ns,
            })
            .ok_or_else(|| UnknownMetric(s.metric.escape_debug().to_string()))
    }
}

/// A requirement: `metric ≤ max`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    /// The metric bounded.
    #[serde(flatten)]
    pub metric: Metric,
    /// The bound, inclusive: ns for latencies, a count for counts.
    pub max: u64,
}

/// Outcome of one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The observed value is at most the bound.
    Pass,
    /// The observed value is above the bound.
    Fail,
    /// The run has no data for the metric.
    NoData,
    /// The run's conditions fell short of what was asked (a real-time policy refused, …): its figures are
    /// of something else and are not judged against the bound.
    NotJudged,
    /// The probe the gate needs could not run on this platform (a kernel without the hwlat tracer); the
    /// run says why. Neither a pass nor a failure.
    Skipped,
}

impl Outcome {
    /// The word a verdict shows.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::NoData => "NO DATA",
            Outcome::NotJudged => "NOT JUDGED",
            Outcome::Skipped => "SKIPPED",
        }
    }
}

/// Whether gates were given and every one was skipped (their probes could not run on the platform):
/// nothing was judged, which is no pass.
pub fn all_skipped(verdicts: &[GateVerdict]) -> bool {
    !verdicts.is_empty() && verdicts.iter().all(|v| v.outcome == Outcome::Skipped)
}

/// A gate with what was observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateVerdict {
    /// The requirement judged.
    pub gate: Gate,
    /// The metric's value in the run; `None` when the run has no data for it.
    pub observed: Option<u64>,
    /// Whether the requirement holds.
    pub outcome: Outcome,
}

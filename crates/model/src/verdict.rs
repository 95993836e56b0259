//! Requirement gates and their verdicts: a gate names a metric of the run and a bound; a verdict records
//! what was observed against it. Metrics are computed from stored data only, so a stored or imported run
//! can be judged again.

use crate::run::{ProbeResult, RunDocument};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A metric of a run that a gate can bound. Latencies are ns; counts are samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "metric", rename_all = "snake_case")]
pub enum Metric {
    /// Largest timer latency over all threads.
    CyclicMaxNs,
    /// Timer-latency samples at or above `threshold_ns`, all threads (rt-tests "overflows" when the
    /// threshold is the `-h` range).
    CyclicSamplesAtOrAbove { threshold_ns: u64 },
    /// Missed deadlines, all threads.
    CyclicMissed,
    /// Largest busy-loop gap over all CPUs.
    OslatMaxNs,
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::CyclicMaxNs => write!(f, "cyclic max latency"),
            Metric::CyclicSamplesAtOrAbove { threshold_ns } => {
                write!(f, "cyclic samples ≥ {} µs", *threshold_ns as f64 / 1000.0)
            }
            Metric::CyclicMissed => write!(f, "cyclic missed deadlines"),
            Metric::OslatMaxNs => write!(f, "oslat max gap"),
        }
    }
}

impl Metric {
    /// Whether the metric is a latency in ns (else a count).
    pub fn is_latency(self) -> bool {
        matches!(self, Metric::CyclicMaxNs | Metric::OslatMaxNs)
    }

    /// The metric's value in a run, `None` if the run has no probe that measures it.
    pub fn observe(self, doc: &RunDocument) -> Option<u64> {
        let cyclic = doc.probes.iter().filter_map(|p| match p {
            ProbeResult::Cyclic(c) => Some(c),
            _ => None,
        });
        let oslat = doc.probes.iter().filter_map(|p| match p {
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
                        n += samples_at_or_above(t, threshold_ns);
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

/// Samples ≥ `threshold_ns` of one cyclic thread: exact from the rt-tests buckets when they resolve the
/// threshold, else from the HDR histogram (3 significant digits).
pub fn samples_at_or_above(t: &crate::cyclic::CyclicThread, threshold_ns: u64) -> u64 {
    if t.latency.max_ns < threshold_ns {
        return 0;
    }
    if let Some(l) = &t.linear {
        if l.unit_ns > 0 && threshold_ns.is_multiple_of(l.unit_ns) {
            let first = (threshold_ns / l.unit_ns) as usize;
            if first <= l.buckets.len() {
                return l.buckets[first..].iter().sum::<u64>() + l.overflows;
            }
        }
    }
    match t.latency.hdr.decode() {
        Ok(h) => h
            .iter_recorded()
            .filter(|v| v.value_iterated_to() >= threshold_ns)
            .map(|v| v.count_at_value())
            .sum(),
        Err(_) => u64::from(t.latency.max_ns >= threshold_ns),
    }
}

/// A requirement: `metric ≤ max`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    #[serde(flatten)]
    pub metric: Metric,
    pub max: u64,
}

/// Outcome of one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    /// The run has no data for the metric.
    NoData,
}

/// A gate with what was observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub gate: Gate,
    pub observed: Option<u64>,
    pub outcome: Outcome,
}

impl Gate {
    pub fn judge(&self, doc: &RunDocument) -> Verdict {
        let observed = self.metric.observe(doc);
        let outcome = match observed {
            None => Outcome::NoData,
            Some(v) if v <= self.max => Outcome::Pass,
            Some(_) => Outcome::Fail,
        };
        Verdict {
            gate: self.clone(),
            observed,
            outcome,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: u64| {
            if self.gate.metric.is_latency() {
                format!("{:.1} µs", v as f64 / 1000.0)
            } else {
                v.to_string()
            }
        };
        let word = match self.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::NoData => "NO DATA",
        };
        write!(
            f,
            "{word:7} {} ≤ {}: observed {}",
            self.gate.metric,
            show(self.gate.max),
            self.observed.map_or("nothing".to_string(), show)
        )
    }
}

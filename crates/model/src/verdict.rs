//! Requirement gates and their verdicts: a gate names a metric of the run and a bound; a verdict records
//! what was observed against it. These are plain types, a leaf module (the run document holds verdicts);
//! the metrics are computed from a run in `rtgauge_analysis::judge`.

use crate::units::us;
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
    CyclicSamplesAtOrAbove {
        /// The threshold, ns.
        threshold_ns: u64,
    },
    /// Missed deadlines, all threads.
    CyclicMissed,
    /// Largest busy-loop gap over all CPUs.
    OslatMaxNs,
    /// Largest hardware/firmware gap over all CPUs (`hwnoise`, 0 when none reached its threshold).
    HwnoiseMaxNs,
    /// Largest packet latency (`net latency`: one-way or round trip, as measured).
    NetLatencyMaxNs,
    /// Packets sent and never received (`net latency`).
    NetLatencyLost,
    /// Packets received at or after the probe's `--deadline` (`net latency`).
    NetLatencyLate,
    /// Largest |offset| of any time source since it locked (`clock`).
    ClockOffsetMaxNs,
    /// Steps of CLOCK_REALTIME (`clock`).
    ClockSteps,
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::CyclicMaxNs => write!(f, "cyclic max latency"),
            Metric::CyclicSamplesAtOrAbove { threshold_ns } => {
                write!(f, "cyclic samples ≥ {} µs", us(*threshold_ns))
            }
            Metric::CyclicMissed => write!(f, "cyclic missed deadlines"),
            Metric::OslatMaxNs => write!(f, "oslat max gap"),
            Metric::HwnoiseMaxNs => write!(f, "hwnoise max gap"),
            Metric::NetLatencyMaxNs => write!(f, "net latency max"),
            Metric::NetLatencyLost => write!(f, "net latency lost packets"),
            Metric::NetLatencyLate => write!(f, "net latency packets past the deadline"),
            Metric::ClockOffsetMaxNs => write!(f, "clock offset max"),
            Metric::ClockSteps => write!(f, "clock steps"),
        }
    }
}

impl Metric {
    /// The kind of probe that measures it.
    pub fn kind(self) -> crate::kind::ProbeKind {
        use crate::kind::ProbeKind;
        match self {
            Metric::OslatMaxNs => ProbeKind::Oslat,
            Metric::HwnoiseMaxNs => ProbeKind::Hwnoise,
            Metric::ClockOffsetMaxNs | Metric::ClockSteps => ProbeKind::Clock,
            Metric::NetLatencyMaxNs | Metric::NetLatencyLost | Metric::NetLatencyLate => {
                ProbeKind::NetLatency
            }
            Metric::CyclicMaxNs | Metric::CyclicMissed | Metric::CyclicSamplesAtOrAbove { .. } => {
                ProbeKind::Cyclic
            }
        }
    }

    /// Whether the metric is a latency in ns (else a count).
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::CyclicMaxNs
                | Metric::OslatMaxNs
                | Metric::HwnoiseMaxNs
                | Metric::NetLatencyMaxNs
                | Metric::ClockOffsetMaxNs
        )
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

impl fmt::Display for GateVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: u64| {
            if self.gate.metric.is_latency() {
                format!("{:.1} µs", us(v))
            } else {
                v.to_string()
            }
        };
        let observed = match (self.observed, self.outcome) {
            (None, Outcome::Skipped) => {
                "not measured (its probe was skipped: see the run's warnings)".to_string()
            }
            (o, _) => format!("observed {}", o.map_or("nothing".to_string(), show)),
        };
        write!(
            f,
            "{:7} {} ≤ {}: {observed}",
            self.outcome.word(),
            self.gate.metric,
            show(self.gate.max),
        )?;
        if self.outcome == Outcome::NotJudged {
            write!(f, " (conditions not met)")?;
        }
        Ok(())
    }
}

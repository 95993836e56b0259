//! The capacity model of `rtgauge capacity` (the method of the NFV-to-KVM slides: vary the load, collect
//! latency, determine capacity): a latency gate, the curve of load levels measured against it, and the
//! answer — the highest level up to which the gate held at every level.
//!
//! A level holds when the gate holds in *every* repetition (the worst run decides): a capacity is a promise,
//! and one failing run out of three is a failure to keep it.

use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::load::LoadResult;
use serde::Serialize;

/// Which latency figure a gate bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// The largest sample.
    Max,
    /// A percentile, one of [`rtgauge_model::latency::DEFAULT_PERCENTILES`].
    Percentile(f64),
}

/// `cyclic.FIGURE<=BOUND`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityGate {
    /// As written.
    pub text: String,
    /// The figure bounded.
    pub figure: Figure,
    /// The bound, ns.
    pub max_ns: u64,
}

impl CapacityGate {
    /// Parse `cyclic.max<=120us`, `cyclic.p99.9<=50us`, ….
    pub fn parse(s: &str) -> Result<CapacityGate, String> {
        let (metric, bound) = s
            .split_once("<=")
            .ok_or_else(|| format!("'{s}' is not METRIC<=BOUND (e.g. cyclic.max<=120us)"))?;
        let figure = match metric.trim().strip_prefix("cyclic.") {
            Some("max") => Figure::Max,
            Some(p) => {
                let v: f64 = p
                    .strip_prefix('p')
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("'{metric}' is not cyclic.max or cyclic.pNN"))?;
                if !rtgauge_model::latency::DEFAULT_PERCENTILES.contains(&v) {
                    return Err(format!(
                        "'{metric}': percentiles kept are p50, p90, p99, p99.9, p99.99 and p99.999"
                    ));
                }
                Figure::Percentile(v)
            }
            None => return Err(format!("'{metric}' is not a cyclic.* metric")),
        };
        let max_ns = rtgauge_model::units::parse_duration(bound.trim())
            .map_err(|e| format!("bound '{bound}': {e}"))?
            .as_ns();
        Ok(CapacityGate {
            text: s.trim().to_string(),
            figure,
            max_ns,
        })
    }
}

/// One run at one level.
#[derive(Debug, Clone, Serialize)]
pub struct CapacitySample {
    /// Median latency, ns.
    pub p50_ns: u64,
    /// p99, ns.
    pub p99_ns: u64,
    /// p99.9, ns.
    pub p999_ns: u64,
    /// Largest sample, ns.
    pub max_ns: u64,
    /// The gated figure, ns.
    pub value_ns: u64,
    /// Whether the gate held.
    pub holds: bool,
    /// The load that ran, as achieved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadResult>,
}

impl CapacitySample {
    /// The figures of the first thread of a timer-probe run, judged against `gate`; `None` when the run has
    /// no thread.
    pub fn of(r: &CyclicResult, gate: &CapacityGate) -> Option<CapacitySample> {
        let l = &r.threads.first()?.latency;
        let p = |v: f64| l.percentile(v).unwrap_or(l.max_ns);
        let value_ns = match gate.figure {
            Figure::Max => l.max_ns,
            Figure::Percentile(v) => p(v),
        };
        Some(CapacitySample {
            p50_ns: p(50.0),
            p99_ns: p(99.0),
            p999_ns: p(99.9),
            max_ns: l.max_ns,
            value_ns,
            holds: value_ns <= gate.max_ns,
            load: r.load.clone(),
        })
    }
}

/// One level of the curve: its runs and the worst of them.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityPoint {
    /// Load level, duty-cycle percent.
    pub level: u8,
    /// The runs at this level.
    pub runs: Vec<CapacitySample>,
    /// Worst (largest) gated figure over the runs.
    pub worst_ns: u64,
    /// Whether the gate held in every run.
    pub holds: bool,
}

impl CapacityPoint {
    /// The level with its runs.
    pub fn new(level: u8, runs: Vec<CapacitySample>) -> CapacityPoint {
        CapacityPoint {
            level,
            holds: runs.iter().all(|s| s.holds),
            worst_ns: runs.iter().map(|s| s.value_ns).max().unwrap_or(0),
            runs,
        }
    }
}

/// What `capacity` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    /// The requirement.
    pub gate: CapacityGate,
    /// The load varied, as written.
    pub load: String,
    /// The measured CPU.
    pub cpu: u32,
    /// Length of each run, ns.
    pub duration_ns: u64,
    /// Runs per level.
    pub repeat: u32,
    /// The highest level up to which every measured level held; None = no level holds.
    pub capacity_level: Option<u8>,
    /// Every level measured, by level.
    pub curve: Vec<CapacityPoint>,
}

/// The highest level such that it and every lower level held.
pub fn capacity_level(curve: &[CapacityPoint]) -> Option<u8> {
    curve.iter().take_while(|p| p.holds).last().map(|p| p.level)
}

/// The bisection of `--search STEP` over 0..=100 %: the next level to measure given the highest level seen
/// to hold (`lo`) and the lowest seen to fail (`hi`), until they are `step` apart (about log2(100 / step)
/// + 2 levels measured). Starts at 100 %.
pub fn next_search_level(lo: Option<u8>, hi: Option<u8>, step: u8) -> Option<u8> {
    match (lo, hi) {
        (None, None) => Some(100),
        (Some(_), None) => None,      // 100 % holds
        (None, Some(100)) => Some(0), // then try idle
        (None, Some(_)) => None,      // idle fails: nothing holds
        (Some(l), Some(h)) if h > l && h - l > step => Some(l + (h - l) / 2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_and_refuse_nonsense() {
        let g = CapacityGate::parse("cyclic.max<=120us").expect("valid");
        assert_eq!((g.figure, g.max_ns), (Figure::Max, 120_000));
        let g = CapacityGate::parse("cyclic.p99.9 <= 50us").expect("valid");
        assert_eq!(g.figure, Figure::Percentile(99.9));
        assert!(CapacityGate::parse("cyclic.p42<=1us").is_err());
        assert!(CapacityGate::parse("oslat.max<=1us").is_err());
        assert!(CapacityGate::parse("cyclic.max<120us").is_err());
    }

    #[test]
    fn capacity_stops_at_the_first_failing_level() {
        let pt = |level: u8, holds: bool| CapacityPoint {
            level,
            runs: vec![],
            worst_ns: 0,
            holds,
        };
        assert_eq!(
            capacity_level(&[pt(0, true), pt(50, true), pt(100, false)]),
            Some(50)
        );
        assert_eq!(
            capacity_level(&[pt(0, true), pt(50, false), pt(100, true)]),
            Some(0)
        );
        assert_eq!(capacity_level(&[pt(0, false), pt(50, true)]), None);
    }

    #[test]
    fn the_search_bisects_between_holding_and_failing() {
        assert_eq!(next_search_level(None, None, 5), Some(100));
        assert_eq!(next_search_level(Some(100), None, 5), None);
        assert_eq!(next_search_level(None, Some(100), 5), Some(0));
        assert_eq!(next_search_level(Some(0), Some(100), 5), Some(50));
        assert_eq!(next_search_level(Some(50), Some(100), 5), Some(75));
        assert_eq!(next_search_level(Some(70), Some(75), 5), None);
        assert_eq!(next_search_level(None, Some(0), 5), None);
    }
}

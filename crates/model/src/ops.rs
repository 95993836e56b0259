//! OS-primitive costs (`rtgauge ops`), in the manner of lmbench's lat_* tools: per operation, a timed loop
//! run as repeated samples; each sample is the cost of one operation, ns, averaged over the sample's
//! iterations and reduced by the overhead lmbench subtracts for that operation. The distribution of the
//! samples is kept whole (HDR); the median is the headline figure, every sample is a replicate.

use crate::latency::LatencyStats;
use crate::rt::Setting;
use serde::{Deserialize, Serialize};

/// How the operations were measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpsConfig {
    /// Operations measured, in order (names as in [`OpResult::op`]).
    pub ops: Vec<String>,
    /// Timed samples per operation (after warm-up).
    pub repetitions: u32,
    /// Target length of one sample, ns: fast operations repeat inside a sample until it lasts this long.
    pub sample_ns: u64,
    /// Processes in the context-switch ring.
    pub ctx_procs: u32,
    /// Working set each ring process sums between switches, bytes.
    pub ctx_size_bytes: u64,
    /// Size of the file mapped by `mmap`, bytes (a tenth of it is touched, every 16 KiB).
    pub mmap_size_bytes: u64,
    /// Intervals of the sleep-overshoot operations, ns.
    pub sleep_intervals_ns: Vec<u64>,
    /// Program run by fork+execve and by fork+/bin/sh -c.
    pub exec_program: String,
}

/// One operation's cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpResult {
    /// Stable name: `null_syscall`, `read`, `pipe_rtt`, `sleep_100us`, …
    pub op: String,
    /// What a reader sees: "null syscall (getppid)".
    pub label: String,
    /// Operations timed per sample (chosen during warm-up so a sample lasts about `sample_ns`).
    pub iterations_per_sample: u64,
    /// Cost subtracted from every sample, ns per operation (loop overhead, send-only cost, …).
    pub overhead_ns: f64,
    /// Median of the samples, ns per operation.
    pub median_ns: f64,
    /// Every sample, ns per operation, in the order taken.
    pub samples_ns: Vec<f64>,
    /// Distribution of the samples (rounded to whole ns, at least 1).
    pub latency: LatencyStats,
}

impl OpResult {
    /// p99 of the samples (the maximum when there are too few for a percentile).
    pub fn p99_ns(&self) -> u64 {
        self.latency.percentile(99.0).unwrap_or(self.latency.max_ns)
    }
}

/// Result of the ops probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpsResult {
    /// How the probe was configured.
    pub config: OpsConfig,
    /// CPU the measuring process (and every process it starts) was pinned to.
    pub cpu: Setting<Option<u32>>,
    /// One result per measured operation, in the order run.
    pub ops: Vec<OpResult>,
    /// Operations that could not be measured, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<(String, String)>,
    /// The load generated while the probe measured (`--load`), as achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadResult>,
}

/// Median of values (mean of the middle two for an even count); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert_eq!(median(&[]), 0.0);
    }
}

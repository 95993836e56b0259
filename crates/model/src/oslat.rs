//! Result of the busy-loop OS-noise probe (`rtgauge oslat`, oslat's measurement): the gaps a polling thread
//! sees between consecutive reads of the CPU's counter.

use crate::kind::StopReason;
use crate::latency::{LatencyStats, TimelineEntry};
use crate::rt::{ProcessConditions, ThreadConditions};
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Extra work done in every iteration (oslat `-w`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// No extra work: the loop only reads the counter.
    No,
    /// A memmove of `workload_mem_bytes` in every iteration.
    Memmove,
}

/// How the probe was configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OslatConfig {
    /// The measured CPUs, one polling thread each (`-c`).
    pub cpus: Vec<u32>,
    /// CPU of the main (non-measuring) thread (`-C`); `None` = not pinned (imported runs).
    pub main_cpu: Option<u32>,
    /// How long the measurement runs after preheat (`-D`).
    #[serde(rename = "duration_ns")]
    pub duration: Nanos,
    /// SCHED_FIFO priority (`-f`); `None` = SCHED_OTHER.
    pub rtprio: Option<i32>,
    /// Busy-loop warm-up before measuring, ns (lets frequency and caches settle).
    pub preheat_ns: u64,
    /// Preheat only the first CPU's thread (`-s`).
    pub single_preheat: bool,
    /// rt-tests buckets (`-b`, 4..1024) of `bucket_width_ns` (`-W`, default 1000).
    pub bucket_count: u32,
    /// Width of one rt-tests bucket, ns (`-W`).
    pub bucket_width_ns: u64,
    /// Subtract the smallest preheat gap from every rt-tests bucket value (`-B`).
    pub bias: bool,
    /// Extra work in every iteration (`-w`).
    pub workload: Workload,
    /// Bytes moved per iteration by the memmove workload (`-m`); 0 without it.
    pub workload_mem_bytes: u64,
    /// Stop at the first gap above this (`-T`).
    pub trace_threshold_ns: Option<u64>,
    /// Gaps above this count as lost CPU time for the availability figure.
    pub availability_threshold_ns: u64,
    /// Thresholds for the gaps-per-second counts.
    pub thresholds_ns: Vec<u64>,
    /// How many worst gaps are kept with their timestamps.
    pub worst_count: u32,
    /// Length of one timeline interval, ns.
    pub timeline_interval_ns: u64,
}

/// The counter the loop reads and how its frequency was established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterInfo {
    /// `tsc` (x86-64 `lfence; rdtsc`), `cntvct_el0` (aarch64) or `clock_gettime` (fallback, ns).
    pub source: String,
    /// Counter ticks per second.
    pub frequency_hz: u64,
    /// How the frequency was measured.
    pub calibration: String,
    /// Spread of the calibration runs, parts per million.
    pub calibration_spread_ppm: f64,
    /// After the run: (counter-derived elapsed − CLOCK_MONOTONIC_RAW elapsed) / elapsed, ppm. Small values
    /// confirm the frequency over the whole run.
    pub cross_check_ppm: f64,
}

/// How many gaps exceeded a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThresholdCount {
    /// The threshold, ns.
    pub threshold_ns: u64,
    /// Gaps above the threshold.
    pub count: u64,
    /// Those gaps per second of measurement.
    pub per_second: f64,
}

/// One gap with when it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// Length of the gap, ns.
    pub gap_ns: u64,
    /// CLOCK_MONOTONIC time at which the gap began, ns.
    pub monotonic_ns: u64,
}

/// oslat's text/JSON histogram: `bucket_count` buckets of `width_ns`, the last one including overflows;
/// `overflow_sum` is oslat's "extra" amount in bucket widths. Bucket i covers [i·w, (i+1)·w) after bias and
/// is labelled by its upper edge, as oslat does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OslatBuckets {
    /// Width of one bucket, ns.
    pub width_ns: u64,
    /// Smallest preheat gap subtracted from every value with `-B`, ns (0 without).
    pub bias_ns: u64,
    /// Count per bucket; the last includes the overflows.
    pub counts: Vec<u64>,
    /// Sum of the overflowing gaps beyond the last bucket, in bucket widths (oslat's "extra").
    pub overflow_sum: u64,
}

/// One measured CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OslatThread {
    /// Thread index, from 0.
    pub index: u32,
    /// The measured CPU.
    pub cpu: u32,
    /// Kernel thread id.
    pub tid: i32,
    /// NUMA node of the CPU; `None` if unknown.
    pub node: Option<u32>,
    /// What the thread actually got: policy, priority, affinity.
    pub conditions: ThreadConditions,
    /// Loop iterations measured.
    pub iterations: u64,
    /// How long the thread measured, ns.
    pub duration_ns: u64,
    /// Mean loop cost, ns per iteration (duration / iterations).
    pub loop_ns: f64,
    /// Distribution of every gap, exact min/max.
    pub gaps: LatencyStats,
    /// The rt-tests buckets.
    pub buckets: OslatBuckets,
    /// Gaps above each of `thresholds_ns`, in the same order.
    pub over_thresholds: Vec<ThresholdCount>,
    /// Time lost in gaps above `availability_threshold_ns`.
    pub lost_ns: u64,
    /// Share of the time not lost in such gaps, % (rtla osnoise's "% of CPU available"). None for an
    /// imported result: oslat's buckets do not hold the time its gaps took.
    #[serde(default)]
    pub availability_pct: Option<f64>,
    /// The worst gaps, largest first.
    pub worst: Vec<Gap>,
    /// The distribution per time window (for comparisons); empty in imported results.
    #[serde(default, skip_serializing_if = "crate::latency::Windows::is_empty")]
    pub windows: crate::latency::Windows,
    /// Per interval: count = iterations, max_ns = largest gap, missed = gaps above the availability threshold.
    pub timeline: Vec<TimelineEntry>,
    /// Timeline intervals lost because the reader fell behind (should be 0).
    #[serde(default)]
    pub timeline_dropped: u64,
    /// The loop's own bookkeeping, timed apart from the gaps; `None` in imported results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bookkeeping: Option<Bookkeeping>,
    /// Faults and preemptions the thread took while it measured; `None` in imported results and
    /// checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<crate::rt::ThreadDisturbance>,
}

/// The measuring loop's own work — the slow path of a long gap and the block every 1024 iterations (stop
/// flag, end, timeline, hand-over) — timed apart from the gaps, so that it is never counted as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Bookkeeping {
    /// Blocks timed.
    pub blocks: u64,
    /// Their time in all, ns (the gaps' sum and this make the measured time).
    pub total_ns: u64,
    /// The longest, ns.
    pub max_ns: u64,
    /// Blocks that took as long as a gap worth recording (interrupted by the platform): their time was left
    /// in the next gap instead, so that no interruption of a gap's size is hidden in bookkeeping.
    pub interrupted: u64,
}

impl OslatThread {
    /// Its gaps of `threshold_ns` or more, where counted (an import whose buckets do not tell has none).
    pub fn over(&self, threshold_ns: u64) -> Option<&ThresholdCount> {
        self.over_thresholds
            .iter()
            .find(|x| x.threshold_ns == threshold_ns)
    }
}

/// The whole probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OslatResult {
    /// How the probe was configured.
    pub config: OslatConfig,
    /// The counter the loop reads.
    pub counter: CounterInfo,
    /// What the process got: mlockall, cpu_dma_latency, and the like.
    pub conditions: ProcessConditions,
    /// One entry per measured CPU, in `cpus` order.
    pub threads: Vec<OslatThread>,
    /// Why the probe ended.
    pub stop_reason: StopReason,
    /// CPU and gap that crossed `-T`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_hit: Option<(u32, u64)>,
    /// How long the measurement ran, preheat excluded, ns.
    pub elapsed_ns: u64,
    /// What the system did while the probe ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<crate::accounting::Accounting>,
    /// Why the gaps happened: per-interval counters and, with `--trace`, each worst gap's breakdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::attribution::Why>,
    /// The load generated while the probe measured (`--load`), as achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadResult>,
}

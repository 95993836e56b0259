//! Result of the timer wake-up latency probe (`rtgauge cyclic`, cyclictest's measurement).

use crate::kind::StopReason;
use crate::latency::Spike;
use crate::latency::{LatencyStats, TimelineEntry};
use crate::rt::{ProcessConditions, SchedPolicy, ThreadConditions};
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// How the probe was configured (after defaults and cyclictest's rules were applied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CyclicConfig {
    /// Measurement threads (cyclictest `-t`).
    pub threads: u32,
    /// Base interval of thread 0.
    pub interval_ns: u64,
    /// Interval increment per thread (cyclictest `-d`; forced to 0 with a histogram).
    pub distance_ns: u64,
    /// Scheduling policy of the measurement threads (cyclictest `-p`/`--policy`).
    pub policy: SchedPolicy,
    /// Priority of thread 0 (decremented per thread with `priospread`).
    pub priority: i32,
    /// Whether priorities decrease by one per thread (cyclictest `-Q`/`--priospread`).
    pub priospread: bool,
    /// CPU of each thread, in thread order (`None` = not pinned).
    pub cpus: Vec<Option<u32>>,
    /// How long the probe runs (cyclictest `-D`); `None` = until `loops`, a signal or a break.
    #[serde(rename = "duration_ns")]
    pub duration: Option<Nanos>,
    /// Cycles per thread (cyclictest `-l`).
    pub loops: Option<u64>,
    /// `clock_nanosleep` relative to the previous wake-up instead of absolute (cyclictest `-r`).
    pub relative: bool,
    /// Reproduce cyclictest's skip-ahead: periods already over at wake-up are skipped, not measured.
    pub skip_missed: bool,
    /// rt-tests-style linear histogram: number of buckets (`-h`/`-H`).
    pub hist_buckets: Option<u32>,
    /// Width of one rt-tests bucket and unit of rt-tests output: 1000 (µs) or 1 (ns, `-N`).
    pub unit_ns: u64,
    /// Samples at or above this are listed as spikes (`--spike`); `None` = no spike list.
    pub spike_threshold_ns: Option<u64>,
    /// The run stops at the first sample above this (cyclictest `-b`); `None` = never.
    pub break_threshold_ns: Option<u64>,
    /// Length of one timeline interval, ns.
    pub timeline_interval_ns: u64,
}

impl CyclicConfig {
    /// The range of the rt-tests histogram (`-h`): samples at or above it are its overflows.
    pub fn overflow_threshold_ns(&self) -> Option<u64> {
        self.hist_buckets.map(|b| u64::from(b) * self.unit_ns)
    }
}

/// The rt-tests-compatible linear histogram of one thread (`-h`): buckets of `unit_ns`, the overflow count and
/// the cycle numbers of the first overflows, exactly as cyclictest keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinearHistogram {
    /// Width of one bucket, ns (1000 for µs buckets, 1 with `-N`).
    pub unit_ns: u64,
    /// Count per bucket; bucket i holds samples with `value / unit_ns == i`.
    pub buckets: Vec<u64>,
    /// Samples at or above the last bucket's upper bound.
    pub overflows: u64,
    /// Cycle numbers of the first `buckets.len()` overflows (cyclictest's list).
    pub overflow_cycles: Vec<u64>,
}

/// How many distinct stalls may wait in a measuring thread for room in its ring to the main thread before
/// later ones share the newest one's window (`late_coalesced`): 64 vCPUs of a guest the emulator ran 80×
/// slower than real time lost 294 stalls in all (1–17 per thread) when only one could wait.
pub const LATE_WAITING: usize = 64;

/// One measurement thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CyclicThread {
    /// Thread index, from 0 (cyclictest's `T:`).
    pub index: u32,
    /// Kernel thread id (in parentheses after cyclictest's `T:`).
    pub tid: i32,
    /// This thread's period, ns.
    pub interval_ns: u64,
    /// What the thread actually got: policy, priority, affinity.
    pub conditions: ThreadConditions,
    /// NUMA node of the thread's CPU, if known.
    pub node: Option<u32>,
    /// Periods measured (cyclictest's `C:`).
    pub cycles: u64,
    /// Periods that were already over when the thread woke (lateness ≥ interval). With `skip_missed` these
    /// are the periods cyclictest would skip without a trace.
    pub missed_deadlines: u64,
    /// Periods skipped without a sample (only with `skip_missed`).
    pub skipped_periods: u64,
    /// Wake-ups before the intended time (clock anomaly; recorded as 0 latency).
    pub early_wakeups: u64,
    /// Last sample (cyclictest's `Act:`).
    pub last_ns: u64,
    /// The latency distribution: exact count, min, max, mean, histogram and percentiles.
    pub latency: LatencyStats,
    /// The rt-tests linear histogram (`-h`); `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearHistogram>,
    /// The distribution per time window (for comparisons); empty in imported results.
    #[serde(default, skip_serializing_if = "crate::latency::Windows::is_empty")]
    pub windows: crate::latency::Windows,
    /// Count, max and missed deadlines per timeline interval, in time order.
    pub timeline: Vec<TimelineEntry>,
    /// Timeline intervals lost because the reader fell behind (should be 0).
    #[serde(default)]
    pub timeline_dropped: u64,
    /// Stalls not handed to the episode tracker (runs before 2026-11-28; since then a stall is never
    /// dropped, see `late_coalesced`).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub late_dropped: u64,
    /// Stalls handed to the episode tracker inside the window of the one before them: the main thread's
    /// ring was full and 64 earlier stalls already waited for room in the thread (should be 0).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub late_coalesced: u64,
    /// Late samples merged into the stall before them while that ring was full: handed over as one
    /// sample spanning the stall's window (its count of late samples short by these).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub late_merged: u64,
    /// Faults and preemptions the thread took while it measured; `None` in imported results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<crate::rt::ThreadDisturbance>,
}

/// The whole probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CyclicResult {
    /// How the probe was configured.
    pub config: CyclicConfig,
    /// What the process got: mlockall, cpu_dma_latency, and the like.
    pub conditions: ProcessConditions,
    /// One entry per measurement thread, in thread order.
    pub threads: Vec<CyclicThread>,
    /// The spikes kept (the first `--spike-nodes`), in the order they happened.
    pub spikes: Vec<Spike>,
    /// Spikes seen in total (the list keeps only the first `--spike-nodes`).
    pub spikes_total: u64,
    /// Why the probe ended.
    pub stop_reason: StopReason,
    /// Thread index and value (ns) that hit the `-b` threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub break_hit: Option<(u32, u64)>,
    /// Wall-clock length of the measurement, ns.
    pub elapsed_ns: u64,
    /// What the system did while the probe ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<crate::accounting::Accounting>,
    /// Why the spikes happened: per-interval counters and, with `--trace`, each spike's breakdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::attribution::Why>,
    /// The load generated while the probe measured (`--load`), as achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadResult>,
}

impl CyclicThread {
    /// Add the same thread's next segment `b`, which started `offset_ns` after this one's start: counts,
    /// timeline and the exact distribution (the monitor's periods are segments of 10 s). The timeline stays
    /// bounded ([`crate::latency::push_bounded`], its buckets `*span_ns` long): a day-long store period of
    /// 10 s segments keeps at most 2,048 entries per thread, each with its bucket's worst sample.
    pub fn absorb(&mut self, b: CyclicThread, offset_ns: u64, span_ns: &mut u64) {
        let a = self;
        a.cycles += b.cycles;
        a.missed_deadlines += b.missed_deadlines;
        a.skipped_periods += b.skipped_periods;
        a.early_wakeups += b.early_wakeups;
        a.last_ns = b.last_ns;
        a.timeline_dropped += b.timeline_dropped;
        for e in &b.timeline {
            crate::latency::push_bounded(
                &mut a.timeline,
                span_ns,
                TimelineEntry {
                    start_ns: e.start_ns + offset_ns,
                    ..*e
                },
            );
        }
        if let (Ok(mut h), Ok(hb)) = (a.latency.hdr.decode(), b.latency.hdr.decode()) {
            if h.add(&hb).is_ok() {
                let min = match (a.latency.count, b.latency.count) {
                    (0, _) => b.latency.min_ns,
                    (_, 0) => a.latency.min_ns,
                    _ => a.latency.min_ns.min(b.latency.min_ns),
                };
                a.latency = LatencyStats::from_parts(
                    &h,
                    min,
                    a.latency.max_ns.max(b.latency.max_ns),
                    a.latency.sum_ns.saturating_add(b.latency.sum_ns),
                    a.latency.clamped + b.latency.clamped,
                );
            }
        }
    }

    /// Samples ≥ `threshold_ns` of one cyclic thread: exact from the rt-tests buckets when they resolve the
    /// threshold, else from the HDR histogram (3 significant digits).
    pub fn samples_at_or_above(&self, threshold_ns: u64) -> u64 {
        if self.latency.max_ns < threshold_ns {
            return 0;
        }
        if let Some(l) = &self.linear {
            if l.unit_ns > 0 && threshold_ns.is_multiple_of(l.unit_ns) {
                let first = (threshold_ns / l.unit_ns) as usize;
                if first <= l.buckets.len() {
                    return l.buckets[first..].iter().sum::<u64>() + l.overflows;
                }
            }
        }
        match self.latency.hdr.decode() {
            Ok(h) => h
                .iter_recorded()
                .filter(|v| v.value_iterated_to() >= threshold_ns)
                .map(|v| v.count_at_value())
                .sum(),
            Err(_) => u64::from(self.latency.max_ns >= threshold_ns),
        }
    }
}

impl CyclicResult {
    /// `(threshold, samples at or above it over all threads)` when there is an rt-tests histogram.
    pub fn overflows(&self) -> Option<(u64, u64)> {
        let thr = self.config.overflow_threshold_ns()?;
        let n = self
            .threads
            .iter()
            .map(|t| t.samples_at_or_above(thr))
            .sum();
        Some((thr, n))
    }
}

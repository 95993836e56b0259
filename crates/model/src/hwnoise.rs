//! Hardware and firmware noise (`rtgauge hwnoise`): what the kernel's own detectors find — a kernel thread
//! that spins with interrupts disabled for `width` of every `window` on each chosen CPU, reading the clock
//! in a tight loop; any gap between two reads that nothing in the OS can have caused is hardware, firmware
//! (SMIs) or, in a guest, the hypervisor. Two tracers do it ([`HwTracer`]): `hwlat` (hwlatdetect's) reports
//! each window whose largest gap is at or above the threshold (`tracing_thresh`), inner (between the reads
//! of one pair) and outer (between pairs), with the NMIs that fell in it; `osnoise` with
//! `OSNOISE_IRQ_DISABLE` (rtla hwnoise's, Linux 6.3 and later) reports every noise at or above the
//! threshold and, per period (the window), the time sampled and the noise in it.

use crate::attribution::Why;
use crate::kind::StopReason;
use crate::latency::LatencyStats;
use crate::CpuSet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// The kernel tracer that samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HwTracer {
    /// `hwlat` (`kernel/trace/trace_hwlat.c`): hwlatdetect's.
    #[default]
    Hwlat,
    /// `osnoise` with the `OSNOISE_IRQ_DISABLE` option (`kernel/trace/trace_osnoise.c`): rtla hwnoise's.
    Osnoise,
}

impl HwTracer {
    /// The tracer's name in `available_tracers`.
    pub fn as_str(self) -> &'static str {
        match self {
            HwTracer::Hwlat => "hwlat",
            HwTracer::Osnoise => "osnoise",
        }
    }
}

/// How the probe was configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HwnoiseConfig {
    /// The tracer that sampled (runs stored before there was a choice: `hwlat`).
    #[serde(default)]
    pub tracer: HwTracer,
    /// The CPUs sampled (`tracing_cpumask`).
    pub cpus: CpuSet,
    /// `per-cpu` (a sampling thread on every chosen CPU at once), `round-robin` (one thread moved to the
    /// next CPU each window), or `none` (kernels before 5.14: one thread, wherever it runs).
    pub mode: String,
    /// Gaps at or above this are reported (`tracing_thresh`), ns.
    pub threshold_ns: u64,
    /// Time spent sampling with interrupts off in every window, ns.
    pub width_ns: u64,
    /// The window, ns.
    pub window_ns: u64,
    /// How long it measured, when bounded.
    #[serde(
        rename = "duration_ns",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<Nanos>,
}

/// One window whose largest gap reached the threshold. From `osnoise`: the period's largest noise as
/// `inner_ns` (`outer_ns` 0), the noises at or above the threshold as `count`, the period's NMIs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HwGap {
    /// The CPU it was sampled on.
    pub cpu: u32,
    /// When, ns after the probe's start (from the sample's wall-clock stamp).
    pub at_ns: u64,
    /// Largest gap between the two clock reads of one pair, ns.
    pub inner_ns: u64,
    /// Largest gap between two pairs, ns.
    pub outer_ns: u64,
    /// Gaps above the threshold in the window.
    pub count: u64,
    /// NMIs taken in the window.
    pub nmi_count: u64,
    /// Time in NMI handlers in the window, ns.
    pub nmi_ns: u64,
}

impl HwGap {
    /// The gap the window is judged by: the larger of inner and outer.
    pub fn gap_ns(&self) -> u64 {
        self.inner_ns.max(self.outer_ns)
    }
}

/// One CPU's noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HwnoiseCpu {
    /// The CPU.
    pub cpu: u32,
    /// The reported windows' gaps ([`HwGap::gap_ns`]): only windows at or above the threshold (a quiet CPU
    /// has none, and its max is 0).
    pub gaps: LatencyStats,
    /// NMIs in the reported windows.
    pub nmi_count: u64,
    /// Time sampled with interrupts off, ns (`osnoise` reports it per period; `hwlat` does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_ns: Option<u64>,
    /// Noise in that time, ns: the sum of every noise at or above the threshold (`osnoise` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_ns: Option<u64>,
}

impl HwnoiseCpu {
    /// The share of the sampled time the CPU was available, % (rtla's "% CPU Aval"), where known.
    pub fn available_pct(&self) -> Option<f64> {
        let (s, n) = (self.sampled_ns?, self.noise_ns?);
        (s > 0).then(|| 100.0 * (1.0 - n.min(s) as f64 / s as f64))
    }
}

/// Result of the hwnoise probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HwnoiseResult {
    /// How the probe was configured.
    pub config: HwnoiseConfig,
    /// How it was measured: "hwlat tracer, per-cpu mode" and the kernel's own settings as read back.
    pub method: String,
    /// One entry per sampled CPU, in CPU order.
    pub cpus: Vec<HwnoiseCpu>,
    /// The reported windows, the largest gaps first (at most [`MAX_GAPS`]).
    pub gaps: Vec<HwGap>,
    /// Reported windows in all (beyond [`MAX_GAPS`] they are counted, not kept).
    pub gaps_total: u64,
    /// Trace entries the kernel dropped before they were read.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub lost: u64,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// How long it measured, ns.
    pub elapsed_ns: u64,
    /// The interval counters of the sampled CPUs (SMIs among them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<Why>,
}

/// Reported windows kept in a result.
pub const MAX_GAPS: usize = 1000;

impl HwnoiseResult {
    /// The largest gap over all CPUs, ns (0: none reached the threshold).
    pub fn max_ns(&self) -> u64 {
        self.cpus.iter().map(|c| c.gaps.max_ns).max().unwrap_or(0)
    }
}

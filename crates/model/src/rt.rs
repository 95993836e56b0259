//! Real-time conditions a probe ran under, each recorded as *requested* versus *achieved*, so that a result
//! taken without privilege (SCHED_OTHER instead of FIFO, no mlockall, no cpu_dma_latency) says so itself.

use crate::CpuSet;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A setting the probe asked for and what it actually got (read back from the kernel after setting it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting<T> {
    /// What the probe asked for.
    pub requested: T,
    /// What it got, read back from the kernel.
    pub achieved: T,
    /// Why `achieved` differs from `requested` (the OS error), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl<T: PartialEq> Setting<T> {
    /// Whether the request took effect.
    pub fn ok(&self) -> bool {
        self.requested == self.achieved
    }
}

/// Linux scheduling policies (sched(7)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedPolicy {
    /// SCHED_OTHER: the default time-sharing policy.
    Other,
    /// SCHED_BATCH: time-sharing for CPU-bound batch work.
    Batch,
    /// SCHED_IDLE: runs only when nothing else wants the CPU.
    Idle,
    /// SCHED_FIFO: real-time, first in first out at a priority.
    Fifo,
    /// SCHED_RR: real-time, round robin at a priority.
    Rr,
    /// SCHED_DEADLINE: earliest-deadline-first with a runtime budget.
    Deadline,
}

impl SchedPolicy {
    /// Whether the policy takes a real-time priority 1..99.
    pub fn is_realtime(self) -> bool {
        matches!(self, SchedPolicy::Fifo | SchedPolicy::Rr)
    }
    /// Parse the names cyclictest accepts for `--policy`.
    pub fn parse(name: &str) -> Option<SchedPolicy> {
        Some(match name.to_ascii_lowercase().as_str() {
            "other" | "normal" => SchedPolicy::Other,
            "batch" => SchedPolicy::Batch,
            "idle" => SchedPolicy::Idle,
            "fifo" => SchedPolicy::Fifo,
            "rr" => SchedPolicy::Rr,
            "deadline" => SchedPolicy::Deadline,
            _ => return None,
        })
    }
}

impl fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchedPolicy::Other => "other",
            SchedPolicy::Batch => "batch",
            SchedPolicy::Idle => "idle",
            SchedPolicy::Fifo => "fifo",
            SchedPolicy::Rr => "rr",
            SchedPolicy::Deadline => "deadline",
        })
    }
}

/// Process-wide conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessConditions {
    /// `mlockall(MCL_CURRENT|MCL_FUTURE)`.
    pub mlockall: Setting<bool>,
    /// Value held in `/dev/cpu_dma_latency` for the run, µs (`None` = not touched). `achieved` is the value
    /// read back from the device while held.
    pub cpu_dma_latency_us: Setting<Option<i32>>,
    /// The value `/dev/cpu_dma_latency` had before the run (restored when the probe closes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_before_us: Option<i32>,
    /// Affinity of the main (reporting) thread.
    pub main_affinity: Setting<Option<CpuSet>>,
    /// Other runs that measured some of the same CPUs at the same time: each disturbed the other, so
    /// neither result describes the platform alone. Empty (and absent from the document) when alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contended: Vec<Contender>,
}

/// Another run that held a claim on some of the measured CPUs during this one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contender {
    /// Process id of the other run.
    pub pid: u32,
    /// Its command line, as it wrote it into its claim.
    pub command: String,
    /// The CPUs both measured.
    pub cpus: CpuSet,
}

/// What disturbed one measuring thread from the kernel's side while it measured (getrusage RUSAGE_THREAD
/// from its first sample to its last): rtgauge's own interference shows here first. A fork of the probe
/// write-protects its pages (a minor fault at the next store); anything runnable above it on its CPU
/// preempts it (an involuntary switch). Both ~0 on a quiet, locked, isolated CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThreadDisturbance {
    /// Minor page faults the thread took (no I/O: a write-protect or first-touch fault).
    pub minor_faults: u64,
    /// Major page faults (the page had to be read in).
    pub major_faults: u64,
    /// Times the thread was preempted while runnable.
    pub involuntary_switches: u64,
}

impl ThreadDisturbance {
    /// What was added since `before` (counters that went backwards count 0).
    pub fn since(&self, before: &ThreadDisturbance) -> ThreadDisturbance {
        ThreadDisturbance {
            minor_faults: self.minor_faults.saturating_sub(before.minor_faults),
            major_faults: self.major_faults.saturating_sub(before.major_faults),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(before.involuntary_switches),
        }
    }
}

/// Conditions of one measurement thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadConditions {
    /// Scheduling policy.
    pub policy: Setting<SchedPolicy>,
    /// Real-time priority (0 for non-real-time policies).
    pub priority: Setting<i32>,
    /// CPU the thread was pinned to (`None` = not pinned).
    pub cpu: Setting<Option<u32>>,
}

//! What the system did while a probe ran (seed 001's "CPU accounting"): the tool's own CPU time and context
//! switches, and per CPU the time stolen by the hypervisor, spent in hard and soft interrupts, and the
//! interrupt counts. Deltas over the probe, so that a latency result carries its cost and its disturbances.

use serde::{Deserialize, Serialize};

/// One CPU's share of the deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuAccounting {
    /// The CPU number these deltas are for.
    pub cpu: u32,
    /// Time the hypervisor ran something else while this vCPU wanted to run (`steal` of /proc/stat).
    pub steal_ns: u64,
    /// Time the CPU spent in hard-interrupt handlers (`irq` of /proc/stat), ns.
    pub irq_ns: u64,
    /// Time the CPU spent in softirqs (`softirq` of /proc/stat), ns.
    pub softirq_ns: u64,
    /// Time the CPU was idle (`idle` of /proc/stat), ns.
    pub idle_ns: u64,
    /// Hardware and IPI interrupts (sum of the CPU's column of /proc/interrupts).
    pub interrupts: u64,
    /// Softirqs raised (sum of the CPU's column of /proc/softirqs).
    pub softirqs: u64,
}

/// Deltas over one probe.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Accounting {
    /// Wall-clock length of the probe, ns.
    pub wall_ns: u64,
    /// CPU time of the rtgauge process (all threads).
    pub tool_user_ns: u64,
    /// System (kernel) CPU time of the rtgauge process, all threads, ns.
    pub tool_system_ns: u64,
    /// Voluntary context switches of the rtgauge process (it blocked or slept).
    pub tool_voluntary_switches: u64,
    /// Involuntary context switches of the rtgauge process (something preempted it).
    pub tool_involuntary_switches: u64,
    /// System-wide context switches (`ctxt` of /proc/stat).
    pub context_switches: u64,
    /// Per-CPU deltas, one entry per CPU read.
    pub cpus: Vec<CpuAccounting>,
}

//! What the system did while a probe ran (seed 001's "CPU accounting"): the tool's own CPU time and context
//! switches, and per CPU the time stolen by the hypervisor, spent in hard and soft interrupts, and the
//! interrupt counts. Deltas over the probe, so that a latency result carries its cost and its disturbances.

use serde::{Deserialize, Serialize};

/// One CPU's share of the deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuAccounting {
    pub cpu: u32,
    /// Time the hypervisor ran something else while this vCPU wanted to run (`steal` of /proc/stat).
    pub steal_ns: u64,
    pub irq_ns: u64,
    pub softirq_ns: u64,
    pub idle_ns: u64,
    /// Hardware and IPI interrupts (sum of the CPU's column of /proc/interrupts).
    pub interrupts: u64,
    /// Softirqs raised (sum of the CPU's column of /proc/softirqs).
    pub softirqs: u64,
}

/// Deltas over one probe.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Accounting {
    pub wall_ns: u64,
    /// CPU time of the rtgauge process (all threads).
    pub tool_user_ns: u64,
    pub tool_system_ns: u64,
    pub tool_voluntary_switches: u64,
    pub tool_involuntary_switches: u64,
    /// System-wide context switches (`ctxt` of /proc/stat).
    pub context_switches: u64,
    pub cpus: Vec<CpuAccounting>,
}

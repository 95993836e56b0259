//! Load put on the system while a probe measures: what was asked (`--load MIX[:LEVEL][@CPUS]`) and what
//! the generators achieved (operations, rate and CPU time per generator), so that two runs are compared as
//! "loaded alike" only when their achieved loads are.

use crate::CpuSet;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One kind of generated load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadKind {
    /// Integer, floating-point and branchy arithmetic (stress-ng's cpu methods in spirit).
    Cpu,
    /// A STREAM-triad bandwidth hog over buffers larger than the last-level cache.
    Memory,
    /// Small writes each followed by fdatasync, to a scratch file.
    Io,
    /// Process churn: fork, exit, wait.
    Fork,
    /// A timer storm: 20 µs sleeps back to back (a timer interrupt each).
    Timer,
    /// hackbench-style messaging: 100-byte messages ping-ponged with an echo thread on the same CPU over
    /// a Unix socket pair (socket buffers, wake-ups, context switches).
    Msg,
    /// An IPI storm: expedited membarrier, which interrupts every CPU running a thread of rtgauge — the
    /// measured CPUs included, as TLB shootdowns of a busy multi-threaded process do.
    Ipi,
}

impl LoadKind {
    /// Every kind, in the order help texts and reports list them.
    pub const ALL: [LoadKind; 7] = [
        LoadKind::Cpu,
        LoadKind::Memory,
        LoadKind::Io,
        LoadKind::Fork,
        LoadKind::Timer,
        LoadKind::Msg,
        LoadKind::Ipi,
    ];
    /// The name used in `--load` and in documents ("cpu", "memory", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LoadKind::Cpu => "cpu",
            LoadKind::Memory => "memory",
            LoadKind::Io => "io",
            LoadKind::Fork => "fork",
            LoadKind::Timer => "timer",
            LoadKind::Msg => "msg",
            LoadKind::Ipi => "ipi",
        }
    }
    /// The kind named `name` as in `--load` ("cpu", "memory", ...).
    pub fn from_name(name: &str) -> Option<LoadKind> {
        LoadKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
    /// Unit of the achieved rate.
    pub fn unit(self) -> &'static str {
        match self {
            LoadKind::Cpu => "Mops/s",
            LoadKind::Memory => "MB/s",
            LoadKind::Io => "fsyncs/s",
            LoadKind::Fork => "forks/s",
            LoadKind::Timer => "wakeups/s",
            LoadKind::Msg => "round trips/s",
            LoadKind::Ipi => "broadcasts/s",
        }
    }
}

impl fmt::Display for LoadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the generators run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadPlacement {
    /// The CPUs the probe does not measure (the usual case: RT CPUs quiet, the rest busy).
    Housekeeping,
    /// The measured CPUs, below the probe (SCHED_OTHER at nice 19): the co-located case.
    Measured,
    /// Both.
    All,
    /// An explicit CPU list.
    Cpus(CpuSet),
}

/// A requested load: `cpu,memory:50@housekeeping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// The kinds of load to generate.
    pub kinds: Vec<LoadKind>,
    /// Duty cycle of each generator, percent of each 10 ms period (1–100).
    pub level: u8,
    /// Where the generators run.
    pub placement: LoadPlacement,
}

impl fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<&str> = self.kinds.iter().map(|k| k.as_str()).collect();
        write!(f, "{}:{}@", kinds.join(","), self.level)?;
        match &self.placement {
            LoadPlacement::Housekeeping => f.write_str("housekeeping"),
            LoadPlacement::Measured => f.write_str("measured"),
            LoadPlacement::All => f.write_str("all"),
            LoadPlacement::Cpus(s) => write!(f, "{s}"),
        }
    }
}

/// What one generator thread achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorResult {
    /// The kind of load the thread generated.
    pub kind: LoadKind,
    /// The CPU the thread was pinned to.
    pub cpu: u32,
    /// Operations done (kind-specific: arithmetic rounds, bytes, fsyncs, forks, wake-ups).
    pub ops: u64,
    /// Rate in [`LoadKind::unit`].
    pub rate: f64,
    /// The generator thread's own CPU time over the wall time, percent of one CPU.
    pub cpu_percent: f64,
}

/// The load that was achieved while a probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    /// As requested (`cpu,memory:50@housekeeping`).
    pub spec: String,
    /// The CPUs the generators ran on.
    pub cpus: CpuSet,
    /// How long the generators ran, ns.
    pub elapsed_ns: u64,
    /// One entry per generator thread.
    pub generators: Vec<GeneratorResult>,
    /// An external load command (`--load-cmd`) and the CPU it used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandLoadResult>,
    /// Set when the generators' worker process ended before it was stopped (killed from outside): how it
    /// ended. Its generators' figures are then missing and the load did not cover the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

/// What an external load command (`--load-cmd 'stress-ng --cpu 4'`) did while the probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandLoadResult {
    /// The command line, as given to `--load-cmd`.
    pub command: String,
    /// User + system CPU time of the command and the children it waited for (wait4's rusage), ns.
    pub cpu_ns: u64,
    /// That CPU time over the wall time the command ran, percent of one CPU (400 = four CPUs busy).
    pub cpu_percent: f64,
    /// The command ended by itself before the probe did (its load did not cover the whole run).
    pub exited_early: bool,
    /// Exit code, or 128 + the signal that ended it.
    pub status: i32,
}

impl LoadResult {
    /// `(kind, total rate, mean CPU %)` per kind, in the order of [`LoadKind::ALL`].
    pub fn by_kind(&self) -> Vec<(LoadKind, f64, f64)> {
        LoadKind::ALL
            .into_iter()
            .filter_map(|k| {
                let g: Vec<&GeneratorResult> =
                    self.generators.iter().filter(|g| g.kind == k).collect();
                (!g.is_empty()).then(|| {
                    (
                        k,
                        g.iter().map(|x| x.rate).sum(),
                        g.iter().map(|x| x.cpu_percent).sum::<f64>() / g.len() as f64,
                    )
                })
            })
            .collect()
    }

    /// One line: `cpu 2 ×1,234 Mops/s at 49.8 % CPU; memory …` for tables and warnings.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .by_kind()
            .into_iter()
            .map(|(k, rate, cpu)| format!("{k} {rate:.1} {} at {cpu:.1} % CPU", k.unit()))
            .collect();
        let command = self.command.as_ref().map(|c| {
            format!(
                "command '{}' {:.1} % CPU{}",
                c.command,
                c.cpu_percent,
                if c.exited_early { " (ended early)" } else { "" }
            )
        });
        let lost = self
            .lost
            .as_ref()
            .map(|l| format!(" (generators lost: {l})"))
            .unwrap_or_default();
        let line = match (self.generators.is_empty(), command) {
            (true, Some(c)) => c,
            (false, Some(c)) => format!(
                "{} on CPU {}: {}; {c}",
                self.spec,
                self.cpus,
                parts.join("; ")
            ),
            (_, None) => format!("{} on CPU {}: {}", self.spec, self.cpus, parts.join("; ")),
        };
        format!("{}{lost}", line.trim_end())
    }
}

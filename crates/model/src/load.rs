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

/// Why a load specification was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadSpecError {
    /// A name that is not a load kind.
    #[error("'{0}' is not a load kind (cpu, memory, io, fork, timer, msg, ipi)")]
    Kind(String),
    /// A level that is not a whole percentage from 1 to 100.
    #[error("level '{0}' is not a whole percentage from 1 to 100")]
    Level(String),
    /// A placement that is neither a keyword nor a CPU list.
    #[error("placement '{0}' is not housekeeping, measured, all or a CPU list")]
    Placement(String),
    /// The specification names no kind.
    #[error("no load kind given")]
    Empty,
}

impl LoadSpec {
    /// Parse `KIND[,KIND…][:LEVEL][@housekeeping|measured|all|CPULIST]`.
    pub fn parse(text: &str) -> Result<LoadSpec, LoadSpecError> {
        let (rest, placement) = match text.split_once('@') {
            Some((r, p)) => (r, parse_placement(p.trim())?),
            None => (text, LoadPlacement::Housekeeping),
        };
        let (kinds, level) = match rest.split_once(':') {
            Some((k, l)) => {
                let level: u8 = l
                    .trim()
                    .parse()
                    .ok()
                    .filter(|v| (1..=100).contains(v))
                    .ok_or_else(|| LoadSpecError::Level(l.to_string()))?;
                (k, level)
            }
            None => (rest, 100),
        };
        let mut out = Vec::new();
        for k in kinds.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let kind = LoadKind::ALL
                .into_iter()
                .find(|x| x.as_str() == k)
                .ok_or_else(|| LoadSpecError::Kind(k.to_string()))?;
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        if out.is_empty() {
            return Err(LoadSpecError::Empty);
        }
        Ok(LoadSpec {
            kinds: out,
            level,
            placement,
        })
    }
}

fn parse_placement(p: &str) -> Result<LoadPlacement, LoadSpecError> {
    match p {
        "housekeeping" | "hk" => Ok(LoadPlacement::Housekeeping),
        "measured" | "rt" => Ok(LoadPlacement::Measured),
        "all" | "both" => Ok(LoadPlacement::All),
        list => CpuSet::parse(list)
            .ok()
            .filter(|s| !s.is_empty())
            .map(LoadPlacement::Cpus)
            .ok_or_else(|| LoadSpecError::Placement(p.to_string())),
    }
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
    pub command: Option<CommandLoad>,
}

/// What an external load command (`--load-cmd 'stress-ng --cpu 4'`) did while the probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandLoad {
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
        match (self.generators.is_empty(), command) {
            (true, Some(c)) => c,
            (false, Some(c)) => format!(
                "{} on CPU {}: {}; {c}",
                self.spec,
                self.cpus,
                parts.join("; ")
            ),
            (_, None) => format!("{} on CPU {}: {}", self.spec, self.cpus, parts.join("; ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_refuse_nonsense() {
        let s = LoadSpec::parse("cpu,memory:50@housekeeping").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.kinds, [LoadKind::Cpu, LoadKind::Memory]);
        assert_eq!((s.level, &s.placement), (50, &LoadPlacement::Housekeeping));
        assert_eq!(s.to_string(), "cpu,memory:50@housekeeping");
        let d = LoadSpec::parse("io").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((d.level, d.placement), (100, LoadPlacement::Housekeeping));
        assert_eq!(
            LoadSpec::parse("fork@2-3").map(|s| s.placement),
            Ok(LoadPlacement::Cpus(CpuSet::new([2, 3])))
        );
        assert_eq!(
            LoadSpec::parse("gpu"),
            Err(LoadSpecError::Kind("gpu".into()))
        );
        assert_eq!(
            LoadSpec::parse("cpu:0"),
            Err(LoadSpecError::Level("0".into()))
        );
        assert_eq!(
            LoadSpec::parse("cpu:101"),
            Err(LoadSpecError::Level("101".into()))
        );
        assert_eq!(
            LoadSpec::parse("cpu@moon"),
            Err(LoadSpecError::Placement("moon".into()))
        );
        assert_eq!(LoadSpec::parse(":50"), Err(LoadSpecError::Empty));
    }
}

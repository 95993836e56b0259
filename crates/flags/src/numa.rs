//! `rtgauge numa`'s flags.

use clap::Args;
use rtgauge_model::units::parse_duration;
use rtgauge_model::Nanos;

/// Share of each process's (and cgroup's) resident memory on its local NUMA nodes, from
/// /proc/PID/numa_maps and status; node-local vs remote allocations (numastat) over an interval.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("root", |a| a.help("Read /proc and /sys under DIR (a captured or fixture tree) instead of the running system")))]
pub struct NumaArgs {
    /// Processes to show.
    #[arg(value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,

    /// Every process.
    #[arg(long = "all", conflicts_with = "pids")]
    pub all: bool,

    /// Sample the allocation counters over this interval (0: totals since boot only).
    #[arg(long = "interval", value_name = "TIME", default_value = "1s", value_parser = parse_interval)]
    pub interval: Nanos,

    /// Rows shown per table, largest resident memory first (the document keeps every process).
    #[arg(long = "top", value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub top: u32,

    #[command(flatten)]
    pub root: super::RootArg,

    #[command(flatten)]
    pub output: super::OutputArg,
}

fn parse_interval(s: &str) -> Result<Nanos, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d.as_ns() > 3_600_000_000_000 {
        return Err("at most 1h".into());
    }
    Ok(d)
}

/// A profile's NUMA locality probe: these processes (all when empty), over this interval.
pub struct NumaStage {
    /// The processes.
    pub pids: Vec<u32>,
    /// The counters' interval.
    pub interval: Nanos,
}

/// A profile's numa stage: it reads for its `--interval`, not the profile's duration.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let args: NumaArgs = cx.parse(argv)?;
    Ok(super::stage::Stage::unloaded(NumaStage {
        pids: args.pids,
        interval: args.interval,
    }))
}

impl super::stage::StagePlan for NumaStage {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Numa
    }

    fn loadable(&self) -> bool {
        false
    }

    fn probe<'a>(&'a self, root: &rtgauge_host::HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::numa::Numa {
            root: root.clone(),
            pids: &self.pids,
            interval_ns: self.interval.as_ns(),
        })
    }
}

//! `rtgauge ops`'s flags, resolved into the OS-primitive probe's plan.

use super::parse_size_max;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::ops::OpsConfig;
use rtgauge_model::units::parse_duration;
use rtgauge_model::Nanos;
use rtgauge_probe::ops::{Op, OpsPlan};
use std::path::PathBuf;

/// OS-primitive costs: each operation timed in repeated samples after a warm-up, the loop overhead (and
/// what lmbench subtracts for that operation) taken off; median, p99 and max per operation.
#[derive(Debug, Clone, Args)]
pub struct OpsArgs {
    #[command(flatten)]
    pub load: super::load::ProbeLoad,

    /// Operations to measure, comma-separated (default: all): null_syscall, read, write, stat, open_close,
    /// sig_install, sig_catch, pipe_rtt, unix_rtt, ctx_switch, fork_exit, fork_exec, fork_sh, mmap,
    /// page_fault, sleep, clock_gettime, tsc_read.
    #[arg(long = "ops", value_name = "LIST", value_delimiter = ',', value_parser = parse_op)]
    pub ops: Option<Vec<String>>,

    /// Timed samples per operation (after warm-up).
    #[arg(short = 'r', long = "repetitions", value_name = "N", default_value_t = 101, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repetitions: u32,

    /// Target length of one sample: fast operations repeat until a sample lasts this long (e.g. 1ms, 500us).
    #[arg(long = "sample-time", value_name = "TIME", default_value = "1ms", value_parser = parse_sample_time)]
    pub sample_time: Nanos,

    /// Pin the measuring process, and every process it starts (pipe partner, ring), to this CPU
    /// (default: not pinned, as lmbench).
    #[arg(long = "cpu", value_name = "CPU")]
    pub cpu: Option<u32>,

    /// Processes in the context-switch ring (2-64).
    #[arg(long = "ctx-procs", value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub ctx_procs: u32,

    /// Working set each ring process sums between switches (lat_ctx -s; e.g. 0, 16K, 64K).
    #[arg(long = "ctx-size", value_name = "SIZE", default_value = "0", value_parser = parse_small_size)]
    pub ctx_size: u64,

    /// Size of the mapped file for mmap and page_fault (64K-1G; lat_mmap touches its first tenth).
    #[arg(long = "mmap-size", value_name = "SIZE", default_value = "4M", value_parser = parse_mmap_size)]
    pub mmap_size: u64,

    /// Sleep intervals of the overshoot measurement, comma-separated (e.g. 10us,100us,1ms).
    #[arg(long = "sleep", value_name = "LIST", value_delimiter = ',', default_value = "10us,100us,1ms", value_parser = parse_sleep)]
    pub sleep: Vec<Nanos>,

    /// Program run by fork_exec (and by /bin/sh -c for fork_sh).
    #[arg(long = "exec", value_name = "PROGRAM", default_value = "/bin/true")]
    pub exec: String,

    /// Directory for the scratch files of stat, open_close, mmap and page_fault (default: the temp dir).
    #[arg(long = "scratch-dir", value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,

    #[command(flatten)]
    pub output: super::OutputArg,
}

fn parse_op(s: &str) -> Result<String, String> {
    let name = s.trim();
    if Op::from_name(name).is_none() {
        let all: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
        return Err(format!(
            "unknown operation '{name}' (one of {})",
            all.join(", ")
        ));
    }
    Ok(name.to_string())
}

fn parse_sample_time(s: &str) -> Result<Nanos, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d.as_ns() < 10_000 || d.as_ns() > 10_000_000_000 {
        return Err("between 10us and 10s".into());
    }
    Ok(d)
}

fn parse_sleep(s: &str) -> Result<Nanos, String> {
    let d = parse_duration(s.trim()).map_err(|e| e.to_string())?;
    if d.as_ns() < 1_000 || d.as_ns() > 1_000_000_000 {
        return Err(format!("'{s}': between 1us and 1s"));
    }
    Ok(d)
}

fn parse_small_size(s: &str) -> Result<u64, String> {
    parse_size_max(s, 64 << 20)
}

fn parse_mmap_size(s: &str) -> Result<u64, String> {
    let b = parse_size_max(s, 1 << 30)?;
    if b < 64 << 10 {
        return Err("at least 64K".into());
    }
    Ok(b)
}

/// Check the CPU against the online set and build the plan.
pub fn resolve(a: &OpsArgs, root: &HostRoot) -> anyhow::Result<OpsPlan> {
    if let Some(c) = a.cpu {
        let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
        if !online.contains(c) {
            bail!("--cpu {c}: not an online CPU (online: {online})");
        }
    }
    if a.exec.is_empty() || a.exec.contains('\0') {
        bail!("--exec: not a program path");
    }
    let scratch = a.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    if !scratch.is_dir() {
        bail!("--scratch-dir {}: not a directory", scratch.display());
    }
    Ok(OpsPlan {
        config: OpsConfig {
            ops: Op::ALL
                .iter()
                .map(|op| op.name().to_string())
                .filter(|n| a.ops.as_ref().is_none_or(|sel| sel.contains(n)))
                .collect(),
            repetitions: a.repetitions,
            sample_ns: a.sample_time.as_ns(),
            ctx_procs: a.ctx_procs,
            ctx_size_bytes: a.ctx_size,
            mmap_size_bytes: a.mmap_size,
            sleep_intervals_ns: a.sleep.iter().map(|d| d.as_ns()).collect(),
            exec_program: a.exec.clone(),
        },
        cpu: a.cpu,
        scratch_dir: scratch,
    })
}

/// A profile's ops stage: it runs for its repetitions (`-r`), not the profile's duration.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let args: OpsArgs = cx.parse(argv)?;
    Ok(super::stage::Stage {
        plan: Box::new(cx.named(resolve(&args, cx.root))?),
        load: args.load.request(),
    })
}

impl super::stage::StagePlan for OpsPlan {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Ops
    }

    fn announce(&self, _duration: Nanos, _cpus: &rtgauge_model::CpuSet) -> Option<String> {
        Some(format!("ops: {} operations…", self.config.ops.len()))
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::ops::Ops(self))
    }
}

//! `rtgauge mem`'s flags, resolved into the memory probe's plan (sweep sizes, the caches that name its
//! steps, the NUMA nodes of its matrix).

use super::parse_size_max;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::mem::{size_label, MemConfig};
use rtgauge_probe::mem::{sweep_sizes, MemPlan};

/// Memory latency curve (4 KiB to beyond the last-level cache), bandwidth, NUMA matrix.
#[derive(Debug, Clone, Args)]
pub struct MemArgs {
    /// Pin the measuring thread to this CPU (default: the first CPU this process may use); also names the
    /// CPU whose caches are read from sysfs.
    #[arg(long = "cpu", value_name = "CPU")]
    pub cpu: Option<u32>,

    /// Smallest working set of the latency curve.
    #[arg(long = "min-size", value_name = "SIZE", default_value = "4K", value_parser = parse_mem_size)]
    pub min_size: u64,

    /// Largest working set of the latency curve (the sweep takes 2^n and 1.5·2^n in between).
    #[arg(long = "max-size", value_name = "SIZE", default_value = "1G", value_parser = parse_mem_size)]
    pub max_size: u64,

    /// Repetitions of every point (latency: minimum; bandwidth: median).
    #[arg(short = 'r', long = "repetitions", value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repetitions: u32,

    /// Most loads timed per repetition of a latency point (at least one lap of the chain up to this).
    #[arg(long = "loads", value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1000..=1_000_000_000))]
    pub loads: u64,

    /// Buffer of the bandwidth kernels (0: no bandwidth; choose well beyond the last-level cache for DRAM).
    #[arg(long = "bw-size", value_name = "SIZE", default_value = "256M", value_parser = parse_mem_size_or_0)]
    pub bw_size: u64,

    /// Working set of each NUMA matrix cell (0: no matrix).
    #[arg(long = "numa-size", value_name = "SIZE", default_value = "256M", value_parser = parse_mem_size_or_0)]
    pub numa_size: u64,

    /// Back every buffer with transparent huge pages (madvise MADV_HUGEPAGE; default: 4 KiB pages).
    #[arg(long = "hugepages")]
    pub hugepages: bool,

    #[command(flatten)]
    pub output: super::OutputArg,
}

fn parse_mem_size(s: &str) -> Result<u64, String> {
    let b = parse_size_max(s, 4 << 30)?;
    if b < 4096 {
        return Err("at least 4K".into());
    }
    Ok(b)
}

fn parse_mem_size_or_0(s: &str) -> Result<u64, String> {
    match parse_size_max(s, 4 << 30)? {
        0 => Ok(0),
        b if b < 4096 => Err("0 or at least 4K".into()),
        b => Ok(b),
    }
}

/// Check the CPU and the sizes, and build the plan from the host's caches and NUMA nodes.
pub fn resolve(a: &MemArgs, root: &HostRoot) -> anyhow::Result<MemPlan> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    if let Some(c) = a.cpu {
        if !online.contains(c) {
            bail!("--cpu {c}: not an online CPU (online: {online})");
        }
    }
    if a.min_size > a.max_size {
        bail!(
            "--min-size {}: larger than --max-size {}",
            size_label(a.min_size),
            size_label(a.max_size)
        );
    }
    let sizes = sweep_sizes(a.min_size, a.max_size);
    if sizes.is_empty() {
        bail!(
            "--max-size {}: no working set of the sweep fits",
            size_label(a.max_size)
        );
    }
    let cache_cpu = a
        .cpu
        .or_else(|| rtgauge_probe::rt::current_affinity().iter().next())
        .unwrap_or(0);
    let nodes = rtgauge_host::numa::read_nodes(root);
    let mem_nodes = rtgauge_host::numa::read_memory_nodes(root, &nodes);
    let cpu_nodes: Vec<(u32, u32)> = nodes
        .iter()
        .filter_map(|n| {
            n.cpus
                .intersection(&online)
                .iter()
                .next()
                .map(|c| (n.node, c))
        })
        .collect();
    Ok(MemPlan {
        config: MemConfig {
            cpu: a.cpu,
            sizes_bytes: sizes,
            loads_per_repetition: a.loads,
            repetitions: a.repetitions,
            bw_size_bytes: a.bw_size,
            numa_size_bytes: if cpu_nodes.is_empty() { 0 } else { a.numa_size },
            hugepages: a.hugepages,
        },
        caches: rtgauge_host::numa::read_caches(root, cache_cpu),
        cpu_nodes,
        mem_nodes,
    })
}

/// A profile's mem stage: it runs for its repetitions, not the profile's duration, and without load.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let args: MemArgs = cx.parse(argv)?;
    Ok(super::stage::Stage::unloaded(
        cx.named(resolve(&args, cx.root))?,
    ))
}

impl super::stage::StagePlan for rtgauge_probe::mem::MemPlan {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Mem
    }

    fn announce(
        &self,
        _duration: rtgauge_model::Nanos,
        _cpus: &rtgauge_model::CpuSet,
    ) -> Option<String> {
        Some(format!(
            "mem: latency curve over {} working sets, bandwidth, NUMA…",
            self.config.sizes_bytes.len()
        ))
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::mem::Mem(self))
    }
}

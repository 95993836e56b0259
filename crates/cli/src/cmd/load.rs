//! `rtgauge load MIX` (load alone, beside another tool) and the `--load MIX[:LEVEL][@CPUS]` option of the
//! probes: resolving where the generators run and sizing them from the host, then starting and stopping
//! them around a measurement.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::load::{LoadResult, LoadSpec, Placement};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::load::{Load, LoadPlan};
use rtgauge_probe::load_cmd::CommandLoad;
use rtgauge_probe::stop::StopFlag;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `--load` as clap parses it.
pub fn parse_load(s: &str) -> Result<LoadSpec, String> {
    LoadSpec::parse(s).map_err(|e| e.to_string())
}

/// Run measured, bounded load generators alone (e.g. beside cyclictest), then report what they achieved.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Generators and placement: cpu, memory, io, fork, timer, msg, ipi, comma-separated, with an optional
    /// ':LEVEL' (duty cycle %, default 100) and '@CPUS' (a CPU list; default: every online CPU).
    #[arg(value_name = "MIX", value_parser = parse_load)]
    pub mix: LoadSpec,

    /// CPUs to load (overrides the MIX's '@CPUS').
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Duty cycle of each generator, percent of each 10 ms period (overrides the MIX's ':LEVEL').
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub level: Option<u8>,

    /// How long to load (default: until SIGINT/SIGTERM).
    #[arg(short = 'D', long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,

    /// Write what was achieved as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Bytes per buffer of the memory generator: 4 × the largest cache of `cpu` (so every pass goes to
/// DRAM), at least 64 MiB.
fn memory_bytes(root: &HostRoot, cpu: u32) -> usize {
    let llc = rtgauge_host::numa::read_caches(root, cpu)
        .iter()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0);
    (llc.saturating_mul(4)).max(64 << 20) as usize
}

/// The generators' plan for `spec` beside a probe measuring `measured` (empty for `rtgauge load`).
pub fn plan(spec: &LoadSpec, measured: &CpuSet, root: &HostRoot) -> anyhow::Result<LoadPlan> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let (cpus, nice) = match &spec.placement {
        Placement::Housekeeping if measured.is_empty() => (online.clone(), false),
        Placement::Housekeeping => (online.difference(measured), false),
        Placement::Measured => (measured.clone(), true),
        Placement::All => (online.clone(), !measured.is_empty()),
        Placement::Cpus(s) => {
            let offline = s.difference(&online);
            if !offline.is_empty() {
                bail!("--load {spec}: CPU {offline} is not online");
            }
            let shared = !s.intersection(measured).is_empty();
            (s.clone(), shared)
        }
    };
    if cpus.is_empty() {
        bail!(
            "--load {spec}: no CPU to load (every online CPU is measured; use @measured or @all to load them \
             below the probe)"
        );
    }
    let first = cpus.iter().next().unwrap_or(0);
    Ok(LoadPlan {
        spec: spec.to_string(),
        kinds: spec.kinds.clone(),
        level: spec.level,
        cpus,
        nice,
        memory_bytes: memory_bytes(root, first),
        scratch: std::env::temp_dir(),
    })
}

/// Load running beside a probe: the generators, an external command, or both.
pub struct Running {
    generators: Option<Load>,
    command: Option<CommandLoad>,
}

/// Start `spec`'s generators and the `--load-cmd` command beside a probe on `measured` (None when neither
/// was asked for). The command runs on the CPUs not measured (all CPUs when every one is measured); call
/// from the main thread (see rtgauge_probe::load_cmd on PR_SET_PDEATHSIG).
pub fn start(
    spec: Option<&LoadSpec>,
    command: Option<&str>,
    measured: &CpuSet,
    root: &HostRoot,
) -> anyhow::Result<Option<Running>> {
    if spec.is_none() && command.is_none() {
        return Ok(None);
    }
    let command = match command {
        None => None,
        Some(c) => {
            let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
            let rest = online.difference(measured);
            let cpus = (!rest.is_empty()).then_some(&rest);
            Some(
                CommandLoad::start(c, cpus, &std::env::temp_dir())
                    .with_context(|| format!("--load-cmd '{c}': starting the command"))?,
            )
        }
    };
    let generators = match spec {
        None => None,
        Some(spec) => {
            let p = plan(spec, measured, root)?;
            Some(
                Load::start(&p)
                    .with_context(|| format!("--load {spec}: starting the generators"))?,
            )
        }
    };
    Ok(Some(Running {
        generators,
        command,
    }))
}

/// Stop the load and report what it achieved (without printing).
pub fn stop(running: Running) -> LoadResult {
    let mut r = match running.generators {
        Some(g) => g.stop(),
        None => LoadResult {
            spec: String::new(),
            cpus: CpuSet::default(),
            elapsed_ns: 0,
            generators: Vec::new(),
            command: None,
        },
    };
    if let Some(c) = running.command {
        r.command = Some(c.stop());
    }
    r
}

/// Stop the load and print what it achieved (stderr, one line).
pub fn finish(load: Option<Running>) -> Option<LoadResult> {
    let r = stop(load?);
    eprintln!("rtgauge: load achieved: {}", r.summary());
    Some(r)
}

/// `rtgauge load`.
pub fn run(a: &LoadArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let mut spec = a.mix.clone();
    if let Some(l) = a.level {
        spec.level = l;
    }
    if let Some(c) = &a.cpus {
        spec.placement =
            Placement::Cpus(CpuSet::parse(c).map_err(|e| anyhow::anyhow!("--cpus {c}: {e}"))?);
    }
    let stop = StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;
    let load = Load::start(&plan(&spec, &CpuSet::default(), &root)?)
        .with_context(|| format!("load {spec}: starting the generators"))?;
    let until = a
        .duration
        .map(|d| Instant::now() + Duration::from_nanos(d.as_ns()));
    while !stop.is_set() && until.is_none_or(|u| Instant::now() < u) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = load.stop();
    println!("{}", r.summary());
    for g in &r.generators {
        println!(
            "  {:<7} CPU {:>3}  {:>12.1} {:<10} {:>5.1} % CPU",
            g.kind.as_str(),
            g.cpu,
            g.rate,
            g.kind.unit(),
            g.cpu_percent
        );
    }
    if let Some(path) = &a.output {
        crate::output::write_json(path, &r)
            .with_context(|| format!("--output {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

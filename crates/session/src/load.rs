//! Load beside a measurement: where the generators of a `--load MIX[:LEVEL][@WHERE]` request run (from
//! the host's online CPUs and the CPUs the probe measures), how large their buffers are (from the host's
//! caches), and an external `--load-cmd` command; started before the probe and stopped after it, with
//! what they achieved recorded.

use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::load::{LoadPlacement, LoadResult, LoadSpec};
use rtgauge_model::CpuSet;
use rtgauge_probe::load::{Load, LoadPlan};
use rtgauge_probe::load_cmd::LoadCommand;

/// Why a load could not be planned or started.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The host's online CPUs could not be read.
    #[error("reading the online CPUs")]
    Online(#[source] rtgauge_host::HostError),
    /// The request names CPUs that are not online.
    #[error("--load {spec}: CPU {offline} is not online")]
    Offline {
        /// The request.
        spec: String,
        /// The CPUs it names that are offline.
        offline: CpuSet,
    },
    /// Every online CPU is measured and the request keeps off them.
    #[error(
        "--load {0}: no CPU to load (every online CPU is measured; use @measured or @all to load them \
         below the probe)"
    )]
    NoCpu(String),
    /// The generators could not start.
    #[error("--load {spec}: starting the generators")]
    Generators {
        /// The request.
        spec: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The external command could not start.
    #[error("--load-cmd '{command}': starting the command")]
    Command {
        /// The command line.
        command: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// What to run beside a probe: generators (`--load`), an external command (`--load-cmd`), or neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadRequest {
    /// The generators' mix, level and placement.
    pub spec: Option<LoadSpec>,
    /// An external command line, run by /bin/sh.
    pub command: Option<String>,
}

impl LoadRequest {
    /// No load.
    pub fn none() -> LoadRequest {
        LoadRequest::default()
    }

    /// Generators only.
    pub fn generators(spec: Option<LoadSpec>) -> LoadRequest {
        LoadRequest {
            spec,
            command: None,
        }
    }
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
pub fn plan(spec: &LoadSpec, measured: &CpuSet, root: &HostRoot) -> Result<LoadPlan, LoadError> {
    let online = read_cpu_mask(root, CpuMask::Online).map_err(LoadError::Online)?;
    let (cpus, nice) = match &spec.placement {
        LoadPlacement::Housekeeping if measured.is_empty() => (online.clone(), false),
        LoadPlacement::Housekeeping => (online.difference(measured), false),
        LoadPlacement::Measured => (measured.clone(), true),
        LoadPlacement::All => (online.clone(), !measured.is_empty()),
        LoadPlacement::Cpus(s) => {
            let offline = s.difference(&online);
            if !offline.is_empty() {
                return Err(LoadError::Offline {
                    spec: spec.to_string(),
                    offline,
                });
            }
            let shared = !s.intersection(measured).is_empty();
            (s.clone(), shared)
        }
    };
    if cpus.is_empty() {
        return Err(LoadError::NoCpu(spec.to_string()));
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
pub struct RunningLoad {
    generators: Option<Load>,
    command: Option<LoadCommand>,
}

/// Start what `request` asks for beside a probe on `measured` (None when it asks for nothing). The command
/// runs on the CPUs not measured (all CPUs when every one is measured); call from the main thread (see
/// rtgauge_probe::load_cmd on PR_SET_PDEATHSIG).
pub fn start(
    request: &LoadRequest,
    measured: &CpuSet,
    root: &HostRoot,
) -> Result<Option<RunningLoad>, LoadError> {
    if request.spec.is_none() && request.command.is_none() {
        return Ok(None);
    }
    let command = match &request.command {
        None => None,
        Some(c) => {
            let online = read_cpu_mask(root, CpuMask::Online).map_err(LoadError::Online)?;
            let rest = online.difference(measured);
            let cpus = (!rest.is_empty()).then_some(&rest);
            Some(
                LoadCommand::start(c, cpus, &std::env::temp_dir()).map_err(|source| {
                    LoadError::Command {
                        command: c.clone(),
                        source,
                    }
                })?,
            )
        }
    };
    let generators = match &request.spec {
        None => None,
        Some(spec) => {
            let p = plan(spec, measured, root)?;
            Some(Load::start(&p).map_err(|source| LoadError::Generators {
                spec: spec.to_string(),
                source,
            })?)
        }
    };
    Ok(Some(RunningLoad {
        generators,
        command,
    }))
}

/// Stop the load and report what it achieved.
pub fn stop(running: RunningLoad) -> LoadResult {
    let mut r = match running.generators {
        Some(g) => g.stop(),
        None => LoadResult {
            spec: String::new(),
            cpus: CpuSet::default(),
            elapsed_ns: 0,
            generators: Vec::new(),
            command: None,
            lost: None,
        },
    };
    if let Some(c) = running.command {
        r.command = Some(c.stop());
    }
    r
}

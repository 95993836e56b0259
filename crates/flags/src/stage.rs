//! A profile probe as `run` measures it: each kind's flags parsed and resolved by the kind's own flags
//! module into a [`Stage`] (through the registry, `crate::kinds::from_profile`), whose plan `run` reaches
//! only through one trait ([`StagePlan`]); and what the monitor tells a watched kind's flags ([`WatchPlace`]).

use anyhow::Context as _;
use clap::Parser;
use rtgauge_host::HostRoot;
use rtgauge_model::attribution::EpisodeThreshold;
use rtgauge_model::kind::ProbeKind;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_session::load::LoadRequest;

/// A kind's stage from a profile's flags for it (the placeholders filled in, no program name) and what
/// the profile sets beside them.
pub type FromProfile = fn(&[String], &StageContext<'_>) -> anyhow::Result<Stage>;

/// What a profile sets for each of its probes beside the probe's own flags.
pub struct StageContext<'a> {
    /// The probe as errors name it: `profile NAME Kind flags '…'`.
    pub what: &'a str,
    /// The profile's duration (or `--duration`'s): the probe's, for a timed kind.
    pub duration: Nanos,
    /// `run --trace`: the latency kinds break their spikes down.
    pub trace: bool,
    /// The profile's lowest bound on the probe's samples: the spike-episode threshold, unless the flags
    /// give one.
    pub bound: Option<EpisodeThreshold>,
    /// The host the probe runs on.
    pub root: &'a HostRoot,
}

impl StageContext<'_> {
    /// The probe's flags parsed by its verb's own parser; an error names the probe.
    pub fn parse<T: clap::Args>(&self, argv: &[String]) -> anyhow::Result<T> {
        Flags::<T>::try_parse_from(argv)
            .map(|f| f.args)
            .map_err(|e| anyhow::anyhow!("{}: {}", self.what, first_line(&e)))
    }

    /// `resolved` with the probe named in its error.
    pub fn named<T>(&self, resolved: anyhow::Result<T>) -> anyhow::Result<T> {
        resolved.with_context(|| self.what.to_string())
    }
}

/// A verb's flags as a profile writes them (no program name).
#[derive(Parser)]
#[command(no_binary_name = true)]
struct Flags<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

/// clap's error on one line.
fn first_line(e: &clap::Error) -> String {
    let r = e.render().to_string();
    r.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid flags")
        .trim_start_matches("error: ")
        .to_string()
}

/// A profile probe, resolved, and the load beside it (a probe's `--load MIX` and `--load-cmd` run beside
/// that probe only, docs/load.md).
pub struct Stage {
    /// The probe.
    pub plan: Box<dyn StagePlan>,
    /// Its load.
    pub load: LoadRequest,
}

impl Stage {
    /// A stage without load of its own.
    pub fn unloaded(plan: impl StagePlan + 'static) -> Stage {
        Stage {
            plan: Box::new(plan),
            load: LoadRequest::none(),
        }
    }

    /// `run --load`: this load instead of the probe's own (a kind that is never loaded keeps none).
    pub fn replace_load(&mut self, l: &rtgauge_model::load::LoadSpec) {
        if self.plan.loadable() {
            self.load = LoadRequest::generators(Some(l.clone()));
        }
    }
}

/// A profile probe resolved by its verb's flags, as `run` measures it: each kind implements it in its verb's
/// flags module, and `run` reaches a stage only through it.
pub trait StagePlan {
    /// Which kind of probe it is.
    fn kind(&self) -> ProbeKind;

    /// Settings adjusted while resolving its flags: said before it measures and kept with the run.
    fn notes(&self) -> &[String] {
        &[]
    }

    /// The line said on stderr before it measures (`None`: its progress says what it does).
    fn announce(&self, _duration: Nanos, _cpus: &CpuSet) -> Option<String> {
        None
    }

    /// Interval counters and the trace beside it (the latency kinds).
    fn why(&self) -> Option<rtgauge_session::why::WhyOpts> {
        None
    }

    /// How long it measures, where its plan holds one duration (the latency kinds; net's is per point).
    fn duration(&self) -> Option<Nanos> {
        None
    }

    /// The real-time priority its measuring threads ask for (SCHED_FIFO/RR), for the audit to check before
    /// it measures; `None` when they run at a normal policy.
    fn rt_priority(&self) -> Option<i32> {
        None
    }

    /// Why this platform cannot run it at all (a kernel without the tracer it drives), said and recorded
    /// instead of measuring; `None` for a stage that can run (the default).
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// Whether `run --load` puts its load beside it (the NUMA locality probe watches other processes and
    /// is never loaded).
    fn loadable(&self) -> bool {
        true
    }

    /// Its probe for the session engine, reading the host through `root`.
    fn probe<'a>(&'a self, root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a>;
}

/// What the monitor tells its watches' flags.
pub struct WatchPlace<'a> {
    /// The CPUs its timer threads measure.
    pub cpus: &'a CpuSet,
    /// The online CPUs.
    pub online: &'a CpuSet,
    /// Its timer threads' SCHED_FIFO priority.
    pub priority: i32,
    /// How long it runs (`None`: until stopped).
    pub duration: Option<Nanos>,
}

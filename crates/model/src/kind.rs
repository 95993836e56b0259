//! A probe kind (cyclic, oslat, net, ops, mem, numa, …) as data: which kind a result is ([`ProbeKind`]),
//! and what every kind's result says about itself to the engine, the comparison and the views
//! ([`KindData`]): its comparable measures, its latency threads, its gate values, the load and accounting
//! recorded with it, its "why", how it ended.
//!
//! Each kind implements [`KindData`] beside its result type (`crate::cyclic`, `crate::oslat`, …); the one
//! place that lists the kinds is `crate::run::ProbeResult`, whose `kinds!` list also gives each result type
//! its `crate::run::Kind` (the downcast a kind's own verb uses to get its typed result back). Everything
//! else reaches a result through these traits, never by naming its variant. The views of a kind are
//! `rtgauge_report::kind::KindView`, implemented in the report crate's module of the kind.
//!
//! Adding a kind: its result type and `impl KindData` (a module here), one line in `kinds!`, its measuring
//! loop (`rtgauge_probe`) and session adapter (`rtgauge_session::probes`), its views (one module of
//! `rtgauge_report::kind` and one line in its `view`), its verb's flags and glue.

use crate::accounting::Accounting;
use crate::attribution::Why;
use crate::latency::{LatencyStats, Sparse, TimelineEntry, Windows};
use crate::load::LoadResult;
use crate::measure::Measure;
use crate::rt::{ProcessConditions, ThreadConditions};
use crate::verdict::Metric;
use serde::{Deserialize, Serialize};

/// The kinds of probe. The serialised name (`cyclic`, …) is the run document's `"probe"` tag, a profile's
/// `kind`, a measure key's prefix and the verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// The timer wake-up latency probe (`rtgauge cyclic` flags).
    Cyclic,
    /// The busy-loop OS-noise probe (`rtgauge oslat` flags).
    Oslat,
    /// `rtgauge net` flags: `cps …` or `throughput …`.
    Net,
    /// The OS-primitive latency probe (`rtgauge ops` flags).
    Ops,
    /// The memory latency and bandwidth probe (`rtgauge mem` flags).
    Mem,
    /// The NUMA locality probe (`rtgauge numa` flags).
    Numa,
}

impl ProbeKind {
    /// Every kind, in the order the views show them.
    pub const ALL: [ProbeKind; 6] = [
        ProbeKind::Cyclic,
        ProbeKind::Oslat,
        ProbeKind::Net,
        ProbeKind::Ops,
        ProbeKind::Mem,
        ProbeKind::Numa,
    ];

    /// The kind's name, as the verbs, the store's probe list and measure keys spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Cyclic => "cyclic",
            ProbeKind::Oslat => "oslat",
            ProbeKind::Net => "net",
            ProbeKind::Ops => "ops",
            ProbeKind::Mem => "mem",
            ProbeKind::Numa => "numa",
        }
    }

    /// The kind whose measure `key` is (`cyclic.p99` → cyclic); `None` for a key of no kind.
    pub fn of_measure_key(key: &str) -> Option<ProbeKind> {
        let prefix = key.split('.').next()?;
        ProbeKind::ALL.into_iter().find(|k| k.as_str() == prefix)
    }

    /// Whether its results are per-thread latency distributions with windows, a timeline and a "why" (the
    /// timer and the busy-loop probe).
    pub fn is_latency(self) -> bool {
        matches!(self, ProbeKind::Cyclic | ProbeKind::Oslat)
    }

    /// Whether a profile's (or `--duration`'s) duration applies to it; the others run for their repetitions
    /// (ops, mem) or their interval (numa).
    pub fn takes_duration(self) -> bool {
        matches!(self, ProbeKind::Cyclic | ProbeKind::Oslat | ProbeKind::Net)
    }
}

/// One measuring thread of a latency probe, as the comparison and the views see it.
#[derive(Debug, Clone, Copy)]
pub struct LatThread<'a> {
    /// The thread's index (cyclictest's `T:`; oslat's thread).
    pub index: u32,
    /// The CPU it ran on, where known.
    pub cpu: Option<u32>,
    /// The CPU it was planned on (the configured affinity), where known.
    pub planned_cpu: Option<u32>,
    /// Its distribution (latency, or busy-loop gap).
    pub stats: &'a LatencyStats,
    /// Its time windows, for resampling.
    pub windows: &'a Windows,
    /// Its per-interval timeline.
    pub timeline: &'a [TimelineEntry],
    /// What it asked for and got.
    pub conditions: &'a ThreadConditions,
}

impl LatThread<'_> {
    /// "CPU 3", or "thread 2" where the CPU is unknown.
    pub fn name(&self) -> String {
        match self.cpu {
            Some(c) => format!("CPU {c}"),
            None => format!("thread {}", self.index),
        }
    }

    /// The CPU its timeline and "why" intervals belong to: where it ran, else where it was planned.
    pub fn measured_cpu(&self) -> Option<u32> {
        self.cpu.or(self.planned_cpu)
    }
}

/// What a document knows about its results that no result holds (where it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFacts {
    /// Whether missed deadlines were counted (not for an imported cyclictest result).
    pub missed_deadlines_known: bool,
}

/// One row of the per-thread CSV export.
#[derive(Debug, Clone)]
pub struct ExportRow<'a> {
    /// The probe's key (`cyclic`, `oslat`, `net.cps`, …).
    pub probe: String,
    /// Thread index (0 for a probe without threads).
    pub index: u32,
    /// The thread's CPU, where known.
    pub cpu: Option<u32>,
    /// Its distribution.
    pub stats: &'a LatencyStats,
    /// Missed deadlines (or failed attempts), where counted.
    pub missed: Option<u64>,
    /// Samples above the kind's overflow bound, where it has one.
    pub over: Option<u64>,
}

/// The late samples of a probe measured without `--trace`, from which episodes can still be made (a VM's
/// host can explain them).
#[derive(Debug, Clone, Copy)]
pub struct LateSamples<'a> {
    /// The samples at or above the spike threshold.
    pub spikes: &'a [Spike],
    /// The spike threshold they were kept above, ns.
    pub threshold_ns: Option<u64>,
    /// Each thread's planned CPU, by thread index.
    pub cpus: &'a [Option<u32>],
}

/// What every probe kind's result says about itself. Every method but [`KindData::kind`] and
/// [`KindData::measures`] has a default for kinds without that part (no load, no "why", no threads).
pub trait KindData: std::fmt::Debug {
    /// Which kind it is.
    fn kind(&self) -> ProbeKind;

    /// Its comparable figures (see [`crate::measure`]): what `compare` puts side by side.
    fn measures(&self) -> Vec<Measure>;

    /// [`KindData::measures`] as far as the document's facts let them be compared (a count that was not
    /// counted is left out).
    fn comparable_measures(&self, _facts: &RunFacts) -> Vec<Measure> {
        self.measures()
    }

    /// The load generated while it measured, as achieved; `None` for an idle run and for kinds never loaded.
    fn load(&self) -> Option<&LoadResult> {
        None
    }

    /// Record the load that ran beside it (kinds never loaded keep none).
    fn set_load(&mut self, _load: Option<LoadResult>) {}

    /// What the system did while it measured, where the kind records it.
    fn accounting(&self) -> Option<&Accounting> {
        None
    }

    /// Record what the system did while it measured (kinds that keep no accounting ignore it).
    fn set_accounting(&mut self, _accounting: Accounting) {}

    /// Why a timed probe ended; `None` for the others.
    fn stop_reason(&self) -> Option<StopReason> {
        None
    }

    /// How long it measured, ns (0 for kinds that run for repetitions).
    fn elapsed_ns(&self) -> u64 {
        0
    }

    /// The process-wide conditions it ran under (memory locking, cpu_dma_latency, contenders).
    fn process_conditions(&self) -> Option<&ProcessConditions> {
        None
    }

    /// Its settings as JSON text, compared byte for byte to decide whether two runs measured alike.
    fn settings_json(&self) -> String {
        String::new()
    }

    /// The settings a reader compares at a glance (CPUs, period, priority, duration), for the kinds where
    /// they tell runs apart.
    fn settings_line(&self) -> Option<String> {
        None
    }

    /// The "why" of a latency probe (counters, trace, episodes).
    fn why(&self) -> Option<&Why> {
        None
    }

    /// Where a latency probe keeps its "why", to fill or join it; `None` for kinds without one.
    fn why_slot(&mut self) -> Option<&mut Option<Why>> {
        None
    }

    /// Its late samples kept without a trace, for kinds that keep them.
    fn late_samples(&self) -> Option<LateSamples<'_>> {
        None
    }

    /// Its measuring threads, for kinds whose results are per-thread latency distributions.
    fn latency_threads(&self) -> Vec<LatThread<'_>> {
        Vec::new()
    }

    /// Per measured CPU, its timeline (for the worst interval of each): the CPU a thread ran on, else the
    /// one it was planned on; a thread with neither is left out.
    fn cpu_timelines(&self) -> Vec<(u32, &[TimelineEntry])> {
        self.latency_threads()
            .into_iter()
            .filter_map(|t| Some((t.measured_cpu()?, t.timeline)))
            .collect()
    }

    /// All its threads as one distribution.
    fn pooled(&self) -> Sparse {
        self.latency_threads().iter().fold(Sparse::new(), |acc, t| {
            crate::latency::sparse_add(&acc, &t.stats.sparse())
        })
    }

    /// The bound of its overflow count (cyclictest's `-h` range), where it has one, ns.
    fn overflow_threshold_ns(&self) -> Option<u64> {
        None
    }

    /// Each value a gate `metric` sees in it (one per thread); empty when it does not measure the metric.
    fn gate_values(&self, _metric: Metric) -> Vec<u64> {
        Vec::new()
    }

    /// Warnings for imported histograms whose limit lost samples.
    fn limit_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Its rows of the per-thread CSV export (kinds without per-thread distributions have none: their
    /// figures leave through [`KindData::measures`]).
    fn export_rows(&self, _facts: &RunFacts) -> Vec<ExportRow<'_>> {
        Vec::new()
    }
}

/// Why the probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The requested duration (`-D`) elapsed.
    Duration,
    /// Every thread completed its cycles (`-l`).
    Loops,
    /// SIGINT or SIGTERM ended it.
    Signal,
    /// A sample crossed the break threshold (`-b`).
    Break,
}

/// A sample above the spike threshold (`--spike`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spike {
    /// Index of the thread that saw the spike.
    pub thread: u32,
    /// Cycle number of the spike within its thread, from 0.
    pub cycle: u64,
    /// The spike's latency, ns.
    pub latency_ns: u64,
    /// CLOCK_MONOTONIC time of the wake-up, ns.
    pub monotonic_ns: u64,
    /// The CPU the thread woke on, where the thread was not pinned (a pinned thread's is in the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
}

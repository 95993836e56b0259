//! What every probe kind's result says about itself to the engine, the comparison, the judge, the file
//! formats and the views ([`KindData`]): its comparable measures, its latency threads, the load and
//! accounting recorded with it, its "why", how it ended, its rows of the CSV export; and what it declares
//! as data ([`KindTables`]): its gates (each with its profile and stored name, label, unit, how it
//! aggregates and its values: [`gates`], [`parse_metric`], [`gate_values`]) and its one-run floors
//! ([`one_run_floors`]).
//!
//! One module per kind implements both for the kind's result type (plain data in `rtgauge_model`). The
//! dispatches ([`ProbeData`], the tables' registries) are made from the one list of kinds
//! (`rtgauge_model::with_kinds!`): nothing here names a kind but its own module. Beside them: a latency
//! thread as every view sees it ([`LatThread`]), what a thread pool's distribution and timelines are
//! ([`pooled`], [`cpu_timelines`]), the pooled latency measures of a kind ([`latency_measures`]). The views
//! of a kind are `rtgauge_report::kind::KindView`; where a kind is registered in every layer, the README's
//! Layout.

use rtgauge_model::accounting::Accounting;
use rtgauge_model::attribution::Why;
use rtgauge_model::kind::ProbeKind;
use rtgauge_model::kind::{RunFacts, StopReason};
use rtgauge_model::latency::Spike;
use rtgauge_model::latency::{LatencyStats, Sparse, TimelineEntry, Windows};
use rtgauge_model::load::LoadResult;
use rtgauge_model::measure::{Better, Measure, MeasureUnit, LATENCY_STATISTICS};
use rtgauge_model::rt::{ProcessConditions, ThreadConditions};
use rtgauge_model::run::ProbeResult;
use rtgauge_model::verdict::Metric;

/// The parts a kind's result keeps in fields of the usual names, written once for every kind that keeps
/// them, each getter with its setter: `load` (`load`, `set_load`), `accounting`, `why` (`why`, `why_slot`),
/// `elapsed` (`elapsed_ns`), `settings` (`settings_json` of its `config`). Used inside `impl KindData`.
macro_rules! fields {
    (load) => {
        fn load(&self) -> Option<&rtgauge_model::load::LoadResult> {
            self.load.as_ref()
        }

        fn set_load(&mut self, load: Option<rtgauge_model::load::LoadResult>) {
            self.load = load;
        }
    };
    (accounting) => {
        fn accounting(&self) -> Option<&rtgauge_model::accounting::Accounting> {
            self.accounting.as_ref()
        }

        fn set_accounting(&mut self, accounting: rtgauge_model::accounting::Accounting) {
            self.accounting = Some(accounting);
        }
    };
    (why) => {
        fn why(&self) -> Option<&rtgauge_model::attribution::Why> {
            self.why.as_ref()
        }

        fn why_slot(&mut self) -> Option<&mut Option<rtgauge_model::attribution::Why>> {
            Some(&mut self.why)
        }
    };
    (elapsed) => {
        fn elapsed_ns(&self) -> u64 {
            self.elapsed_ns
        }
    };
    (settings) => {
        fn settings_json(&self) -> String {
            $crate::kind::config_json(&self.config)
        }
    };
    ($($part:ident),+) => {
        $($crate::kind::fields!($part);)+
    };
}
pub(crate) use fields;

pub mod clock;
pub mod cyclic;
pub mod hwnoise;
pub mod mem;
pub mod net;
pub mod net_latency;
pub mod numa;
pub mod ops;
pub mod oslat;

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

/// What every probe kind's result says about itself. Every method but
/// [`KindData::measures`] has a default for kinds without that part (no load, no "why", no threads).
pub trait KindData: std::fmt::Debug {
    /// Its comparable figures (see `rtgauge_model::measure`): what `compare` puts side by side.
    fn measures(&self) -> Vec<Measure>;

    /// [`KindData::measures`] as far as the document's facts let them be compared (a count that was not
    /// counted is left out).
    fn comparable_measures(&self, _facts: &RunFacts) -> Vec<Measure> {
        self.measures()
    }

    /// The load generated while it measured, as achieved; `None` for an idle run and for kinds never loaded.
    fn load(&self) -> Option<&LoadResult>;

    /// Record the load that ran beside it (kinds never loaded keep none).
    fn set_load(&mut self, load: Option<LoadResult>);

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
    fn elapsed_ns(&self) -> u64;

    /// The process-wide conditions it ran under (memory locking, cpu_dma_latency, contenders).
    fn process_conditions(&self) -> Option<&ProcessConditions> {
        None
    }

    /// Its settings as JSON text, compared byte for byte to decide whether two runs measured alike (stored
    /// repeats): [`config_json`] of its configuration, or empty for a kind without one.
    fn settings_json(&self) -> String;

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

    /// Whether its results are per-thread latency distributions with windows, a timeline and a "why" (the
    /// timer and the busy-loop probe): what the comparison resamples by window.
    fn is_latency(&self) -> bool {
        false
    }

    /// Its measuring threads, for kinds whose results are per-thread latency distributions.
    fn latency_threads(&self) -> Vec<LatThread<'_>> {
        Vec::new()
    }

    /// What each of its measuring threads asked for and got (policy, priority, CPU): its latency threads'
    /// by default; a kind whose threads are not latency threads (the packet probe's sender and receiver)
    /// says its own.
    fn thread_conditions(&self) -> Vec<&ThreadConditions> {
        self.latency_threads()
            .into_iter()
            .map(|t| t.conditions)
            .collect()
    }

    /// The exchanges it made with another machine's clock (a receive-only packet stream reading its
    /// sender's through `rtgauge vm`'s channel), as `rtgauge vm observe` records them: what `vm join` puts
    /// its episodes on the host's clock with when the host record has none.
    fn peer_clock_sync(&self) -> Option<&rtgauge_model::vm::ClockSync> {
        None
    }

    /// The bound of its overflow count (cyclictest's `-h` range), where it has one, ns.
    fn overflow_threshold_ns(&self) -> Option<u64> {
        None
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

/// min, p50 … p99.99 and max of the pooled distribution of several threads (`prefix.min`, …).
pub fn latency_measures<'a>(
    prefix: &str,
    what: &str,
    stats: impl Iterator<Item = &'a rtgauge_model::latency::LatencyStats>,
) -> Vec<Measure> {
    let mut pooled = rtgauge_model::latency::new_histogram();
    let (mut min, mut max, mut any) = (u64::MAX, 0u64, false);
    // Samples only counted beyond an imported histogram's range, and the lowest such range.
    let (mut total, mut beyond, mut limit) = (0u64, 0u64, u64::MAX);
    for s in stats {
        if s.count == 0 {
            continue;
        }
        any = true;
        min = min.min(s.min_ns);
        max = max.max(s.max_ns);
        total += s.count;
        if let Some(b) = s.beyond.filter(|b| b.count > 0) {
            beyond += b.count;
            limit = limit.min(b.limit_ns);
        }
        if let Ok(h) = s.hdr.decode() {
            // Same bounds on both sides: adding cannot fail.
            let _ = pooled.add(&h);
        }
    }
    if !any {
        return Vec::new();
    }
    let m = |stat: &str, v: u64| {
        Measure::new(
            format!("{prefix}.{stat}"),
            format!("{what} {stat}"),
            MeasureUnit::Nanos,
            v as f64,
            Better::Lower,
        )
    };
    let mut out = vec![m("min", min)];
    for (name, p) in LATENCY_STATISTICS {
        if rtgauge_model::latency::unknown_rank(*p, total, beyond) {
            let mut u = m(name, limit.max(min).min(max));
            u.unknown_above = Some(limit as f64);
            out.push(u);
        } else {
            out.push(m(name, pooled.value_at_percentile(*p).min(max)));
        }
    }
    out.push(m("max", max));
    out
}

/// A kind's configuration as [`KindData::settings_json`] compares it: its JSON text.
pub fn config_json<T: serde::Serialize>(config: &T) -> String {
    serde_json::to_string(config).unwrap_or_default()
}

/// Per measured CPU, its timeline (for the worst interval of each): the CPU a thread ran on, else the one
/// it was planned on; a thread with neither is left out.
pub fn cpu_timelines(d: &dyn KindData) -> Vec<(u32, &[TimelineEntry])> {
    d.latency_threads()
        .into_iter()
        .filter_map(|t| Some((t.measured_cpu()?, t.timeline)))
        .collect()
}

/// All of a result's threads as one distribution.
pub fn pooled(d: &dyn KindData) -> Sparse {
    d.latency_threads().iter().fold(Sparse::new(), |acc, t| {
        rtgauge_model::latency::sparse_add(&acc, &t.stats.sparse())
    })
}

/// What a gate's values are: latencies (a profile gives the bound as a duration) or counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateUnit {
    /// A latency or an offset, ns.
    Nanos,
    /// A count (samples, packets, steps).
    Count,
}

/// How a gate's values over a result's threads, CPUs or sources, and over a run's results, become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// The largest (a maximum latency).
    Max,
    /// Their sum (a count).
    Sum,
}

/// Which bound of a gate is where a spike episode starts to matter for a profile: the lowest of them, over
/// a kind's gates, is the threshold its episodes are explained from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpisodeBound {
    /// The gate bounds no single sample (a count, a maximum the probe does not explain).
    None,
    /// Its maximum (`cyclic.max`).
    Max,
    /// Its threshold (`cyclic.samples_at_or_above`).
    Threshold,
}

/// One gate of a kind, as its table declares it: everything but how it is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateDef {
    /// The profile's name after the kind's (`max` of `cyclic.max`, `offset.max` of `clock.offset.max`).
    pub key: &'static str,
    /// The run document's name after the kind's (`max_ns` of `cyclic_max_ns`).
    pub stored: &'static str,
    /// How a verdict names it (`cyclic max latency`); one with a threshold is followed by it
    /// (`cyclic samples ≥ 120 µs`).
    pub label: &'static str,
    /// Its values' unit.
    pub unit: GateUnit,
    /// How its values become the run's.
    pub aggregate: Aggregate,
    /// Whether it takes a threshold (a profile's `threshold = "120us"`): it counts samples at or above it.
    pub threshold: bool,
    /// Which of its bounds starts a spike episode.
    pub episode_bound: EpisodeBound,
}

/// A kind's gate with how it is computed from the kind's result `R`: its values, one per thread, CPU or
/// source (empty: the result has no data for it), given the metric's threshold.
pub struct KindGate<R> {
    /// The gate.
    pub def: GateDef,
    /// Its values in one result.
    pub values: fn(&R, Option<u64>) -> Vec<u64>,
}

/// A kind's tables, in its module here: its gates, one line each, and its one-run floors
/// (`crate::compare::one_run`). A kind without either keeps the empty default.
pub trait KindTables: Sized + 'static {
    /// The kind's gates.
    const GATES: &'static [KindGate<Self>] = &[];
    /// The largest ratio idle runs of one platform showed per family of its measures (a pattern, a
    /// floor), each kept with where it was measured: a single run per platform decides a measure only
    /// beyond it. Empty: its measures get no verdict from one run per platform.
    const ONE_RUN_FLOORS: &'static [(&'static str, f64)] = &[];
}

/// A kind's name as a profile's gates write it: `net.latency` for `net_latency`.
pub fn gate_prefix(kind: ProbeKind) -> String {
    kind.as_str().replace('_', ".")
}

/// The gate `metric` is, if its kind has it.
pub fn gate_def(metric: &Metric) -> Option<GateDef> {
    gates()
        .into_iter()
        .find(|(k, d)| *k == metric.kind && d.stored == metric.name)
        .map(|(_, d)| d)
}

/// The metric a profile names (`cyclic.max`, `net.latency.lost`) with its threshold (`None` when not
/// given), or why it is not one.
pub fn parse_metric(name: &str, threshold_ns: Option<u64>) -> Result<Metric, MetricError> {
    let (kind, def) = gates()
        .into_iter()
        .find(|(k, d)| name == format!("{}.{}", gate_prefix(*k), d.key))
        .ok_or(MetricError::Unknown)?;
    match (def.threshold, threshold_ns) {
        (true, None) => Err(MetricError::ThresholdRequired),
        (false, Some(_)) => Err(MetricError::ThresholdUnused),
        _ => Ok(Metric {
            kind,
            name: std::borrow::Cow::Borrowed(def.stored),
            threshold_ns,
        }),
    }
}

/// Why a name is not a metric of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// No kind has a gate of that name.
    #[error("unknown metric")]
    Unknown,
    /// The gate counts samples at or above a threshold, and none was given.
    #[error("required for this metric")]
    ThresholdRequired,
    /// A threshold was given to a gate that takes none.
    #[error("not used by this metric")]
    ThresholdUnused,
}

/// Every gate's profile name, in the table's order (`cyclic.max, cyclic.samples_at_or_above, …`).
pub fn gate_names() -> Vec<String> {
    gates()
        .into_iter()
        .map(|(k, d)| format!("{}.{}", gate_prefix(k), d.key))
        .collect()
}

/// A stored result's kind, as [`KindData`].
pub trait ProbeData {
    /// The result as its kind's [`KindData`].
    fn data(&self) -> &dyn KindData;
    /// The result as its kind's [`KindData`], to fill in.
    fn data_mut(&mut self) -> &mut dyn KindData;
}

/// [`ProbeData`], the gate table and the gates' values for every kind of the list
/// (`rtgauge_model::with_kinds!`).
macro_rules! data_dispatch {
    ($($variant:ident => $ty:ty, $name:literal, $doc:literal;)*) => {
        /// Every kind's gates, kind by kind in the views' order: what a profile may name
        /// ([`gate_names`]) and the docs list.
        pub fn gates() -> Vec<(ProbeKind, GateDef)> {
            let mut all = Vec::new();
            $(all.extend(<$ty as KindTables>::GATES.iter().map(|g| (ProbeKind::$variant, g.def)));)*
            all
        }

        /// Every kind's one-run floors, kind by kind (`(pattern, floor)`): where a kind has none, its
        /// measures get no verdict from one run per platform.
        pub fn one_run_floors() -> Vec<(&'static str, f64)> {
            let mut all = Vec::new();
            $(all.extend_from_slice(<$ty as KindTables>::ONE_RUN_FLOORS);)*
            all
        }

        /// Each value `metric` has in `p` (one per thread, CPU or source); empty when `p` does not measure
        /// it.
        pub fn gate_values(p: &ProbeResult, metric: &Metric) -> Vec<u64> {
            match p {
                $(ProbeResult::$variant(r) => <$ty as KindTables>::GATES
                    .iter()
                    .filter(|g| metric.kind == ProbeKind::$variant && g.def.stored == metric.name)
                    .flat_map(|g| (g.values)(r, metric.threshold_ns))
                    .collect(),)*
            }
        }

        impl ProbeData for ProbeResult {
            fn data(&self) -> &dyn KindData {
                match self {
                    $(ProbeResult::$variant(r) => r,)*
                }
            }

            fn data_mut(&mut self) -> &mut dyn KindData {
                match self {
                    $(ProbeResult::$variant(r) => r,)*
                }
            }
        }
    };
}

rtgauge_model::with_kinds!(data_dispatch);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each gate is stored as `<kind>_<stored>` (the names run documents have held since they had gates),
    /// read back as the same metric, and named by its profile name; a name no kind has is refused.
    #[test]
    fn every_gate_round_trips_by_its_stored_and_its_profile_name() {
        let names: Vec<String> = gates()
            .into_iter()
            .map(|(k, d)| format!("{}_{}", k.as_str(), d.stored))
            .collect();
        assert_eq!(
            names,
            [
                "cyclic_max_ns",
                "cyclic_samples_at_or_above",
                "cyclic_missed",
                "oslat_max_ns",
                "hwnoise_max_ns",
                "net_latency_max_ns",
                "net_latency_lost",
                "net_latency_late",
                "clock_offset_max_ns",
                "clock_steps"
            ]
        );
        for (kind, def) in gates() {
            let name = format!("{}.{}", gate_prefix(kind), def.key);
            let threshold = def.threshold.then_some(120_000);
            let m = parse_metric(&name, threshold).unwrap();
            assert_eq!((m.kind, gate_def(&m)), (kind, Some(def)));
            let gate = rtgauge_model::verdict::Gate {
                metric: m.clone(),
                max: 5,
            };
            let json = serde_json::to_string(&gate).unwrap();
            let expected = match threshold {
                Some(t) => format!(
                    "{{\"metric\":\"{}_{}\",\"threshold_ns\":{t},\"max\":5}}",
                    kind.as_str(),
                    def.stored
                ),
                None => format!(
                    "{{\"metric\":\"{}_{}\",\"max\":5}}",
                    kind.as_str(),
                    def.stored
                ),
            };
            assert_eq!(json, expected);
            let back: rtgauge_model::verdict::Gate = serde_json::from_str(&json).unwrap();
            assert_eq!(back, gate);
            assert_eq!(
                parse_metric(&name, if def.threshold { None } else { Some(1) }),
                Err(if def.threshold {
                    MetricError::ThresholdRequired
                } else {
                    MetricError::ThresholdUnused
                })
            );
        }
        assert_eq!(parse_metric("cyclic.p99", None), Err(MetricError::Unknown));
        let unknown = serde_json::from_str::<rtgauge_model::verdict::Gate>(
            "{\"metric\":\"fio_max_ns\",\"max\":1}",
        );
        assert!(unknown
            .unwrap_err()
            .to_string()
            .contains("unknown metric 'fio_max_ns'"));
    }
}

//! The timer wake-up latency probe's result (`rtgauge cyclic`, imported cyclictest) as [`KindData`]: its
//! latency measures with missed deadlines and rt-tests overflows, its threads, its gates, its late samples.

use super::*;
use rtgauge_model::cyclic::*;
use rtgauge_model::units::us_trunc;

impl KindData for CyclicResult {
    fields!(load, accounting, why, elapsed, settings);

    fn measures(&self) -> Vec<Measure> {
        latency_measures(
            "cyclic",
            "timer latency",
            self.threads.iter().map(|t| &t.latency),
        )
        .into_iter()
        .chain([Measure::new(
            "cyclic.missed",
            "missed deadlines",
            MeasureUnit::Count,
            self.threads.iter().map(|t| t.missed_deadlines).sum::<u64>() as f64,
            Better::Lower,
        )])
        .chain(self.overflows().map(|(thr, n)| {
            Measure::new(
                "cyclic.overflows",
                if thr % 1000 == 0 {
                    format!("samples ≥ {} µs (overflows)", us_trunc(thr))
                } else {
                    // A -N histogram's range is in ns (`-N -H 50`: 50 ns, not "0 µs").
                    format!("samples ≥ {thr} ns (overflows)")
                },
                MeasureUnit::Count,
                n as f64,
                Better::Lower,
            )
        }))
        .collect()
    }

    fn comparable_measures(&self, facts: &RunFacts) -> Vec<Measure> {
        let mut m = self.measures();
        // An imported cyclictest result did not count its missed deadlines: no figure to compare.
        if !facts.missed_deadlines_known {
            m.retain(|m| m.key != "cyclic.missed");
        }
        m
    }

    fn stop_reason(&self) -> Option<StopReason> {
        Some(self.stop_reason)
    }

    fn process_conditions(&self) -> Option<&ProcessConditions> {
        Some(&self.conditions)
    }

    fn settings_line(&self) -> Option<String> {
        let cpus: Vec<String> = self
            .config
            .cpus
            .iter()
            .map(|x| x.map_or("any".into(), |c| c.to_string()))
            .collect();
        Some(format!(
            "cyclic CPUs {}, interval {} µs, priority {}, {}",
            cpus.join(","),
            us_trunc(self.config.interval_ns),
            self.config.priority,
            self.config
                .duration
                .map_or("no duration".into(), |d| format!("{} s", d.as_secs_f64()))
        ))
    }

    fn late_samples(&self) -> Option<LateSamples<'_>> {
        Some(LateSamples {
            spikes: &self.spikes,
            threshold_ns: self.config.spike_threshold_ns,
            cpus: &self.config.cpus,
        })
    }

    fn is_latency(&self) -> bool {
        true
    }

    fn latency_threads(&self) -> Vec<LatThread<'_>> {
        self.threads
            .iter()
            .enumerate()
            .map(|(i, t)| LatThread {
                index: t.index,
                cpu: t.conditions.cpu.achieved,
                planned_cpu: self.config.cpus.get(i).copied().flatten(),
                stats: &t.latency,
                windows: &t.windows,
                timeline: &t.timeline,
                conditions: &t.conditions,
            })
            .collect()
    }

    fn overflow_threshold_ns(&self) -> Option<u64> {
        self.config.overflow_threshold_ns()
    }

    fn limit_warnings(&self) -> Vec<String> {
        self.threads
            .iter()
            .flat_map(|t| t.latency.beyond_warning(&format!("thread {}", t.index)))
            .collect()
    }

    fn export_rows(&self, facts: &RunFacts) -> Vec<ExportRow<'_>> {
        self.threads
            .iter()
            .map(|t| ExportRow {
                probe: "cyclic".into(),
                index: t.index,
                cpu: t.conditions.cpu.achieved,
                stats: &t.latency,
                missed: facts.missed_deadlines_known.then_some(t.missed_deadlines),
                over: t.linear.as_ref().map(|l| l.overflows),
            })
            .collect()
    }
}

impl super::KindTables for CyclicResult {
    /// The one-run floors (`crate::compare::one_run`): per measure, the largest ratio (B/A or A/B) between two
    /// idle runs of one platform in the A/A bench, rounded up to two significant digits — `bench/compare_aa` of
    /// 2026-11-26 14:40 (session 2 in docs/report.md): 20 s runs of one timer-latency profile (`-m -p10 -i 1000
    /// -h 2000 -a 1`, FIFO 10 on CPU 1) on this project's 2-vCPU VM, the 29 idle runs no other measuring run
    /// disturbed, every pair of them (406). Counts compare as (B + 1)/(A + 1). The max moved 45× (0.47 vs 21 ms:
    /// the VM's host stalls a vCPU for up to ~20 ms at random) and p99.9 131×; p50 2.5× (13.6 vs 34.3 µs).
    const ONE_RUN_FLOORS: &'static [(&'static str, f64)] = &[
        ("cyclic.min", 1.8),
        ("cyclic.p50", 2.6),
        ("cyclic.p99", 12.0),
        ("cyclic.p99.9", 140.0),
        ("cyclic.p99.99", 110.0),
        ("cyclic.max", 46.0),
        ("cyclic.missed", 150.0),
        ("cyclic.overflows", 120.0),
    ];
    const GATES: &'static [KindGate<Self>] = &[
        KindGate {
            def: GateDef {
                key: "max",
                stored: "max_ns",
                label: "cyclic max latency",
                unit: GateUnit::Nanos,
                aggregate: Aggregate::Max,
                threshold: false,
                episode_bound: EpisodeBound::Max,
            },
            values: |r, _| r.threads.iter().map(|t| t.latency.max_ns).collect(),
        },
        KindGate {
            def: GateDef {
                key: "samples_at_or_above",
                stored: "samples_at_or_above",
                label: "cyclic samples ≥",
                unit: GateUnit::Count,
                aggregate: Aggregate::Sum,
                threshold: true,
                episode_bound: EpisodeBound::Threshold,
            },
            values: |r, thr| {
                r.threads
                    .iter()
                    .map(|t| t.samples_at_or_above(thr.unwrap_or(0)))
                    .collect()
            },
        },
        KindGate {
            def: GateDef {
                key: "missed",
                stored: "missed",
                label: "cyclic missed deadlines",
                unit: GateUnit::Count,
                aggregate: Aggregate::Sum,
                threshold: false,
                episode_bound: EpisodeBound::None,
            },
            values: |r, _| r.threads.iter().map(|t| t.missed_deadlines).collect(),
        },
    ];
}

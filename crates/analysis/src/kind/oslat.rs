//! The busy-loop OS-noise probe's result (`rtgauge oslat`, imported oslat) as [`KindData`]: its gap measures,
//! its threads, its gate, its rows of the CSV export.

use super::*;
use rtgauge_model::oslat::*;

impl KindData for OslatResult {
    fields!(load, accounting, why, elapsed, settings);

    fn measures(&self) -> Vec<Measure> {
        latency_measures(
            "oslat",
            "busy-loop gap",
            self.threads.iter().map(|t| &t.gaps),
        )
    }

    fn stop_reason(&self) -> Option<StopReason> {
        Some(self.stop_reason)
    }

    fn process_conditions(&self) -> Option<&ProcessConditions> {
        Some(&self.conditions)
    }

    fn settings_line(&self) -> Option<String> {
        let cpus: Vec<String> = self.config.cpus.iter().map(u32::to_string).collect();
        Some(format!(
            "oslat CPUs {}, {} s",
            cpus.join(","),
            self.config.duration.as_secs_f64()
        ))
    }

    fn is_latency(&self) -> bool {
        true
    }

    fn latency_threads(&self) -> Vec<LatThread<'_>> {
        self.threads
            .iter()
            .map(|t| LatThread {
                index: t.index,
                cpu: Some(t.cpu),
                planned_cpu: Some(t.cpu),
                stats: &t.gaps,
                windows: &t.windows,
                timeline: &t.timeline,
                conditions: &t.conditions,
            })
            .collect()
    }

    fn limit_warnings(&self) -> Vec<String> {
        self.threads
            .iter()
            .flat_map(|t| t.gaps.beyond_warning(&format!("CPU {}", t.cpu)))
            .collect()
    }

    fn export_rows(&self, _facts: &RunFacts) -> Vec<ExportRow<'_>> {
        self.threads
            .iter()
            .map(|t| ExportRow {
                probe: "oslat".into(),
                index: t.index,
                cpu: Some(t.cpu),
                stats: &t.gaps,
                missed: Some(0),
                // Gaps above 20 µs (native runs' highest threshold), empty where an import's buckets do not
                // tell.
                over: t.over(20_000).map(|x| x.count),
            })
            .collect()
    }
}

impl super::KindTables for OslatResult {
    /// The one-run floors (`crate::compare::one_run`): per measure, the largest ratio (either way) between two
    /// idle runs of one platform, rounded up to two significant digits — `bench/compare_aa_probes floors 12`
    /// of 2026-11-28 on this project's 2-vCPU VM: two sessions of 12 idle runs of the built-in `quick` profile
    /// (oslat 5 s on CPUs 0-1), 66 pairs each, the larger of the two. The gaps are counted in ticks ~10 ns
    /// apart: min and p99 never moved (20 and 30 ns), p50 moved once by one tick (20 vs 29 ns, 1.45×) and p99.9
    /// by one (30 vs 40 ns, 1.33×); a one-tick move of any of these is no verdict, so they share p50's 1.5.
    /// p99.99 moved 44× (60 ns vs 2.7 µs: a host stall in one run's last 0.01 %), max 4× (4 vs 16 ms).
    const ONE_RUN_FLOORS: &'static [(&'static str, f64)] = &[
        ("oslat.min", 1.5),
        ("oslat.p50", 1.5),
        ("oslat.p99", 1.5),
        ("oslat.p99.9", 1.5),
        ("oslat.p99.99", 45.0),
        ("oslat.max", 4.0),
    ];
    const GATES: &'static [KindGate<Self>] = &[KindGate {
        def: GateDef {
            key: "max",
            stored: "max_ns",
            label: "oslat max gap",
            unit: GateUnit::Nanos,
            aggregate: Aggregate::Max,
            threshold: false,
            episode_bound: EpisodeBound::Max,
        },
        values: |r, _| r.threads.iter().map(|t| t.gaps.max_ns).collect(),
    }];
}

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
            self.config.duration_ns as f64 / 1e9
        ))
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

    fn gate_values(&self, metric: Metric) -> Vec<u64> {
        match metric {
            Metric::OslatMaxNs => self.threads.iter().map(|t| t.gaps.max_ns).collect(),
            _ => Vec::new(),
        }
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

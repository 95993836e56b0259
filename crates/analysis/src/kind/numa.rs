//! The NUMA locality probe's result (`rtgauge numa`) as [`KindData`]: local shares and allocation counters.

use super::*;
use rtgauge_model::numa::*;

impl KindData for NumaResult {
    /// `numa.alloc_local_pct`, `numa.resident_local_pct` (all listed processes, weighted by bytes), and
    /// `numa.pid.<comm>.local_pct` is left out on purpose: PIDs differ between runs.
    fn measures(&self) -> Vec<Measure> {
        let mut out = Vec::new();
        if let Some(p) = self.local_alloc_pct() {
            out.push(Measure::new(
                "numa.alloc_local_pct",
                "node-local allocations",
                MeasureUnit::Percent,
                p,
                Better::Higher,
            ));
        }
        let (mut local, mut total) = (0f64, 0f64);
        for p in &self.processes {
            let t: u64 = p.bytes_per_node.values().sum();
            local += p.local_pct / 100.0 * t as f64;
            total += t as f64;
        }
        if total > 0.0 {
            out.push(
                Measure::new(
                    "numa.resident_local_pct",
                    "resident memory on local nodes",
                    MeasureUnit::Percent,
                    local * 100.0 / total,
                    Better::Higher,
                )
                .with_replicates(self.processes.iter().map(|p| p.local_pct).collect()),
            );
        }
        out
    }

    /// It watches other processes and is never loaded.
    fn load(&self) -> Option<&LoadResult> {
        None
    }

    fn set_load(&mut self, _load: Option<LoadResult>) {}

    /// It samples for its interval, not a duration.
    fn elapsed_ns(&self) -> u64 {
        0
    }

    /// It keeps no configuration of its own.
    fn settings_json(&self) -> String {
        String::new()
    }
}

impl super::KindTables for NumaResult {}

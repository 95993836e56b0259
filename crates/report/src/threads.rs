//! The per-thread view of a latency probe (cyclic or oslat), shared by the report pages and `compare`.

use rtgauge_model::latency::{self, LatencyStats, Sparse, TimelineEntry, Windows};
use rtgauge_model::rt::ThreadConditions;
use rtgauge_model::run::ProbeResult;

/// One measuring thread of a latency probe.
pub(crate) struct LatThread<'a> {
    pub name: String,
    pub stats: &'a LatencyStats,
    pub windows: &'a Windows,
    pub timeline: &'a [TimelineEntry],
    pub conditions: &'a ThreadConditions,
}

/// The threads of a latency probe; none for other probes.
pub(crate) fn lat_threads(p: &ProbeResult) -> Vec<LatThread<'_>> {
    match p {
        ProbeResult::Cyclic(c) => c
            .threads
            .iter()
            .map(|t| LatThread {
                name: cpu_name(t.conditions.cpu.achieved, t.index),
                stats: &t.latency,
                windows: &t.windows,
                timeline: &t.timeline,
                conditions: &t.conditions,
            })
            .collect(),
        ProbeResult::Oslat(o) => o
            .threads
            .iter()
            .map(|t| LatThread {
                name: format!("CPU {}", t.cpu),
                stats: &t.gaps,
                windows: &t.windows,
                timeline: &t.timeline,
                conditions: &t.conditions,
            })
            .collect(),
        ProbeResult::Net(_) | ProbeResult::Ops(_) | ProbeResult::Mem(_) | ProbeResult::Numa(_) => {
            Vec::new()
        }
    }
}

fn cpu_name(cpu: Option<u32>, index: u32) -> String {
    match cpu {
        Some(c) => format!("CPU {c}"),
        None => format!("thread {index}"),
    }
}

/// A thread's distribution (empty if its histogram does not decode).
pub(crate) fn sparse_of(s: &LatencyStats) -> Sparse {
    s.hdr
        .decode()
        .map(|h| latency::sparse(&h))
        .unwrap_or_default()
}

/// All threads of a probe as one distribution.
pub fn pooled_sparse(probe: &ProbeResult) -> Sparse {
    lat_threads(probe).iter().fold(Sparse::new(), |acc, t| {
        latency::sparse_add(&acc, &sparse_of(t.stats))
    })
}

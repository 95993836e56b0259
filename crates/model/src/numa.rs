//! NUMA locality of what runs (`rtgauge numa`): per process and per cgroup, the share of resident memory on
//! the nodes its allowed CPUs belong to; and the system's local/remote allocation counters over an interval.

use crate::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A NUMA node: its CPUs and whether it has memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Node number.
    pub node: u32,
    /// CPUs of the node.
    pub cpus: CpuSet,
}

/// Where one process's (or one cgroup's) memory is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Locality {
    /// PID, or 0 for a cgroup aggregate.
    pub pid: u32,
    /// Command name (`comm`), or the cgroup path for an aggregate.
    pub name: String,
    /// cgroup v2 path (`/system.slice/x.service`), empty when unknown.
    pub cgroup: String,
    /// CPUs the process may run on (`Cpus_allowed_list`).
    pub cpus_allowed: CpuSet,
    /// Nodes those CPUs belong to.
    pub local_nodes: Vec<u32>,
    /// Resident bytes per node (numa_maps `N<node>=<pages>` × page size), stored as `[[node, bytes], …]`.
    #[serde(with = "node_pairs")]
    pub bytes_per_node: BTreeMap<u32, u64>,
    /// Share of resident bytes on `local_nodes`, percent (100 when nothing is resident).
    pub local_pct: f64,
}

/// One node's allocation counters (`/sys/devices/system/node/nodeN/numastat`), pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NumaStat {
    /// Pages allocated on this node as intended (`numa_hit`).
    pub numa_hit: u64,
    /// Pages allocated on this node although another was intended (`numa_miss`).
    pub numa_miss: u64,
    /// Pages intended for this node but allocated on another (`numa_foreign`).
    pub numa_foreign: u64,
    /// Interleaved pages allocated on this node as intended (`interleave_hit`).
    pub interleave_hit: u64,
    /// Pages allocated on this node while the process ran on it (`local_node`).
    pub local_node: u64,
    /// Pages allocated on this node while the process ran on another (`other_node`).
    pub other_node: u64,
}

/// Counters of one node: totals since boot and the change over the sampled interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCounters {
    /// Node number.
    pub node: u32,
    /// Counters since boot.
    pub total: NumaStat,
    /// Change over the sampled interval (zero when `interval_ns` is 0).
    pub delta: NumaStat,
}

/// Result of the NUMA locality probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaResult {
    /// The nodes and their CPUs.
    pub nodes: Vec<NodeInfo>,
    /// Per-process memory locality.
    pub processes: Vec<Locality>,
    /// Per-cgroup memory locality (aggregates of the processes).
    pub cgroups: Vec<Locality>,
    /// Length of the counter sample, ns (0: totals only).
    pub interval_ns: u64,
    /// Allocation counters, one entry per node.
    pub counters: Vec<NodeCounters>,
}

/// A node map as a list of `[node, value]` pairs: JSON object keys are strings, and serde cannot turn them
/// back into integers inside an internally tagged enum (`ProbeResult`), so a map would not round-trip.
mod node_pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(
        map: &BTreeMap<u32, u64>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        map.iter()
            .map(|(k, v)| (*k, *v))
            .collect::<Vec<_>>()
            .serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<u32, u64>, D::Error> {
        Ok(Vec::<(u32, u64)>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

/// Local share of `bytes_per_node` on `local` nodes, percent.
pub fn local_pct(bytes_per_node: &BTreeMap<u32, u64>, local: &[u32]) -> f64 {
    let total: u64 = bytes_per_node.values().sum();
    if total == 0 {
        return 100.0;
    }
    let l: u64 = bytes_per_node
        .iter()
        .filter(|(n, _)| local.contains(n))
        .map(|(_, b)| *b)
        .sum();
    l as f64 * 100.0 / total as f64
}

impl NumaStat {
    /// The change since `earlier` (each counter saturates at 0).
    pub fn minus(&self, earlier: &NumaStat) -> NumaStat {
        NumaStat {
            numa_hit: self.numa_hit.saturating_sub(earlier.numa_hit),
            numa_miss: self.numa_miss.saturating_sub(earlier.numa_miss),
            numa_foreign: self.numa_foreign.saturating_sub(earlier.numa_foreign),
            interleave_hit: self.interleave_hit.saturating_sub(earlier.interleave_hit),
            local_node: self.local_node.saturating_sub(earlier.local_node),
            other_node: self.other_node.saturating_sub(earlier.other_node),
        }
    }
}

impl NumaResult {
    /// A node's counters over the sampled interval, or since boot when none was sampled.
    pub fn counts(&self, counters: &NodeCounters) -> NumaStat {
        if self.interval_ns > 0 {
            counters.delta
        } else {
            counters.total
        }
    }

    /// Share of allocations that were node-local, over the interval when one was sampled, else since boot.
    pub fn local_alloc_pct(&self) -> Option<f64> {
        let (l, o) = self
            .counters
            .iter()
            .map(|c| self.counts(c))
            .fold((0u64, 0u64), |(l, o), s| {
                (l + s.local_node, o + s.other_node)
            });
        (l + o > 0).then(|| l as f64 * 100.0 / (l + o) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numa_result_round_trips_inside_a_run_document_probe() {
        let r = crate::run::ProbeResult::from(NumaResult {
            nodes: vec![],
            processes: vec![Locality {
                pid: 1,
                name: "init".into(),
                cgroup: "/".into(),
                cpus_allowed: CpuSet::new([0]),
                local_nodes: vec![0],
                bytes_per_node: [(0, 4096), (1, 8192)].into_iter().collect(),
                local_pct: 100.0 / 3.0,
            }],
            cgroups: vec![],
            interval_ns: 0,
            counters: vec![],
        });
        let text = serde_json::to_string(&r).unwrap();
        let back: crate::run::ProbeResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn local_share_counts_only_local_nodes() {
        let b: BTreeMap<u32, u64> = [(0, 300), (1, 100)].into_iter().collect();
        assert_eq!(local_pct(&b, &[0]), 75.0);
        assert_eq!(local_pct(&b, &[0, 1]), 100.0);
        assert_eq!(local_pct(&b, &[2]), 0.0);
        assert_eq!(local_pct(&BTreeMap::new(), &[0]), 100.0);
    }
}

//! Memory probe results (`rtgauge mem`): the load-latency curve (dependent loads over a randomised chain,
//! ns per load against working-set size), the cache/TLB steps found in it and the caches sysfs reports,
//! read/write/copy bandwidth, and the NUMA matrix (CPUs of node i, memory bound to node j).

use serde::{Deserialize, Serialize};

/// How the memory probe was run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemConfig {
    /// CPU the probe was pinned to; `None` = not pinned.
    pub cpu: Option<u32>,
    /// Working sets of the latency curve, bytes.
    pub sizes_bytes: Vec<u64>,
    /// Loads timed per repetition of one point (at least one whole lap of the chain).
    pub loads_per_repetition: u64,
    /// Repetitions of each point; the latency curve keeps their minimum, bandwidth their median.
    pub repetitions: u32,
    /// Buffer size of the bandwidth kernels, bytes.
    pub bw_size_bytes: u64,
    /// Working set of each NUMA latency/bandwidth cell, bytes (0: no matrix).
    pub numa_size_bytes: u64,
    /// Transparent huge pages requested (madvise(MADV_HUGEPAGE)) for every buffer.
    pub hugepages: bool,
}

/// A cache as sysfs describes it (`/sys/devices/system/cpu/cpuN/cache/indexM`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheInfo {
    /// Cache level (1 for L1, ...).
    pub level: u32,
    /// `Data`, `Unified` (instruction caches are left out).
    pub kind: String,
    /// Capacity, bytes.
    pub size_bytes: u64,
}

/// One point of the latency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// Working set, bytes.
    pub size_bytes: u64,
    /// Minimum over the repetitions, ns per dependent load (lmbench's lat_mem_rd reports the minimum).
    pub ns_per_load: f64,
    /// Every repetition, ns per load.
    pub samples_ns: Vec<f64>,
}

/// A step of the curve: the last working set of a plateau and the latency there and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Largest working set still on the plateau: the capacity this level appears to have.
    pub capacity_bytes: u64,
    /// Latency on the plateau, ns per dependent load.
    pub plateau_ns: f64,
    /// The next plateau (or the last point), ns.
    pub next_ns: f64,
    /// sysfs cache whose size lies within one sweep step (×1.5) of the capacity, e.g. `L2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
}

/// One bandwidth kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// `read` (sum every 8-byte word), `write` (store every word), `copy` (memcpy).
    pub kind: String,
    /// Buffer size, bytes.
    pub size_bytes: u64,
    /// Median over the repetitions, bytes per second (bytes = buffer size per pass, as bw_mem counts).
    pub bytes_per_sec: f64,
    /// Every repetition, bytes per second.
    pub samples: Vec<f64>,
}

/// One cell of the NUMA matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaCell {
    /// NUMA node of the measuring CPU.
    pub cpu_node: u32,
    /// NUMA node the buffer was bound to.
    pub mem_node: u32,
    /// CPU the measuring thread was pinned to (first CPU of `cpu_node`).
    pub cpu: u32,
    /// Node the buffer's first page is on, as the kernel reports it (get_mempolicy MPOL_F_ADDR).
    pub verified_node: Option<u32>,
    /// Latency of a dependent load, ns (0 when the cell failed).
    pub latency_ns: f64,
    /// Read bandwidth, bytes per second (0 when the cell failed).
    pub read_bytes_per_sec: f64,
    /// Why the cell could not be measured (binding refused, node without memory); `None` when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Result of the memory probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemResult {
    /// How the probe was run.
    pub config: MemConfig,
    /// The caches of the measuring CPU, as sysfs describes them.
    pub caches: Vec<CacheInfo>,
    /// The latency curve, one point per working set, smallest first.
    pub latency: Vec<LatencyPoint>,
    /// The steps found in the curve, smallest first.
    pub steps: Vec<Step>,
    /// One entry per bandwidth kernel (read, write, copy).
    pub bandwidth: Vec<Bandwidth>,
    /// The NUMA latency/bandwidth matrix, one cell per (CPU node, memory node); empty without one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa: Vec<NumaCell>,
    /// The load generated while the probe measured (`run --load`), as achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadResult>,
}

/// `4k`, `1536k`, `32m`, `1g`: size keys and labels (binary units, exact).
pub fn size_label(bytes: u64) -> String {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;
    if bytes >= G && bytes.is_multiple_of(G) {
        format!("{}g", bytes / G)
    } else if bytes >= M && bytes.is_multiple_of(M) {
        format!("{}m", bytes / M)
    } else if bytes >= K && bytes.is_multiple_of(K) {
        format!("{}k", bytes / K)
    } else {
        format!("{bytes}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels_are_exact() {
        assert_eq!(size_label(4096), "4k");
        assert_eq!(size_label(1536 << 10), "1536k");
        assert_eq!(size_label(32 << 20), "32m");
        assert_eq!(size_label(1 << 30), "1g");
        assert_eq!(size_label(100), "100");
    }
}

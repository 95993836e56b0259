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

/// Find the steps of a latency curve (sizes ascending). A transition is a run of successive points each
/// at least `member` times the one before, rising `rise` times or more in all; its capacity is the point
/// before the largest single rise of the run (caches do not fall off a cliff: associativity conflicts and
/// replacement make the curve climb over a few points before the next level). Caches are then matched to
/// a step when the step's capacity is within a factor 1.5·1.01 of the cache size (one step of the default
/// sweep, ×1.5 or ×4/3).
pub fn find_steps(
    points: &[LatencyPoint],
    caches: &[CacheInfo],
    member: f64,
    rise: f64,
) -> Vec<Step> {
    let lat: Vec<f64> = points.iter().map(|p| p.ns_per_load.max(1e-9)).collect();
    let ratio = |i: usize| lat[i + 1] / lat[i];
    let mut steps = Vec::new();
    let mut plateau_start = 0;
    let mut i = 0;
    while i + 1 < lat.len() {
        if ratio(i) < member {
            i += 1;
            continue;
        }
        let mut j = i;
        while j + 2 < lat.len() && ratio(j + 1) >= member {
            j += 1;
        }
        if lat[j + 1] / lat[i] >= rise {
            let k = (i..=j)
                .max_by(|a, b| ratio(*a).total_cmp(&ratio(*b)))
                .unwrap_or(i);
            steps.push(Step {
                capacity_bytes: points[k].size_bytes,
                plateau_ns: lat[plateau_start],
                next_ns: lat[j + 1],
                matches: None,
            });
            plateau_start = j + 1;
        }
        i = j + 1;
    }
    for c in caches {
        let size = c.size_bytes as f64;
        let best = steps
            .iter_mut()
            .filter(|s| s.matches.is_none())
            .map(|s| {
                let r = (s.capacity_bytes as f64 / size).ln().abs();
                (r, s)
            })
            .filter(|(r, _)| *r <= (1.5f64 * 1.01).ln())
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((_, s)) = best {
            s.matches = Some(format!("L{}", c.level));
        }
    }
    steps
}

impl crate::kind::KindData for MemResult {
    fn kind(&self) -> crate::kind::ProbeKind {
        crate::kind::ProbeKind::Mem
    }

    /// `mem.latency.<size>` (ns per load, minimum, repetitions as replicates), `mem.bw.<kind>`,
    /// `mem.numa.<cpu node>.<mem node>.latency` and `.bw`.
    fn measures(&self) -> Vec<crate::measure::Measure> {
        use crate::measure::{Better, Measure, MeasureUnit};
        let mut out = Vec::new();
        for p in &self.latency {
            let s = size_label(p.size_bytes);
            out.push(
                Measure::new(
                    format!("mem.latency.{s}"),
                    format!("load latency {s}"),
                    MeasureUnit::Nanos,
                    p.ns_per_load,
                    Better::Lower,
                )
                .with_replicates(p.samples_ns.clone()),
            );
        }
        for b in &self.bandwidth {
            out.push(
                Measure::new(
                    format!("mem.bw.{}", b.kind),
                    format!("{} bandwidth {}", b.kind, size_label(b.size_bytes)),
                    MeasureUnit::BytesPerSecond,
                    b.bytes_per_sec,
                    Better::Higher,
                )
                .with_replicates(b.samples.clone()),
            );
        }
        for c in self.numa.iter().filter(|c| c.error.is_none()) {
            let k = format!("mem.numa.{}.{}", c.cpu_node, c.mem_node);
            out.push(Measure::new(
                format!("{k}.latency"),
                format!(
                    "latency CPUs of node {} to memory of node {}",
                    c.cpu_node, c.mem_node
                ),
                MeasureUnit::Nanos,
                c.latency_ns,
                Better::Lower,
            ));
            out.push(Measure::new(
                format!("{k}.bw"),
                format!(
                    "read bandwidth CPUs of node {} from memory of node {}",
                    c.cpu_node, c.mem_node
                ),
                MeasureUnit::BytesPerSecond,
                c.read_bytes_per_sec,
                Better::Higher,
            ));
        }
        out
    }

    fn load(&self) -> Option<&crate::load::LoadResult> {
        self.load.as_ref()
    }

    fn set_load(&mut self, load: Option<crate::load::LoadResult>) {
        self.load = load;
    }

    fn settings_json(&self) -> String {
        serde_json::to_string(&self.config).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(v: &[(u64, f64)]) -> Vec<LatencyPoint> {
        v.iter()
            .map(|&(s, ns)| LatencyPoint {
                size_bytes: s << 10,
                ns_per_load: ns,
                samples_ns: vec![ns],
            })
            .collect()
    }

    #[test]
    fn steps_of_a_three_level_curve_match_the_caches() {
        let pts = curve(&[
            (16, 1.0),
            (32, 1.0),
            (48, 1.05),
            (64, 2.5),
            (96, 3.0),
            (128, 3.0),
            (512, 3.1),
            (1024, 3.3),
            (1536, 6.0),
            (2048, 9.0),
            (4096, 10.0),
            (32768, 11.0),
            (65536, 60.0),
            (131072, 90.0),
            (262144, 95.0),
        ]);
        let caches = [
            CacheInfo {
                level: 1,
                kind: "Data".into(),
                size_bytes: 48 << 10,
            },
            CacheInfo {
                level: 2,
                kind: "Unified".into(),
                size_bytes: 1 << 20,
            },
            CacheInfo {
                level: 3,
                kind: "Unified".into(),
                size_bytes: 32 << 20,
            },
        ];
        let s = find_steps(&pts, &caches, 1.2, 1.3);
        let caps: Vec<u64> = s.iter().map(|x| x.capacity_bytes >> 10).collect();
        assert_eq!(caps, vec![48, 1024, 32768]);
        let m: Vec<Option<&str>> = s.iter().map(|x| x.matches.as_deref()).collect();
        assert_eq!(m, vec![Some("L1"), Some("L2"), Some("L3")]);
        // A flat curve has no steps.
        assert!(find_steps(&curve(&[(4, 1.0), (8, 1.1), (16, 1.0)]), &caches, 1.2, 1.3).is_empty());
        assert!(find_steps(&[], &caches, 1.2, 1.3).is_empty());
    }

    #[test]
    fn size_labels_are_exact() {
        assert_eq!(size_label(4096), "4k");
        assert_eq!(size_label(1536 << 10), "1536k");
        assert_eq!(size_label(32 << 20), "32m");
        assert_eq!(size_label(1 << 30), "1g");
        assert_eq!(size_label(100), "100");
    }
}

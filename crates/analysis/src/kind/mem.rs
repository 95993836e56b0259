//! The memory probe's result (`rtgauge mem`) as [`KindData`]: the latency curve's steps, bandwidths and the
//! NUMA matrix as measures.

use super::*;
use rtgauge_model::mem::*;

impl KindData for MemResult {
    fields!(load, settings);

    /// `mem.latency.<size>` (ns per load, minimum, repetitions as replicates), `mem.bw.<kind>`,
    /// `mem.numa.<cpu node>.<mem node>.latency` and `.bw`.
    fn measures(&self) -> Vec<Measure> {
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

    /// It runs for its repetitions, not a duration.
    fn elapsed_ns(&self) -> u64 {
        0
    }
}

/// Rise from one point to the next that belongs to a transition of the latency curve.
pub const STEP_MEMBER: f64 = 1.2;
/// Total rise of a transition that makes it a step.
pub const STEP_RISE: f64 = 1.3;

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

impl super::KindTables for MemResult {
    /// The one-run floors (`crate::compare::one_run`) per family: load latency at any size, any bandwidth —
    /// the largest ratio (either way) of any member between two idle runs of one platform, rounded up to two
    /// significant digits. `bench/compare_aa_probes floors 12` of 2026-11-28 on this project's 2-vCPU VM (one
    /// node): two sessions of 12 idle runs of the built-in `quick` profile (`--max-size 64M -r 3 --bw-size 64M
    /// --numa-size 64M`), the larger of the two. Load latency moved 10.9× at 3-4 MiB (17 vs 190 ns: the host's
    /// last-level cache, shared with other guests, held the buffer in one run and not in the other); bandwidth
    /// 1.5×. The NUMA matrix (`mem.numa.*`) has none: one node measured says nothing of a pair across sockets.
    const ONE_RUN_FLOORS: &'static [(&'static str, f64)] =
        &[("mem.latency.*", 11.0), ("mem.bw.*", 1.6)];
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
}

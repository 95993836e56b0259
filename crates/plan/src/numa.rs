//! `rtgauge plan --numa` (seed 002: NUMA-local placement is worth 8–17 %): which running processes and
//! cgroups keep memory away from the CPUs they run on, the binding that makes them local, and the gain the
//! measured NUMA matrix predicts.
//!
//! The gain model: a workload whose memory accesses go a fraction `r` to a remote node waits on average
//! `(1−r)·L_local + r·L_remote` per miss; bound local it waits `L_local`. The predicted reduction of memory
//! stall time is `r·(L_remote − L_local) / ((1−r)·L_local + r·L_remote)`; bandwidth likewise with the
//! harmonic mean. Latencies come from `rtgauge mem`'s matrix when given, else from the firmware's SLIT
//! distances (`/sys/devices/system/node/nodeN/distance`, 10 = local), which are relative only.

use rtgauge_host::HostRoot;
use rtgauge_model::mem::NumaCell;
use rtgauge_model::numa::{Locality, NodeInfo, NumaResult};
use rtgauge_model::CpuSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// Local and remote cost between two nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// Memory access latency from a CPU of one node to memory of the other: ns when measured, SLIT units (1.0 = local) otherwise.
    pub latency_ns: f64,
    /// Bytes per second; `None` from SLIT distances.
    pub read_bytes_per_sec: Option<f64>,
}

/// Where the costs came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum MatrixSource {
    /// Measured by `rtgauge mem` (file named).
    Measured(String),
    /// Firmware SLIT distances: latency in units of the local distance (10 = 1.0).
    Slit,
    /// No cost known (no measurement, no SLIT): advice without predicted gains.
    None,
}

/// Cost of (cpu node, memory node).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    /// Where the costs came from.
    pub source: MatrixSource,
    /// Cost by (CPU node, memory node).
    #[serde(serialize_with = "cells_as_list")]
    pub cells: BTreeMap<(u32, u32), Cost>,
}

/// JSON object keys are strings: the cells serialize as a list of `{cpu_node, mem_node, latency_ns, ...}`.
fn cells_as_list<S: serde::Serializer>(
    cells: &BTreeMap<(u32, u32), Cost>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Cell<'a> {
        cpu_node: u32,
        mem_node: u32,
        #[serde(flatten)]
        cost: &'a Cost,
    }
    s.collect_seq(cells.iter().map(|((c, m), cost)| Cell {
        cpu_node: *c,
        mem_node: *m,
        cost,
    }))
}

/// Why a measured matrix cannot serve this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    /// No cell at all.
    #[error("the NUMA matrix is empty")]
    Empty,
    /// Cells for nodes this machine does not have: a matrix of another machine.
    #[error("its cells are for NUMA nodes {named}, this machine has nodes {machine} (a matrix of another machine?)")]
    OtherNodes {
        /// The nodes the cells name.
        named: CpuSet,
        /// The machine's nodes.
        machine: CpuSet,
    },
    /// Every cell failed or holds no latency.
    #[error("none of its {0} NUMA cells holds a measurement (each failed or has no latency)")]
    NoMeasurement(usize),
    /// A cell that reports no error holds a latency no memory access can have (not a number, ≤ 0, or
    /// above one second): an edited or corrupted file.
    #[error("cell {cpu_node}→{mem_node}: latency_ns {latency_ns} is impossible (a measured cell holds a latency above 0 and at most 1 s)")]
    Impossible {
        /// CPU node of the cell.
        cpu_node: u32,
        /// Memory node of the cell.
        mem_node: u32,
        /// The latency it holds, as text (large values in exponent form: `1e308`, not 309 digits).
        latency_ns: String,
    },
    /// Two cells for one (CPU node, memory node) pair: which one holds is not known.
    #[error("two cells for {0}→{1}")]
    Duplicate(u32, u32),
    /// No node has both its local cell and a remote one measured: no gain can be estimated.
    #[error("its measured cells ({cells}) hold no node's local and remote cost, so no gain can be estimated on this machine's nodes {machine}")]
    NoPair {
        /// The measured (cpu node→mem node) pairs.
        cells: String,
        /// The machine's nodes.
        machine: CpuSet,
    },
}

impl Matrix {
    /// The matrix of a `rtgauge mem` run's cells, named `name`, for a machine with `machine_nodes` (empty:
    /// not known, not checked); failed cells (with an `error`) are left out (how many: the second value).
    /// Refused: a pair given twice, a cell without error holding an impossible latency (not finite, ≤ 0,
    /// above 1 s), and when nothing usable is left: no cell, cells of nodes the machine lacks, none
    /// measured, or (on a multi-node machine) no node with both its local and a remote cost, the least a
    /// gain needs.
    pub fn from_cells(
        name: &str,
        cells: &[NumaCell],
        machine_nodes: &[u32],
    ) -> Result<(Matrix, usize), MatrixError> {
        if cells.is_empty() {
            return Err(MatrixError::Empty);
        }
        let machine = CpuSet::new(machine_nodes.iter().copied());
        let named = CpuSet::new(cells.iter().flat_map(|c| [c.cpu_node, c.mem_node]));
        if !machine.is_empty() && !named.difference(&machine).is_empty() {
            return Err(MatrixError::OtherNodes { named, machine });
        }
        // The ceiling: no memory access takes a second; above it a gain would be noise (or overflow).
        const MAX_LATENCY_NS: f64 = 1e9;
        let mut seen = std::collections::BTreeSet::new();
        for c in cells {
            if !seen.insert((c.cpu_node, c.mem_node)) {
                return Err(MatrixError::Duplicate(c.cpu_node, c.mem_node));
            }
            let possible =
                c.latency_ns.is_finite() && c.latency_ns > 0.0 && c.latency_ns <= MAX_LATENCY_NS;
            if c.error.is_none() && !possible {
                return Err(MatrixError::Impossible {
                    cpu_node: c.cpu_node,
                    mem_node: c.mem_node,
                    latency_ns: if c.latency_ns.abs() >= 1e9 {
                        format!("{:e}", c.latency_ns)
                    } else {
                        c.latency_ns.to_string()
                    },
                });
            }
        }
        let measured = |c: &&NumaCell| c.error.is_none();
        let left_out = cells.len() - cells.iter().filter(measured).count();
        let given = cells.len();
        let cells: BTreeMap<(u32, u32), Cost> = cells
            .iter()
            .filter(measured)
            .map(|c| {
                (
                    (c.cpu_node, c.mem_node),
                    Cost {
                        latency_ns: c.latency_ns,
                        read_bytes_per_sec: (c.read_bytes_per_sec.is_finite()
                            && c.read_bytes_per_sec > 0.0)
                            .then_some(c.read_bytes_per_sec),
                    },
                )
            })
            .collect();
        if cells.is_empty() {
            return Err(MatrixError::NoMeasurement(given));
        }
        let pair = cells
            .keys()
            .any(|&(c, m)| c != m && cells.contains_key(&(c, c)));
        if machine.len() > 1 && !pair {
            return Err(MatrixError::NoPair {
                cells: cells
                    .keys()
                    .map(|(c, m)| format!("{c}→{m}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                machine,
            });
        }
        Ok((
            Matrix {
                source: MatrixSource::Measured(name.to_string()),
                cells,
            },
            left_out,
        ))
    }
    /// SLIT distances through the root; an empty matrix when the files are absent.
    pub fn from_slit(root: &HostRoot, nodes: &[NodeInfo]) -> Matrix {
        let mut cells = BTreeMap::new();
        for n in nodes {
            let Some(t) =
                root.read_optional(&format!("/sys/devices/system/node/node{}/distance", n.node))
            else {
                continue;
            };
            for (m, d) in nodes.iter().zip(t.split_whitespace()) {
                if let Ok(d) = d.parse::<f64>() {
                    if d > 0.0 {
                        cells.insert(
                            (n.node, m.node),
                            Cost {
                                latency_ns: d / 10.0,
                                read_bytes_per_sec: None,
                            },
                        );
                    }
                }
            }
        }
        Matrix {
            source: if cells.is_empty() {
                MatrixSource::None
            } else {
                MatrixSource::Slit
            },
            cells,
        }
    }
}

/// One binding to make.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// `pid 200 vdu` or `cgroup /kubepods/podB/c1`.
    pub who: String,
    /// The cgroup the process or group runs in.
    pub cgroup: String,
    /// The CPUs it may run on now.
    pub cpus_allowed: CpuSet,
    /// Percent of its resident memory on the nodes of its CPUs.
    pub local_pct: f64,
    /// Resident bytes per node.
    pub bytes_per_node: BTreeMap<u32, u64>,
    /// The node to bind to: the one holding most of its memory among those it should run on.
    pub node: u32,
    /// The CPUs of that node.
    pub node_cpus: CpuSet,
    /// Commands that make it local.
    pub binding: Vec<String>,
    /// Predicted reduction of memory stall time, percent (None: no matrix).
    pub latency_gain_pct: Option<f64>,
    /// Predicted bandwidth increase, percent.
    pub bandwidth_gain_pct: Option<f64>,
}

/// The whole `--numa` answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumaPlan {
    /// The costs behind the predicted gains.
    pub matrix: Matrix,
    /// Local share (percent) below which a process or cgroup gets advice.
    pub threshold_pct: f64,
    /// One binding per process, then per cgroup, under the threshold.
    pub advice: Vec<Advice>,
    /// Processes looked at (with resident memory).
    pub looked_at: usize,
}

fn gains(m: &Matrix, bytes: &BTreeMap<u32, u64>, node: u32) -> (Option<f64>, Option<f64>) {
    let total: u64 = bytes.values().sum();
    if total == 0 {
        return (None, None);
    }
    let Some(local) = m.cells.get(&(node, node)) else {
        return (None, None);
    };
    let mut lat = 0.0;
    let mut inv_bw = 0.0;
    let mut bw_known = local.read_bytes_per_sec.is_some();
    for (mn, b) in bytes {
        let share = *b as f64 / total as f64;
        let Some(c) = m.cells.get(&(node, *mn)) else {
            return (None, None);
        };
        lat += share * c.latency_ns;
        match c.read_bytes_per_sec {
            Some(bw) if bw > 0.0 => inv_bw += share / bw,
            _ => bw_known = false,
        }
    }
    // 100·(1 − local/lat) rather than 100·(lat − local)/lat: the same, without overflow near f64::MAX.
    let lat_gain = (lat > 0.0).then(|| 100.0 * (1.0 - local.latency_ns / lat));
    let bw_gain = match (bw_known, local.read_bytes_per_sec) {
        (true, Some(lbw)) if inv_bw > 0.0 => Some(100.0 * (lbw * inv_bw - 1.0)),
        _ => None,
    };
    (lat_gain, bw_gain)
}

fn advise(l: &Locality, who: String, nodes: &[NodeInfo], m: &Matrix) -> Option<Advice> {
    // Candidate nodes: those it may run on (a binding keeps it where it is allowed); the one with most
    // of its memory wins (fewest pages to migrate), ties to the lower id.
    let allowed_nodes: Vec<&NodeInfo> = nodes
        .iter()
        .filter(|n| !n.cpus.intersection(&l.cpus_allowed).is_empty())
        .collect();
    let best = allowed_nodes.iter().max_by_key(|n| {
        (
            l.bytes_per_node.get(&n.node).copied().unwrap_or(0),
            std::cmp::Reverse(n.node),
        )
    })?;
    let node = best.node;
    let node_cpus = best.cpus.intersection(&l.cpus_allowed);
    let (lat, bw) = gains(m, &l.bytes_per_node, node);
    let binding = if who.starts_with("cgroup") {
        vec![
            format!("echo {node_cpus} > /sys/fs/cgroup{}/cpuset.cpus", l.cgroup),
            format!(
                "echo {node} > /sys/fs/cgroup{}/cpuset.mems   # cgroup v2 migrates the pages",
                l.cgroup
            ),
        ]
    } else {
        vec![
            format!("taskset -a -cp {node_cpus} {}", l.pid),
            format!("migratepages {} all {node}", l.pid),
            format!(
                "at restart: numactl --cpunodebind={node} --membind={node} {}",
                l.name
            ),
        ]
    };
    Some(Advice {
        who,
        cgroup: l.cgroup.clone(),
        cpus_allowed: l.cpus_allowed.clone(),
        local_pct: l.local_pct,
        bytes_per_node: l.bytes_per_node.clone(),
        node,
        node_cpus,
        binding,
        latency_gain_pct: lat,
        bandwidth_gain_pct: bw,
    })
}

/// Advice for every process and cgroup below `threshold_pct` local memory.
pub fn numa_plan(result: &NumaResult, matrix: Matrix, threshold_pct: f64) -> NumaPlan {
    let mut advice = Vec::new();
    let with_mem = |l: &&Locality| l.bytes_per_node.values().sum::<u64>() > 0;
    for l in result.processes.iter().filter(with_mem) {
        if l.local_pct < threshold_pct {
            if let Some(a) = advise(
                l,
                format!("pid {} {}", l.pid, l.name),
                &result.nodes,
                &matrix,
            ) {
                advice.push(a);
            }
        }
    }
    for l in result.cgroups.iter().filter(with_mem) {
        if l.local_pct < threshold_pct {
            if let Some(a) = advise(l, format!("cgroup {}", l.cgroup), &result.nodes, &matrix) {
                advice.push(a);
            }
        }
    }
    NumaPlan {
        matrix,
        threshold_pct,
        advice,
        looked_at: result.processes.iter().filter(with_mem).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gain_model() {
        let mut cells = BTreeMap::new();
        let c = |l: f64, b: f64| Cost {
            latency_ns: l,
            read_bytes_per_sec: Some(b),
        };
        cells.insert((0, 0), c(100.0, 10e9));
        cells.insert((0, 1), c(200.0, 5e9));
        let m = Matrix {
            source: MatrixSource::Slit,
            cells,
        };
        let bytes: BTreeMap<u32, u64> = [(0, 50), (1, 50)].into_iter().collect();
        let (l, b) = gains(&m, &bytes, 0);
        // 150 ns → 100 ns: −33.3 %; 1/(0.5/10 + 0.5/5) = 6.67 GB/s → 10: +50 %.
        assert!((l.expect("lat") - 33.333).abs() < 0.01);
        assert!((b.expect("bw") - 50.0).abs() < 0.01);
        // The view prints a change with one sign: less stall time "−", more "+" (remote cheaper).
        // Near f64::MAX the gain stays finite.
        let mut huge = m.clone();
        huge.cells.insert((0, 1), c(1e308, 5e9));
        let (l, _) = gains(&huge, &bytes, 0);
        assert!(
            l.is_some_and(|l| l.is_finite() && (l - 100.0).abs() < 0.01),
            "{l:?}"
        );
    }

    fn cell(cpu_node: u32, mem_node: u32, latency_ns: f64, error: Option<&str>) -> NumaCell {
        NumaCell {
            cpu_node,
            mem_node,
            cpu: 0,
            verified_node: None,
            latency_ns,
            read_bytes_per_sec: 1e10,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn a_matrix_without_usable_cells_is_refused() {
        let two = [0, 1];
        let from = |cells: &[NumaCell]| Matrix::from_cells("m.json", cells, &two);
        assert_eq!(from(&[]), Err(MatrixError::Empty));
        let failed = [cell(0, 0, 0.0, Some("mbind")), cell(0, 1, 0.0, Some("x"))];
        assert_eq!(from(&failed), Err(MatrixError::NoMeasurement(2)));
        // Impossible latencies in cells that report no error, and a pair given twice.
        for (bad, text) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (0.0, "0"),
            (-5.0, "-5"),
            (1e308, "1e308"),
            (2e9, "2e9"),
        ] {
            let e = from(&[cell(0, 0, 90.0, None), cell(0, 1, bad, None)]).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("cell 0→1: latency_ns {text} is impossible")),
                "{e}"
            );
        }
        let e = from(&[
            cell(0, 0, 90.0, None),
            cell(0, 1, 140.0, None),
            cell(0, 1, 150.0, None),
        ])
        .unwrap_err();
        assert_eq!(e, MatrixError::Duplicate(0, 1));
        assert_eq!(e.to_string(), "two cells for 0→1");
        // Another machine's 4-node matrix.
        let e = from(&[cell(0, 0, 90.0, None), cell(3, 2, 140.0, None)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "its cells are for NUMA nodes 0,2-3, this machine has nodes 0-1 (a matrix of another machine?)"
        );
        // Wrong size: local cells only, no remote one.
        let e = from(&[cell(0, 0, 90.0, None), cell(1, 1, 90.0, None)]).unwrap_err();
        assert!(matches!(e, MatrixError::NoPair { .. }), "{e}");
        assert!(e.to_string().contains("(0→0, 1→1)"), "{e}");
        // Half failed: usable, the failed half counted.
        let half = [
            cell(0, 0, 90.0, None),
            cell(0, 1, 140.0, None),
            cell(1, 1, 0.0, Some("x")),
            cell(1, 0, 0.0, Some("x")),
        ];
        let (m, left_out) = from(&half).unwrap();
        assert_eq!((m.cells.len(), left_out), (2, 2));
        // Node list unknown: not checked against it; a one-node machine needs no remote cell.
        assert!(Matrix::from_cells("m", &[cell(5, 5, 90.0, None)], &[]).is_ok());
        assert!(Matrix::from_cells("m", &[cell(0, 0, 90.0, None)], &[0]).is_ok());
    }
}

//! NUMA topology, per-process memory placement and allocation counters, and CPU caches, through a
//! [`HostRoot`] so fixture trees of two- and four-node machines can be replayed.
//!
//! Files (kernel ABI):
//! - `/sys/devices/system/node/nodeN/cpulist`, `has_memory` (Documentation/ABI/stable/sysfs-devices-node);
//! - `/sys/devices/system/node/nodeN/numastat` (same document; counters in pages);
//! - `/proc/PID/numa_maps` (Documentation/filesystems/proc.rst, "numa_maps"): one line per mapping,
//!   `N<node>=<pages>` tokens, page size in `kernelpagesize_kB=`;
//! - `/proc/PID/status` `Cpus_allowed_list`, `/proc/PID/comm`, `/proc/PID/cgroup` (cgroup v2 `0::/path`);
//! - `/sys/devices/system/cpu/cpuN/cache/indexM/{level,type,size}` (sysfs-devices-system-cpu).

use crate::root::HostRoot;
use rtgauge_model::mem::CacheInfo;
use rtgauge_model::numa::{local_pct, Locality, NodeCounters, NodeInfo, NumaResult, NumaStat};
use rtgauge_model::CpuSet;
use std::collections::BTreeMap;

const NODE_DIR: &str = "/sys/devices/system/node";

/// Nodes and their CPUs (empty when the kernel has no NUMA support: one implicit node).
pub fn read_nodes(root: &HostRoot) -> Vec<NodeInfo> {
    root.list_dir(NODE_DIR)
        .iter()
        .filter_map(|n| n.strip_prefix("node").and_then(|x| x.parse::<u32>().ok()))
        .map(|node| NodeInfo {
            node,
            cpus: root
                .read_optional(&format!("{NODE_DIR}/node{node}/cpulist"))
                .and_then(|t| crate::cpu::parse_cpu_mask(&t).ok())
                .unwrap_or_default(),
        })
        .collect()
}

/// Nodes with memory (`has_memory`), or every listed node when that file is missing.
pub fn read_memory_nodes(root: &HostRoot, nodes: &[NodeInfo]) -> Vec<u32> {
    match root.read_optional(&format!("{NODE_DIR}/has_memory")) {
        Some(t) => crate::cpu::parse_cpu_mask(&t)
            .map(|s| s.iter().collect())
            .unwrap_or_default(),
        None => nodes.iter().map(|n| n.node).collect(),
    }
}

/// Resident bytes per node of one `numa_maps` text. Lines without `N<node>=` (nothing resident) add
/// nothing; a missing `kernelpagesize_kB` means 4 KiB pages; malformed tokens are ignored.
pub fn parse_numa_maps(text: &str) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let page_kb: u64 = line
            .split_whitespace()
            .find_map(|t| t.strip_prefix("kernelpagesize_kB="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(4);
        for tok in line.split_whitespace() {
            let Some((n, pages)) = tok.strip_prefix('N').and_then(|t| t.split_once('=')) else {
                continue;
            };
            if let (Ok(n), Ok(p)) = (n.parse::<u32>(), pages.parse::<u64>()) {
                let e = out.entry(n).or_insert(0u64);
                *e = e.saturating_add(p.saturating_mul(page_kb).saturating_mul(1024));
            }
        }
    }
    out
}

/// One node's `numastat` (`numa_hit 123` lines); unknown keys are ignored.
pub fn parse_numastat(text: &str) -> NumaStat {
    let mut s = NumaStat::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "numa_hit" => s.numa_hit = v,
            "numa_miss" => s.numa_miss = v,
            "numa_foreign" => s.numa_foreign = v,
            "interleave_hit" => s.interleave_hit = v,
            "local_node" => s.local_node = v,
            "other_node" => s.other_node = v,
            _ => {}
        }
    }
    s
}

/// cgroup v2 path from `/proc/PID/cgroup` (`0::/path`), or the first v1 line's path.
pub fn parse_cgroup(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| lines.first().and_then(|l| l.splitn(3, ':').nth(2)))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Counters of every node.
pub fn read_numastat(root: &HostRoot, nodes: &[NodeInfo]) -> Vec<(u32, NumaStat)> {
    nodes
        .iter()
        .filter_map(|n| {
            root.read_optional(&format!("{NODE_DIR}/node{}/numastat", n.node))
                .map(|t| (n.node, parse_numastat(&t)))
        })
        .collect()
}

/// Nodes whose CPUs intersect `cpus`.
fn nodes_of(cpus: &CpuSet, nodes: &[NodeInfo]) -> Vec<u32> {
    nodes
        .iter()
        .filter(|n| !n.cpus.intersection(cpus).is_empty())
        .map(|n| n.node)
        .collect()
}

/// Placement of one process; `None` when it is gone, a kernel thread (no numa_maps content) or unreadable.
pub fn read_locality(root: &HostRoot, pid: u32, nodes: &[NodeInfo]) -> Option<Locality> {
    let status = root.read_optional(&format!("/proc/{pid}/status"))?;
    let kv = crate::parse::parse_status(&status);
    let cpus = kv
        .get("Cpus_allowed_list")
        .and_then(|t| CpuSet::parse(t).ok())
        .unwrap_or_default();
    let maps = root.read_optional(&format!("/proc/{pid}/numa_maps"))?;
    let bytes = parse_numa_maps(&maps);
    if bytes.is_empty() && maps.trim().is_empty() {
        return None;
    }
    let name = root
        .read_optional(&format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_string())
        .or_else(|| kv.get("Name").cloned())
        .unwrap_or_default();
    let cgroup = root
        .read_optional(&format!("/proc/{pid}/cgroup"))
        .map(|t| parse_cgroup(&t))
        .unwrap_or_default();
    let local = nodes_of(&cpus, nodes);
    Some(Locality {
        pid,
        name,
        cgroup,
        local_pct: local_pct(&bytes, &local),
        cpus_allowed: cpus,
        local_nodes: local,
        bytes_per_node: bytes,
    })
}

/// Every numeric entry of /proc.
pub fn read_pids(root: &HostRoot) -> Vec<u32> {
    let mut v: Vec<u32> = root
        .list_dir("/proc")
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Per-cgroup aggregates of `procs`: bytes summed, allowed CPUs united, local share recomputed.
pub fn aggregate_cgroups(procs: &[Locality], nodes: &[NodeInfo]) -> Vec<Locality> {
    let mut by: BTreeMap<&str, (CpuSet, BTreeMap<u32, u64>)> = BTreeMap::new();
    for p in procs {
        let e = by.entry(p.cgroup.as_str()).or_default();
        e.0 = CpuSet::new(e.0.iter().chain(p.cpus_allowed.iter()));
        for (n, b) in &p.bytes_per_node {
            *e.1.entry(*n).or_insert(0) += b;
        }
    }
    by.into_iter()
        .map(|(cg, (cpus, bytes))| {
            let local = nodes_of(&cpus, nodes);
            Locality {
                pid: 0,
                name: cg.to_string(),
                cgroup: cg.to_string(),
                local_pct: local_pct(&bytes, &local),
                cpus_allowed: cpus,
                local_nodes: local,
                bytes_per_node: bytes,
            }
        })
        .collect()
}

/// The locality report: `pids` (or every process), per cgroup, and the node counters sampled over
/// `interval_ns` (0: totals since boot only).
pub fn read_numa(root: &HostRoot, pids: Option<&[u32]>, interval_ns: u64) -> NumaResult {
    let nodes = read_nodes(root);
    let before = read_numastat(root, &nodes);
    let all;
    let list = match pids {
        Some(p) => p,
        None => {
            all = read_pids(root);
            &all
        }
    };
    let processes: Vec<Locality> = list
        .iter()
        .filter_map(|&p| read_locality(root, p, &nodes))
        .collect();
    let cgroups = aggregate_cgroups(&processes, &nodes);
    let after = if interval_ns > 0 {
        std::thread::sleep(std::time::Duration::from_nanos(interval_ns));
        read_numastat(root, &nodes)
    } else {
        before.clone()
    };
    let counters = after
        .iter()
        .map(|(node, a)| NodeCounters {
            node: *node,
            total: *a,
            delta: before
                .iter()
                .find(|(n, _)| n == node)
                .map_or(NumaStat::default(), |(_, b)| a.minus(b)),
        })
        .collect();
    NumaResult {
        nodes,
        processes,
        cgroups,
        interval_ns,
        counters,
    }
}

/// `48K`, `1024K`, `32M` (sysfs cache size syntax) in bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1u64 << 10),
        'M' | 'm' => (&t[..t.len() - 1], 1 << 20),
        'G' | 'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// Data and unified caches of `cpu`, by level.
pub fn read_caches(root: &HostRoot, cpu: u32) -> Vec<CacheInfo> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    let mut out: Vec<CacheInfo> = root
        .list_dir(&dir)
        .iter()
        .filter(|n| n.starts_with("index"))
        .filter_map(|idx| {
            let f = |name: &str| root.read_optional(&format!("{dir}/{idx}/{name}"));
            let kind = f("type")?.trim().to_string();
            if kind == "Instruction" {
                return None;
            }
            Some(CacheInfo {
                level: f("level")?.trim().parse().ok()?,
                kind,
                size_bytes: parse_cache_size(&f("size")?)?,
            })
        })
        .collect();
    out.sort_by_key(|c| c.level);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_maps_counts_bytes_per_node_with_page_sizes() {
        let t = "\
7f00 default file=/lib/x.so mapped=3 N0=2 N1=1 kernelpagesize_kB=4
7f10 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4
7f20 default huge anon=2 N0=2 kernelpagesize_kB=2048
7f30 default stack
garbage N=3 Nx=2 N2=z N3=5
";
        let b = parse_numa_maps(t);
        assert_eq!(b.get(&0), Some(&(2 * 4096 + 2 * 2048 * 1024)));
        assert_eq!(b.get(&1), Some(&(513 * 4096)));
        assert_eq!(b.get(&3), Some(&(5 * 4096)));
        assert_eq!(b.len(), 3);
        assert!(parse_numa_maps("").is_empty());
    }

    #[test]
    fn numastat_and_cgroup_and_sizes() {
        let s =
            parse_numastat("numa_hit 10\nnuma_miss 2\nlocal_node 9\nother_node 3\nbogus\nx y\n");
        assert_eq!(
            (s.numa_hit, s.numa_miss, s.local_node, s.other_node),
            (10, 2, 9, 3)
        );
        assert_eq!(parse_cgroup("0::/kubepods/pod1/c1\n"), "/kubepods/pod1/c1");
        assert_eq!(parse_cgroup("4:cpuset:/a\n"), "/a");
        assert_eq!(parse_cgroup(""), "");
        assert_eq!(parse_cache_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("lots"), None);
        assert_eq!(parse_cache_size(""), None);
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,300}") {
            let _ = parse_numa_maps(&s);
            let _ = parse_numastat(&s);
            let _ = parse_cgroup(&s);
            let _ = parse_cache_size(&s);
        }
    }
}

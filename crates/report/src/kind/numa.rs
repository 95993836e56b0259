//! The NUMA locality probe (`rtgauge numa`) in every view: its terminal tables of local shares per
//! process and cgroup and the allocation counters; its section of the run page is its measures.

use super::KindView;
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::numa::{Locality, NumaResult};
use rtgauge_model::Nanos;

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn table(s: &mut String, title: &str, rows: &[Locality], top: usize, pid: bool) {
    use std::fmt::Write as _;
    let mut v: Vec<&Locality> = rows.iter().collect();
    v.sort_by_key(|l| std::cmp::Reverse(l.bytes_per_node.values().sum::<u64>()));
    let _ = writeln!(s, "  {title} ({} shown of {}):", v.len().min(top), v.len());
    let _ = writeln!(
        s,
        "    {:>8} {:<24} {:>10} {:>8} {:<12} MiB per node",
        if pid { "PID" } else { "" },
        if pid { "command" } else { "cgroup" },
        "RSS MiB",
        "local %",
        "local nodes",
    );
    for l in v.into_iter().take(top) {
        let per: Vec<String> = l
            .bytes_per_node
            .iter()
            .map(|(n, b)| format!("N{n}={:.1}", mib(*b)))
            .collect();
        let nodes: Vec<String> = l.local_nodes.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(
            s,
            "    {:>8} {:<24} {:>10.1} {:>8.1} {:<12} {}",
            if pid {
                l.pid.to_string()
            } else {
                String::new()
            },
            l.name,
            mib(l.bytes_per_node.values().sum()),
            l.local_pct,
            nodes.join(","),
            per.join(" ")
        );
    }
}

/// The NUMA locality result as terminal text: the nodes, then at most `top` rows each of processes and cgroups.
pub fn render(result: &NumaResult, top: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let nodes: Vec<String> = result
        .nodes
        .iter()
        .map(|n| format!("node {}: CPUs {}", n.node, n.cpus))
        .collect();
    let _ = writeln!(
        s,
        "\nNUMA locality ({}):",
        if nodes.is_empty() {
            "no NUMA nodes".into()
        } else {
            nodes.join("; ")
        }
    );
    table(&mut s, "processes", &result.processes, top, true);
    table(&mut s, "cgroups", &result.cgroups, top, false);
    let over = if result.interval_ns > 0 {
        format!("over {}", Nanos(result.interval_ns))
    } else {
        "since boot".into()
    };
    let _ = writeln!(s, "  allocations {over} (pages):");
    for c in &result.counters {
        let x = result.counts(c);
        let _ = writeln!(
            s,
            "    node {}: local_node {} other_node {} numa_hit {} numa_miss {} numa_foreign {}",
            c.node, x.local_node, x.other_node, x.numa_hit, x.numa_miss, x.numa_foreign
        );
    }
    match result.local_alloc_pct() {
        Some(p) => {
            let _ = writeln!(s, "  node-local allocations: {p:.2} %");
        }
        None => {
            let _ = writeln!(s, "  node-local allocations: no allocations counted");
        }
    }
    s
}

impl KindView for NumaResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        "NUMA locality (numa)".to_string()
    }

    fn terminal_section(&self, _facts: &RunFacts) -> String {
        render(self, 10)
    }
}

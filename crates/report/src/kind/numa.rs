//! The NUMA locality probe (`rtgauge numa`) in every view: its terminal tables of local shares per
//! process and cgroup and the allocation counters; its section of the run page is its measures.

use super::KindView;
use crate::text::TextOptions;
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::numa::{Locality, NumaResult};
use rtgauge_model::Nanos;

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Resident bytes off the nodes of the CPUs it may run on.
fn remote_bytes(l: &Locality) -> u64 {
    l.bytes_per_node
        .iter()
        .filter(|(n, _)| !l.local_nodes.contains(n))
        .map(|(_, b)| b)
        .sum()
}

fn table(s: &mut String, heading: &str, rows: &[&Locality], pid: bool) {
    use std::fmt::Write as _;
    let _ = writeln!(s, "  {heading}:");
    let _ = writeln!(
        s,
        "    {:>8} {:<24} {:>10} {:>8} {:<12} MiB per node",
        if pid { "PID" } else { "" },
        if pid { "command" } else { "cgroup" },
        "RSS MiB",
        "local %",
        "local nodes",
    );
    for l in rows {
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

/// The `top` largest of `rows` (by resident memory).
fn largest(s: &mut String, what: &str, rows: &[Locality], top: usize, pid: bool) {
    let mut v: Vec<&Locality> = rows.iter().collect();
    v.sort_by_key(|l| std::cmp::Reverse(l.bytes_per_node.values().sum::<u64>()));
    let heading = format!("{what} ({} shown of {})", v.len().min(top), v.len());
    v.truncate(top);
    table(s, &heading, &v, pid);
}

/// Those of `rows` with memory off their CPUs' nodes, the most such memory first (at most `top`), or a
/// line saying there are none.
fn nonlocal(s: &mut String, what: &str, rows: &[Locality], top: usize, pid: bool) {
    let mut v: Vec<&Locality> = rows.iter().filter(|l| remote_bytes(l) > 0).collect();
    if v.is_empty() {
        s.push_str(&format!(
            "  {what}: all {} with their memory on their CPUs' nodes\n",
            rows.len()
        ));
        return;
    }
    v.sort_by_key(|l| std::cmp::Reverse(remote_bytes(l)));
    let heading = format!(
        "{what} with memory off their CPUs' nodes ({} shown of {}, of {} in all)",
        v.len().min(top),
        v.len(),
        rows.len()
    );
    v.truncate(top);
    table(s, &heading, &v, pid);
}

fn heading(result: &NumaResult) -> String {
    let nodes: Vec<String> = result
        .nodes
        .iter()
        .map(|n| format!("node {}: CPUs {}", n.node, n.cpus))
        .collect();
    format!(
        "\nNUMA locality ({}):\n",
        if nodes.is_empty() {
            "no NUMA nodes".into()
        } else {
            nodes.join("; ")
        }
    )
}

fn local_line(result: &NumaResult) -> String {
    let over = if result.interval_ns > 0 {
        format!("over {}", Nanos(result.interval_ns))
    } else {
        "since boot".into()
    };
    match result.local_alloc_pct() {
        Some(p) => format!("  node-local allocations: {p:.2} % ({over})\n"),
        None => format!("  node-local allocations: none counted ({over})\n"),
    }
}

/// Processes and cgroups listed with memory off their nodes in the brief terminal form.
pub const BRIEF_NONLOCAL: usize = 5;

/// The brief terminal form: what has memory off its CPUs' nodes, and the node-local share of allocations.
fn render_brief(result: &NumaResult) -> String {
    let mut s = heading(result);
    nonlocal(&mut s, "processes", &result.processes, BRIEF_NONLOCAL, true);
    nonlocal(&mut s, "cgroups", &result.cgroups, BRIEF_NONLOCAL, false);
    s.push_str(&local_line(result));
    s
}

/// The NUMA locality result as terminal text: the nodes; the processes and cgroups with memory off their
/// CPUs' nodes (all of them), and the `top` largest of each; the allocation counters.
pub fn render(result: &NumaResult, top: usize) -> String {
    use std::fmt::Write as _;
    let mut s = heading(result);
    nonlocal(&mut s, "processes", &result.processes, usize::MAX, true);
    largest(&mut s, "processes", &result.processes, top, true);
    nonlocal(&mut s, "cgroups", &result.cgroups, usize::MAX, false);
    largest(&mut s, "cgroups", &result.cgroups, top, false);
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
    s.push_str(&local_line(result));
    s
}

impl KindView for NumaResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        "NUMA locality (numa)".to_string()
    }

    fn terminal_section(&self, _facts: &RunFacts, opts: TextOptions) -> String {
        match opts.verbose {
            true => render(self, 10),
            false => render_brief(self),
        }
    }
}

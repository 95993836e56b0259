//! Terminal rendering of the memory latency curve, bandwidth and NUMA matrix (`rtgauge mem`).

use rtgauge_model::mem::{size_label, MemResult};

fn gbs(b: f64) -> String {
    format!("{:.2}", b / 1e9)
}

/// Curve, steps, bandwidth and matrix as text.
pub fn render(result: &MemResult, full_curve: bool) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let caches: Vec<String> = result
        .caches
        .iter()
        .map(|c| format!("L{} {}", c.level, size_label(c.size_bytes)))
        .collect();
    let _ = writeln!(
        s,
        "\nmemory (mem, {} pages; sysfs caches: {}):",
        if result.config.hugepages {
            "huge"
        } else {
            "4 KiB"
        },
        if caches.is_empty() {
            "-".into()
        } else {
            caches.join(", ")
        }
    );
    if full_curve {
        let _ = writeln!(s, "  {:>10} {:>10}", "working set", "ns/load");
        for p in &result.latency {
            let _ = writeln!(
                s,
                "  {:>10} {:>10.2}",
                size_label(p.size_bytes),
                p.ns_per_load
            );
        }
    }
    let _ = writeln!(s, "  steps of the latency curve:");
    for st in &result.steps {
        let _ = writeln!(
            s,
            "    up to {:>6}: {:>7.2} ns, then {:>7.2} ns  {}",
            size_label(st.capacity_bytes),
            st.plateau_ns,
            st.next_ns,
            st.matches.as_ref().map_or(
                "(no sysfs cache of this size: TLB reach, or the share of a cache this CPU gets)"
                    .to_string(),
                |m| format!("= {m}")
            )
        );
    }
    if let Some(last) = result.latency.last() {
        let _ = writeln!(
            s,
            "    at {:>6}: {:>7.2} ns (largest working set)",
            size_label(last.size_bytes),
            last.ns_per_load
        );
    }
    for b in &result.bandwidth {
        let _ = writeln!(
            s,
            "  {:<5} bandwidth {:>6}: {:>8} GB/s",
            b.kind,
            size_label(b.size_bytes),
            gbs(b.bytes_per_sec)
        );
    }
    if !result.numa.is_empty() {
        let _ = writeln!(
            s,
            "  NUMA matrix (CPUs of node → memory of node): latency ns, read GB/s"
        );
        for c in &result.numa {
            match &c.error {
                Some(e) => {
                    let _ = writeln!(s, "    {} → {}: {e}", c.cpu_node, c.mem_node);
                }
                None => {
                    let _ = writeln!(
                        s,
                        "    {} → {} (CPU {}, page on node {}): {:>7.1} ns {:>8} GB/s",
                        c.cpu_node,
                        c.mem_node,
                        c.cpu,
                        c.verified_node.map_or("?".into(), |n| n.to_string()),
                        c.latency_ns,
                        gbs(c.read_bytes_per_sec)
                    );
                }
            }
        }
    }
    s
}

//! The plan's views: the partition and its reasoning (`rtgauge plan`), and the NUMA advice (`plan --numa`).

use rtgauge_plan::numa::{MatrixSource, NumaPlan};
use rtgauge_plan::Plan;

/// Render the reasoning and the partition as text.
pub fn render_text(plan: &Plan) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "rtgauge plan for {} ({} tuned profile)\n\n",
        plan.target.as_str(),
        plan.target.tuned_profile()
    ));
    s.push_str(&format!("  RT CPUs (I)           {}\n", plan.isolated));
    s.push_str(&format!("  housekeeping (H)      {}\n", plan.housekeeping));
    if !plan.offline.is_empty() {
        s.push_str(&format!("  offline (nosmt)       {}\n", plan.offline));
    }
    s.push_str("\nreasoning\n");
    for r in &plan.reasoning {
        s.push_str(&format!("  - {r}\n"));
    }
    s
}

/// Text rendering.
pub fn render_numa(plan: &NumaPlan) -> String {
    let mut s = String::from(
        "rtgauge plan --numa: non-local memory and the binding that makes it local\n\n",
    );
    match &plan.matrix.source {
        MatrixSource::Measured(f) => {
            s.push_str(&format!("matrix: rtgauge mem NUMA cells from {f}\n"));
            for ((c, m), cost) in &plan.matrix.cells {
                s.push_str(&format!(
                    "  cpu node {c} → mem node {m}: {:.1} ns{}\n",
                    cost.latency_ns,
                    cost.read_bytes_per_sec
                        .map(|b| format!(", {:.2} GB/s", b / 1e9))
                        .unwrap_or_default()
                ));
            }
        }
        MatrixSource::Slit => s.push_str(
            "matrix: firmware SLIT distances (relative latency only; measure with `rtgauge mem --output F` and pass --matrix F)\n",
        ),
        MatrixSource::None => s.push_str(
            "matrix: none (no --matrix and no SLIT distances): gains not estimated\n",
        ),
    }
    s.push_str(&format!(
        "\n{} process(es) with resident memory; {} process(es)/cgroup(s) below {:.0} % local:\n",
        plan.looked_at,
        plan.advice.len(),
        plan.threshold_pct
    ));
    for a in &plan.advice {
        let spread: Vec<String> = a
            .bytes_per_node
            .iter()
            .map(|(n, b)| format!("N{n}={} MiB", mib(*b)))
            .collect();
        s.push_str(&format!(
            "\n  {} — {:.1} % local, runs on {}, memory {}\n",
            a.who,
            a.local_pct,
            a.cpus_allowed,
            spread.join(" ")
        ));
        s.push_str(&format!(
            "    bind to node {} (CPUs {}):\n",
            a.node, a.node_cpus
        ));
        for b in &a.binding {
            s.push_str(&format!("      {b}\n"));
        }
        match (a.latency_gain_pct, a.bandwidth_gain_pct) {
            (Some(l), Some(b)) => s.push_str(&format!(
                "    expected: memory stall time {}, read bandwidth {}\n",
                signed_pct(-l),
                signed_pct(b)
            )),
            (Some(l), None) => s.push_str(&format!(
                "    expected: memory stall time {} (relative, from distances)\n",
                signed_pct(-l)
            )),
            _ if plan.matrix.source == MatrixSource::None => {
                s.push_str("    expected: not estimated (no matrix)\n")
            }
            _ => {
                s.push_str("    expected: not estimated (the matrix has no cost for these nodes)\n")
            }
        }
    }
    s
}

/// A change in percent with its sign: "−33.3 %", "+9.1 %" (a true minus sign, as the rest of the view);
/// a change that rounds to zero is "±0.0 %".
fn signed_pct(v: f64) -> String {
    let a = format!("{:.1}", v.abs());
    if a == "0.0" {
        "±0.0 %".to_string()
    } else if v < 0.0 {
        format!("−{a} %")
    } else {
        format!("+{a} %")
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gains_carry_one_sign() {
        assert_eq!(signed_pct(-33.333), "−33.3 %");
        assert_eq!(signed_pct(9.1), "+9.1 %");
        assert_eq!(signed_pct(-0.01), "±0.0 %");
    }
}

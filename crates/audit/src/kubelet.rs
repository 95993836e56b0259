//! Catalogue §11, the one Kubernetes rule that needs host facts: the kubelet's reserved CPUs against the host's
//! isolated and online CPUs (the file linter cannot judge it).

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_lint::k8s::kubelet_reserved_cpus;
use rtgauge_model::audit::{Evidence, Severity, Target};

/// Where kubeadm-style nodes keep the KubeletConfiguration.
pub const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";

pub static RULES: [Rule; 1] = [Rule {
    id: "kubelet-reserved-vs-host",
    section: 11,
    severity: Severity::Medium,
    expected: "kubelet reservedSystemCPUs ∩ I = ∅ and reservedSystemCPUs ∪ I = all online CPUs",
    remediation:
        "Set reservedSystemCPUs in the kubelet configuration to the host housekeeping set H.",
    source: "[O4]",
    sampled: false,
    check: reserved_vs_host,
}];

fn reserved_vs_host(c: &Ctx) -> RuleOutcome {
    let text = c.root.read_optional(KUBELET_CONFIG);
    if text.is_none() && c.target != Target::K8sRtNode {
        return RuleOutcome::na("not a Kubernetes node (no kubelet configuration)");
    }
    let Some(text) = text else {
        return RuleOutcome::unavailable(format!("{KUBELET_CONFIG} not readable"));
    };
    let Some(reserved) = kubelet_reserved_cpus(&text) else {
        return RuleOutcome::fail("kubelet configuration has no reservedSystemCPUs").ev(
            "reservedSystemCPUs",
            KUBELET_CONFIG,
            "absent",
        );
    };
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let ev = vec![
        c.iso_evidence(),
        Evidence::new("reservedSystemCPUs", KUBELET_CONFIG, reserved.to_string()),
        Evidence::new(
            "online CPUs",
            "/sys/devices/system/cpu/online",
            c.online.to_string(),
        ),
    ];
    let both = reserved.intersection(iso);
    let uncovered = c.online.difference(&reserved).difference(iso);
    if !both.is_empty() {
        RuleOutcome::fail(format!("reserved CPUs {both} are also isolated")).evs(ev)
    } else if !uncovered.is_empty() {
        RuleOutcome::fail(format!(
            "online CPUs {uncovered} are neither reserved nor isolated: pods may land there"
        ))
        .evs(ev)
    } else {
        RuleOutcome::pass("reserved and isolated CPUs partition the online CPUs").evs(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const K: Target = Target::K8sRtNode;

    #[test]
    fn reserved_against_isolated() {
        assert_eq!(
            Fx::new()
                .finding("kubelet-reserved-vs-host", Target::BareMetalRtHost)
                .status,
            Status::NotApplicable
        );
        assert_eq!(
            Fx::new().finding("kubelet-reserved-vs-host", K).status,
            Status::Unavailable
        );
        let fx = Fx::new()
            .file(
                super::KUBELET_CONFIG,
                "kind: KubeletConfiguration\nreservedSystemCPUs: \"0-1\"\n",
            )
            .file("/proc/cmdline", "isolcpus=2-3\n");
        assert_eq!(
            fx.finding("kubelet-reserved-vs-host", K).status,
            Status::Pass
        );
        let fx = fx.file("/proc/cmdline", "isolcpus=1-3\n");
        assert_eq!(
            fx.finding("kubelet-reserved-vs-host", K).status,
            Status::Fail
        );
        let fx = fx.file("/proc/cmdline", "isolcpus=3\n");
        let f = fx.finding("kubelet-reserved-vs-host", K);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("neither"), "{}", f.summary);
    }
}

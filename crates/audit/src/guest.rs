//! Catalogue §8: guest-only checks (a container's privileges are the process rules', `process.rs`).

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_host::parse::parse_stat_steal;
use rtgauge_model::audit::{Evidence, Severity};

pub static RULES: [Rule; 3] = [
    Rule {
        id: "guest-min-vcpus",
        section: 8,
        severity: Severity::Medium,
        expected: ">= 2 vCPUs: one housekeeping vCPU for the OS and I/O, at least one RT vCPU",
        remediation: "Add a housekeeping vCPU to the VM definition.",
        source: "[L1][R1]",
        sampled: false,
        check: min_vcpus,
    },
    Rule {
        id: "guest-steal-time",
        section: 8,
        severity: Severity::High,
        expected: "steal time on RT vCPUs does not grow between two samples",
        remediation: "Pin vCPUs 1:1 to isolated physical CPUs (libvirt vcpupin / VMware Latency Sensitivity High).",
        source: "[K11]",
        sampled: true,
        check: steal,
    },
    Rule {
        id: "guest-hint-dedicated",
        section: 8,
        severity: Severity::Info,
        expected: "evidence: cpuidle driver haltpoll means the host exposes KVM_HINTS_REALTIME (hint-dedicated)",
        remediation: "Set <hint-dedicated state='on'/> in the domain XML (with true 1:1 pinning).",
        source: "[K9g]",
        sampled: false,
        check: hint_dedicated,
    },
];

fn min_vcpus(c: &Ctx) -> RuleOutcome {
    if !c.target.is_guest() {
        return RuleOutcome::na("guest rule");
    }
    let n = c.online.len();
    let v = if n >= 2 {
        RuleOutcome::pass(format!("{n} vCPUs online"))
    } else {
        RuleOutcome::fail(format!("{n} vCPU online: no room for a housekeeping vCPU"))
    };
    v.ev(
        "online vCPUs",
        "/sys/devices/system/cpu/online",
        c.online.to_string(),
    )
}

fn steal(c: &Ctx) -> RuleOutcome {
    if !c.target.is_guest() {
        return RuleOutcome::na("guest rule");
    }
    let Some(s) = &c.samples else {
        return RuleOutcome::na(super::NOT_SAMPLED);
    };
    let (Some(a), Some(b)) = (s.first.get("/proc/stat"), s.second.get("/proc/stat")) else {
        return RuleOutcome::unavailable("/proc/stat unreadable");
    };
    let (a, b) = (parse_stat_steal(a), parse_stat_steal(b));
    let cpus = c.rt_or_online();
    let grew: Vec<String> = cpus
        .iter()
        .filter_map(|cpu| {
            let d = b.get(cpu)?.saturating_sub(*a.get(cpu)?);
            (d > 1).then(|| format!("cpu{cpu} +{d} ticks"))
        })
        .collect();
    let ev = vec![
        c.iso_evidence(),
        s.interval_evidence(),
        Evidence::new(
            "steal growth",
            "/proc/stat",
            if grew.is_empty() {
                "none".into()
            } else {
                grew.join("; ")
            },
        ),
    ];
    if grew.is_empty() {
        RuleOutcome::pass("no steal time on the audited vCPUs").evs(ev)
    } else {
        RuleOutcome::fail(format!(
            "steal time on {} vCPU(s): not exclusively backed",
            grew.len()
        ))
        .evs(ev)
    }
}

fn hint_dedicated(c: &Ctx) -> RuleOutcome {
    if !c.target.is_guest() {
        return RuleOutcome::na("guest rule");
    }
    if !matches!(c.fp.virt.platform.as_str(), "kvm" | "qemu" | "other") {
        return RuleOutcome::na(format!("KVM-only rule (platform {})", c.fp.virt.platform));
    }
    let drv = c.read("/sys/devices/system/cpu/cpuidle/current_driver");
    let ev = vec![
        Evidence::new(
            "cpuidle driver",
            "/sys/devices/system/cpu/cpuidle/current_driver",
            drv.clone().unwrap_or_else(|| "absent".into()),
        ),
        c.cmdline_ev("idle"),
        c.cmdline_ev("cpuidle_haltpoll.force"),
    ];
    match drv.as_deref() {
        Some("haltpoll") if c.cmdline.get("cpuidle_haltpoll.force") == Some("1") => {
            RuleOutcome::pass(
                "haltpoll loaded by cpuidle_haltpoll.force=1 (says nothing about hint-dedicated)",
            )
        }
        Some("haltpoll") => {
            RuleOutcome::pass("haltpoll active: host exposes KVM_HINTS_REALTIME (hint-dedicated)")
        }
        _ if c.cmdline.has("idle") => {
            RuleOutcome::pass("idle= given: haltpoll cannot load, hint unknown")
        }
        _ => RuleOutcome::pass("haltpoll not active: hint-dedicated probably not exposed"),
    }
    .evs(ev)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const G: Target = Target::RtGuest;

    #[test]
    fn vcpus_and_hint() {
        let fx = Fx::new().file("/sys/devices/system/cpu/online", "0\n");
        assert_eq!(fx.finding("guest-min-vcpus", G).status, Status::Fail);
        assert_eq!(
            fx.finding("guest-min-vcpus", Target::BareMetalRtHost)
                .status,
            Status::NotApplicable
        );
        assert_eq!(Fx::new().finding("guest-min-vcpus", G).status, Status::Pass);
        let fx = Fx::new()
            .file("/sys/class/dmi/id/sys_vendor", "QEMU\n")
            .file(
                "/sys/devices/system/cpu/cpuidle/current_driver",
                "haltpoll\n",
            );
        assert!(fx
            .finding("guest-hint-dedicated", G)
            .summary
            .contains("KVM_HINTS_REALTIME"));
        let fx = fx.file("/sys/class/dmi/id/sys_vendor", "VMware, Inc.\n");
        assert_eq!(
            fx.finding("guest-hint-dedicated", G).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn steal_from_two_samples() {
        let s1 = "cpu 0 0 0 0 0 0 0 0 0 0\ncpu0 1 1 1 1 1 1 1 10 0 0\ncpu1 1 1 1 1 1 1 1 10 0 0\n";
        let s2 = "cpu 0 0 0 0 0 0 0 0 0 0\ncpu0 1 1 1 1 1 1 1 10 0 0\ncpu1 1 1 1 1 1 1 1 90 0 0\n";
        let fx = Fx::new()
            .file("/sys/devices/system/cpu/online", "0-1\n")
            .file("/proc/stat", s1)
            .file("/.rtgauge/sample2/proc/stat", s2)
            .file("/.rtgauge/sample2/interval_ns", "2000000000");
        assert_eq!(
            fx.finding_with("guest-steal-time", G, Some("1")).status,
            Status::Fail
        );
        assert_eq!(
            fx.finding_with("guest-steal-time", G, Some("0")).status,
            Status::Pass
        );
    }
}

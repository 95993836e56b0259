//! Catalogue §7: background work the host runs on its own and that can reach RT CPUs: machine-check
//! polling of corrected errors, kernel auditing, the KVM module parameters that start periodic work or exits
//! on a KVM host, and fwupd's refresh timer.

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_model::audit::{Evidence, Severity, Target};

pub static RULES: [Rule; 4] = [
    Rule {
        id: "mce-corrected-errors",
        section: 7,
        severity: Severity::Low,
        expected: "machinecheck*/ignore_ce = 1 (or mce=ignore_ce); mce=off only with accepted risk",
        remediation: "tuned [sysfs] /sys/devices/system/machinecheck/machinecheck*/ignore_ce=1, or mce=ignore_ce on the command line.",
        source: "[T1][T4][K8][O1]",
        sampled: false,
        check: mce,
    },
    Rule {
        id: "audit",
        section: 7,
        severity: Severity::Info,
        expected: "evidence: audit=0 disables kernel auditing until reboot (only if site policy allows)",
        remediation: "audit=0 on the command line if policy allows.",
        source: "[K1]",
        sampled: false,
        check: audit,
    },
    Rule {
        id: "kvm-host-params",
        section: 7,
        severity: Severity::Medium,
        expected: "kvm kvmclock_periodic_sync=N, nx_huge_pages=N, kvm_intel ple_gap=0; ktimer_lockless_check=1 where present",
        remediation: "tuned realtime-virtual-host (writes /etc/modprobe.d/kvm.rt.tuned.conf); reload the kvm modules with all VMs stopped.",
        source: "[T2][T7][K1]",
        sampled: false,
        check: kvm_params,
    },
    Rule {
        id: "fwupd-refresh",
        section: 7,
        severity: Severity::Low,
        expected: "fwupd-refresh.timer not enabled (it can cause SMIs on isolated CPUs)",
        remediation: "systemctl disable --now fwupd-refresh.timer",
        source: "[O1]",
        sampled: false,
        check: fwupd,
    },
];

fn mce(c: &Ctx) -> RuleOutcome {
    if c.target.is_guest() {
        return RuleOutcome::na("host rule");
    }
    let banks: Vec<String> = c
        .root
        .list_dir("/sys/devices/system/machinecheck")
        .into_iter()
        .filter(|d| d.starts_with("machinecheck"))
        .collect();
    let vals: Vec<(String, Option<String>)> = banks
        .iter()
        .map(|b| {
            (
                b.clone(),
                c.read(&format!("/sys/devices/system/machinecheck/{b}/ignore_ce")),
            )
        })
        .collect();
    let off: Vec<&str> = vals
        .iter()
        .filter(|(_, v)| v.as_deref() != Some("1"))
        .map(|(b, _)| b.as_str())
        .collect();
    let mce_cmd = c.cmdline.get("mce");
    let ev = vec![
        c.cmdline_ev("mce"),
        Evidence::new(
            "ignore_ce",
            "/sys/devices/system/machinecheck/machinecheck*/ignore_ce",
            if vals.is_empty() {
                "absent".into()
            } else {
                format!("{} of {} CPUs set", vals.len() - off.len(), vals.len())
            },
        ),
    ];
    if mce_cmd.is_some_and(|m| m.split(',').any(|x| x == "off")) {
        return RuleOutcome::warn("mce=off: machine checks are not handled at all").evs(ev);
    }
    if mce_cmd.is_some_and(|m| m.split(',').any(|x| x == "ignore_ce"))
        || (!vals.is_empty() && off.is_empty())
    {
        return RuleOutcome::pass("corrected-error polling and CMCI off").evs(ev);
    }
    if vals.is_empty() {
        return RuleOutcome::unavailable("no machinecheck sysfs").evs(ev);
    }
    RuleOutcome::warn(format!(
        "corrected-error polling active on {} CPU(s)",
        off.len()
    ))
    .evs(ev)
}

fn audit(c: &Ctx) -> RuleOutcome {
    let kauditd = c.tasks().iter().any(|t| t.kthread && t.comm == "kauditd");
    let ev = vec![
        c.cmdline_ev("audit"),
        Evidence::new(
            "kauditd kthread",
            "/proc/*/comm",
            if kauditd { "present" } else { "absent" },
        ),
    ];
    match c.cmdline.get("audit") {
        Some("0") | Some("off") => RuleOutcome::pass("kernel audit disabled (audit=0)"),
        _ if kauditd => RuleOutcome::pass("kernel audit enabled (kauditd running)"),
        _ => RuleOutcome::pass("kernel audit not disabled on the command line"),
    }
    .evs(ev)
}

fn kvm_params(c: &Ctx) -> RuleOutcome {
    if c.target != Target::KvmRtHost {
        return RuleOutcome::na(format!("only for kvm-rt-host (target {})", c.target));
    }
    let p = |m: &str, k: &str| c.read(&format!("/sys/module/{m}/parameters/{k}"));
    let sync = p("kvm", "kvmclock_periodic_sync");
    let nx = p("kvm", "nx_huge_pages");
    let ple = p("kvm_intel", "ple_gap");
    let lockless = c.read("/sys/kernel/ktimer_lockless_check");
    let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "absent".into());
    let ev = vec![
        Evidence::new(
            "kvmclock_periodic_sync",
            "/sys/module/kvm/parameters/kvmclock_periodic_sync",
            s(&sync),
        ),
        Evidence::new(
            "nx_huge_pages",
            "/sys/module/kvm/parameters/nx_huge_pages",
            s(&nx),
        ),
        Evidence::new(
            "ple_gap",
            "/sys/module/kvm_intel/parameters/ple_gap",
            s(&ple),
        ),
        Evidence::new(
            "ktimer_lockless_check",
            "/sys/kernel/ktimer_lockless_check",
            s(&lockless),
        ),
    ];
    if sync.is_none() && nx.is_none() {
        return RuleOutcome::unavailable("kvm module not loaded").evs(ev);
    }
    let mut bad = Vec::new();
    if sync.as_deref().is_some_and(|v| v != "N" && v != "0") {
        bad.push("kvmclock_periodic_sync on");
    }
    if nx
        .as_deref()
        .is_some_and(|v| !matches!(v, "N" | "0" | "off" | "never"))
    {
        bad.push("nx_huge_pages on");
    }
    if ple.as_deref().is_some_and(|v| v != "0") {
        bad.push("ple_gap not 0");
    }
    if lockless.as_deref().is_some_and(|v| v != "1") {
        bad.push("ktimer_lockless_check not 1");
    }
    if bad.is_empty() {
        let note = if nx.is_some() {
            " (nx_huge_pages off removes the iTLB-multihit mitigation)"
        } else {
            ""
        };
        RuleOutcome::pass(format!("KVM module parameters tuned for RT{note}")).evs(ev)
    } else {
        RuleOutcome::fail(bad.join(", ")).evs(ev)
    }
}

fn fwupd(c: &Ctx) -> RuleOutcome {
    if c.target.is_guest() {
        return RuleOutcome::na("host rule");
    }
    let links: Vec<String> = c
        .root
        .list_dir("/etc/systemd/system")
        .into_iter()
        .filter(|d| d.ends_with(".wants"))
        .map(|d| format!("/etc/systemd/system/{d}/fwupd-refresh.timer"))
        .filter(|p| c.root.exists(p))
        .collect();
    if links.is_empty() {
        RuleOutcome::pass("fwupd-refresh.timer not enabled").ev(
            "enablement links",
            "/etc/systemd/system/*.wants/fwupd-refresh.timer",
            "none",
        )
    } else {
        RuleOutcome::warn("fwupd-refresh.timer enabled").ev(
            "enablement links",
            "/etc/systemd/system/*.wants",
            links.join(" "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const T: Target = Target::BareMetalRtHost;

    #[test]
    fn mce_ignore_ce() {
        let fx = Fx::new()
            .file(
                "/sys/devices/system/machinecheck/machinecheck0/ignore_ce",
                "1\n",
            )
            .file(
                "/sys/devices/system/machinecheck/machinecheck1/ignore_ce",
                "0\n",
            );
        assert_eq!(fx.finding("mce-corrected-errors", T).status, Status::Warn);
        let fx = fx.file(
            "/sys/devices/system/machinecheck/machinecheck1/ignore_ce",
            "1\n",
        );
        assert_eq!(fx.finding("mce-corrected-errors", T).status, Status::Pass);
        let fx = fx.file("/proc/cmdline", "mce=off\n");
        assert_eq!(fx.finding("mce-corrected-errors", T).status, Status::Warn);
        assert_eq!(
            fx.finding("mce-corrected-errors", Target::RtGuest).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn audit_is_info() {
        let f = Fx::new()
            .file("/proc/cmdline", "audit=0\n")
            .finding("audit", T);
        assert_eq!(f.status, Status::Pass);
        assert!(f.summary.contains("disabled"));
    }

    #[test]
    fn kvm_module_parameters() {
        let fx = Fx::new()
            .file("/sys/module/kvm/parameters/kvmclock_periodic_sync", "N\n")
            .file("/sys/module/kvm/parameters/nx_huge_pages", "N\n")
            .file("/sys/module/kvm_intel/parameters/ple_gap", "0\n");
        assert_eq!(
            fx.finding("kvm-host-params", Target::KvmRtHost).status,
            Status::Pass
        );
        assert_eq!(
            fx.finding("kvm-host-params", T).status,
            Status::NotApplicable
        );
        let fx = fx.file("/sys/module/kvm_intel/parameters/ple_gap", "128\n");
        assert_eq!(
            fx.finding("kvm-host-params", Target::KvmRtHost).status,
            Status::Fail
        );
        assert_eq!(
            Fx::new()
                .finding("kvm-host-params", Target::KvmRtHost)
                .status,
            Status::Unavailable
        );
    }

    #[test]
    fn fwupd_timer() {
        let fx = Fx::new().dir("/etc/systemd/system/timers.target.wants");
        assert_eq!(fx.finding("fwupd-refresh", T).status, Status::Pass);
        let fx = fx.file(
            "/etc/systemd/system/timers.target.wants/fwupd-refresh.timer",
            "",
        );
        assert_eq!(fx.finding("fwupd-refresh", T).status, Status::Warn);
    }
}

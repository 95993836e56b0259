//! Catalogue §1 (environment detection) and §2 (kernel flavour, tuned state).

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_host::parse::parse_cmdline;
use rtgauge_model::audit::{Evidence, Severity, Target};
use rtgauge_model::fingerprint::PreemptModel;

pub static RULES: [Rule; 6] = [
    Rule {
        id: "env-virt-platform",
        section: 1,
        severity: Severity::Info,
        expected: "evidence only: the platform decides which rules are host-, guest- or n/a",
        remediation: "-",
        source: "[S1]",
        sampled: false,
        check: virt_platform,
    },
    Rule {
        id: "env-container",
        section: 1,
        severity: Severity::Info,
        expected: "evidence only: inside a container kernel values are the host's",
        remediation: "Run host rules on the node itself, or mount host /proc and /sys read-only and say so.",
        source: "[S1]",
        sampled: false,
        check: container,
    },
    Rule {
        id: "kernel-preempt-rt",
        section: 2,
        severity: Severity::High,
        expected: "PREEMPT_RT kernel (PREEMPT_RT in uname -v, or /sys/kernel/realtime = 1)",
        remediation: "Install and boot a real-time kernel (RHEL kernel-rt, Debian linux-image-rt-*), or preempt=full as a soft-RT fallback.",
        source: "[L1][O1b][K9c][K9d]",
        sampled: false,
        check: preempt_rt,
    },
    Rule {
        id: "kernel-nohz-full-support",
        section: 2,
        severity: Severity::Medium,
        expected: "with nohz_full= on the command line, /sys/devices/system/cpu/nohz_full exists and is not empty",
        remediation: "Use a kernel built with CONFIG_NO_HZ_FULL=y (and CONFIG_RCU_NOCB_CPU=y).",
        source: "[ISS1][ISS2]",
        sampled: false,
        check: nohz_full_support,
    },
    Rule {
        id: "tuned-profile-active",
        section: 2,
        severity: Severity::Low,
        expected: "host: realtime, realtime-virtual-host or cpu-partitioning; guest: realtime-virtual-guest; OpenShift: openshift-node-performance-*; isolated_cores set; tuned running",
        remediation: "tuned-adm profile realtime-virtual-host (or realtime / realtime-virtual-guest / cpu-partitioning), set isolated_cores= in /etc/tuned/<profile>-variables.conf, systemctl enable --now tuned",
        source: "[T1][T2][T3][T4][O1][T7]",
        sampled: false,
        check: tuned_profile,
    },
    Rule {
        id: "tuned-bootcmdline-applied",
        section: 2,
        severity: Severity::Medium,
        expected: "every token of TUNED_BOOT_CMDLINE in /etc/tuned/bootcmdline is in /proc/cmdline",
        remediation: "Reboot (regenerate the grub/BLS entries first if tuned could not).",
        source: "[T7][T1][T2][T6]",
        sampled: false,
        check: tuned_bootcmdline,
    },
];

fn virt_platform(c: &Ctx) -> RuleOutcome {
    let v = &c.fp.virt;
    let o = |x: &Option<String>| x.clone().unwrap_or_else(|| "absent".into());
    let mut verdict = RuleOutcome::pass(format!(
        "platform {} (decided by {})",
        v.platform, v.decided_by
    ))
    .ev(
        "hypervisor flag",
        "/proc/cpuinfo",
        v.hypervisor_flag.to_string(),
    )
    .ev("CPUID 0x40000000 vendor", "cpuid", o(&v.cpuid_vendor))
    .ev(
        "DMI sys_vendor",
        "/sys/class/dmi/id/sys_vendor",
        o(&v.dmi.sys_vendor),
    )
    .ev(
        "DMI product_name",
        "/sys/class/dmi/id/product_name",
        o(&v.dmi.product_name),
    )
    .ev(
        "hypervisor type",
        "/sys/hypervisor/type",
        o(&v.sys_hypervisor),
    );
    if c.target.is_guest() != (v.platform != "none") {
        verdict
            .summary
            .push_str(&format!("; target {} does not match", c.target));
    }
    verdict
}

fn container(c: &Ctx) -> RuleOutcome {
    let k = &c.fp.container;
    let ev = k.evidence.join("; ");
    if k.kind == "none" {
        RuleOutcome::pass("not in a container").ev(
            "container markers",
            "/run, /proc/1/environ, /.dockerenv",
            "none",
        )
    } else {
        RuleOutcome::pass(format!(
            "inside a {} container: kernel and sysfs values are host-scope",
            k.kind
        ))
        .ev(
            "container markers",
            "/run, /proc/1/environ, /.dockerenv",
            ev,
        )
        .ev(
            "container's own CPUs",
            "/sys/fs/cgroup/cpuset.cpus.effective",
            k.cpus_effective
                .as_ref()
                .map_or_else(|| "absent".to_string(), |c| c.to_string()),
        )
    }
}

fn preempt_rt(c: &Ctx) -> RuleOutcome {
    let p = &c.fp.kernel.preempt;
    let v = RuleOutcome::pass("")
        .ev(
            "kernel version",
            "/proc/sys/kernel/version",
            c.fp.kernel.version.clone(),
        )
        .ev(
            "realtime flag",
            "/sys/kernel/realtime",
            if p.sys_kernel_realtime { "1" } else { "absent" },
        )
        .ev(
            "PREEMPT_DYNAMIC mode",
            "/sys/kernel/debug/sched/preempt",
            p.dynamic_mode
                .clone()
                .unwrap_or_else(|| "unreadable or absent".into()),
        );
    let (status, summary) = match p.model {
        PreemptModel::Rt => (
            RuleOutcome::pass as fn(String) -> RuleOutcome,
            "PREEMPT_RT kernel".to_string(),
        ),
        PreemptModel::Full | PreemptModel::Lazy => (
            RuleOutcome::warn as fn(String) -> RuleOutcome,
            format!(
                "{} preemption: soft real time only, not PREEMPT_RT",
                model_word(p.model)
            ),
        ),
        PreemptModel::Unknown if c.fp.kernel.version.is_empty() => {
            return RuleOutcome::unavailable("kernel version unreadable").evs(v.evidence)
        }
        PreemptModel::Unknown => (
            RuleOutcome::fail as fn(String) -> RuleOutcome,
            "PREEMPT_DYNAMIC kernel, not PREEMPT_RT (active mode unreadable without debugfs)"
                .to_string(),
        ),
        PreemptModel::Voluntary | PreemptModel::None => (
            RuleOutcome::fail as fn(String) -> RuleOutcome,
            format!("{} preemption kernel, not PREEMPT_RT", model_word(p.model)),
        ),
    };
    status(summary).evs(v.evidence)
}

/// Two values of one kernel parameter are the same when equal as text, or when both are CPU lists (with
/// optional isolcpus flags) naming the same CPUs: tuned may write `2,3` where the running line has `2-3`.
fn same_param_value(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if a != b => {
            match (
                rtgauge_host::parse::parse_isolcpus(a),
                rtgauge_host::parse::parse_isolcpus(b),
            ) {
                (Ok((mut fa, sa)), Ok((mut fb, sb))) => {
                    fa.sort();
                    fb.sort();
                    !sa.is_empty() && sa == sb && fa == fb
                }
                _ => false,
            }
        }
        (a, b) => a == b,
    }
}

fn model_word(m: PreemptModel) -> String {
    format!("{m:?}").to_lowercase()
}

fn nohz_full_support(c: &Ctx) -> RuleOutcome {
    let runtime = c.read("/sys/devices/system/cpu/nohz_full");
    let ev_rt = runtime.clone().unwrap_or_else(|| "absent".into());
    let kconfig = rtgauge_host::fingerprint::read_kconfig(c.root);
    let built = (!kconfig.is_empty()).then(|| {
        kconfig
            .get("CONFIG_NO_HZ_FULL")
            .cloned()
            .unwrap_or_else(|| "not set".into())
    });
    let ev_cfg = Evidence::new(
        "CONFIG_NO_HZ_FULL",
        format!("/boot/config-{}", c.fp.kernel.release),
        built
            .clone()
            .unwrap_or_else(|| "config not readable".into()),
    );
    if runtime.is_none()
        && built.as_deref().is_some_and(|b| b != "y")
        && !c.cmdline.has("nohz_full")
    {
        return RuleOutcome::warn(
            "kernel built without CONFIG_NO_HZ_FULL: nohz_full cannot be used",
        )
        .ev("nohz_full CPUs", "/sys/devices/system/cpu/nohz_full", ev_rt)
        .evs(vec![ev_cfg, c.cmdline_ev("nohz_full")]);
    }
    match (c.cmdline.get("nohz_full"), runtime) {
        (Some(_), None) => RuleOutcome::fail("nohz_full= on the command line but the kernel has no CONFIG_NO_HZ_FULL: silently dropped"),
        (Some(_), Some(r)) if r.is_empty() || r == "(null)" => {
            RuleOutcome::fail("nohz_full= on the command line but no CPU is nohz_full at run time")
        }
        (Some(_), Some(_)) => RuleOutcome::pass("nohz_full requested and in force"),
        (None, Some(_)) => RuleOutcome::pass("kernel supports nohz_full (not requested)"),
        (None, None) => RuleOutcome::na("nohz_full not requested; kernel support unknown"),
    }
    .ev("nohz_full CPUs", "/sys/devices/system/cpu/nohz_full", ev_rt)
    .evs(vec![ev_cfg, c.cmdline_ev("nohz_full")])
}

fn tuned_profile(c: &Ctx) -> RuleOutcome {
    let t = &c.fp.tuned;
    let running = c.running("tuned");
    let ev_running = if running { "running" } else { "not running" };
    let Some(active) = t.active_profile.clone() else {
        return RuleOutcome::fail("no active tuned profile")
            .ev("active profile", "/etc/tuned/active_profile", "absent")
            .ev("tuned daemon", "/proc/*/comm", ev_running);
    };
    let profiles: Vec<&str> = active.split_whitespace().collect();
    let accepted: &[&str] = match c.target {
        Target::BareMetalRtHost => &["realtime", "cpu-partitioning", "realtime-virtual-host"],
        Target::KvmRtHost => &["realtime-virtual-host", "cpu-partitioning"],
        Target::RtGuest => &["realtime-virtual-guest", "realtime", "cpu-partitioning"],
        Target::K8sRtNode => &["cpu-partitioning", "realtime"],
    };
    let ok = profiles.iter().any(|p| {
        accepted.contains(p)
            || (c.target == Target::K8sRtNode && p.starts_with("openshift-node-performance-"))
    });
    let base = |v: RuleOutcome| {
        v.ev(
            "active profile",
            "/etc/tuned/active_profile",
            active.clone(),
        )
        .ev(
            "isolated_cores",
            "/etc/tuned/<profile>-variables.conf",
            t.isolated_cores.clone().unwrap_or_else(|| "absent".into()),
        )
        .ev("tuned daemon", "/proc/*/comm", ev_running)
    };
    let needs_cores = profiles.iter().any(|p| {
        [
            "realtime",
            "realtime-virtual-host",
            "realtime-virtual-guest",
            "cpu-partitioning",
        ]
        .contains(p)
    });
    if !ok {
        return base(RuleOutcome::fail(format!(
            "profile '{active}' is not an RT profile for {}",
            c.target
        )));
    }
    if needs_cores
        && t.isolated_cores
            .as_deref()
            .is_none_or(|s| s.trim().is_empty())
    {
        return base(RuleOutcome::fail(format!(
            "profile '{active}' without isolated_cores"
        )));
    }
    if !running {
        return base(RuleOutcome::warn(format!(
            "profile '{active}' set but tuned is not running (force_latency is not held)"
        )));
    }
    if c.target == Target::RtGuest && profiles.contains(&"realtime") {
        return base(RuleOutcome::pass(
            "profile 'realtime' in a guest (realtime-virtual-guest is the guest variant)",
        ));
    }
    base(RuleOutcome::pass(format!("profile '{active}' active")))
}

fn tuned_bootcmdline(c: &Ctx) -> RuleOutcome {
    let Some(want) = c.fp.tuned.boot_cmdline.clone() else {
        return RuleOutcome::na(
            "no /etc/tuned/bootcmdline (tuned has no boot parameters to apply)",
        );
    };
    let want_c = parse_cmdline(&want);
    let missing: Vec<String> = want_c
        .tokens
        .iter()
        .filter(|(k, v)| {
            !c.cmdline
                .tokens
                .iter()
                .any(|(k2, v2)| k2 == k && same_param_value(v.as_deref(), v2.as_deref()))
        })
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => k.clone(),
        })
        .collect();
    let v = if missing.is_empty() {
        RuleOutcome::pass("every tuned boot parameter is in the running command line")
    } else {
        RuleOutcome::fail(format!(
            "configured but not effective (reboot pending): {}",
            missing.join(" ")
        ))
    };
    v.ev("TUNED_BOOT_CMDLINE", "/etc/tuned/bootcmdline", want)
        .ev(
            "running command line",
            "/proc/cmdline",
            c.cmdline.raw.clone(),
        )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    #[test]
    fn preempt_rt_from_version_string() {
        let fx = Fx::new().file("/proc/sys/kernel/version", "#1 SMP PREEMPT_RT Thu\n");
        assert_eq!(
            fx.finding("kernel-preempt-rt", Target::BareMetalRtHost)
                .status,
            Status::Pass
        );
        let fx = Fx::new().file("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Thu\n");
        assert_eq!(
            fx.finding("kernel-preempt-rt", Target::BareMetalRtHost)
                .status,
            Status::Fail
        );
        let fx = fx.file(
            "/sys/kernel/debug/sched/preempt",
            "none voluntary (full) lazy\n",
        );
        assert_eq!(
            fx.finding("kernel-preempt-rt", Target::BareMetalRtHost)
                .status,
            Status::Warn
        );
        let fx = Fx::new()
            .file("/proc/sys/kernel/version", "#1 SMP Thu\n")
            .file("/sys/kernel/realtime", "1\n");
        assert_eq!(
            fx.finding("kernel-preempt-rt", Target::RtGuest).status,
            Status::Pass
        );
    }

    #[test]
    fn nohz_full_dropped_without_kernel_support() {
        let fx = Fx::new().file("/proc/cmdline", "nohz_full=1-3\n");
        assert_eq!(
            fx.finding("kernel-nohz-full-support", Target::BareMetalRtHost)
                .status,
            Status::Fail
        );
        let fx = fx.file("/sys/devices/system/cpu/nohz_full", "1-3\n");
        assert_eq!(
            fx.finding("kernel-nohz-full-support", Target::BareMetalRtHost)
                .status,
            Status::Pass
        );
        let fx = Fx::new();
        assert_eq!(
            fx.finding("kernel-nohz-full-support", Target::BareMetalRtHost)
                .status,
            Status::NotApplicable
        );
    }

    #[test]
    fn kernel_config_decides_when_runtime_is_silent() {
        let fx = Fx::new()
            .file("/proc/sys/kernel/version", "#1 SMP Thu\n")
            .file(
                "/boot/config-6.12.0-rt",
                "CONFIG_PREEMPT_RT=y\n# CONFIG_NO_HZ_FULL is not set\n",
            );
        assert_eq!(
            fx.finding("kernel-preempt-rt", Target::BareMetalRtHost)
                .status,
            Status::Pass
        );
        let f = fx.finding("kernel-nohz-full-support", Target::BareMetalRtHost);
        assert_eq!(f.status, Status::Warn);
        assert!(f
            .evidence
            .iter()
            .any(|e| e.source == "/boot/config-6.12.0-rt" && e.value == "not set"));
    }

    #[test]
    fn tuned_profile_by_target() {
        let fx = Fx::new()
            .file("/etc/tuned/active_profile", "realtime-virtual-host\n")
            .file(
                "/etc/tuned/realtime-virtual-host-variables.conf",
                "isolated_cores=2-3\n",
            )
            .file(
                "/proc/77/task/77/status",
                "Name:\ttuned\nPPid:\t1\nCpus_allowed_list:\t0-1\n",
            );
        assert_eq!(
            fx.finding("tuned-profile-active", Target::KvmRtHost).status,
            Status::Pass
        );
        assert_eq!(
            fx.finding("tuned-profile-active", Target::RtGuest).status,
            Status::Fail
        );
        let fx = Fx::new()
            .file("/etc/tuned/active_profile", "realtime\n")
            .file("/etc/tuned/realtime-variables.conf", "isolated_cores=\n");
        assert_eq!(
            fx.finding("tuned-profile-active", Target::BareMetalRtHost)
                .status,
            Status::Fail
        );
        let fx = Fx::new()
            .file("/etc/tuned/active_profile", "realtime\n")
            .file("/etc/tuned/realtime-variables.conf", "isolated_cores=1\n");
        assert_eq!(
            fx.finding("tuned-profile-active", Target::BareMetalRtHost)
                .status,
            Status::Warn
        );
        assert_eq!(
            Fx::new()
                .finding("tuned-profile-active", Target::RtGuest)
                .status,
            Status::Fail
        );
    }

    #[test]
    fn tuned_bootcmdline_reboot_pending() {
        let fx = Fx::new()
            .file(
                "/etc/tuned/bootcmdline",
                "TUNED_BOOT_CMDLINE=\"isolcpus=2-3 nohz=on\"\n",
            )
            .file("/proc/cmdline", "ro isolcpus=2-3\n");
        let f = fx.finding("tuned-bootcmdline-applied", Target::BareMetalRtHost);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("nohz=on"), "{}", f.summary);
        let fx = fx.file("/proc/cmdline", "ro isolcpus=2,3 nohz=on\n");
        assert_eq!(
            fx.finding("tuned-bootcmdline-applied", Target::BareMetalRtHost)
                .status,
            Status::Pass
        );
        assert_eq!(
            Fx::new()
                .finding("tuned-bootcmdline-applied", Target::BareMetalRtHost)
                .status,
            Status::NotApplicable
        );
    }
}

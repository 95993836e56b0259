//! Catalogue §5: power management (P-states, C-states, PM QoS).

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_model::audit::{Evidence, Severity};

pub static RULES: [Rule; 5] = [
    Rule {
        id: "pstate-driver",
        section: 5,
        severity: Severity::Low,
        expected: "one consistent model: intel_pstate/amd_pstate=disable (tuned realtime) or the driver kept with pinned frequency (OpenShift)",
        remediation: "Pick one model: intel_pstate=disable (or amd_pstate=disable) on the command line, or keep the driver and pin frequencies; don't mix.",
        source: "[T1][T4][O1][K10]",
        sampled: false,
        check: pstate,
    },
    Rule {
        id: "cpufreq-governor-epb",
        section: 5,
        severity: Severity::Medium,
        expected: "scaling_governor = performance on every policy; energy_perf_bias 0 (performance); min_perf_pct 100",
        remediation: "tuned latency-performance (or its [cpu] governor=performance energy_perf_bias=performance min_perf_pct=100).",
        source: "[T5][K2][O1]",
        sampled: false,
        check: governor,
    },
    Rule {
        id: "cpu-dma-latency",
        section: 5,
        severity: Severity::Medium,
        expected: "/dev/cpu_dma_latency <= latency of cpuidle state1 (else <= 3 µs), held by tuned or a dedicated process",
        remediation: "Keep tuned running with force_latency=cstate.id_no_zero:1|3, or hold /dev/cpu_dma_latency open from a dedicated process.",
        source: "[T5][O1][T7][K7]",
        sampled: false,
        check: dma_latency,
    },
    Rule {
        id: "cpuidle-states",
        section: 5,
        severity: Severity::Medium,
        expected: "no C-state deeper than the latency budget is entered on I (usage does not grow between samples)",
        remediation: "tuned force_latency, per-CPU PM QoS, or processor.max_cstate=1 intel_idle.max_cstate=0 (idle=poll only with care).",
        source: "[O1][K1][K9g][K2]",
        sampled: false,
        check: cpuidle,
    },
    Rule {
        id: "pm-qos-resume-latency",
        section: 5,
        severity: Severity::Low,
        expected: "on I: pm_qos_resume_latency_us = n/a (no C-states) or a few µs; 0 means no constraint",
        remediation: "tuned pm_qos_resume_latency_us= or the CRI-O cpu-c-states.crio.io annotation.",
        source: "[K7][T7][C1]",
        sampled: false,
        check: pm_qos,
    },
];

fn pstate(c: &Ctx) -> RuleOutcome {
    let driver = c.read("/sys/devices/system/cpu/cpufreq/policy0/scaling_driver");
    let intel = c.read("/sys/devices/system/cpu/intel_pstate/status");
    let amd = c.read("/sys/devices/system/cpu/amd_pstate/status");
    let ev = vec![
        Evidence::new(
            "scaling driver",
            "/sys/devices/system/cpu/cpufreq/policy0/scaling_driver",
            driver.clone().unwrap_or_else(|| "absent".into()),
        ),
        Evidence::new(
            "intel_pstate status",
            "/sys/devices/system/cpu/intel_pstate/status",
            intel.clone().unwrap_or_else(|| "absent".into()),
        ),
        Evidence::new(
            "amd_pstate status",
            "/sys/devices/system/cpu/amd_pstate/status",
            amd.clone().unwrap_or_else(|| "absent".into()),
        ),
        c.cmdline_ev("intel_pstate"),
        c.cmdline_ev("amd_pstate"),
    ];
    if driver.is_none() && intel.is_none() && amd.is_none() {
        return RuleOutcome::na("no cpufreq (typical in guests)").evs(ev);
    }
    let disabled_cmd = c.cmdline.get("intel_pstate") == Some("disable")
        || c.cmdline.get("amd_pstate") == Some("disable");
    let pstate_active = driver
        .as_deref()
        .is_some_and(|d| d.starts_with("intel_pstate") || d.starts_with("amd-pstate"));
    if disabled_cmd && pstate_active {
        RuleOutcome::warn("P-state driver disabled on the command line but still active (configured but not effective)").evs(ev)
    } else if disabled_cmd {
        RuleOutcome::pass(format!(
            "P-state driver disabled (tuned model); driver {}",
            driver.unwrap_or_default()
        ))
        .evs(ev)
    } else {
        RuleOutcome::pass(format!(
            "P-state driver kept (OpenShift model): {}",
            driver.unwrap_or_else(|| "-".into())
        ))
        .evs(ev)
    }
}

fn governor(c: &Ctx) -> RuleOutcome {
    let mut govs = Vec::new();
    let mut bad = Vec::new();
    for p in c.root.list_dir("/sys/devices/system/cpu/cpufreq") {
        if !p.starts_with("policy") {
            continue;
        }
        if let Some(g) = c.read(&format!(
            "/sys/devices/system/cpu/cpufreq/{p}/scaling_governor"
        )) {
            if g != "performance" {
                bad.push(format!("{p}: {g}"));
            }
            govs.push(format!("{p}: {g}"));
        }
    }
    if govs.is_empty() {
        return RuleOutcome::na("no cpufreq policies (typical in guests)");
    }
    let epb: Vec<String> = c
        .online
        .iter()
        .filter_map(|cpu| {
            let v = c.read_int(&format!(
                "/sys/devices/system/cpu/cpu{cpu}/power/energy_perf_bias"
            ))?;
            (v != 0).then(|| format!("cpu{cpu}: {v}"))
        })
        .collect();
    let min_perf = c.read_int("/sys/devices/system/cpu/intel_pstate/min_perf_pct");
    let mut ev = vec![Evidence::new(
        "governors",
        "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor",
        govs.join("; "),
    )];
    if !epb.is_empty() {
        ev.push(Evidence::new(
            "energy_perf_bias not 0",
            "/sys/devices/system/cpu/cpu*/power/energy_perf_bias",
            epb.join("; "),
        ));
    }
    if let Some(m) = min_perf {
        ev.push(Evidence::new(
            "min_perf_pct",
            "/sys/devices/system/cpu/intel_pstate/min_perf_pct",
            m.to_string(),
        ));
    }
    if !bad.is_empty() {
        RuleOutcome::fail(format!(
            "{} cpufreq policy(ies) not on the performance governor",
            bad.len()
        ))
        .evs(ev)
    } else if !epb.is_empty() || min_perf.is_some_and(|m| m < 100) {
        RuleOutcome::warn(
            "performance governor, but energy_perf_bias / min_perf_pct allow down-clocking",
        )
        .evs(ev)
    } else {
        RuleOutcome::pass("performance governor everywhere").evs(ev)
    }
}

/// `/dev/cpu_dma_latency` holds a native-endian s32 (kernel/power/qos.c `cpu_latency_qos_read`).
pub fn parse_dma_latency(bytes: &[u8]) -> Option<i32> {
    if let Ok(b) = <[u8; 4]>::try_from(bytes.get(..4)?) {
        return Some(i32::from_ne_bytes(b));
    }
    None
}

fn dma_latency(c: &Ctx) -> RuleOutcome {
    if c.target.is_guest() {
        return RuleOutcome::na("host rule (guest C-states are judged by cpuidle-states)");
    }
    let budget = c
        .read_int("/sys/devices/system/cpu/cpu0/cpuidle/state1/latency")
        .filter(|v| *v > 0)
        .unwrap_or(3);
    let ev_budget = Evidence::new(
        "budget (state1 latency, else 3)",
        "/sys/devices/system/cpu/cpu0/cpuidle/state1/latency",
        format!("{budget} µs"),
    );
    let Ok(bytes) = c.root.read_bytes("/dev/cpu_dma_latency") else {
        return RuleOutcome::unavailable("/dev/cpu_dma_latency unreadable (root needed)")
            .evs(vec![ev_budget]);
    };
    let Some(v) = parse_dma_latency(&bytes) else {
        return RuleOutcome::unavailable("/dev/cpu_dma_latency returned fewer than 4 bytes")
            .evs(vec![ev_budget]);
    };
    let ev = vec![
        Evidence::new(
            "PM QoS CPU latency",
            "/dev/cpu_dma_latency",
            format!("{v} µs"),
        ),
        ev_budget,
    ];
    if i64::from(v) <= budget {
        RuleOutcome::pass(format!("CPU latency constraint {v} µs held")).evs(ev)
    } else if v >= 2_000_000_000 {
        RuleOutcome::fail("no CPU latency constraint held (default 2000000000)").evs(ev)
    } else {
        RuleOutcome::fail(format!(
            "CPU latency constraint {v} µs above the budget {budget} µs"
        ))
        .evs(ev)
    }
}

fn cpuidle(c: &Ctx) -> RuleOutcome {
    let driver = c.read("/sys/devices/system/cpu/cpuidle/current_driver");
    let governor = c
        .read("/sys/devices/system/cpu/cpuidle/current_governor")
        .or_else(|| c.read("/sys/devices/system/cpu/cpuidle/current_governor_ro"));
    let mut ev = vec![
        Evidence::new(
            "cpuidle driver",
            "/sys/devices/system/cpu/cpuidle/current_driver",
            driver.clone().unwrap_or_else(|| "absent".into()),
        ),
        Evidence::new(
            "cpuidle governor",
            "/sys/devices/system/cpu/cpuidle/current_governor",
            governor.unwrap_or_else(|| "absent".into()),
        ),
        c.cmdline_ev("idle"),
        c.cmdline_ev("processor.max_cstate"),
        c.cmdline_ev("intel_idle.max_cstate"),
    ];
    let cpus = c.rt_or_online();
    let budget = c
        .read_int("/sys/devices/system/cpu/cpu0/cpuidle/state1/latency")
        .filter(|v| *v > 0)
        .unwrap_or(3)
        .max(3);
    // Deep states (exit latency above the budget) that are enabled, per CPU of I.
    let mut deep = Vec::new();
    for cpu in &cpus {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
        for st in c.root.list_dir(&base) {
            let lat = c.read_int(&format!("{base}/{st}/latency")).unwrap_or(0);
            let disabled = c.read_int(&format!("{base}/{st}/disable")).unwrap_or(0) != 0;
            if lat > budget && !disabled {
                let name = c
                    .read(&format!("{base}/{st}/name"))
                    .unwrap_or_else(|| st.clone());
                deep.push((*cpu, st, name, lat));
            }
        }
    }
    let static_limit = matches!(c.cmdline.get("idle"), Some("poll") | Some("halt"))
        || c.cmdline.get("cpuidle.off") == Some("1");
    if let Some(s) = &c.samples {
        let grew: Vec<String> = deep
            .iter()
            .filter_map(|(cpu, st, name, lat)| {
                let a = s.idle_first.get(&(*cpu, st.clone()))?;
                let b = s.idle_second.get(&(*cpu, st.clone()))?;
                (b > a).then(|| format!("cpu{cpu} {name} ({lat} µs) +{}", b - a))
            })
            .collect();
        if !grew.is_empty() {
            ev.push(Evidence::new(
                "deep C-state entries between samples",
                "/sys/devices/system/cpu/cpu*/cpuidle/state*/usage",
                grew.join("; "),
            ));
            return RuleOutcome::fail(format!(
                "{} deep C-state(s) entered on the audited CPUs",
                grew.len()
            ))
            .evs(ev);
        }
    }
    if deep.is_empty() || static_limit {
        let why = if static_limit {
            "idle limited on the command line"
        } else {
            "no enabled C-state deeper than the budget"
        };
        return RuleOutcome::pass(why).evs(ev);
    }
    let list: Vec<String> = deep
        .iter()
        .take(8)
        .map(|(cpu, _, n, l)| format!("cpu{cpu} {n} {l} µs"))
        .collect();
    ev.push(Evidence::new(
        format!("enabled states deeper than {budget} µs").as_str(),
        "/sys/devices/system/cpu/cpu*/cpuidle/state*/{latency,disable}",
        list.join("; "),
    ));
    if c.samples.is_some() {
        RuleOutcome::pass(
            "deep C-states enabled but not entered between samples (PM QoS holds them off)",
        )
        .evs(ev)
    } else {
        RuleOutcome::warn("deep C-states enabled on the audited CPUs (run with sampling to see whether they are entered)").evs(ev)
    }
}

fn pm_qos(c: &Ctx) -> RuleOutcome {
    let cpus: Vec<u32> = match &c.iso {
        Some(i) => i.iter().collect(),
        None => return RuleOutcome::na("no RT CPU set declared"),
    };
    let mut vals = Vec::new();
    let mut zero = Vec::new();
    for cpu in cpus {
        if let Some(v) = c.read(&format!(
            "/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"
        )) {
            if v == "0" {
                zero.push(cpu);
            }
            vals.push(format!("cpu{cpu}: {v}"));
        }
    }
    let ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "pm_qos_resume_latency_us",
            "/sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us",
            vals.join("; "),
        ),
    ];
    if vals.is_empty() {
        return RuleOutcome::na("no per-CPU PM QoS files").evs(ev);
    }
    if zero.is_empty() {
        RuleOutcome::pass("resume latency constrained on I").evs(ev)
    } else {
        RuleOutcome::warn(format!(
            "{} CPU(s) of I have no resume-latency constraint (0 = none)",
            zero.len()
        ))
        .evs(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use super::parse_dma_latency;
    use rtgauge_model::audit::{Status, Target};

    const T: Target = Target::BareMetalRtHost;

    #[test]
    fn governor_and_pstate() {
        let fx = Fx::new()
            .file(
                "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
                "performance\n",
            )
            .file(
                "/sys/devices/system/cpu/cpufreq/policy0/scaling_driver",
                "intel_pstate\n",
            )
            .file(
                "/sys/devices/system/cpu/cpufreq/policy1/scaling_governor",
                "powersave\n",
            );
        assert_eq!(fx.finding("cpufreq-governor-epb", T).status, Status::Fail);
        assert_eq!(fx.finding("pstate-driver", T).status, Status::Pass);
        let fx = fx
            .file(
                "/sys/devices/system/cpu/cpufreq/policy1/scaling_governor",
                "performance\n",
            )
            .file("/proc/cmdline", "intel_pstate=disable\n");
        assert_eq!(fx.finding("cpufreq-governor-epb", T).status, Status::Pass);
        assert_eq!(fx.finding("pstate-driver", T).status, Status::Warn);
        assert_eq!(
            Fx::new()
                .finding("cpufreq-governor-epb", Target::RtGuest)
                .status,
            Status::NotApplicable
        );
    }

    #[test]
    fn dma_latency_binary_value() {
        assert_eq!(
            parse_dma_latency(&2_000_000_000i32.to_ne_bytes()),
            Some(2_000_000_000)
        );
        assert_eq!(parse_dma_latency(&[1, 2]), None);
        let fx = Fx::new().file("/sys/devices/system/cpu/cpu0/cpuidle/state1/latency", "2\n");
        std::fs::create_dir_all(fx.dir.path().join("dev")).unwrap();
        std::fs::write(
            fx.dir.path().join("dev/cpu_dma_latency"),
            2i32.to_ne_bytes(),
        )
        .unwrap();
        assert_eq!(fx.finding("cpu-dma-latency", T).status, Status::Pass);
        std::fs::write(
            fx.dir.path().join("dev/cpu_dma_latency"),
            2_000_000_000i32.to_ne_bytes(),
        )
        .unwrap();
        assert_eq!(fx.finding("cpu-dma-latency", T).status, Status::Fail);
        assert_eq!(
            Fx::new().finding("cpu-dma-latency", T).status,
            Status::Unavailable
        );
        assert_eq!(
            Fx::new().finding("cpu-dma-latency", Target::RtGuest).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn cpuidle_usage_growth_and_static_limits() {
        let base = "/sys/devices/system/cpu/cpu2/cpuidle/state2";
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2\n")
            .file(&format!("{base}/latency"), "80\n")
            .file(&format!("{base}/name"), "C6\n")
            .file(&format!("{base}/disable"), "0\n")
            .file(&format!("{base}/usage"), "100\n")
            .file(&format!("/.rtgauge/sample2{base}/usage"), "150\n")
            .file("/.rtgauge/sample2/interval_ns", "2000000000");
        assert_eq!(fx.finding("cpuidle-states", T).status, Status::Fail);
        let fx = fx.file(&format!("/.rtgauge/sample2{base}/usage"), "100\n");
        assert_eq!(fx.finding("cpuidle-states", T).status, Status::Pass);
        let fx = fx
            .file(&format!("{base}/disable"), "1\n")
            .file(&format!("/.rtgauge/sample2{base}/usage"), "150\n");
        assert_eq!(fx.finding("cpuidle-states", T).status, Status::Pass);
    }

    #[test]
    fn pm_qos_zero_means_none() {
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3\n")
            .file(
                "/sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us",
                "n/a\n",
            )
            .file(
                "/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us",
                "0\n",
            );
        assert_eq!(fx.finding("pm-qos-resume-latency", T).status, Status::Warn);
        let fx = fx.file(
            "/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us",
            "n/a\n",
        );
        assert_eq!(fx.finding("pm-qos-resume-latency", T).status, Status::Pass);
    }
}

//! Catalogue §3: CPU isolation, IRQs and housekeeping work. Without an RT CPU set I, `cmdline-isolcpus` fails
//! (nothing is set aside for real-time work) and every other rule here is `n/a`. The table below lists all
//! §3 rules in catalogue order; this file holds the isolation rules (isolcpus, nohz_full, RCU, consistent
//! sets, housekeeping capacity, SMT), [`super::irq`] the IRQ rules and [`super::tasks`] the housekeeping work.

use super::irq::{irq_activity, irq_affinity, irqbalance, rps};
use super::tasks::{kthread_prios, systemd_affinity, tasks_on_isolated, workqueue};
use super::{set_or, Ctx, Rule, RuleOutcome};
use rtgauge_host::parse::{parse_cpu_list_param, parse_isolcpus, ParseError};
use rtgauge_model::audit::{Evidence, Severity};
use rtgauge_model::CpuSet;
use std::collections::BTreeSet;

pub static RULES: [Rule; 14] = [
    Rule {
        id: "cmdline-isolcpus",
        section: 3,
        severity: Severity::High,
        expected: "isolcpus=[managed_irq,domain,]<I> in force: /sys/devices/system/cpu/isolated (or cpuset.cpus.isolated) covers I",
        remediation: "Add isolcpus=managed_irq,domain,<I> to the kernel command line (or use tuned / a PerformanceProfile) and reboot.",
        source: "[T1][R1][O1][K1][K9b][K8]",
        sampled: false,
        check: isolcpus,
    },
    Rule {
        id: "cmdline-nohz-full",
        section: 3,
        severity: Severity::Medium,
        expected: "nohz=on nohz_full=<I> skew_tick=1; /sys/devices/system/cpu/nohz_full covers I (boot CPU excepted)",
        remediation: "Add nohz=on nohz_full=<I> skew_tick=1 to the kernel command line and reboot.",
        source: "[T2][T3][T4][O1][K1][K5][T6]",
        sampled: false,
        check: nohz_full,
    },
    Rule {
        id: "rcu-offload-and-normal",
        section: 3,
        severity: Severity::Medium,
        expected: "rcu_nocbs=<I> (or nohz_full=<I>), rcuo* kthreads affined to H, /sys/kernel/rcu_normal = 1 on PREEMPT_RT",
        remediation: "Add rcu_nocbs=<I> rcupdate.rcu_normal_after_boot=1 (optionally rcu_nocb_poll); pin rcuo* threads to H (tuned scheduler plugin).",
        source: "[K1][K6][T2][T3][T4][T6][O1]",
        sampled: false,
        check: rcu,
    },
    Rule {
        id: "isolation-sets-consistent",
        section: 3,
        severity: Severity::Medium,
        expected: "isolcpus, nohz_full, rcu_nocbs, tuned isolated_cores describe the same I, irqaffinity = H, all CPUs online",
        remediation: "Regenerate every parameter from one RT CPU set (tuned does it from isolated_cores).",
        source: "[T1][T2][K9b]",
        sampled: false,
        check: sets_consistent,
    },
    Rule {
        id: "housekeeping-capacity",
        section: 3,
        severity: Severity::Medium,
        expected: "H not empty on every socket and NUMA node that hosts I; CPU 0 in H",
        remediation: "Move at least one core per socket (and CPU 0) to the housekeeping set.",
        source: "[T1][R1][L1]",
        sampled: false,
        check: housekeeping,
    },
    Rule {
        id: "smt-siblings",
        section: 3,
        severity: Severity::Medium,
        expected: "SMT off, or I closed under thread siblings (no RT CPU shares a core with H)",
        remediation: "Disable SMT in the BIOS or boot with nosmt; or isolate whole cores.",
        source: "[K2][L1][R3][O2]",
        sampled: false,
        check: smt,
    },
    Rule {
        id: "irq-affinity-isolated",
        section: 3,
        severity: Severity::High,
        expected: "no device IRQ effectively targets a CPU in I; default_smp_affinity within H",
        remediation: "irqaffinity=<H> on the command line, isolcpus=managed_irq,…, fewer NIC queues (tuned netdev_queue_count); stop or fix irqbalance.",
        source: "[T2][T3][K1][K8]",
        sampled: false,
        check: irq_affinity,
    },
    Rule {
        id: "irqbalance-banned-cpus",
        section: 3,
        severity: Severity::High,
        expected: "irqbalance stopped, or IRQBALANCE_BANNED_CPULIST covers I",
        remediation: "systemctl disable --now irqbalance, or set IRQBALANCE_BANNED_CPULIST=<I> in /etc/sysconfig/irqbalance (/etc/default/irqbalance); on OpenShift use irq-load-balancing.crio.io or globallyDisableIrqLoadBalancing.",
        source: "[R1][T7][T1][T4][IRQB][O5][O3]",
        sampled: false,
        check: irqbalance,
    },
    Rule {
        id: "irq-activity-on-isolated",
        section: 3,
        severity: Severity::Medium,
        expected: "between two samples: no device IRQ on I, local timer and IPIs near zero, TIMER/RCU softirqs rare",
        remediation: "Trace the sources on the noisy CPU (/sys/kernel/tracing, function_graph) and fix their affinities.",
        source: "[K6]",
        sampled: true,
        check: irq_activity,
    },
    Rule {
        id: "workqueue-cpumask",
        section: 3,
        severity: Severity::Medium,
        expected: "/sys/devices/virtual/workqueue/cpumask, */cpumask and writeback cpumask exclude I",
        remediation: "Write mask(H) to the workqueue cpumask files (tuned [sysfs]) or boot with workqueue.unbound_cpus=<H>.",
        source: "[T1][T4][K1][K6]",
        sampled: false,
        check: workqueue,
    },
    Rule {
        id: "systemd-cpuaffinity",
        section: 3,
        severity: Severity::Medium,
        expected: "PID 1 Cpus_allowed_list within H",
        remediation: "CPUAffinity=<H> in /etc/systemd/system.conf (or systemd.cpu_affinity=<H>), then reboot.",
        source: "[T4][O1]",
        sampled: false,
        check: systemd_affinity,
    },
    Rule {
        id: "tasks-on-isolated",
        section: 3,
        severity: Severity::Medium,
        expected: "no unbound task or kthread may run on I (per-CPU kthreads and tasks pinned inside I excepted)",
        remediation: "Restart the offenders under taskset or a cpuset limited to H; fix their units (CPUAffinity=).",
        source: "[T2][T4]",
        sampled: false,
        check: tasks_on_isolated,
    },
    Rule {
        id: "rt-kthread-priorities",
        section: 3,
        severity: Severity::Low,
        expected: "on PREEMPT_RT: ksoftirqd, ktimers, rcuc, rcub SCHED_FIFO (tuned: 2/2/4/4; OpenShift: 11)",
        remediation: "Apply tuned realtime-virtual-host/guest [scheduler] group.* settings (or the OpenShift profile); choose application priorities relative to them.",
        source: "[T2][T3][O1][R2]",
        sampled: false,
        check: kthread_prios,
    },
    Rule {
        id: "net-rps-and-queues",
        section: 3,
        severity: Severity::Low,
        expected: "RPS masks (rx-*/rps_cpus, net.core.rps_default_mask) exclude I",
        remediation: "Write mask(H) to /sys/class/net/<if>/queues/rx-*/rps_cpus; ethtool -L <if> combined <|H|>.",
        source: "[O1][T1][R1][T6]",
        sampled: false,
        check: rps,
    },
];

fn isolcpus(c: &Ctx) -> RuleOutcome {
    let sev = if c.target.is_guest() {
        Severity::Medium
    } else {
        Severity::High
    };
    let Some(iso) = c.iso.as_ref() else {
        // Not partitioned at all: the one question every other isolation rule assumes answered. This rule
        // fails (the others stay n/a: they have no set to judge), so the audit never reads as "nothing
        // wrong" on a host that gives real-time work no CPU of its own.
        return RuleOutcome::fail(
            "no CPU is set aside for real-time work: no isolcpus, nohz_full, rcu_nocbs, tuned isolated_cores or \
             isolated cpuset partition (to audit a planned set before rebooting, pass --isolated LIST)",
        )
        .evs(vec![
            c.cmdline_ev("isolcpus"),
            c.cmdline_ev("nohz_full"),
            Evidence::new(
                "domain-isolated CPUs",
                "/sys/devices/system/cpu/isolated",
                c.read("/sys/devices/system/cpu/isolated")
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "(none)".into()),
            ),
        ])
        .sev(sev);
    };
    let runtime = rtgauge_host::cpu::parse_cpu_mask(
        &c.read("/sys/devices/system/cpu/isolated")
            .unwrap_or_default(),
    )
    .ok();
    let cpuset_iso = c
        .read("/sys/fs/cgroup/cpuset.cpus.isolated")
        .and_then(|t| CpuSet::parse(&t).ok());
    let cmd = c.cmdline.get("isolcpus").map(parse_isolcpus);
    let ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "domain-isolated CPUs",
            "/sys/devices/system/cpu/isolated",
            set_or(&runtime),
        ),
        Evidence::new(
            "isolated cpuset partitions",
            "/sys/fs/cgroup/cpuset.cpus.isolated",
            set_or(&cpuset_iso),
        ),
        c.cmdline_ev("isolcpus"),
    ];
    let covers = |s: &Option<CpuSet>| s.as_ref().is_some_and(|s| iso.difference(s).is_empty());
    if covers(&runtime) || covers(&cpuset_iso) {
        return RuleOutcome::pass(format!("I = {iso} is isolated at run time"))
            .evs(ev)
            .sev(sev);
    }
    match cmd {
        Some(Ok((flags, list))) if iso.difference(&list).is_empty() => {
            if !flags.is_empty() && !flags.iter().any(|f| f == "domain") {
                // isolcpus=managed_irq,<I> keeps load balancing: the isolated file stays empty by design.
                RuleOutcome::pass(format!(
                    "isolcpus={} covers I without domain isolation (isolated file empty by design)",
                    flags.join(",")
                ))
            } else {
                RuleOutcome::fail(
                    "isolcpus covers I on the command line but is not effective at run time",
                )
            }
        }
        Some(Ok((_, list))) => RuleOutcome::fail(format!(
            "isolcpus={list} does not cover I: missing {}",
            iso.difference(&list)
        )),
        Some(Err(e)) => RuleOutcome::fail(format!("isolcpus= cannot be parsed: {e}")),
        None => RuleOutcome::fail("no isolcpus= and no isolated cpuset partition covers I"),
    }
    .evs(ev)
    .sev(sev)
}

fn nohz_full(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let runtime = c
        .read("/sys/devices/system/cpu/nohz_full")
        .and_then(|t| rtgauge_host::cpu::parse_cpu_mask(&t).ok());
    let ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "nohz_full CPUs",
            "/sys/devices/system/cpu/nohz_full",
            set_or(&runtime),
        ),
        c.cmdline_ev("nohz_full"),
        c.cmdline_ev("skew_tick"),
    ];
    // The boot CPU is forced out of nohz_full (Documentation/timers/no_hz.rst).
    let need = iso.difference(&CpuSet::new([0]));
    let missing = runtime.as_ref().map(|r| need.difference(r));
    match missing {
        Some(m) if m.is_empty() => {
            if c.cmdline.get("skew_tick") == Some("1") {
                RuleOutcome::pass("nohz_full covers I, skew_tick=1")
            } else {
                RuleOutcome::warn("nohz_full covers I but skew_tick=1 is missing")
            }
        }
        Some(m) if c.cmdline.has("nohz_full") => RuleOutcome::fail(format!(
            "nohz_full requested but not in force on {m} (configured but not effective)"
        )),
        Some(m) => RuleOutcome::fail(format!("CPUs of I without nohz_full: {m}")),
        None if c.cmdline.has("nohz_full") => RuleOutcome::fail(
            "nohz_full requested but the kernel does not expose it (no CONFIG_NO_HZ_FULL?)",
        ),
        None => RuleOutcome::fail("no nohz_full: the tick keeps running on I"),
    }
    .evs(ev)
}

fn rcu(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let nocbs = c
        .cmdline
        .get("rcu_nocbs")
        .and_then(|v| parse_cpu_list_param(v, &c.online).ok());
    let nohz = c
        .read("/sys/devices/system/cpu/nohz_full")
        .and_then(|t| rtgauge_host::cpu::parse_cpu_mask(&t).ok())
        .unwrap_or_default();
    let offloaded = nocbs.clone().unwrap_or_default();
    let uncovered = CpuSet::new(
        iso.iter()
            .filter(|x| !offloaded.contains(*x) && !nohz.contains(*x)),
    );
    let rcu_normal = c.read("/sys/kernel/rcu_normal");
    let rcuo_off_h: Vec<String> = c
        .tasks()
        .iter()
        .filter(|t| t.kthread && t.comm.starts_with("rcuo"))
        .filter(|t| {
            t.allowed
                .as_ref()
                .is_some_and(|a| !a.intersection(iso).is_empty())
        })
        .map(|t| {
            format!(
                "{}({})",
                t.comm,
                t.allowed
                    .as_ref()
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            )
        })
        .collect();
    let mut ev = vec![
        c.iso_evidence(),
        c.cmdline_ev("rcu_nocbs"),
        c.cmdline_ev("rcu_nocb_poll"),
        c.cmdline_ev("rcupdate.rcu_normal_after_boot"),
        Evidence::new(
            "rcu_normal",
            "/sys/kernel/rcu_normal",
            rcu_normal.clone().unwrap_or_else(|| "absent".into()),
        ),
    ];
    if !rcuo_off_h.is_empty() {
        ev.push(Evidence::new(
            "rcuo kthreads allowed on I",
            "/proc/*/task/*/status Cpus_allowed_list",
            rcuo_off_h.join(" "),
        ));
    }
    if !uncovered.is_empty() {
        return RuleOutcome::fail(format!(
            "RCU callbacks not offloaded on {uncovered} (no rcu_nocbs / nohz_full)"
        ))
        .evs(ev);
    }
    if !rcuo_off_h.is_empty() {
        return RuleOutcome::warn(format!("{} rcuo* kthreads may run on I", rcuo_off_h.len()))
            .evs(ev);
    }
    if c.is_rt_kernel() && rcu_normal.as_deref() == Some("0") {
        return RuleOutcome::warn("PREEMPT_RT kernel but rcu_normal = 0").evs(ev);
    }
    RuleOutcome::pass("RCU callbacks offloaded from I").evs(ev)
}

fn sets_consistent(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let mut sets: Vec<(String, String, Result<CpuSet, ParseError>)> = Vec::new();
    if let Some(v) = c.cmdline.get("isolcpus") {
        sets.push((
            "isolcpus".into(),
            "/proc/cmdline".into(),
            parse_isolcpus(v).map(|x| x.1),
        ));
    }
    for k in ["nohz_full", "rcu_nocbs"] {
        if let Some(v) = c.cmdline.get(k) {
            sets.push((
                k.into(),
                "/proc/cmdline".into(),
                parse_cpu_list_param(v, &c.online),
            ));
        }
    }
    // `${f:calc_isolated_cores:1}` (tuned's default) is computed by tuned at run time: nothing to compare.
    if let Some(v) =
        c.fp.tuned
            .isolated_cores
            .as_ref()
            .filter(|v| !v.contains("${"))
    {
        sets.push((
            "tuned isolated_cores".into(),
            "/etc/tuned/<profile>-variables.conf".into(),
            CpuSet::parse(v).map_err(ParseError::from),
        ));
    }
    let mut problems = Vec::new();
    let mut ev = vec![c.iso_evidence()];
    for (name, src, set) in &sets {
        match set {
            Ok(s) => {
                ev.push(Evidence::new(name.clone(), src.clone(), s.to_string()));
                if s != iso {
                    problems.push(format!("{name}={s} differs from I"));
                }
                let off = s.difference(&c.online);
                if !off.is_empty() {
                    problems.push(format!("{name} names offline CPUs {off}"));
                }
            }
            Err(e) => problems.push(format!("{name} unparsable: {e}")),
        }
    }
    if let Some(v) = c.cmdline.get("irqaffinity") {
        match CpuSet::parse(v) {
            Ok(s) => {
                ev.push(Evidence::new("irqaffinity", "/proc/cmdline", s.to_string()));
                if s != c.hk {
                    problems.push(format!("irqaffinity={s} differs from H={}", c.hk));
                }
            }
            Err(e) => problems.push(format!("irqaffinity unparsable: {e}")),
        }
    }
    if sets.is_empty() && !c.cmdline.has("irqaffinity") {
        return RuleOutcome::pass("I declared only by the operator; no parameters to compare")
            .evs(ev);
    }
    if problems.is_empty() {
        RuleOutcome::pass("all isolation parameters describe the same I").evs(ev)
    } else {
        RuleOutcome::fail(problems.join("; ")).evs(ev)
    }
}

fn housekeeping(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "housekeeping CPUs H",
            "/sys/devices/system/cpu/online − I",
            c.hk.to_string(),
        ),
    ];
    if c.hk.is_empty() {
        return RuleOutcome::fail("no housekeeping CPU left").evs(ev);
    }
    let mut problems = Vec::new();
    if !c.hk.contains(0) && c.online.contains(0) {
        problems.push("CPU 0 is in I".to_string());
    }
    let topo = c.topology();
    let pkgs_i: BTreeSet<u32> = iso.iter().filter_map(|x| topo.get(&x)?.package).collect();
    // A guest's sockets are virtual (VMware's cores-per-socket = 1 makes one per vCPU): judge NUMA nodes only.
    for p in pkgs_i.into_iter().filter(|_| !c.target.is_guest()) {
        if !c
            .hk
            .iter()
            .any(|h| topo.get(&h).and_then(|t| t.package) == Some(p))
        {
            problems.push(format!("socket {p} has no housekeeping CPU"));
        }
    }
    for n in &c.fp.numa {
        if !n.cpus.intersection(iso).is_empty() && n.cpus.intersection(&c.hk).is_empty() {
            problems.push(format!("NUMA node {} has no housekeeping CPU", n.id));
        }
    }
    if problems.is_empty() {
        RuleOutcome::pass(format!("H = {} covers every socket/node hosting I", c.hk)).evs(ev)
    } else {
        RuleOutcome::fail(problems.join("; ")).evs(ev)
    }
}

fn smt(c: &Ctx) -> RuleOutcome {
    let control = c.fp.cpu.smt_control.clone();
    let ev = vec![
        Evidence::new(
            "SMT control",
            "/sys/devices/system/cpu/smt/control",
            control.clone().unwrap_or_else(|| "absent".into()),
        ),
        Evidence::new(
            "threads per core",
            "/sys/devices/system/cpu/cpu*/topology/thread_siblings_list",
            c.fp.cpu.threads_per_core.to_string(),
        ),
    ];
    let off = matches!(
        control.as_deref(),
        Some("off" | "forceoff" | "notsupported" | "notimplemented")
    ) || c.fp.cpu.threads_per_core <= 1;
    if off {
        return RuleOutcome::pass("SMT off or not present").evs(ev);
    }
    let Some(iso) = c.iso.as_ref() else {
        return RuleOutcome::warn("SMT on and no RT CPU set declared").evs(ev);
    };
    let topo = c.topology();
    let shared: Vec<String> = iso
        .iter()
        .filter_map(|x| {
            let sib = &topo.get(&x)?.siblings;
            let h = sib.difference(iso);
            (!h.is_empty()).then(|| format!("{x}~{h}"))
        })
        .collect();
    let mut ev = ev;
    ev.insert(0, c.iso_evidence());
    if shared.is_empty() {
        RuleOutcome::pass("SMT on, but I is made of whole cores").evs(ev)
    } else {
        RuleOutcome::fail(format!(
            "RT CPUs share a core with housekeeping CPUs: {}",
            shared.join(" ")
        ))
        .evs(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const T: Target = Target::BareMetalRtHost;

    #[test]
    fn an_unpartitioned_host_fails_isolcpus_and_the_rest_is_na() {
        let fx = Fx::new();
        let f = fx.finding("cmdline-isolcpus", T);
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary.contains("no CPU is set aside for real-time work"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("--isolated LIST"), "{}", f.summary);
        assert!(f.remediation.contains("isolcpus="), "{}", f.remediation);
        for id in [
            "cmdline-nohz-full",
            "irq-affinity-isolated",
            "workqueue-cpumask",
            "tasks-on-isolated",
        ] {
            assert_eq!(fx.finding(id, T).status, Status::NotApplicable, "{id}");
        }
    }

    #[test]
    fn isolcpus_runtime_truth_and_managed_irq_trap() {
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=domain,2-3\n")
            .file("/sys/devices/system/cpu/isolated", "2-3\n");
        assert_eq!(fx.finding("cmdline-isolcpus", T).status, Status::Pass);
        // Configured but not effective.
        let fx = fx.file("/sys/devices/system/cpu/isolated", "\n");
        let f = fx.finding("cmdline-isolcpus", T);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("not effective"));
        // managed_irq without domain: the isolated file stays empty by design.
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=managed_irq,2-3\n")
            .file("/sys/devices/system/cpu/isolated", "\n");
        assert_eq!(fx.finding("cmdline-isolcpus", T).status, Status::Pass);
        // Operator set not covered.
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=3\n")
            .file("/sys/devices/system/cpu/isolated", "3\n");
        assert_eq!(
            fx.finding_with("cmdline-isolcpus", T, Some("2-3")).status,
            Status::Fail
        );
        assert_eq!(
            fx.finding_with("cmdline-isolcpus", Target::RtGuest, Some("2-3"))
                .severity,
            rtgauge_model::audit::Severity::Medium
        );
    }

    #[test]
    fn nohz_full_and_skew_tick() {
        let fx = Fx::new()
            .file("/proc/cmdline", "nohz_full=2-3 skew_tick=1\n")
            .file("/sys/devices/system/cpu/nohz_full", "2-3\n");
        assert_eq!(fx.finding("cmdline-nohz-full", T).status, Status::Pass);
        let fx = fx.file("/proc/cmdline", "nohz_full=2-3\n");
        assert_eq!(fx.finding("cmdline-nohz-full", T).status, Status::Warn);
        let fx = fx.file("/sys/devices/system/cpu/nohz_full", "3\n");
        assert_eq!(fx.finding("cmdline-nohz-full", T).status, Status::Fail);
    }

    #[test]
    fn rcu_offload() {
        let fx = Fx::new().file("/proc/cmdline", "isolcpus=2-3 rcu_nocbs=2-3\n");
        assert_eq!(fx.finding("rcu-offload-and-normal", T).status, Status::Pass);
        let fx = Fx::new().file("/proc/cmdline", "isolcpus=2-3 rcu_nocbs=3\n");
        assert_eq!(fx.finding("rcu-offload-and-normal", T).status, Status::Fail);
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3 rcu_nocbs=2-3\n")
            .file(
                "/proc/9/task/9/status",
                "Name:\trcuop/2\nPPid:\t2\nCpus_allowed_list:\t0-3\n",
            );
        assert_eq!(fx.finding("rcu-offload-and-normal", T).status, Status::Warn);
    }

    #[test]
    fn sets_consistency() {
        let fx = Fx::new().file(
            "/proc/cmdline",
            "isolcpus=2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1\n",
        );
        assert_eq!(
            fx.finding("isolation-sets-consistent", T).status,
            Status::Pass
        );
        let fx = Fx::new().file(
            "/proc/cmdline",
            "isolcpus=2-3 nohz_full=1-3 irqaffinity=0\n",
        );
        let f = fx.finding("isolation-sets-consistent", T);
        assert_eq!(f.status, Status::Fail);
        let fx = Fx::new().file("/proc/cmdline", "isolcpus=2-7\n");
        assert!(fx
            .finding("isolation-sets-consistent", T)
            .summary
            .contains("offline"));
    }

    #[test]
    fn housekeeping_per_socket_and_cpu0() {
        let topo = |fx: Fx, cpu: u32, pkg: u32| {
            fx.file(
                &format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
                &format!("{pkg}\n"),
            )
            .file(
                &format!("/sys/devices/system/cpu/cpu{cpu}/topology/core_id"),
                &format!("{cpu}\n"),
            )
        };
        let mut fx = Fx::new();
        for (c, p) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
            fx = topo(fx, c, p);
        }
        assert_eq!(
            fx.finding_with("housekeeping-capacity", T, Some("1,3"))
                .status,
            Status::Pass
        );
        assert_eq!(
            fx.finding_with("housekeeping-capacity", T, Some("2-3"))
                .status,
            Status::Fail
        );
        assert_eq!(
            fx.finding_with("housekeeping-capacity", T, Some("0,3"))
                .status,
            Status::Fail
        );
    }

    #[test]
    fn smt_sibling_closure() {
        let sib = |fx: Fx, cpu: u32, s: &str| {
            fx.file(
                &format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
                s,
            )
        };
        let fx = sib(
            sib(sib(sib(Fx::new(), 0, "0,2"), 1, "1,3"), 2, "0,2"),
            3,
            "1,3",
        )
        .file("/sys/devices/system/cpu/smt/control", "on\n");
        assert_eq!(
            fx.finding_with("smt-siblings", T, Some("1,3")).status,
            Status::Pass
        );
        assert_eq!(
            fx.finding_with("smt-siblings", T, Some("2-3")).status,
            Status::Fail
        );
        assert_eq!(fx.finding("smt-siblings", T).status, Status::Warn);
        let fx = fx.file("/sys/devices/system/cpu/smt/control", "off\n");
        assert_eq!(
            fx.finding_with("smt-siblings", T, Some("2-3")).status,
            Status::Pass
        );
    }

    #[test]
    fn irq_affinity_effective_and_managed() {
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=managed_irq,domain,2-3\n")
            .file("/proc/irq/default_smp_affinity", "3\n")
            .file("/proc/irq/24/effective_affinity_list", "1\n")
            .file("/proc/irq/24/smp_affinity_list", "0-3\n");
        assert_eq!(fx.finding("irq-affinity-isolated", T).status, Status::Pass);
        let fx = fx
            .file("/proc/irq/30/effective_affinity_list", "2\n")
            .file("/proc/irq/30/smp_affinity_list", "2\n");
        assert_eq!(fx.finding("irq-affinity-isolated", T).status, Status::Warn);
        let fx = fx
            .file("/proc/irq/31/effective_affinity_list", "3\n")
            .file("/proc/irq/31/smp_affinity_list", "0-3\n");
        assert_eq!(fx.finding("irq-affinity-isolated", T).status, Status::Fail);
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3\n")
            .file("/proc/irq/default_smp_affinity", "f\n");
        assert_eq!(fx.finding("irq-affinity-isolated", T).status, Status::Fail);
    }

    #[test]
    fn irqbalance_variants() {
        let run = "Name:\tirqbalance\nPPid:\t1\nCpus_allowed_list:\t0-1\n";
        let base = || Fx::new().file("/proc/cmdline", "isolcpus=2-3\n");
        assert_eq!(
            base().finding("irqbalance-banned-cpus", T).status,
            Status::Pass
        );
        let fx = base().file("/proc/5/task/5/status", run);
        assert_eq!(fx.finding("irqbalance-banned-cpus", T).status, Status::Fail);
        let fx = fx.file("/sys/devices/system/cpu/isolated", "2-3\n");
        assert_eq!(fx.finding("irqbalance-banned-cpus", T).status, Status::Pass);
        let fx = fx.file("/etc/sysconfig/irqbalance", "IRQBALANCE_BANNED_CPULIST=3\n");
        assert_eq!(fx.finding("irqbalance-banned-cpus", T).status, Status::Fail);
        let fx = fx.file(
            "/etc/sysconfig/irqbalance",
            "IRQBALANCE_BANNED_CPULIST=2-3\n",
        );
        assert_eq!(fx.finding("irqbalance-banned-cpus", T).status, Status::Pass);
        // The running daemon's environment beats the config file.
        let fx = base()
            .file("/proc/5/task/5/status", run)
            .file(
                "/etc/sysconfig/irqbalance",
                "IRQBALANCE_BANNED_CPULIST=2-3\n",
            )
            .file(
                "/proc/5/environ",
                "PATH=/bin\0IRQBALANCE_BANNED_CPULIST=3\0",
            );
        let f = fx.finding("irqbalance-banned-cpus", T);
        assert_eq!(f.status, Status::Fail);
        assert!(f
            .evidence
            .iter()
            .any(|e| e.source.contains("not effective")));
        let (l, h, kept) =
            super::super::irq::parse_irqbalance_environ(b"SECRET=x\0IRQBALANCE_BANNED_CPULIST=3\0");
        assert_eq!((l.as_deref(), h), (Some("3"), None));
        assert_eq!(kept, b"IRQBALANCE_BANNED_CPULIST=3\0");
        let fx = base()
            .file("/proc/5/task/5/status", run)
            .file("/etc/default/irqbalance", "IRQBALANCE_BANNED_CPUS=0\n");
        assert_eq!(
            fx.finding("irqbalance-banned-cpus", Target::K8sRtNode)
                .status,
            Status::Warn
        );
        assert_eq!(fx.finding("irqbalance-banned-cpus", T).status, Status::Fail);
    }

    #[test]
    fn irq_activity_from_two_samples() {
        let s1 =
            "      CPU0 CPU1 CPU2 CPU3\n 24: 1 1 5 0 PCI-MSI eth0\nLOC: 10 10 10 10 Local timer\n";
        let s2 =
            "      CPU0 CPU1 CPU2 CPU3\n 24: 1 1 9 0 PCI-MSI eth0\nLOC: 90 90 10 11 Local timer\n";
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3\n")
            .file("/proc/interrupts", s1)
            .file("/.rtgauge/sample2/proc/interrupts", s2)
            .file("/.rtgauge/sample2/interval_ns", "1000000000");
        let f = fx.finding("irq-activity-on-isolated", T);
        assert_eq!(f.status, Status::Fail, "{f:?}");
        let fx = fx.file("/.rtgauge/sample2/proc/interrupts", s1);
        assert_eq!(
            fx.finding("irq-activity-on-isolated", T).status,
            Status::Pass
        );
    }

    #[test]
    fn workqueue_masks() {
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3\n")
            .file("/sys/devices/virtual/workqueue/cpumask", "3\n")
            .file("/sys/devices/virtual/workqueue/writeback/cpumask", "3\n");
        assert_eq!(fx.finding("workqueue-cpumask", T).status, Status::Pass);
        let fx = fx.file("/sys/bus/workqueue/devices/writeback/cpumask", "f\n");
        assert_eq!(fx.finding("workqueue-cpumask", T).status, Status::Fail);
        assert_eq!(
            Fx::new()
                .file("/proc/cmdline", "isolcpus=2-3\n")
                .finding("workqueue-cpumask", T)
                .status,
            Status::Unavailable
        );
    }

    #[test]
    fn systemd_and_tasks() {
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3\n")
            .file(
                "/proc/1/status",
                "Name:\tsystemd\nCpus_allowed_list:\t0-1\n",
            )
            .file(
                "/proc/1/task/1/status",
                "Name:\tsystemd\nPPid:\t0\nCpus_allowed_list:\t0-1\n",
            )
            .file(
                "/proc/20/task/20/status",
                "Name:\tksoftirqd/2\nPPid:\t2\nCpus_allowed_list:\t2\n",
            )
            .file(
                "/proc/30/task/30/status",
                "Name:\tcyclic\nPPid:\t1\nCpus_allowed_list:\t2-3\n",
            );
        assert_eq!(fx.finding("systemd-cpuaffinity", T).status, Status::Pass);
        assert_eq!(fx.finding("tasks-on-isolated", T).status, Status::Pass);
        // A 6.1 workqueue rescuer: bound by the kernel to every possible CPU (flags PF_KTHREAD, PF_NOFREEZE and
        // PF_NO_SETAFFINITY), not movable, so no failure; a movable kthread there fails.
        let kt = |flags: u32| {
            format!("50 (writeback) S 2 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0\n")
        };
        let fx = fx
            .file(
                "/proc/50/task/50/status",
                "Name:\twriteback\nPPid:\t2\nKthread:\t1\nCpus_allowed_list:\t0-3\n",
            )
            .file("/proc/50/task/50/stat", &kt(0x0420_8040));
        let f = fx.finding("tasks-on-isolated", T);
        assert_eq!(f.status, Status::Pass, "{f:?}");
        assert!(f.summary.contains("1 kernel-bound"), "{}", f.summary);
        assert!(f.evidence.iter().any(|e| e.value.contains("writeback[50]")));
        let fx = fx.file("/proc/50/task/50/stat", &kt(0x0020_8040));
        let f = fx.finding("tasks-on-isolated", T);
        assert_eq!(f.status, Status::Fail, "{f:?}");
        assert!(
            f.summary.starts_with("0 user and 1 kernel"),
            "{}",
            f.summary
        );
        let fx = fx.file("/proc/50/task/50/stat", &kt(0x0420_8040));
        let fx = fx
            .file(
                "/proc/1/status",
                "Name:\tsystemd\nCpus_allowed_list:\t0-3\n",
            )
            .file(
                "/proc/40/task/41/status",
                "Name:\tsshd\nPPid:\t1\nCpus_allowed_list:\t0-3\n",
            );
        assert_eq!(fx.finding("systemd-cpuaffinity", T).status, Status::Fail);
        let f = fx.finding("tasks-on-isolated", T);
        assert_eq!(f.status, Status::Fail);
        assert!(f.evidence.iter().any(|e| e.value.contains("sshd[41]")));
    }

    #[test]
    fn kthread_priorities_on_rt() {
        let stat = |comm: &str, prio: u32, pol: u32| {
            format!("9 ({comm}) S 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 -2 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2 {prio} {pol} 0 0 0\n")
        };
        let fx = Fx::new()
            .file("/proc/sys/kernel/version", "#1 SMP PREEMPT_RT\n")
            .file("/proc/9/task/9/status", "Name:\tksoftirqd/2\nPPid:\t2\n")
            .file("/proc/9/task/9/stat", &stat("ksoftirqd/2", 2, 1));
        assert_eq!(fx.finding("rt-kthread-priorities", T).status, Status::Pass);
        let fx = fx.file("/proc/9/task/9/stat", &stat("ksoftirqd/2", 0, 0));
        assert_eq!(fx.finding("rt-kthread-priorities", T).status, Status::Warn);
        assert_eq!(
            Fx::new().finding("rt-kthread-priorities", T).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn rps_masks() {
        let fx = Fx::new()
            .file("/proc/cmdline", "isolcpus=2-3\n")
            .file("/sys/class/net/eth0/queues/rx-0/rps_cpus", "0\n")
            .file("/sys/class/net/lo/queues/rx-0/rps_cpus", "f\n");
        assert_eq!(fx.finding("net-rps-and-queues", T).status, Status::Pass);
        let fx = fx.file("/sys/class/net/eth0/queues/rx-0/rps_cpus", "c\n");
        assert_eq!(fx.finding("net-rps-and-queues", T).status, Status::Warn);
    }
}

//! Catalogue §4: whether this process may measure as asked — SCHED_FIFO at the measurement's priority,
//! `mlockall`, the measured CPUs — on any target (a host, a guest, a container, a pod). The causes and fixes
//! are `rtgauge_host::privilege`'s, the same words a run's unmet conditions use, so the audit before a run
//! names the cause the run will meet.

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_host::privilege::{Group, Limit, Privilege, Refusal};
use rtgauge_model::audit::{Evidence, Severity};

pub static RULES: [Rule; 3] = [
    Rule {
        id: "rt-priority-allowed",
        section: 4,
        severity: Severity::High,
        expected: "this process may use SCHED_FIFO at the measurement's priority: CAP_SYS_NICE or RLIMIT_RTPRIO at least that high, and a real-time budget in its cgroup",
        remediation: "Grant CAP_SYS_NICE (pod securityContext.capabilities.add [SYS_NICE], docker --cap-add=SYS_NICE) or raise RLIMIT_RTPRIO; give the cgroup an RT budget (docker --cpu-rt-runtime, cpu.rt_runtime_us); or run on the host.",
        source: "[R4][T1]",
        sampled: false,
        check: priority,
    },
    Rule {
        id: "mlockall-allowed",
        section: 4,
        severity: Severity::High,
        expected: "this process may lock its memory: CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK (a finite limit above what it maps now warns: a measuring process maps more)",
        remediation: "Grant CAP_IPC_LOCK (pod securityContext.capabilities.add [IPC_LOCK], docker --cap-add=IPC_LOCK) or raise RLIMIT_MEMLOCK (ulimit -l unlimited, LimitMEMLOCK=infinity).",
        source: "[R4][T1]",
        sampled: false,
        check: mlockall,
    },
    Rule {
        id: "measured-cpus-allowed",
        section: 4,
        severity: Severity::High,
        expected: "every measured CPU (run's, or the RT CPU set I) is in this process's cpuset, where its threads may pin themselves (its current mask, which isolcpus or taskset narrow, does not bound them)",
        remediation: "Guaranteed QoS with whole CPUs (static CPU manager policy), docker --cpuset-cpus, or measure only the allowed CPUs (--cpus).",
        source: "[K1][R4]",
        sampled: false,
        check: cpus,
    },
];

fn limit(l: Option<Limit>) -> String {
    let one = |v: Option<u64>| v.map_or("unlimited".to_string(), |n| n.to_string());
    l.map_or("unreadable".into(), |l| {
        format!("soft {}, hard {}", one(l.soft), one(l.hard))
    })
}

fn group_ev(what: &str, g: &Option<Group>) -> Option<Evidence> {
    let g = g.as_ref()?;
    Some(Evidence::new(
        format!("{what} (cgroup {})", g.path),
        &g.file,
        g.value.clone().unwrap_or_else(|| "unreadable".into()),
    ))
}

fn cap_ev(p: &Privilege) -> Evidence {
    Evidence::new(
        "CapEff",
        "/proc/self/status",
        p.cap_eff.clone().unwrap_or_else(|| "unreadable".into()),
    )
}

/// A refusal as a finding: fail when what was read shows it, warn when it is the likely cause.
fn refused(what: &str, r: &Refusal) -> RuleOutcome {
    let line = format!("{what} will be refused: {} — {}", r.cause, r.fix);
    if r.certain {
        RuleOutcome::fail(line)
    } else {
        RuleOutcome::warn(line.replace(" will be refused: ", " may be refused: "))
    }
}

fn priority(c: &Ctx) -> RuleOutcome {
    let p = c.privilege();
    let mut ev = vec![
        cap_ev(p),
        Evidence::new("RLIMIT_RTPRIO", "/proc/self/limits", limit(p.rtprio)),
    ];
    ev.extend(group_ev("cpu.rt_runtime_us", &p.cpu_v1));
    ev.extend(group_ev("parent's cgroup.subtree_control", &p.cpu_v2));
    if let Some(v) = p.rt_group_sched {
        ev.push(Evidence::new(
            "CONFIG_RT_GROUP_SCHED",
            "kernel configuration",
            if v { "y" } else { "not set" },
        ));
    }
    let prio = c.rt_priority;
    if prio <= 0 {
        return RuleOutcome::na("the measurement asks for no real-time priority").evs(ev);
    }
    if p.cap_eff.is_none() {
        return RuleOutcome::unavailable("/proc/self/status unreadable").evs(ev);
    }
    match p.fifo_refusal(prio) {
        Some(r) => refused(&format!("SCHED_FIFO {prio}"), &r).evs(ev),
        None => RuleOutcome::pass(format!("this process may use SCHED_FIFO {prio}")).evs(ev),
    }
}

fn mlockall(c: &Ctx) -> RuleOutcome {
    let p = c.privilege();
    let ev = vec![
        cap_ev(p),
        Evidence::new(
            "RLIMIT_MEMLOCK (bytes)",
            "/proc/self/limits",
            limit(p.memlock),
        ),
        Evidence::new(
            "VmSize",
            "/proc/self/status",
            p.vm_size_kib
                .map_or("unreadable".into(), |k| format!("{k} kB")),
        ),
    ];
    if p.cap_eff.is_none() {
        return RuleOutcome::unavailable("/proc/self/status unreadable").evs(ev);
    }
    match p.mlockall_refusal() {
        Some(r) => refused("mlockall", &r).evs(ev),
        None => RuleOutcome::pass("this process may lock its memory").evs(ev),
    }
}

fn cpus(c: &Ctx) -> RuleOutcome {
    let p = c.privilege();
    let Some(measured) = &c.measured else {
        return RuleOutcome::na("no measured CPUs given and no RT CPU set declared");
    };
    let mut ev = vec![
        Evidence::new("measured CPUs", "the measurement", measured.to_string()),
        Evidence::new(
            "Cpus_allowed_list",
            "/proc/self/status",
            p.allowed
                .as_ref()
                .map_or("unreadable".into(), |a| a.to_string()),
        ),
    ];
    ev.extend(group_ev("cpuset", &p.cpuset));
    if p.allowed.is_none() && p.cpuset_cpus().is_none() {
        return RuleOutcome::unavailable("/proc/self/status and the cpuset unreadable").evs(ev);
    }
    match p.cpus_refusal(measured) {
        Some(r) if r.certain => RuleOutcome::fail(format!("{} — {}", r.cause, r.fix)).evs(ev),
        Some(r) => RuleOutcome::warn(format!("{} — {}", r.cause, r.fix)).evs(ev),
        None => match p.cpuset_cpus() {
            Some((_, set)) => {
                RuleOutcome::pass(format!("CPUs {measured} are all in this process's cpuset, {set}"))
            }
            None => RuleOutcome::pass(format!(
                "CPUs {measured} are all in this process's current CPUs (its cpuset was not readable)"
            )),
        }
        .evs(ev),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const H: Target = Target::BareMetalRtHost;

    fn status(cap: &str, cpus: &str) -> String {
        format!(
            "Name:\trtgauge\nVmSize:\t  204800 kB\nCapEff:\t{cap}\nCpus_allowed_list:\t{cpus}\n"
        )
    }

    const LIMITS: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max locked memory         65536                65536                bytes     \n\
        Max realtime priority     0                    0                              \n";

    #[test]
    fn a_container_without_an_rt_budget_fails_with_its_cgroup_named() {
        let fx = Fx::new()
            .file("/proc/self/status", &status("000001ffffffffff", "0-3"))
            .file("/proc/self/limits", LIMITS)
            .file("/proc/self/cgroup", "3:cpu,cpuacct:/docker/ab\n0::/\n")
            .file(
                "/proc/self/mountinfo",
                "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
            )
            .file(
                "/sys/fs/cgroup/cpu,cpuacct/docker/ab/cpu.rt_runtime_us",
                "0\n",
            );
        let f = fx.finding("rt-priority-allowed", H);
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary.starts_with(
                "SCHED_FIFO 99 will be refused: this cgroup (/docker/ab) has cpu.rt_runtime_us = 0 — run the container with --cpu-rt-runtime=950000"
            ),
            "{}",
            f.summary
        );
        assert!(f.evidence.iter().any(|e| e.value == "0"
            && e.source == "/sys/fs/cgroup/cpu,cpuacct/docker/ab/cpu.rt_runtime_us"));
        // Root with CAP_IPC_LOCK: mlockall ignores the limit; every CPU allowed.
        assert_eq!(fx.finding("mlockall-allowed", H).status, Status::Pass);
        // The measured CPUs are the RT CPU set when no run gives its own; without either the rule is n/a.
        assert_eq!(
            fx.finding_with("measured-cpus-allowed", H, Some("0-3"))
                .status,
            Status::Pass
        );
        assert_eq!(
            fx.finding("measured-cpus-allowed", H).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn a_process_without_capabilities_fails_on_its_limits_and_cpuset() {
        let fx = Fx::new()
            .file("/proc/self/status", &status("0000000000000000", "0-1"))
            .file("/proc/self/limits", LIMITS);
        let f = fx.finding("rt-priority-allowed", H);
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary.contains(
                "lacks CAP_SYS_NICE and its RLIMIT_RTPRIO (hard) is 0, below priority 99"
            ),
            "{}",
            f.summary
        );
        let m = fx.finding("mlockall-allowed", H);
        assert_eq!(m.status, Status::Fail);
        assert!(
            m.summary.contains("RLIMIT_MEMLOCK is 64 KiB"),
            "{}",
            m.summary
        );
        // No cpuset read: the current mask only hints (a thread may widen it), so it warns.
        let c = fx.finding_with("measured-cpus-allowed", H, Some("0-3"));
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.summary
                .starts_with("CPUs 2-3 are outside this process's current CPUs, 0-1, and its cpuset was not readable"),
            "{}",
            c.summary
        );
    }

    /// isolcpus=2-7 narrows every process's mask to 0-1 while its cpuset holds 0-7: the measuring threads
    /// may pin themselves to 2-7 (a lab guest's closed loop once read the mask as a refusal).
    #[test]
    fn the_cpuset_decides_not_the_mask_isolcpus_or_taskset_narrowed() {
        let v1 = |cpus: &str| {
            Fx::new()
                .file("/proc/self/status", &status("000001ffffffffff", "0-1"))
                .file("/proc/self/limits", LIMITS)
                .file("/proc/self/cgroup", "4:cpuset:/\n0::/\n")
                .file(
                    "/proc/self/mountinfo",
                    "34 31 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n",
                )
                .file("/sys/fs/cgroup/cpuset/cpuset.cpus", &format!("{cpus}\n"))
        };
        let f = v1("0-7").finding_with("measured-cpus-allowed", H, Some("2-7"));
        assert_eq!(f.status, Status::Pass, "{}", f.summary);
        assert_eq!(f.summary, "CPUs 2-7 are all in this process's cpuset, 0-7");
        let f = v1("0-3").finding_with("measured-cpus-allowed", H, Some("2-7"));
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary.starts_with(
                "CPUs 4-7 are outside this process's cpuset, 0-3 (cpuset /: cpuset.cpus) — "
            ),
            "{}",
            f.summary
        );
        // cgroup v2: a pod's container group without the cpuset controller is bound by its nearest
        // ancestor's effective set.
        let v2 = Fx::new()
            .file("/proc/self/status", &status("000001ffffffffff", "2-3"))
            .file("/proc/self/limits", LIMITS)
            .file("/proc/self/cgroup", "0::/kubepods/pod1/c1\n")
            .file(
                "/proc/self/mountinfo",
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            )
            .file("/sys/fs/cgroup/kubepods/cpuset.cpus.effective", "2-5\n")
            .file("/sys/fs/cgroup/cpuset.cpus.effective", "0-7\n");
        let f = v2.finding_with("measured-cpus-allowed", H, Some("2-7"));
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary
                .starts_with("CPUs 6-7 are outside this process's cpuset, 2-5 (cpuset /kubepods: cpuset.cpus.effective)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_tree_without_the_process_is_unavailable() {
        let fx = Fx::new();
        for id in [
            "rt-priority-allowed",
            "mlockall-allowed",
            "measured-cpus-allowed",
        ] {
            assert_eq!(
                fx.finding_with(id, H, Some("1")).status,
                Status::Unavailable,
                "{id}"
            );
        }
    }
}

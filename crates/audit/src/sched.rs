//! Catalogue §4: scheduler, memory and sysctl knobs.

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_host::parse::{parse_bracketed_choice, parse_swaps};
use rtgauge_model::audit::{Evidence, Severity, Target};

pub static RULES: [Rule; 11] = [
    Rule {
        id: "lockup-detectors",
        section: 4,
        severity: Severity::Medium,
        expected: "kernel.nmi_watchdog = 0 and the soft-lockup detector off (nosoftlockup, nowatchdog)",
        remediation: "Add nosoftlockup nmi_watchdog=0 (or nowatchdog) to the kernel command line; sysctl kernel.nmi_watchdog=0.",
        source: "[T6][T4][O1][T1][K1][K3]",
        sampled: false,
        check: lockup,
    },
    Rule {
        id: "sysctl-hung-task-and-vmstat",
        section: 4,
        severity: Severity::Low,
        expected: "kernel.hung_task_timeout_secs = 600 (or 0) and vm.stat_interval >= 10",
        remediation: "sysctl kernel.hung_task_timeout_secs=600 vm.stat_interval=10 (drop-in in /etc/sysctl.d or tuned).",
        source: "[T6][T4][O1][K6]",
        sampled: false,
        check: hung_vmstat,
    },
    Rule {
        id: "sched-rt-runtime",
        section: 4,
        severity: Severity::Medium,
        expected: "kernel.sched_rt_runtime_us = -1 together with stalld",
        remediation: "sysctl kernel.sched_rt_runtime_us=-1 and enable stalld, or design RT threads to block.",
        source: "[T1][O1][K4][R2]",
        sampled: false,
        check: rt_runtime,
    },
    Rule {
        id: "fair-server",
        section: 4,
        severity: Severity::Info,
        expected: "evidence: the per-CPU deadline fair server (6.12+) gives CFS tasks runtime/period even under RT load",
        remediation: "Keep CFS tasks off I; only if required lower /sys/kernel/debug/sched/fair_server/cpuN/runtime on I.",
        source: "[K9e][ISS3]",
        sampled: false,
        check: fair_server,
    },
    Rule {
        id: "stalld",
        section: 4,
        severity: Severity::Medium,
        expected: "stalld running whenever sched_rt_runtime_us = -1",
        remediation: "Install and enable stalld (systemctl enable --now stalld).",
        source: "[O1][R2]",
        sampled: false,
        check: stalld,
    },
    Rule {
        id: "timer-migration",
        section: 4,
        severity: Severity::Low,
        expected: "kernel.timer_migration = 0 on static partitions; 1 accepted on k8s-rt-node",
        remediation: "sysctl kernel.timer_migration=0",
        source: "[T6][T4][O1]",
        sampled: false,
        check: timer_migration,
    },
    Rule {
        id: "numa-balancing",
        section: 4,
        severity: Severity::Medium,
        expected: "kernel.numa_balancing = 0",
        remediation: "sysctl kernel.numa_balancing=0 or numa_balancing=disable on the command line.",
        source: "[T6][K3][O1]",
        sampled: false,
        check: numa_balancing,
    },
    Rule {
        id: "thp",
        section: 4,
        severity: Severity::Medium,
        expected: "transparent huge pages: [never]",
        remediation: "transparent_hugepage=never on the kernel command line (or tuned [vm] transparent_hugepages=never).",
        source: "[T6][O1][K8]",
        sampled: false,
        check: thp,
    },
    Rule {
        id: "ksm",
        section: 4,
        severity: Severity::Medium,
        expected: "/sys/kernel/mm/ksm/run = 0 or 2",
        remediation: "echo 2 > /sys/kernel/mm/ksm/run via tuned; systemctl mask ksm ksmtuned.",
        source: "[T2][T4][L2]",
        sampled: false,
        check: ksm,
    },
    Rule {
        id: "swap",
        section: 4,
        severity: Severity::Low,
        expected: "no active swap, or vm.swappiness <= 10",
        remediation: "swapoff -a (and remove swap from /etc/fstab) or sysctl vm.swappiness=10; mlockall in RT apps.",
        source: "[T5][L2]",
        sampled: false,
        check: swap,
    },
    Rule {
        id: "hugepages-pool",
        section: 4,
        severity: Severity::Info,
        expected: "evidence: huge page pools sized for the workload on the right NUMA node",
        remediation: "Reserve on the command line: default_hugepagesz=1G hugepagesz=1G hugepages=N.",
        source: "[O1][L1]",
        sampled: false,
        check: hugepages,
    },
];

fn val(c: &Ctx, path: &str) -> String {
    c.read(path).unwrap_or_else(|| "absent".into())
}

fn lockup(c: &Ctx) -> RuleOutcome {
    let nmi = c.read_int("/proc/sys/kernel/nmi_watchdog");
    let soft = c.read_int("/proc/sys/kernel/soft_watchdog");
    let wd = c.read_int("/proc/sys/kernel/watchdog");
    let ev = vec![
        Evidence::new(
            "nmi_watchdog",
            "/proc/sys/kernel/nmi_watchdog",
            val(c, "/proc/sys/kernel/nmi_watchdog"),
        ),
        Evidence::new(
            "soft_watchdog",
            "/proc/sys/kernel/soft_watchdog",
            val(c, "/proc/sys/kernel/soft_watchdog"),
        ),
        Evidence::new(
            "watchdog",
            "/proc/sys/kernel/watchdog",
            val(c, "/proc/sys/kernel/watchdog"),
        ),
        Evidence::new(
            "watchdog_cpumask",
            "/proc/sys/kernel/watchdog_cpumask",
            val(c, "/proc/sys/kernel/watchdog_cpumask"),
        ),
        c.cmdline_ev("nosoftlockup"),
        c.cmdline_ev("nowatchdog"),
        c.cmdline_ev("nmi_watchdog"),
    ];
    if nmi.is_none() && soft.is_none() && wd.is_none() {
        return RuleOutcome::unavailable("no watchdog sysctl readable").evs(ev);
    }
    let all_off = wd == Some(0) || c.cmdline.has("nowatchdog");
    let nmi_on = !all_off && nmi.unwrap_or(0) != 0;
    let soft_on = !all_off && soft.unwrap_or(0) != 0 && !c.cmdline.has("nosoftlockup");
    match (nmi_on, soft_on) {
        (false, false) => RuleOutcome::pass("NMI and soft-lockup detectors off"),
        (true, _) => RuleOutcome::fail("NMI watchdog on: periodic NMIs on every CPU"),
        (false, true) => RuleOutcome::warn(
            "soft-lockup detector on (watchdog_cpumask excludes nohz_full CPUs by default)",
        ),
    }
    .evs(ev)
}

fn hung_vmstat(c: &Ctx) -> RuleOutcome {
    let hung = c.read_int("/proc/sys/kernel/hung_task_timeout_secs");
    let stat = c.read_int("/proc/sys/vm/stat_interval");
    let ev = vec![
        Evidence::new(
            "hung_task_timeout_secs",
            "/proc/sys/kernel/hung_task_timeout_secs",
            val(c, "/proc/sys/kernel/hung_task_timeout_secs"),
        ),
        Evidence::new(
            "stat_interval",
            "/proc/sys/vm/stat_interval",
            val(c, "/proc/sys/vm/stat_interval"),
        ),
    ];
    let mut problems = Vec::new();
    if let Some(h) = hung {
        if h != 0 && h < 600 {
            problems.push(format!("hung_task_timeout_secs = {h}"));
        }
    }
    match stat {
        Some(s) if s < 10 => problems.push(format!("stat_interval = {s}")),
        None => return RuleOutcome::unavailable("/proc/sys/vm/stat_interval unreadable").evs(ev),
        _ => {}
    }
    if problems.is_empty() {
        RuleOutcome::pass("hung-task and vmstat intervals are long").evs(ev)
    } else {
        RuleOutcome::warn(problems.join(", ")).evs(ev)
    }
}

fn rt_runtime(c: &Ctx) -> RuleOutcome {
    let rt = c.read_int("/proc/sys/kernel/sched_rt_runtime_us");
    let stalld = c.running("stalld");
    let ev = vec![
        Evidence::new(
            "sched_rt_runtime_us",
            "/proc/sys/kernel/sched_rt_runtime_us",
            val(c, "/proc/sys/kernel/sched_rt_runtime_us"),
        ),
        Evidence::new(
            "sched_rt_period_us",
            "/proc/sys/kernel/sched_rt_period_us",
            val(c, "/proc/sys/kernel/sched_rt_period_us"),
        ),
        Evidence::new(
            "stalld",
            "/proc/*/comm",
            if stalld { "running" } else { "not running" },
        ),
    ];
    match rt {
        None => RuleOutcome::unavailable("sched_rt_runtime_us unreadable"),
        Some(-1) if stalld => RuleOutcome::pass("RT throttling off, stalld as safety net"),
        Some(-1) => RuleOutcome::warn(
            "RT throttling off without stalld: a runaway RT task can starve the CPU",
        ),
        Some(v) => RuleOutcome::warn(format!(
            "RT throttling on ({v} µs per period): 100 %-busy RT pollers are stopped every period"
        )),
    }
    .evs(ev)
}

fn fair_server(c: &Ctx) -> RuleOutcome {
    let dir = "/sys/kernel/debug/sched/fair_server";
    let cpus = c.root.list_dir(dir);
    if cpus.is_empty() {
        let rel = &c.fp.kernel.release;
        let ge_612 = rel
            .split(['.', '-'])
            .take(2)
            .map(|x| x.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>();
        let newer = matches!(ge_612.as_slice(), [a, b] if *a > 6 || (*a == 6 && *b >= 12));
        return if newer {
            RuleOutcome::unavailable(
                "kernel >= 6.12 but debugfs fair_server not readable (root + debugfs needed)",
            )
        } else {
            RuleOutcome::na("kernel older than 6.12: no fair server")
        }
        .ev("kernel release", "/proc/sys/kernel/osrelease", rel.clone());
    }
    let targets: Vec<u32> = match &c.iso {
        Some(i) => i.iter().collect(),
        None => c.online.iter().take(1).collect(),
    };
    let mut vals = Vec::new();
    for cpu in targets {
        let r = c
            .read(&format!("{dir}/cpu{cpu}/runtime"))
            .unwrap_or_else(|| "?".into());
        let p = c
            .read(&format!("{dir}/cpu{cpu}/period"))
            .unwrap_or_else(|| "?".into());
        vals.push(format!("cpu{cpu} {r}/{p} ns"));
    }
    RuleOutcome::pass("fair server present: CFS tasks on I still get their share under RT load").ev(
        "runtime/period",
        dir,
        vals.join("; "),
    )
}

fn stalld(c: &Ctx) -> RuleOutcome {
    let running = c.running("stalld");
    let rt = c.read_int("/proc/sys/kernel/sched_rt_runtime_us");
    let ev = vec![
        Evidence::new(
            "stalld",
            "/proc/*/comm",
            if running { "running" } else { "not running" },
        ),
        Evidence::new(
            "sched_rt_runtime_us",
            "/proc/sys/kernel/sched_rt_runtime_us",
            val(c, "/proc/sys/kernel/sched_rt_runtime_us"),
        ),
    ];
    match (running, rt) {
        (true, _) => RuleOutcome::pass("stalld running"),
        (false, Some(-1)) => RuleOutcome::fail("sched_rt_runtime_us = -1 without stalld"),
        (false, _) => RuleOutcome::na("RT throttling in force; stalld optional"),
    }
    .evs(ev)
}

fn timer_migration(c: &Ctx) -> RuleOutcome {
    let v = c.read_int("/proc/sys/kernel/timer_migration");
    let ev = vec![Evidence::new(
        "timer_migration",
        "/proc/sys/kernel/timer_migration",
        val(c, "/proc/sys/kernel/timer_migration"),
    )];
    match v {
        None => RuleOutcome::unavailable("timer_migration unreadable"),
        Some(0) => RuleOutcome::pass("timers stay on the CPU that armed them"),
        Some(_) if c.target == Target::K8sRtNode => {
            RuleOutcome::pass("timer_migration = 1 (dynamic partitioning on Kubernetes needs it)")
        }
        Some(_) => RuleOutcome::warn("timer_migration = 1 on a static partition"),
    }
    .evs(ev)
}

fn numa_balancing(c: &Ctx) -> RuleOutcome {
    let v = c.read_int("/proc/sys/kernel/numa_balancing");
    let nodes = c.fp.numa.len();
    let ev = vec![
        Evidence::new(
            "numa_balancing",
            "/proc/sys/kernel/numa_balancing",
            val(c, "/proc/sys/kernel/numa_balancing"),
        ),
        Evidence::new("NUMA nodes", "/sys/devices/system/node", nodes.to_string()),
    ];
    match v {
        None => RuleOutcome::na("numa_balancing absent (kernel without NUMA balancing)"),
        Some(0) => RuleOutcome::pass("automatic NUMA balancing off"),
        Some(_) if nodes <= 1 => {
            RuleOutcome::warn("automatic NUMA balancing on (single node: little effect)")
        }
        Some(_) => {
            RuleOutcome::fail("automatic NUMA balancing on: periodic unmapping for hint faults")
        }
    }
    .evs(ev)
}

fn thp(c: &Ctx) -> RuleOutcome {
    let raw = c.read("/sys/kernel/mm/transparent_hugepage/enabled");
    let active = raw.as_deref().and_then(parse_bracketed_choice);
    let ev = vec![
        Evidence::new(
            "THP enabled",
            "/sys/kernel/mm/transparent_hugepage/enabled",
            raw.clone().unwrap_or_else(|| "absent".into()),
        ),
        c.cmdline_ev("transparent_hugepage"),
    ];
    match active.as_deref() {
        None => RuleOutcome::na("no transparent huge page support"),
        Some("never") => RuleOutcome::pass("THP never"),
        Some("madvise") => RuleOutcome::warn(
            "THP madvise: only applications that ask get huge pages (and khugepaged)",
        ),
        Some(a) => RuleOutcome::fail(format!(
            "THP {a}: khugepaged and compaction can stall RT tasks"
        )),
    }
    .evs(ev)
}

fn ksm(c: &Ctx) -> RuleOutcome {
    let run = c.read_int("/sys/kernel/mm/ksm/run");
    let ev = vec![
        Evidence::new(
            "ksm run",
            "/sys/kernel/mm/ksm/run",
            val(c, "/sys/kernel/mm/ksm/run"),
        ),
        Evidence::new(
            "pages_shared",
            "/sys/kernel/mm/ksm/pages_shared",
            val(c, "/sys/kernel/mm/ksm/pages_shared"),
        ),
    ];
    let sev = if c.target.is_guest() {
        Severity::Low
    } else {
        Severity::Medium
    };
    match run {
        None => RuleOutcome::na("kernel without KSM"),
        Some(0) | Some(2) => RuleOutcome::pass("KSM stopped"),
        Some(_) if c.target.is_guest() => RuleOutcome::warn("KSM merging pages in the guest"),
        Some(_) => RuleOutcome::fail("KSM merging pages: scanning and copy-on-write faults"),
    }
    .evs(ev)
    .sev(sev)
}

fn swap(c: &Ctx) -> RuleOutcome {
    let swaps = c
        .read("/proc/swaps")
        .map(|t| parse_swaps(&t))
        .unwrap_or_default();
    let sw = c.read_int("/proc/sys/vm/swappiness");
    let ev = vec![
        Evidence::new(
            "active swap areas",
            "/proc/swaps",
            if swaps.is_empty() {
                "none".into()
            } else {
                swaps.join(" ")
            },
        ),
        Evidence::new(
            "swappiness",
            "/proc/sys/vm/swappiness",
            val(c, "/proc/sys/vm/swappiness"),
        ),
    ];
    if swaps.is_empty() {
        RuleOutcome::pass("no active swap").evs(ev)
    } else if sw.is_some_and(|s| s <= 10) {
        RuleOutcome::pass("swap active, swappiness low").evs(ev)
    } else {
        RuleOutcome::warn("swap active with default swappiness: lock RT memory (mlockall)").evs(ev)
    }
}

fn hugepages(c: &Ctx) -> RuleOutcome {
    let pools: Vec<String> =
        c.fp.memory
            .hugepages
            .iter()
            .map(|h| format!("{} kB: {} total, {} free", h.size_kib, h.total, h.free))
            .collect();
    let mut per_node = Vec::new();
    for n in &c.fp.numa {
        for d in c
            .root
            .list_dir(&format!("/sys/devices/system/node/node{}/hugepages", n.id))
        {
            if let Some(nr) = c.read(&format!(
                "/sys/devices/system/node/node{}/hugepages/{d}/nr_hugepages",
                n.id
            )) {
                if nr != "0" {
                    per_node.push(format!("node{} {d}: {nr}", n.id));
                }
            }
        }
    }
    let reserved: u64 = c.fp.memory.hugepages.iter().map(|h| h.total).sum();
    let v = if reserved == 0 {
        RuleOutcome::pass("no huge pages reserved")
    } else {
        RuleOutcome::pass(format!("{reserved} huge page(s) reserved"))
    };
    v.ev(
        "pools",
        "/sys/kernel/mm/hugepages/*/nr_hugepages",
        if pools.is_empty() {
            "none".into()
        } else {
            pools.join("; ")
        },
    )
    .ev(
        "per NUMA node",
        "/sys/devices/system/node/node*/hugepages",
        if per_node.is_empty() {
            "none".into()
        } else {
            per_node.join("; ")
        },
    )
    .evs(vec![
        c.cmdline_ev("default_hugepagesz"),
        c.cmdline_ev("hugepages"),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const T: Target = Target::BareMetalRtHost;

    #[test]
    fn lockup_detectors() {
        let fx = Fx::new()
            .file("/proc/sys/kernel/nmi_watchdog", "0\n")
            .file("/proc/sys/kernel/soft_watchdog", "1\n")
            .file("/proc/sys/kernel/watchdog", "1\n");
        assert_eq!(fx.finding("lockup-detectors", T).status, Status::Warn);
        let fx = fx.file("/proc/cmdline", "nosoftlockup\n");
        assert_eq!(fx.finding("lockup-detectors", T).status, Status::Pass);
        let fx = fx.file("/proc/sys/kernel/nmi_watchdog", "1\n");
        assert_eq!(fx.finding("lockup-detectors", T).status, Status::Fail);
        let fx = fx.file("/proc/cmdline", "nowatchdog\n");
        assert_eq!(fx.finding("lockup-detectors", T).status, Status::Pass);
    }

    #[test]
    fn sysctls() {
        let fx = Fx::new()
            .file("/proc/sys/kernel/hung_task_timeout_secs", "120\n")
            .file("/proc/sys/vm/stat_interval", "1\n")
            .file("/proc/sys/kernel/sched_rt_runtime_us", "950000\n")
            .file("/proc/sys/kernel/timer_migration", "1\n")
            .file("/proc/sys/kernel/numa_balancing", "1\n")
            .file(
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "[always] madvise never\n",
            )
            .file("/sys/kernel/mm/ksm/run", "1\n")
            .file("/proc/swaps", "Filename\n/swap file 1 0 -2\n")
            .file("/proc/sys/vm/swappiness", "60\n");
        assert_eq!(
            fx.finding("sysctl-hung-task-and-vmstat", T).status,
            Status::Warn
        );
        assert_eq!(fx.finding("sched-rt-runtime", T).status, Status::Warn);
        assert_eq!(fx.finding("stalld", T).status, Status::NotApplicable);
        assert_eq!(fx.finding("timer-migration", T).status, Status::Warn);
        assert_eq!(
            fx.finding("timer-migration", Target::K8sRtNode).status,
            Status::Pass
        );
        assert_eq!(fx.finding("numa-balancing", T).status, Status::Warn);
        assert_eq!(fx.finding("thp", T).status, Status::Fail);
        assert_eq!(fx.finding("ksm", T).status, Status::Fail);
        assert_eq!(fx.finding("ksm", Target::RtGuest).status, Status::Warn);
        assert_eq!(fx.finding("swap", T).status, Status::Warn);
        let fx = Fx::new()
            .file("/proc/sys/kernel/hung_task_timeout_secs", "600\n")
            .file("/proc/sys/vm/stat_interval", "10\n")
            .file("/proc/sys/kernel/sched_rt_runtime_us", "-1\n")
            .file("/proc/sys/kernel/timer_migration", "0\n")
            .file("/proc/sys/kernel/numa_balancing", "0\n")
            .file(
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "always madvise [never]\n",
            )
            .file("/sys/kernel/mm/ksm/run", "2\n")
            .file("/proc/swaps", "Filename\n");
        assert_eq!(
            fx.finding("sysctl-hung-task-and-vmstat", T).status,
            Status::Pass
        );
        assert_eq!(fx.finding("sched-rt-runtime", T).status, Status::Warn);
        assert_eq!(fx.finding("stalld", T).status, Status::Fail);
        assert_eq!(fx.finding("timer-migration", T).status, Status::Pass);
        assert_eq!(fx.finding("numa-balancing", T).status, Status::Pass);
        assert_eq!(fx.finding("thp", T).status, Status::Pass);
        assert_eq!(fx.finding("ksm", T).status, Status::Pass);
        assert_eq!(fx.finding("swap", T).status, Status::Pass);
        let fx = fx.file("/proc/5/task/5/status", "Name:\tstalld\nPPid:\t1\n");
        assert_eq!(fx.finding("sched-rt-runtime", T).status, Status::Pass);
        assert_eq!(fx.finding("stalld", T).status, Status::Pass);
    }

    #[test]
    fn fair_server_and_hugepages_are_info() {
        let fx = Fx::new()
            .file(
                "/sys/kernel/debug/sched/fair_server/cpu0/runtime",
                "50000000\n",
            )
            .file(
                "/sys/kernel/debug/sched/fair_server/cpu0/period",
                "1000000000\n",
            )
            .file(
                "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
                "4\n",
            );
        let f = fx.finding("fair-server", T);
        assert_eq!(f.status, Status::Pass);
        assert!(f.evidence[0].value.contains("50000000/1000000000"));
        assert!(fx
            .finding("hugepages-pool", T)
            .summary
            .contains("4 huge page"));
        assert_eq!(
            Fx::new().finding("fair-server", T).status,
            Status::Unavailable
        );
        let old = Fx::new().file("/proc/sys/kernel/osrelease", "5.14.0-rt\n");
        assert_eq!(old.finding("fair-server", T).status, Status::NotApplicable);
    }
}

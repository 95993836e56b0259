//! Catalogue §3, housekeeping work: workqueue cpumasks, systemd's CPU affinity, tasks and kthreads allowed
//! on the RT CPUs, and the priorities of the PREEMPT_RT kthreads. The rules are listed in
//! [`super::isolation`]'s table (catalogue order); like every §3 rule they are `n/a` without an RT CPU set I.

use super::{Ctx, RuleOutcome};
use rtgauge_host::parse::{key_value, parse_hex_mask, parse_key_values};
use rtgauge_model::audit::Evidence;
use rtgauge_model::CpuSet;

pub(super) fn workqueue(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let mut files = vec![
        "/sys/devices/virtual/workqueue/cpumask".to_string(),
        "/sys/bus/workqueue/devices/writeback/cpumask".to_string(),
    ];
    for wq in c.root.list_dir("/sys/devices/virtual/workqueue") {
        if wq != "cpumask"
            && !wq.contains('.')
            && wq != "power"
            && wq != "uevent"
            && wq != "subsystem"
        {
            files.push(format!("/sys/devices/virtual/workqueue/{wq}/cpumask"));
        }
    }
    files.sort();
    files.dedup();
    let mut bad = Vec::new();
    let mut read = 0;
    for f in &files {
        if let Some(m) = c.read(f).and_then(|t| parse_hex_mask(&t).ok()) {
            read += 1;
            let on = m.intersection(iso);
            if !on.is_empty() {
                bad.push(format!("{f}: {}", m.hex_mask()));
            }
        }
    }
    let mut ev = vec![c.iso_evidence(), c.cmdline_ev("workqueue.unbound_cpus")];
    ev.push(Evidence::new(
        "expected mask(H)",
        "-",
        if c.hk.is_empty() {
            "-".into()
        } else {
            c.hk.hex_mask()
        },
    ));
    if read == 0 {
        return RuleOutcome::unavailable("no workqueue cpumask readable").evs(ev);
    }
    if bad.is_empty() {
        RuleOutcome::pass(format!("{read} workqueue cpumask(s) exclude I")).evs(ev)
    } else {
        ev.push(Evidence::new(
            "masks including I",
            "/sys/devices/virtual/workqueue",
            bad.join("; "),
        ));
        RuleOutcome::fail(format!(
            "{} of {read} workqueue cpumask(s) include isolated CPUs",
            bad.len()
        ))
        .evs(ev)
    }
}

pub(super) fn systemd_affinity(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let pid1 = c
        .root
        .read_optional("/proc/1/status")
        .map(|t| rtgauge_host::parse::parse_status(&t))
        .and_then(|m| m.get("Cpus_allowed_list").cloned());
    let mut configured = None;
    let mut conf_files = vec!["/etc/systemd/system.conf".to_string()];
    for f in c.root.list_dir("/etc/systemd/system.conf.d") {
        if f.ends_with(".conf") {
            conf_files.push(format!("/etc/systemd/system.conf.d/{f}"));
        }
    }
    for f in &conf_files {
        if let Some(t) = c.root.read_optional(f) {
            if let Some(v) = key_value(&parse_key_values(&t), "CPUAffinity") {
                configured = Some(format!("{f}: {v}"));
            }
        }
    }
    let ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "PID 1 allowed CPUs",
            "/proc/1/status Cpus_allowed_list",
            pid1.clone().unwrap_or_else(|| "unreadable".into()),
        ),
        Evidence::new(
            "CPUAffinity",
            "/etc/systemd/system.conf[.d]",
            configured.clone().unwrap_or_else(|| "unset".into()),
        ),
        c.cmdline_ev("systemd.cpu_affinity"),
    ];
    let Some(allowed) = pid1.and_then(|t| CpuSet::parse(&t).ok()) else {
        return RuleOutcome::unavailable("/proc/1/status unreadable").evs(ev);
    };
    let on = allowed.intersection(iso);
    if on.is_empty() {
        RuleOutcome::pass("PID 1 confined to housekeeping CPUs").evs(ev)
    } else if configured.is_some() || c.cmdline.has("systemd.cpu_affinity") {
        RuleOutcome::fail(format!(
            "CPU affinity configured but not effective: PID 1 allowed on {on}"
        ))
        .evs(ev)
    } else {
        RuleOutcome::fail(format!(
            "PID 1 (and every service) allowed on isolated CPUs {on}"
        ))
        .evs(ev)
    }
}

/// Kernel threads tuned leaves on isolated CPUs (tuned `ps_blacklist`) or that are per-CPU by nature.
const KTHREAD_ALLOWED_PREFIXES: [&str; 14] = [
    "ksoftirqd/",
    "ktimers/",
    "rcuc/",
    "rcub/",
    "ktimersoftd/",
    "migration/",
    "cpuhp/",
    "kworker/",
    "idle_inject/",
    "irq/",
    "watchdog/",
    "posixcputmr/",
    "rcuop/",
    "pmd",
];

pub(super) fn tasks_on_isolated(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let tasks = c.tasks();
    if tasks.is_empty() {
        return RuleOutcome::unavailable("no task readable under /proc");
    }
    let mut user = Vec::new();
    let mut kernel = Vec::new();
    let mut bound = Vec::new();
    for t in tasks {
        let Some(a) = &t.allowed else { continue };
        let on = a.intersection(iso);
        // Pinned inside I: a deliberately placed RT task or a per-CPU kthread.
        if on.is_empty() || a.difference(iso).is_empty() {
            continue;
        }
        if t.kthread
            && KTHREAD_ALLOWED_PREFIXES
                .iter()
                .any(|p| t.comm.starts_with(p))
            && a.len() == 1
        {
            continue;
        }
        let item = format!("{}[{}] {}", t.comm, t.tid, a);
        // PF_NO_SETAFFINITY marks every workqueue worker, but the unbound ones (kworker/u*) follow
        // /sys/devices/virtual/workqueue/cpumask; and io_uring's user workers (iou-wrk, kernels ≤ 6.2) move
        // with their process. Only kernel threads nothing can move are set apart.
        if t.kernel_bound && t.kthread && !t.comm.starts_with("kworker/u") {
            bound.push(item);
        } else if t.kthread {
            kernel.push(item);
        } else {
            user.push(item);
        }
    }
    let mut ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "threads inspected",
            "/proc/*/task/*/status",
            tasks.len().to_string(),
        ),
    ];
    let cap = |v: &Vec<String>| {
        let mut s = v.iter().take(12).cloned().collect::<Vec<_>>().join("; ");
        if v.len() > 12 {
            s.push_str(&format!("; … {} more", v.len() - 12));
        }
        s
    };
    if !user.is_empty() {
        ev.push(Evidence::new(
            "unbound user threads allowed on I",
            "/proc/*/task/*/status",
            cap(&user),
        ));
    }
    if !kernel.is_empty() {
        ev.push(Evidence::new(
            "unbound kthreads allowed on I",
            "/proc/*/task/*/status",
            cap(&kernel),
        ));
    }
    if !bound.is_empty() {
        ev.push(Evidence::new(
            "kernel-bound threads allowed on I (PF_NO_SETAFFINITY: no tuning can move them; workqueue rescuers run only when a worker cannot be created)",
            "/proc/*/task/*/stat",
            cap(&bound),
        ));
    }
    if user.is_empty() && kernel.is_empty() && bound.is_empty() {
        RuleOutcome::pass("no unbound thread may run on I").evs(ev)
    } else if user.is_empty() && kernel.is_empty() {
        RuleOutcome::pass(format!(
            "no movable thread may run on I; {} kernel-bound thread(s) may, which the kernel alone places",
            bound.len()
        ))
        .evs(ev)
    } else {
        RuleOutcome::fail(format!(
            "{} user and {} kernel thread(s) unbound across I and H",
            user.len(),
            kernel.len()
        ))
        .evs(ev)
    }
}

pub(super) fn kthread_prios(c: &Ctx) -> RuleOutcome {
    if !c.is_rt_kernel() {
        return RuleOutcome::na("not a PREEMPT_RT kernel");
    }
    let groups = ["ksoftirqd/", "ktimers/", "rcuc/", "rcub/", "ktimersoftd/"];
    let mut seen = Vec::new();
    let mut other = Vec::new();
    for t in c.tasks().iter().filter(|t| t.kthread) {
        let Some(g) = groups.iter().find(|g| t.comm.starts_with(**g)) else {
            continue;
        };
        let pol = t.policy.unwrap_or(0);
        let prio = t.rt_priority.unwrap_or(0);
        let label = match pol {
            1 => format!("FIFO:{prio}"),
            2 => format!("RR:{prio}"),
            _ => "OTHER".into(),
        };
        let entry = format!("{}{label}", g);
        if !seen.contains(&entry) {
            seen.push(entry);
        }
        if !matches!(pol, 1 | 2) && (*g == "ksoftirqd/" || *g == "ktimers/" || *g == "rcuc/") {
            other.push(t.comm.clone());
        }
    }
    let ev = vec![Evidence::new(
        "per-CPU kthread policies",
        "/proc/*/task/*/stat fields 40-41",
        if seen.is_empty() {
            "none found".into()
        } else {
            seen.join(" ")
        },
    )];
    if seen.is_empty() {
        return RuleOutcome::unavailable("no ksoftirqd/ktimers/rcuc threads found").evs(ev);
    }
    if other.is_empty() {
        RuleOutcome::pass("softirq, timer and RCU kthreads run SCHED_FIFO").evs(ev)
    } else {
        RuleOutcome::warn(format!(
            "{} softirq/timer/RCU kthread(s) are SCHED_OTHER",
            other.len()
        ))
        .evs(ev)
    }
}

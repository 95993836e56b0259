//! Catalogue §3, IRQs: device IRQ affinity, irqbalance's banned CPUs, IRQ and softirq activity on the RT
//! CPUs between two samples, and RPS receive steering. The rules are listed in [`super::isolation`]'s table
//! (catalogue order); like every §3 rule they are `n/a` without an RT CPU set I.

use super::{set_or, Ctx, RuleOutcome};
use rtgauge_host::parse::{
    key_value, parse_counter_table, parse_hex_mask, parse_isolcpus, parse_key_values,
};
use rtgauge_model::audit::{Evidence, Target};
use rtgauge_model::CpuSet;

pub(super) fn irq_affinity(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let names: std::collections::BTreeMap<String, String> = c
        .root
        .read_optional("/proc/interrupts")
        .map(|t| {
            parse_counter_table(&t)
                .into_iter()
                .map(|r| (r.name, r.desc))
                .collect()
        })
        .unwrap_or_default();
    let managed = c
        .cmdline
        .get("isolcpus")
        .and_then(|v| parse_isolcpus(v).ok())
        .is_some_and(|(f, _)| f.iter().any(|x| x == "managed_irq"));
    let mut bad = Vec::new();
    let mut managed_only = Vec::new();
    let mut seen = 0;
    for irq in c
        .root
        .list_dir("/proc/irq")
        .iter()
        .filter(|n| n.parse::<u32>().is_ok())
    {
        let eff = c
            .read(&format!("/proc/irq/{irq}/effective_affinity_list"))
            .or_else(|| c.read(&format!("/proc/irq/{irq}/smp_affinity_list")));
        let Some(eff) = eff.and_then(|t| CpuSet::parse(&t).ok()) else {
            continue;
        };
        seen += 1;
        let on_i = eff.intersection(iso);
        if on_i.is_empty() {
            continue;
        }
        let req = c
            .read(&format!("/proc/irq/{irq}/smp_affinity_list"))
            .and_then(|t| CpuSet::parse(&t).ok())
            .unwrap_or_default();
        let desc = names.get(irq.as_str()).cloned().unwrap_or_default();
        let item = format!("{irq}→{on_i} {desc}").trim().to_string();
        if managed && !req.is_empty() && req.difference(iso).is_empty() {
            managed_only.push(item);
        } else {
            bad.push(item);
        }
    }
    let default = c
        .read("/proc/irq/default_smp_affinity")
        .and_then(|t| parse_hex_mask(&t).ok());
    let mut ev = vec![
        c.iso_evidence(),
        c.cmdline_ev("irqaffinity"),
        Evidence::new(
            "default IRQ affinity",
            "/proc/irq/default_smp_affinity",
            set_or(&default),
        ),
        Evidence::new(
            "IRQs inspected",
            "/proc/irq/*/effective_affinity_list",
            seen.to_string(),
        ),
    ];
    if let Some(d) = &default {
        if !d.intersection(iso).is_empty() {
            bad.push(format!("default_smp_affinity→{}", d.intersection(iso)));
        }
    }
    if !bad.is_empty() {
        ev.push(Evidence::new(
            "IRQs targeting I",
            "/proc/irq/*",
            bad.join("; "),
        ));
        return RuleOutcome::fail(format!("{} IRQ(s) target isolated CPUs", bad.len())).evs(ev);
    }
    if !managed_only.is_empty() {
        ev.push(Evidence::new(
            "managed IRQs confined to I",
            "/proc/irq/*",
            managed_only.join("; "),
        ));
        return RuleOutcome::warn(format!(
            "{} managed IRQ queue(s) confined to I (fire only when tasks there submit I/O)",
            managed_only.len()
        ))
        .evs(ev);
    }
    if seen == 0 && default.is_none() {
        return RuleOutcome::unavailable("/proc/irq not readable").evs(ev);
    }
    RuleOutcome::pass("no IRQ targets I").evs(ev)
}

pub(super) fn irqbalance(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    if !c.running("irqbalance") {
        return RuleOutcome::pass("irqbalance is not running").ev(
            "irqbalance daemon",
            "/proc/*/comm",
            "not running",
        );
    }
    let (path, text) = ["/etc/sysconfig/irqbalance", "/etc/default/irqbalance"]
        .iter()
        .find_map(|p| c.root.read_optional(p).map(|t| (p.to_string(), t)))
        .unwrap_or_else(|| ("/etc/sysconfig/irqbalance".into(), String::new()));
    let kv = parse_key_values(&text);
    let mut list = key_value(&kv, "IRQBALANCE_BANNED_CPULIST").map(str::to_string);
    let mut hex = key_value(&kv, "IRQBALANCE_BANNED_CPUS").map(str::to_string);
    let mut path = path;
    // Runtime truth: the daemon's own environment, when readable, is what it was started with.
    let pid = c
        .tasks()
        .iter()
        .find(|t| t.pid == t.tid && t.comm == "irqbalance")
        .map(|t| t.pid);
    if let Some(pid) = pid {
        let env_path = format!("/proc/{pid}/environ");
        if let Ok(env) = c.root.read_bytes(&env_path) {
            let (elist, ehex, kept) = parse_irqbalance_environ(&env);
            // A capture keeps only the irqbalance variables of that environment.
            c.root.record(&env_path, &kept);
            if elist != list || ehex != hex {
                path = format!(
                    "{env_path} (differs from the config file: configured but not effective)"
                );
            } else {
                path = env_path;
            }
            list = elist;
            hex = ehex;
        }
    }
    let ev = vec![
        c.iso_evidence(),
        Evidence::new("irqbalance daemon", "/proc/*/comm", "running"),
        Evidence::new(
            "IRQBALANCE_BANNED_CPULIST",
            path.clone(),
            list.clone().unwrap_or_else(|| "unset".into()),
        ),
        Evidence::new(
            "IRQBALANCE_BANNED_CPUS",
            path,
            hex.clone().unwrap_or_else(|| "unset".into()),
        ),
    ];
    match (list, hex) {
        (Some(l), _) => match CpuSet::parse(&l) {
            Ok(s) if iso.difference(&s).is_empty() => {
                RuleOutcome::pass("irqbalance bans every CPU of I")
            }
            Ok(s) => RuleOutcome::fail(format!(
                "irqbalance may move IRQs onto {}",
                iso.difference(&s)
            )),
            Err(e) => RuleOutcome::fail(format!("IRQBALANCE_BANNED_CPULIST unparsable: {e}")),
        },
        (None, Some(h)) => match parse_hex_mask(&h) {
            Ok(s) if s.is_empty() && c.target == Target::K8sRtNode => RuleOutcome::warn(
                "IRQBALANCE_BANNED_CPUS=0 (OpenShift style): relies on CRI-O per-pod banning",
            ),
            Ok(s) if iso.difference(&s).is_empty() => {
                RuleOutcome::warn("IRQBALANCE_BANNED_CPUS (deprecated hex form) covers I")
            }
            Ok(s) => RuleOutcome::fail(format!(
                "irqbalance may move IRQs onto {} (a set value disables auto-banning)",
                iso.difference(&s)
            )),
            Err(e) => RuleOutcome::fail(format!("IRQBALANCE_BANNED_CPUS unparsable: {e}")),
        },
        (None, None) => {
            // irqbalance then bans isolated ∪ nohz_full by itself (cputree.c setup_banned_cpus).
            let mut auto = Vec::new();
            for p in [
                "/sys/devices/system/cpu/isolated",
                "/sys/devices/system/cpu/nohz_full",
            ] {
                if let Some(s) = c
                    .read(p)
                    .and_then(|t| rtgauge_host::cpu::parse_cpu_mask(&t).ok())
                {
                    auto.extend(s.iter());
                }
            }
            let auto = CpuSet::new(auto);
            if iso.difference(&auto).is_empty() {
                RuleOutcome::pass(format!(
                    "irqbalance auto-bans isolated ∪ nohz_full = {auto}"
                ))
            } else {
                RuleOutcome::fail(format!(
                    "irqbalance runs without a banned list and may move IRQs onto {}",
                    iso.difference(&auto)
                ))
            }
        }
    }
    .evs(ev)
}

/// The irqbalance variables of a NUL-separated environment (`/proc/<pid>/environ`): the CPU list, the hex
/// mask, and the environment reduced to those two variables (nothing else is ever kept).
pub fn parse_irqbalance_environ(env: &[u8]) -> (Option<String>, Option<String>, Vec<u8>) {
    let mut list = None;
    let mut hex = None;
    let mut kept = Vec::new();
    for var in env.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(var);
        if let Some(v) = text.strip_prefix("IRQBALANCE_BANNED_CPULIST=") {
            list = Some(v.to_string());
        } else if let Some(v) = text.strip_prefix("IRQBALANCE_BANNED_CPUS=") {
            hex = Some(v.to_string());
        } else {
            continue;
        }
        kept.extend_from_slice(var);
        kept.push(0);
    }
    (list, hex, kept)
}

/// Per-CPU deltas of one counter table between the two samples, restricted to `cpus`.
fn table_deltas(c: &Ctx, path: &str, cpus: &CpuSet) -> Vec<(String, u32, u64, String)> {
    let Some(s) = c.samples.as_ref() else {
        return Vec::new();
    };
    let (Some(a), Some(b)) = (s.first.get(path), s.second.get(path)) else {
        return Vec::new();
    };
    let a = parse_counter_table(a);
    let b = parse_counter_table(b);
    let mut out = Vec::new();
    for row in &b {
        let Some(prev) = a.iter().find(|r| r.name == row.name) else {
            continue;
        };
        for (cpu, v) in &row.counts {
            if !cpus.contains(*cpu) {
                continue;
            }
            let d = v.saturating_sub(prev.counts.get(cpu).copied().unwrap_or(*v));
            if d > 0 {
                out.push((row.name.clone(), *cpu, d, row.desc.clone()));
            }
        }
    }
    out
}

pub(super) fn irq_activity(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let Some(s) = c.samples.as_ref() else {
        return RuleOutcome::na(super::NOT_SAMPLED);
    };
    if !s.first.contains_key("/proc/interrupts") {
        return RuleOutcome::unavailable("/proc/interrupts not readable");
    }
    let secs = (s.interval.as_secs_f64()).max(0.001);
    let irqs = table_deltas(c, "/proc/interrupts", iso);
    let soft = table_deltas(c, "/proc/softirqs", iso);
    let device: Vec<String> = irqs
        .iter()
        .filter(|(n, ..)| n.parse::<u32>().is_ok())
        .map(|(n, cpu, d, desc)| format!("IRQ {n} ({desc}) +{d} on CPU {cpu}"))
        .collect();
    // Rates above this (per second per CPU) are more than a residual tick or an occasional IPI.
    const NOISY_PER_S: f64 = 10.0;
    let noisy: Vec<String> = irqs
        .iter()
        .filter(|(n, ..)| n.parse::<u32>().is_err())
        .chain(
            soft.iter()
                .filter(|(n, ..)| matches!(n.as_str(), "TIMER" | "RCU" | "HRTIMER" | "SCHED")),
        )
        .filter(|(_, _, d, _)| *d as f64 / secs > NOISY_PER_S)
        .map(|(n, cpu, d, _)| format!("{n} +{d} on CPU {cpu}"))
        .collect();
    let mut ev = vec![c.iso_evidence(), s.interval_evidence()];
    if !device.is_empty() {
        ev.push(Evidence::new(
            "device IRQs on I",
            "/proc/interrupts",
            device.join("; "),
        ));
    }
    if !noisy.is_empty() {
        ev.push(Evidence::new(
            "timer/IPI/softirq activity on I",
            "/proc/interrupts, /proc/softirqs",
            noisy.join("; "),
        ));
    }
    if !device.is_empty() {
        RuleOutcome::fail(format!("{} device IRQ source(s) fired on I", device.len())).evs(ev)
    } else if !noisy.is_empty() {
        RuleOutcome::warn(format!(
            "{} housekeeping interrupt source(s) above {NOISY_PER_S}/s on I",
            noisy.len()
        ))
        .evs(ev)
    } else {
        RuleOutcome::pass("no device IRQs and little timer/IPI activity on I").evs(ev)
    }
}

pub(super) fn rps(c: &Ctx) -> RuleOutcome {
    let iso = match c.iso_or_na() {
        Ok(i) => i,
        Err(v) => return v,
    };
    let mut bad = Vec::new();
    let mut n = 0;
    for dev in c.root.list_dir("/sys/class/net") {
        if dev == "lo" {
            continue;
        }
        for q in c.root.list_dir(&format!("/sys/class/net/{dev}/queues")) {
            if !q.starts_with("rx-") {
                continue;
            }
            let p = format!("/sys/class/net/{dev}/queues/{q}/rps_cpus");
            if let Some(m) = c.read(&p).and_then(|t| parse_hex_mask(&t).ok()) {
                n += 1;
                if !m.intersection(iso).is_empty() {
                    bad.push(format!("{dev}/{q}: {m}"));
                }
            }
        }
    }
    let default = c.read("/proc/sys/net/core/rps_default_mask");
    if let Some(m) = default.as_deref().and_then(|t| parse_hex_mask(t).ok()) {
        if !m.intersection(iso).is_empty() {
            bad.push(format!("rps_default_mask: {m}"));
        }
    }
    let mut ev = vec![
        c.iso_evidence(),
        Evidence::new(
            "rx queues inspected",
            "/sys/class/net/*/queues/rx-*/rps_cpus",
            n.to_string(),
        ),
        Evidence::new(
            "rps_default_mask",
            "/proc/sys/net/core/rps_default_mask",
            default.unwrap_or_else(|| "absent".into()),
        ),
    ];
    if bad.is_empty() {
        RuleOutcome::pass("no RPS mask steers packets to I").evs(ev)
    } else {
        ev.push(Evidence::new(
            "RPS masks including I",
            "/sys/class/net",
            bad.join("; "),
        ));
        RuleOutcome::warn(format!("{} RPS mask(s) include isolated CPUs", bad.len())).evs(ev)
    }
}

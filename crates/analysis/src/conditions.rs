//! A run's unmet conditions from its results alone: every measuring thread's and every probe's requested
//! versus achieved settings, gathered into one [`Unmet`] per cause (sixteen threads refused SCHED_FIFO for
//! one reason: one line, not sixteen). The causes are the host's to name (`rtgauge_host::privilege`); here
//! are what fell short and the kernel's error.

use crate::kind::{KindData, ProbeData};
use rtgauge_model::conditions::{Condition, Unmet};
use rtgauge_model::rt::SchedPolicy;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use std::collections::BTreeMap;

/// `SCHED_FIFO 95`, `SCHED_OTHER`.
fn sched(policy: SchedPolicy, priority: i32) -> String {
    let p = policy.to_string().to_uppercase();
    if policy.is_realtime() {
        format!("SCHED_{p} {priority}")
    } else {
        format!("SCHED_{p}")
    }
}

/// "N of M threads", "the one thread".
fn of(n: usize, total: usize) -> String {
    if total == 1 {
        "the one thread".into()
    } else {
        format!("{n} of {total} threads")
    }
}

/// The conditions `probes` asked for and did not get, one per cause, in the order: priority, affinity,
/// memory locking, cpu_dma_latency, trace.
pub fn unmet(probes: &[ProbeResult]) -> Vec<Unmet> {
    of_results(probes.iter().map(|p| p.data()))
}

/// [`unmet`] of results as their kinds' data (a monitor's segment, before it is a `ProbeResult`).
pub fn of_results<'a>(results: impl IntoIterator<Item = &'a dyn KindData>) -> Vec<Unmet> {
    // Threads by what they asked: (policy, priority) → (asked, refused, what the first refused got, error).
    type Asked = (usize, usize, Option<(SchedPolicy, i32)>, Option<String>);
    let mut by_request: BTreeMap<(String, i32), (SchedPolicy, Asked)> = BTreeMap::new();
    let (mut pin_total, mut pin_failed, mut pin_cpus, mut pin_error) = (0, 0, Vec::new(), None);
    let mut out = Vec::new();
    let mut mlock = None;
    let mut dma: Option<Unmet> = None;
    let mut trace = None;
    for d in results {
        for c in d.thread_conditions() {
            let key = (c.policy.requested.to_string(), c.priority.requested);
            let (_, e) = by_request
                .entry(key)
                .or_insert((c.policy.requested, (0, 0, None, None)));
            e.0 += 1;
            if !c.policy.ok() || !c.priority.ok() {
                e.1 += 1;
                e.2.get_or_insert((c.policy.achieved, c.priority.achieved));
                if e.3.is_none() {
                    e.3 = c.policy.error.clone();
                }
            }
            if c.cpu.requested.is_some() {
                pin_total += 1;
                if !c.cpu.ok() {
                    pin_failed += 1;
                    pin_cpus.extend(c.cpu.requested);
                    pin_error = pin_error.or(c.cpu.error.clone());
                }
            }
        }
        if let Some(pc) = d.process_conditions() {
            if !pc.mlockall.ok() && mlock.is_none() {
                let mut u = Unmet::new(
                    Condition::Mlockall,
                    "memory not locked (mlockall refused; a page fault can land in a measurement)",
                );
                u.error = pc.mlockall.error.clone();
                mlock = Some(u);
            }
            // Another holder's lower (stricter) value satisfies the request.
            let dma_held = match (
                pc.cpu_dma_latency_us.requested,
                pc.cpu_dma_latency_us.achieved,
            ) {
                (Some(r), Some(a)) => a <= r,
                (r, a) => r == a,
            };
            if !dma_held && dma.is_none() {
                let asked = pc
                    .cpu_dma_latency_us
                    .requested
                    .map_or(String::new(), |us| format!(" {us} µs"));
                let mut u = Unmet::new(
                    Condition::CpuDmaLatency,
                    format!("/dev/cpu_dma_latency{asked} not held (the CPUs may enter deeper idle states)"),
                );
                u.error = pc.cpu_dma_latency_us.error.clone();
                dma = Some(u);
            }
        }
        if let Some(m) = d.why().and_then(|w| w.missing.as_ref()) {
            if trace.is_none() && m.starts_with("--trace") {
                let mut u = Unmet::new(
                    Condition::Trace,
                    "--trace asked, no kernel trace taken (spikes are explained from counters only)",
                );
                // The tracer's own error is the cause (tracefs not mountable, not root, …).
                let e = m.trim_start_matches("--trace: ");
                u.cause = Some(e.trim_end_matches("; counters only").to_string());
                trace = Some(u);
            }
        }
    }
    for ((_, priority), (policy, (total, refused, got, error))) in by_request {
        if refused == 0 {
            continue;
        }
        let (gp, gprio) = got.unwrap_or((SchedPolicy::Other, 0));
        let mut u = Unmet::new(
            Condition::Priority,
            format!(
                "{} refused on {} ({} ran at {})",
                sched(policy, priority),
                of(refused, total),
                if refused == 1 { "it" } else { "they" },
                sched(gp, gprio)
            ),
        );
        u.priority = Some(priority);
        u.error = error;
        out.push(u);
    }
    if pin_failed > 0 {
        let cpus = CpuSet::new(pin_cpus);
        let mut u = Unmet::new(
            Condition::Affinity,
            format!("not pinned to CPUs {cpus} on {}", of(pin_failed, pin_total)),
        );
        u.cpus = Some(cpus);
        u.error = pin_error;
        out.push(u);
    }
    out.extend(mlock);
    out.extend(dma);
    out.extend(trace);
    out
}

//! The platform fingerprint as text, one fact per line (`rtgauge fingerprint`).

use rtgauge_model::fingerprint::Fingerprint;
use rtgauge_model::CpuSet;

fn or_dash(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".into())
}

fn cpu_set(v: &Option<CpuSet>) -> String {
    v.as_ref()
        .map(|s| {
            if s.is_empty() {
                "(none)".into()
            } else {
                s.to_string()
            }
        })
        .unwrap_or_else(|| "-".into())
}

/// Human-readable fingerprint, one fact per line: the CPU and its topology, then the kernel's command
/// line, time, isolation and memory.
pub fn render_text(fingerprint: &Fingerprint) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<16} {v}\n"));
    cpu_lines(fingerprint, &mut line);
    system_lines(fingerprint, &mut line);
    out
}

/// The CPU: model, topology, nodes, caches, the kernel release and preemption.
fn cpu_lines(fingerprint: &Fingerprint, line: &mut dyn FnMut(&str, String)) {
    let o = or_dash;
    line(
        "cpu",
        format!(
            "{} ({})",
            o(&fingerprint.cpu.model_name),
            o(&fingerprint.cpu.vendor)
        ),
    );
    line(
        "topology",
        format!(
            "{} socket(s), {} core(s), {} thread(s), {} per core; online {}",
            fingerprint.cpu.sockets,
            fingerprint.cpu.cores,
            fingerprint.cpu.threads,
            fingerprint.cpu.threads_per_core,
            fingerprint.cpu.online
        ),
    );
    line(
        "smt",
        format!(
            "control {}, active {}",
            o(&fingerprint.cpu.smt_control),
            fingerprint
                .cpu
                .smt_active
                .map_or("-".into(), |a| a.to_string())
        ),
    );
    for n in &fingerprint.numa {
        line(
            &format!("numa node{}", n.id),
            format!(
                "cpus {}, memory {}",
                n.cpus,
                n.mem_total_kib
                    .map_or("-".into(), |k| format!("{} MiB", k / 1024))
            ),
        );
    }
    line(
        "kernel",
        format!(
            "{} {}",
            fingerprint.kernel.release, fingerprint.kernel.version
        ),
    );
    line(
        "preemption",
        format!(
            "{:?}{}{} (from {})",
            fingerprint.kernel.preempt.model,
            if fingerprint.kernel.preempt.dynamic {
                ", PREEMPT_DYNAMIC"
            } else {
                ""
            },
            fingerprint
                .kernel
                .preempt
                .dynamic_mode
                .as_ref()
                .map_or(String::new(), |m| format!(" mode {m}")),
            if fingerprint.kernel.preempt.source.is_empty() {
                "-"
            } else {
                &fingerprint.kernel.preempt.source
            }
        )
        .to_lowercase(),
    );
}

/// The rest: command line, time, power, isolation, memory.
fn system_lines(fingerprint: &Fingerprint, line: &mut dyn FnMut(&str, String)) {
    let o = or_dash;
    let set = cpu_set;
    line("cmdline", fingerprint.kernel.cmdline.clone());
    line(
        "clocksource",
        format!(
            "{} (available: {})",
            o(&fingerprint.clock.current),
            fingerprint.clock.available.join(" ")
        ),
    );
    line("tsc flags", fingerprint.cpu.timing_flags.join(" "));
    if !fingerprint.cpu.smi.is_empty() {
        line("SMI counts", fingerprint.cpu.smi.clone());
    }
    line(
        "virtualization",
        format!(
            "{} (by {}; cpuid {}; dmi {} / {})",
            fingerprint.virt.platform,
            fingerprint.virt.decided_by,
            o(&fingerprint.virt.cpuid_vendor),
            o(&fingerprint.virt.dmi.sys_vendor),
            o(&fingerprint.virt.dmi.product_name)
        ),
    );
    line(
        "container",
        match &fingerprint.container.cpus_effective {
            Some(c) => format!("{} (cgroup cpuset {c})", fingerprint.container.kind),
            None => fingerprint.container.kind.clone(),
        },
    );
    line(
        "tuned",
        format!(
            "{} (isolated_cores {})",
            o(&fingerprint.tuned.active_profile),
            o(&fingerprint.tuned.isolated_cores)
        ),
    );
    line("isolated", set(&fingerprint.isolation.isolated));
    line("nohz_full", set(&fingerprint.isolation.nohz_full));
    let mem = &fingerprint.memory;
    line(
        "memory",
        format!(
            "total {} MiB, available {} MiB, swap {} MiB, THP {}",
            mem.total_kib.unwrap_or(0) / 1024,
            mem.available_kib.unwrap_or(0) / 1024,
            mem.swap_total_kib.unwrap_or(0) / 1024,
            o(&mem.thp)
        ),
    );
    for h in &mem.hugepages {
        line(
            "hugepages",
            format!("{} kB: {} total, {} free", h.size_kib, h.total, h.free),
        );
    }
}

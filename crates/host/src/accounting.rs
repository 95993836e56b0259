//! Samples of system activity before and after a probe ([`AccountingSample`]), and their deltas (model
//! `Accounting`). Sources (Documentation/filesystems/proc.rst): `/proc/stat` (per-CPU times in USER_HZ
//! ticks, `ctxt`), `/proc/interrupts` and `/proc/softirqs` (per-CPU counters), and getrusage(2) for the
//! tool itself.

use crate::parse::parse_counter_table;
use crate::root::HostRoot;
use rtgauge_model::accounting::{Accounting, CpuAccounting};
use std::collections::BTreeMap;

/// Per-CPU times from one `cpuN` line of /proc/stat, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// Ticks spent idle (the `idle` column).
    pub idle: u64,
    /// Ticks spent serving hardware interrupts.
    pub irq: u64,
    /// Ticks spent serving softirqs.
    pub softirq: u64,
    /// Ticks stolen by the hypervisor while this vCPU wanted to run.
    pub steal: u64,
}

/// `cpuN user nice system idle iowait irq softirq steal …` lines and the `ctxt` line of /proc/stat.
/// Missing trailing columns (old kernels) read as 0; malformed lines are skipped.
pub fn parse_stat_times(text: &str) -> (BTreeMap<u32, CpuTicks>, Option<u64>) {
    let mut cpus = BTreeMap::new();
    let mut ctxt = None;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("ctxt") => ctxt = f.next().and_then(|v| v.parse().ok()),
            Some(name) => {
                let Some(cpu) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                let v: Vec<u64> = f.map_while(|x| x.parse().ok()).collect();
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                if v.len() >= 4 {
                    cpus.insert(
                        cpu,
                        CpuTicks {
                            idle: at(3),
                            irq: at(5),
                            softirq: at(6),
                            steal: at(7),
                        },
                    );
                }
            }
            None => {}
        }
    }
    (cpus, ctxt)
}

/// Sum of each CPU's column of /proc/interrupts or /proc/softirqs.
pub fn parse_counter_totals(text: &str) -> BTreeMap<u32, u64> {
    let mut totals = BTreeMap::new();
    for row in parse_counter_table(text) {
        for (cpu, n) in row.counts {
            *totals.entry(cpu).or_insert(0u64) += n;
        }
    }
    totals
}

/// The process's own CPU time and context switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SelfUsage {
    /// User CPU time of the process, nanoseconds.
    pub user_ns: u64,
    /// System (kernel) CPU time of the process, nanoseconds.
    pub system_ns: u64,
    /// Voluntary context switches (the process blocked).
    pub voluntary: u64,
    /// Involuntary context switches (the process was preempted).
    pub involuntary: u64,
}

fn read_self_usage() -> SelfUsage {
    // SAFETY: rusage is plain data, filled by getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return SelfUsage::default();
    }
    let ns = |t: libc::timeval| {
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_usec as u64 * 1_000)
    };
    SelfUsage {
        user_ns: ns(ru.ru_utime),
        system_ns: ns(ru.ru_stime),
        voluntary: ru.ru_nvcsw as u64,
        involuntary: ru.ru_nivcsw as u64,
    }
}

/// Everything needed for one side of a delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountingSample {
    /// When the sample was taken (monotonic).
    pub at: std::time::Instant,
    /// Per-CPU times by CPU number.
    pub cpus: BTreeMap<u32, CpuTicks>,
    /// Context switches since boot, all CPUs (`ctxt`).
    pub ctxt: u64,
    /// Device interrupts per CPU since boot, summed over every `/proc/interrupts` row.
    pub interrupts: BTreeMap<u32, u64>,
    /// Softirqs per CPU since boot, summed over every `/proc/softirqs` row.
    pub softirqs: BTreeMap<u32, u64>,
    /// The process's own usage at that moment.
    pub usage: SelfUsage,
}

/// Take a sample (a few small /proc reads; done before and after a probe, never during).
pub fn read_sample(root: &HostRoot) -> AccountingSample {
    let (cpus, ctxt) = parse_stat_times(&root.read_optional("/proc/stat").unwrap_or_default());
    AccountingSample {
        at: std::time::Instant::now(),
        cpus,
        ctxt: ctxt.unwrap_or(0),
        interrupts: parse_counter_totals(
            &root.read_optional("/proc/interrupts").unwrap_or_default(),
        ),
        softirqs: parse_counter_totals(&root.read_optional("/proc/softirqs").unwrap_or_default()),
        usage: read_self_usage(),
    }
}

/// Nanoseconds per USER_HZ tick (the unit of /proc/stat's CPU times); 100 Hz if sysconf cannot say.
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / if hz > 0 { hz as u64 } else { 100 }
}

/// Deltas between two samples (counters that went backwards, e.g. a CPU hot-plugged, count as 0).
pub fn delta(before: &AccountingSample, after: &AccountingSample) -> Accounting {
    let t = tick_ns();
    let cpus = after
        .cpus
        .iter()
        .map(|(&cpu, a)| {
            let b = before.cpus.get(&cpu).copied().unwrap_or_default();
            let d = |x: u64, y: u64| x.saturating_sub(y) * t;
            let c = |m: &BTreeMap<u32, u64>, n: &BTreeMap<u32, u64>| {
                m.get(&cpu)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(n.get(&cpu).copied().unwrap_or(0))
            };
            CpuAccounting {
                cpu,
                steal_ns: d(a.steal, b.steal),
                irq_ns: d(a.irq, b.irq),
                softirq_ns: d(a.softirq, b.softirq),
                idle_ns: d(a.idle, b.idle),
                interrupts: c(&after.interrupts, &before.interrupts),
                softirqs: c(&after.softirqs, &before.softirqs),
            }
        })
        .collect();
    Accounting {
        wall_ns: after.at.saturating_duration_since(before.at).as_nanos() as u64,
        tool_user_ns: after.usage.user_ns.saturating_sub(before.usage.user_ns),
        tool_system_ns: after.usage.system_ns.saturating_sub(before.usage.system_ns),
        tool_voluntary_switches: after.usage.voluntary.saturating_sub(before.usage.voluntary),
        tool_involuntary_switches: after
            .usage
            .involuntary
            .saturating_sub(before.usage.involuntary),
        context_switches: after.ctxt.saturating_sub(before.ctxt),
        cpus,
    }
}

/// Steal, IRQ and softirq time of every CPU since boot, seconds (`/proc/stat`), by CPU; empty when
/// /proc/stat cannot be read.
pub fn read_cpu_seconds(root: &HostRoot) -> BTreeMap<u32, CpuSeconds> {
    let Ok(text) = root.read_text("/proc/stat") else {
        return BTreeMap::new();
    };
    let (ticks, _) = parse_stat_times(&text);
    let hz = 1e9 / tick_ns() as f64;
    ticks
        .into_iter()
        .map(|(cpu, t)| {
            (
                cpu,
                CpuSeconds {
                    steal: t.steal as f64 / hz,
                    irq: t.irq as f64 / hz,
                    softirq: t.softirq as f64 / hz,
                },
            )
        })
        .collect()
}

impl From<CpuSeconds> for (f64, f64, f64) {
    fn from(c: CpuSeconds) -> (f64, f64, f64) {
        (c.steal, c.irq, c.softirq)
    }
}

/// A CPU's steal, IRQ and softirq time since boot, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuSeconds {
    /// Time the hypervisor stole.
    pub steal: f64,
    /// Time in hard IRQs.
    pub irq: f64,
    /// Time in softirqs.
    pub softirq: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_and_ctxt() {
        let text = "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 5 100 1 7 3 42 0 0\ncpu1 1 2 3\ncpux 1 2 3 4\nintr 5 6\nctxt 999\n";
        let (cpus, ctxt) = parse_stat_times(text);
        assert_eq!(
            cpus.len(),
            1,
            "the aggregate line, a short line and a bad name are skipped"
        );
        assert_eq!(
            cpus[&0],
            CpuTicks {
                idle: 100,
                irq: 7,
                softirq: 3,
                steal: 42
            }
        );
        assert_eq!(ctxt, Some(999));
        let (c, x) = parse_stat_times("cpu0 1 2 3 4\n");
        assert_eq!(c[&0].steal, 0, "old kernels without steal");
        assert_eq!(x, None);
    }

    #[test]
    fn interrupt_columns_are_summed() {
        let text = "           CPU0       CPU1\n  0:         35          0   IO-APIC   2-edge      timer\nLOC:     100     200   Local timer interrupts\nERR:          0\n";
        let t = parse_counter_totals(text);
        assert_eq!(t[&0], 135);
        assert_eq!(t[&1], 200);
    }

    #[test]
    fn live_delta_sees_our_own_cpu_time() {
        let root = HostRoot::live();
        // Spin until this thread has used 50 ms of CPU (not 50 ms of wall time: on a busy machine the
        // spinning thread may get half of that; not the process's CPU time, which other tests add to).
        let cpu_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_gettime fills a timespec we own.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let a = read_sample(&root);
        let start = cpu_ns();
        let mut x = 0u64;
        while cpu_ns() - start < 50_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let b = read_sample(&root);
        let d = delta(&a, &b);
        // getrusage counts in scheduler ticks: allow a few of them.
        assert!(d.tool_user_ns + d.tool_system_ns >= 30_000_000, "{d:?} {x}");
        assert!(!d.cpus.is_empty());
        assert!(d.wall_ns >= 50_000_000);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse_stat_times(&s);
            let _ = parse_counter_totals(&s);
        }
    }
}

//! Always-on interval counters of the measured CPUs: per timeline interval, the deltas of interrupts per
//! source (`/proc/interrupts`), softirqs per type (`/proc/softirqs`), scheduler calls (`/proc/schedstat`)
//! and IRQ/softirq/steal time (`/proc/stat`), and the run-queue wait of the probe's own threads
//! (`/proc/self/task/<tid>/schedstat`: time runnable but not running, i.e. another task held the CPU, ns
//! resolution, kept by every kernel with CONFIG_SCHED_INFO), and the SMIs each CPU took (`MSR_SMI_COUNT`,
//! [`crate::smi`], where countable). No tracing needed; the main thread samples them on its
//! housekeeping CPU once per interval (four small /proc reads, ~100 µs), never the measured CPUs.

use crate::accounting::{parse_stat_times, CpuTicks};
use crate::parse::parse_counter_table;
use crate::root::HostRoot;
use crate::smi::{smi_delta, SmiPlatform, SmiReader};
use rtgauge_model::attribution::{IntervalCounters, MAX_INTERVALS, TOP_SOURCES};
use rtgauge_model::CpuSet;
use std::collections::BTreeMap;

/// `cpuN` lines of /proc/schedstat (Documentation/scheduler/sched-stats.rst, version ≥ 15): the third value,
/// sched_count, is the number of schedule() calls on the CPU. Malformed lines are skipped.
pub fn parse_schedstat(text: &str) -> BTreeMap<u32, u64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let n = f.nth(2)?.parse().ok()?;
            Some((cpu, n))
        })
        .collect()
}

/// The name an interrupt row is shown under: the label for architecture rows (`LOC`, `RES`, `CAL`, `NMI`),
/// "`24 virtio0-input`" (number and device, the description's last word) for numbered IRQs.
pub fn source_name(label: &str, description: &str) -> String {
    if label.chars().all(|c| c.is_ascii_digit()) {
        match description.split_whitespace().last() {
            Some(dev) => format!("{label} {dev}"),
            None => label.to_string(),
        }
    } else {
        label.to_string()
    }
}

/// One CPU's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct CpuCounts {
    irqs: BTreeMap<String, u64>,
    softirqs: BTreeMap<String, u64>,
    sched: Option<u64>,
    ticks: CpuTicks,
    /// Run-queue wait of the probe's threads pinned to the CPU, ns (summed).
    run_delay: Option<u64>,
    /// MSR_SMI_COUNT, where countable.
    smis: Option<u64>,
}

/// The run delay (time runnable but waiting for a CPU, ns) of a per-task schedstat file: its second field
/// (Documentation/scheduler/sched-stats.rst, "/proc/<pid>/schedstat").
pub fn parse_task_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Every CPU's counters at one instant, from the four texts (pure, for tests and captured trees).
fn counts(
    interrupts: &str,
    softirqs: &str,
    stat: &str,
    schedstat: &str,
) -> BTreeMap<u32, CpuCounts> {
    let mut out: BTreeMap<u32, CpuCounts> = BTreeMap::new();
    for row in parse_counter_table(interrupts) {
        let name = source_name(&row.name, &row.desc);
        for (cpu, n) in row.counts {
            *out.entry(cpu)
                .or_default()
                .irqs
                .entry(name.clone())
                .or_insert(0) += n;
        }
    }
    for row in parse_counter_table(softirqs) {
        for (cpu, n) in row.counts {
            out.entry(cpu)
                .or_default()
                .softirqs
                .insert(row.name.clone(), n);
        }
    }
    let (ticks, _) = parse_stat_times(stat);
    for (cpu, t) in ticks {
        out.entry(cpu).or_default().ticks = t;
    }
    for (cpu, n) in parse_schedstat(schedstat) {
        out.entry(cpu).or_default().sched = Some(n);
    }
    out
}

/// Deltas of named counters, non-zero only, largest first, at most `keep`.
fn top(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
    keep: usize,
) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = after
        .iter()
        .map(|(k, &a)| {
            (
                k.clone(),
                a.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(keep);
    v
}

fn delta(cpu: u32, start_ns: u64, a: &CpuCounts, b: &CpuCounts, tick_ns: u64) -> IntervalCounters {
    IntervalCounters {
        cpu,
        start_ns,
        len_ns: 0,
        irqs: top(&a.irqs, &b.irqs, TOP_SOURCES),
        softirqs: top(&a.softirqs, &b.softirqs, usize::MAX),
        sched_calls: a.sched.zip(b.sched).map(|(a, b)| a.saturating_sub(b)),
        run_delay_ns: a
            .run_delay
            .zip(b.run_delay)
            .map(|(a, b)| a.saturating_sub(b)),
        smis: a.smis.zip(b.smis).map(|(a, b)| smi_delta(a, b)),
        irq_ns: a.ticks.irq.saturating_sub(b.ticks.irq) * tick_ns,
        softirq_ns: a.ticks.softirq.saturating_sub(b.ticks.softirq) * tick_ns,
        steal_ns: a.ticks.steal.saturating_sub(b.ticks.steal) * tick_ns,
    }
}

/// Samples the counters of a CPU set interval after interval and keeps the deltas.
#[derive(Debug)]
pub struct Sampler {
    root: HostRoot,
    cpus: CpuSet,
    last: BTreeMap<u32, CpuCounts>,
    last_start_ns: u64,
    tick_ns: u64,
    /// The probe's threads: (CPU it is pinned to, thread id).
    threads: Vec<(u32, i32)>,
    smi: Option<SmiReader>,
    /// Whether each interval reads the SMI counts (else only the start and the end do: reading another
    /// CPU's MSR interrupts it, an IPI, so per-interval counts are asked for, as `cyclictest --smi` is).
    smi_each: bool,
    smi_first: BTreeMap<u32, u64>,
    /// What the SMI counts cover, or why there are none (one line, for the document).
    pub smi_note: String,
    /// The deltas so far, in interval order, one per CPU and bucket of `span_ns`.
    pub intervals: Vec<IntervalCounters>,
    /// The buckets' length: the timeline's interval to start with, doubled (and the intervals merged into
    /// the new buckets) each time a CPU would have more than [`MAX_INTERVALS`]. Buckets are aligned to the
    /// probe's start as the timeline's are (`rtgauge_model::latency::push_bounded`), so that a timeline
    /// bucket lies within one counter interval whenever its span is no longer.
    pub span_ns: u64,
    /// Each CPU's last bucket (an index into `intervals`).
    open: BTreeMap<u32, usize>,
}

impl Sampler {
    /// Take the first sample now (the start of the interval at 0 ns); `smi_each`: read the SMI counts every
    /// interval, not only at the start and the end.
    pub fn start(root: &HostRoot, cpus: &CpuSet, smi_each: bool) -> Sampler {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let mut s = Sampler {
            root: root.clone(),
            cpus: cpus.clone(),
            last: BTreeMap::new(),
            last_start_ns: 0,
            tick_ns: 1_000_000_000 / if hz > 0 { hz as u64 } else { 100 },
            threads: Vec::new(),
            smi: None,
            smi_each,
            smi_first: BTreeMap::new(),
            smi_note: String::new(),
            intervals: Vec::new(),
            span_ns: 1_000_000_000,
            open: BTreeMap::new(),
        };
        match SmiReader::open(root, cpus.iter()) {
            Ok(r) => {
                s.smi_first = r.opened.clone();
                s.smi_note = r.platform.describe();
                s.smi = Some(r);
            }
            Err(why) => s.smi_note = SmiPlatform::NotCountable(why).describe(),
        }
        s.last = s.read();
        s
    }

    /// Whether the counters could be read at all (no /proc: nothing to show).
    pub fn available(&self) -> bool {
        !self.last.is_empty()
    }

    fn read(&self) -> BTreeMap<u32, CpuCounts> {
        let r = |p: &str| self.root.read_optional(p).unwrap_or_default();
        let mut all = counts(
            &r("/proc/interrupts"),
            &r("/proc/softirqs"),
            &r("/proc/stat"),
            &r("/proc/schedstat"),
        );
        all.retain(|cpu, _| self.cpus.contains(*cpu));
        for &(cpu, tid) in &self.threads {
            let d = r(&format!("/proc/self/task/{tid}/schedstat"));
            if let (Some(c), Some(ns)) = (all.get_mut(&cpu), parse_task_schedstat(&d)) {
                c.run_delay = Some(c.run_delay.unwrap_or(0) + ns);
            }
        }
        if let Some(r) = self.smi.as_ref().filter(|_| self.smi_each) {
            for (cpu, n) in r.read() {
                if let Some(c) = all.get_mut(&cpu) {
                    c.smis = Some(n);
                }
            }
        }
        all
    }

    /// The probe's threads pinned to measured CPUs, whose run-queue wait is counted from the next interval
    /// on (the one in progress has no baseline for them; unpinned threads move between CPUs and are left
    /// out).
    pub fn set_threads(&mut self, threads: &[(u32, i32)]) {
        self.threads = threads.to_vec();
    }

    /// Close the interval that began at the previous sample; the next one starts at `now_ns` (ns after the
    /// probe's start, on the timeline's grid).
    pub fn sample(&mut self, now_ns: u64) {
        let now = self.read();
        for (cpu, a) in &now {
            if let Some(b) = self.last.get(cpu) {
                let mut d = delta(*cpu, self.last_start_ns, a, b, self.tick_ns);
                d.len_ns = now_ns.saturating_sub(self.last_start_ns);
                push_aligned(&mut self.intervals, &mut self.open, self.span_ns, d);
            }
        }
        // Bounded storage for long runs: buckets twice as long once a CPU has more than MAX_INTERVALS.
        while self.intervals.len() > MAX_INTERVALS * now.len().max(1) {
            self.span_ns = self.span_ns.saturating_mul(2);
            self.open.clear();
            for d in std::mem::take(&mut self.intervals) {
                push_aligned(&mut self.intervals, &mut self.open, self.span_ns, d);
            }
        }
        self.last = now;
        self.last_start_ns = now_ns;
    }
}

impl Sampler {
    /// The SMIs each CPU took since the start (read now), where countable; empty otherwise.
    pub fn smi_totals(&self) -> Vec<(u32, u64)> {
        let Some(r) = &self.smi else {
            return Vec::new();
        };
        r.read()
            .into_iter()
            .filter_map(|(cpu, n)| Some((cpu, smi_delta(n, *self.smi_first.get(&cpu)?))))
            .collect()
    }
}

/// Sum two named-counter lists, largest first, at most `keep`.
fn add_named(a: &[(String, u64)], b: &[(String, u64)], keep: usize) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = a.to_vec();
    for (n, c) in b {
        match out.iter_mut().find(|(m, _)| m == n) {
            Some(x) => x.1 += c,
            None => out.push((n.clone(), *c)),
        }
    }
    out.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    out.truncate(keep);
    out
}

/// Add interval `d` to its CPU's bucket of `span_ns` (aligned to the probe's start): into the CPU's last
/// interval when that is the same bucket, else as a new interval starting at the bucket's start.
fn push_aligned(
    intervals: &mut Vec<IntervalCounters>,
    open: &mut BTreeMap<u32, usize>,
    span_ns: u64,
    d: IntervalCounters,
) {
    let span = span_ns.max(1);
    let bucket = d.start_ns / span * span;
    let end = d.start_ns.saturating_add(d.len_ns);
    match open.get(&d.cpu).map(|&i| &mut intervals[i]) {
        Some(a) if a.start_ns == bucket => {
            a.len_ns = end.saturating_sub(a.start_ns);
            a.irqs = add_named(&a.irqs, &d.irqs, TOP_SOURCES);
            a.softirqs = add_named(&a.softirqs, &d.softirqs, usize::MAX);
            a.sched_calls = a.sched_calls.zip(d.sched_calls).map(|(x, y)| x + y);
            a.irq_ns += d.irq_ns;
            a.softirq_ns += d.softirq_ns;
            a.steal_ns += d.steal_ns;
            a.run_delay_ns = a.run_delay_ns.zip(d.run_delay_ns).map(|(x, y)| x + y);
            a.smis = a.smis.zip(d.smis).map(|(x, y)| x + y);
        }
        _ => {
            open.insert(d.cpu, intervals.len());
            intervals.push(IntervalCounters {
                start_ns: bucket,
                len_ns: end.saturating_sub(bucket),
                ..d
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IRQ_A: &str = "           CPU0       CPU1\n  0:         35          0   IO-APIC   2-edge      timer\n 24:  10  5  PCI-MSI 49153-edge      virtio0-input.0\nLOC:     100     200   Local timer interrupts\nRES:  1 2 Rescheduling interrupts\nERR:          0\n";
    const IRQ_B: &str = "           CPU0       CPU1\n  0:         35          0   IO-APIC   2-edge      timer\n 24:  10  95  PCI-MSI 49153-edge      virtio0-input.0\nLOC:     100     1200   Local timer interrupts\nRES:  1 2 Rescheduling interrupts\nERR:          0\n";
    const SOFT_A: &str = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:     10     20\n      NET_RX:   1  1\n";
    const SOFT_B: &str = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:     10     70\n      NET_RX:   1  4\n";
    const STAT_A: &str =
        "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 5 100 1 7 3 42 0 0\ncpu1 10 0 5 100 1 7 3 42 0 0\n";
    const STAT_B: &str =
        "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 5 100 1 7 3 42 0 0\ncpu1 10 0 5 100 1 9 3 52 0 0\n";
    const SCHED_A: &str = "version 17\ntimestamp 1\ncpu0 0 0 500 1 2 3 4 5 6\ndomain0 3 1 2\ncpu1 0 0 700 1 2 3 4 5 6\n";
    const SCHED_B: &str =
        "version 17\ntimestamp 2\ncpu0 0 0 500 1 2 3 4 5 6\ncpu1 0 0 2700 1 2 3 4 5 6\n";

    #[test]
    fn deltas_name_what_rose_per_cpu() {
        let a = counts(IRQ_A, SOFT_A, STAT_A, SCHED_A);
        let b = counts(IRQ_B, SOFT_B, STAT_B, SCHED_B);
        let d = delta(1, 1_000_000_000, &b[&1], &a[&1], 10_000_000);
        assert_eq!(
            d.irqs,
            vec![
                ("LOC".to_string(), 1000),
                ("24 virtio0-input.0".to_string(), 90)
            ]
        );
        assert_eq!(
            d.softirqs,
            vec![("TIMER".to_string(), 50), ("NET_RX".to_string(), 3)]
        );
        assert_eq!(d.sched_calls, Some(2000));
        assert_eq!(d.irq_ns, 20_000_000);
        assert_eq!(d.steal_ns, 100_000_000);
        assert!(
            d.summary()
                .starts_with("LOC 1000, 24 virtio0-input.0 90, TIMER 50"),
            "{}",
            d.summary()
        );
        let quiet = delta(0, 0, &b[&0], &a[&0], 10_000_000);
        assert!(quiet.irqs.is_empty() && quiet.softirqs.is_empty() && quiet.sched_calls == Some(0));
    }

    #[test]
    fn task_schedstat_gives_the_run_delay() {
        assert_eq!(parse_task_schedstat("245043 2908208 1\n"), Some(2_908_208));
        assert_eq!(parse_task_schedstat("1"), None);
        assert_eq!(parse_task_schedstat(""), None);
    }

    #[test]
    fn names_and_schedstat() {
        assert_eq!(
            source_name("24", "PCI-MSI 49153-edge virtio0-input.0"),
            "24 virtio0-input.0"
        );
        assert_eq!(source_name("7", ""), "7");
        assert_eq!(source_name("LOC", "Local timer interrupts"), "LOC");
        let s = parse_schedstat(SCHED_A);
        assert_eq!(s.get(&1), Some(&700));
        assert_eq!(s.len(), 2);
        assert!(parse_schedstat("cpu0 1\ncpuX 1 2 3\n").is_empty());
    }

    #[test]
    fn live_sampler_sees_the_local_timer_of_a_busy_cpu() {
        let root = HostRoot::live();
        let cpus = CpuSet::parse("0").unwrap();
        let mut s = Sampler::start(&root, &cpus, false);
        assert!(s.available());
        std::thread::sleep(std::time::Duration::from_millis(100));
        s.sample(1_000_000_000);
        assert_eq!(s.intervals.len(), 1);
        let i = &s.intervals[0];
        assert_eq!((i.cpu, i.start_ns), (0, 0));
        assert!(i.irq_total() > 0, "the local timer ticks at least: {i:?}");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse_schedstat(&s);
            let _ = counts(&s, &s, &s, &s);
        }
    }

    #[test]
    fn intervals_merge_into_aligned_buckets_per_cpu() {
        let iv = |cpu, start_ns: u64, loc: u64| IntervalCounters {
            cpu,
            start_ns,
            len_ns: 1_000,
            irqs: vec![("LOC".into(), loc)],
            steal_ns: 1,
            ..IntervalCounters::default()
        };
        let (mut v, mut open) = (Vec::new(), BTreeMap::new());
        for d in [
            iv(0, 0, 1),
            iv(1, 0, 10),
            iv(0, 1_000, 2),
            iv(1, 1_000, 20),
            iv(0, 2_000, 4),
        ] {
            push_aligned(&mut v, &mut open, 2_000, d);
        }
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].cpu, v[0].len_ns, v[0].irqs[0].1, v[0].steal_ns),
            (0, 2_000, 3, 2)
        );
        assert_eq!((v[1].cpu, v[1].irqs[0].1), (1, 30));
        assert_eq!((v[2].start_ns, v[2].len_ns), (2_000, 1_000));
        // An interval that starts inside a bucket (the probe's first, after a short tick) joins it, and
        // the bucket starts on the grid.
        let (mut v, mut open) = (Vec::new(), BTreeMap::new());
        push_aligned(&mut v, &mut open, 4_000, iv(0, 1_000, 1));
        push_aligned(&mut v, &mut open, 4_000, iv(0, 2_000, 1));
        assert_eq!((v.len(), v[0].start_ns, v[0].len_ns), (1, 0, 3_000));
    }
}

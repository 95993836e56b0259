//! `rtgauge cyclic`'s flags: cyclictest's, with cyclictest's meaning, resolved into a probe plan.
//!
//! Differences from cyclictest, on purpose (docs/METHODOLOGY.md explains why):
//! - periods already over at wake-up are measured and counted as missed deadlines (`--skip-missed` restores
//!   cyclictest's skip-ahead, and still counts what it skips);
//! - latencies are kept in ns in an HDR histogram that is never truncated; `-h` only shapes the rt-tests view;
//! - the summary lines are printed at the end even with `-q -h`, followed by percentiles and missed deadlines.

use super::{parse_duration_arg, Resolved};
use anyhow::{bail, Context as _};
use clap::{ArgAction, Args};
use rtgauge_host::cpu::{read_cpu_mask, read_cpu_node, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::CyclicConfig;
use rtgauge_model::rt::SchedPolicy;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::cyclic::CyclicPlan;
use rtgauge_probe::time::ClockId;
use std::path::PathBuf;
use std::time::Duration;

/// Timer wake-up latency per thread: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), latency = actual −
/// intended wake-up, in ns. Accepts cyclictest's options with cyclictest's meaning.
#[derive(Debug, Clone, Args)]
#[command(disable_help_flag = true)]
#[command(mut_arg("root", |a| a
    .help("Read the CPU topology from a captured tree instead of the live system (with --dry-run)")
    .requires("dry_run")))]
pub struct CyclicArgs {
    /// Pin thread N to CPU N, or round-robin over CPUSET (kernel list syntax). Without --mainaffinity the
    /// main thread runs on the CPUs not measured (it reads the interval counters every second and drains
    /// the live figures every 100 ms, work cyclictest's main thread does not do), or on the measured set,
    /// as cyclictest does, when every online CPU is measured.
    #[arg(short = 'a', long = "affinity", value_name = "CPUSET", num_args = 0..=1, default_missing_value = "")]
    pub affinity: Option<String>,

    /// Stop the run when a latency exceeds US (µs); prints the break thread and value.
    #[arg(short = 'b', long = "breaktrace", value_name = "US", value_parser = clap::value_parser!(u64).range(1..))]
    pub breaktrace: Option<u64>,

    /// Clock to measure with: 0 or monotonic (default), 1 or realtime.
    #[arg(short = 'c', long = "clock", value_name = "CLOCK", default_value = "monotonic", value_parser = parse_clock)]
    pub clock: ClockId,

    /// Do not touch /dev/cpu_dma_latency (measure the system as it is configured).
    #[arg(long = "default-system", alias = "laptop")]
    pub default_system: bool,

    /// Interval increment per thread, µs (forced to 0 with a histogram).
    #[arg(
        short = 'd',
        long = "distance",
        value_name = "DIST",
        default_value_t = 500
    )]
    pub distance: u64,

    /// Run for TIME: a number of seconds, or with suffix s, m, h, d (e.g. 90, 15m, 1h, 7d). 0 = until stopped.
    #[arg(short = 'D', long = "duration", value_name = "TIME", allow_hyphen_values = true, value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,

    /// rt-tests histogram with US buckets of 1 µs (of 1 ns with -N); overflow count and cycle numbers.
    /// The HDR histogram rtgauge keeps is never limited by it.
    #[arg(short = 'h', long = "histogram", value_name = "US", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub histogram: Option<u32>,

    /// Like -h, plus a sum column over all threads.
    #[arg(short = 'H', long = "histofall", value_name = "US", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub histofall: Option<u32>,

    /// Write the -h histogram to PATH instead of standard output.
    #[arg(long = "histfile", value_name = "PATH")]
    pub histfile: Option<PathBuf>,

    /// Base interval of thread 0, µs.
    #[arg(short = 'i', long = "interval", value_name = "INTV", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=3_600_000_000))]
    pub interval: u64,

    /// Write rt-tests (cyclictest) compatible JSON to FILE ('-' = stdout).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// PM QoS value held in /dev/cpu_dma_latency during the run, µs.
    #[arg(long = "latency", value_name = "PM_QOS", default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..))]
    pub latency: i32,

    /// Number of cycles per thread (0 = unlimited).
    #[arg(short = 'l', long = "loops", value_name = "LOOPS")]
    pub loops: Option<u64>,

    /// Lock current and future memory (mlockall).
    #[arg(short = 'm', long = "mlockall")]
    pub mlockall: bool,

    /// Run the main (reporting) thread on CPUSET (default: the online CPUs not measured, see -a).
    #[arg(long = "mainaffinity", value_name = "CPUSET")]
    pub mainaffinity: Option<String>,

    /// Print and write results in ns instead of µs (-h buckets become 1 ns).
    #[arg(short = 'N', long = "nsecs")]
    pub nsecs: bool,

    /// Priority of the highest-priority thread, 1-99; selects SCHED_FIFO unless --policy rr.
    #[arg(short = 'p', long = "priority", value_name = "PRIO", allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub priority: Option<i32>,

    /// Scheduling policy: other, normal, batch, idle, fifo, rr.
    #[arg(long = "policy", value_name = "NAME", value_parser = parse_policy)]
    pub policy: Option<SchedPolicy>,

    /// Decrement the priority by one per thread.
    #[arg(long = "priospread")]
    pub priospread: bool,

    #[command(flatten)]
    pub load: super::load::ProbeLoad,

    /// Print only the summary at exit (no live lines).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Use a relative timer (clock_nanosleep without TIMER_ABSTIME). Periods drift; not reproducible.
    #[arg(short = 'r', long = "relative")]
    pub relative: bool,

    /// Standard SMP testing: one thread per CPU, all pinned, same priority (-a -t).
    #[arg(short = 'S', long = "smp")]
    pub smp: bool,

    /// Record every sample above US (µs) with its timestamp; with --trace, the episodes above US are
    /// explained.
    #[arg(long = "spike", value_name = "US")]
    pub spike: Option<u64>,

    /// Trace the measured CPUs' kernel events and explain each spike episode (the late samples of one
    /// stall), above --spike, else max(p50 + 10 × (p90 − p50), 3 × p90) of the run: IRQs, softirqs,
    /// threads with their policy and priority, kernel work and an unattributed remainder, the worst 100
    /// broken down and the rest counted. Needs root (tracefs is mounted if needed, and unmounted after).
    #[arg(long = "trace")]
    pub trace: bool,

    /// Count the SMIs of the measured CPUs every interval (cyclictest's --smi): each read of a CPU's
    /// MSR_SMI_COUNT interrupts it, so without it they are read at the start and the end only (Intel; root).
    #[arg(long = "smi")]
    pub smi: bool,

    /// Do not sample the interval counters (for the overhead bench only).
    #[arg(long = "no-counters", hide = true)]
    pub no_counters: bool,

    /// Stop at the first sample above US (µs), like -b, with --trace: the trace of the 20 ms before it is
    /// stored with the run and the sample's breakdown printed.
    #[arg(long = "break-above", value_name = "US", value_parser = clap::value_parser!(u64).range(1..))]
    pub break_above: Option<u64>,

    /// Capacity of the spike list per thread.
    #[arg(long = "spike-nodes", value_name = "N", default_value_t = 1024)]
    pub spike_nodes: usize,

    /// Number of threads; without NUM, one per CPU (of -a, or of all allowed CPUs).
    #[arg(short = 't', long = "threads", value_name = "NUM", num_args = 0..=1, default_missing_value = "0")]
    pub threads: Option<u32>,

    /// Accepted for compatibility: output is always flushed line by line.
    #[arg(short = 'u', long = "unbuffered")]
    pub unbuffered: bool,

    /// Reproduce cyclictest's skip-ahead over periods already over at wake-up (they are still counted).
    #[arg(long = "skip-missed")]
    pub skip_missed: bool,

    #[command(flatten)]
    pub output: super::OutputArg,

    /// Length of one timeline interval (count, max and missed per thread), e.g. 1s, 100ms.
    #[arg(long = "timeline-interval", value_name = "TIME", default_value = "1s", value_parser = parse_duration_arg)]
    pub timeline_interval: Nanos,

    #[command(flatten)]
    pub root: super::RootArg,

    /// Resolve the flags as for a run and print the resulting probe configuration as JSON; measure nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,

    /// Print help.
    #[arg(long = "help", action = ArgAction::Help)]
    pub help: Option<bool>,
}

fn parse_clock(s: &str) -> Result<ClockId, String> {
    match s {
        "0" | "monotonic" => Ok(ClockId::Monotonic),
        "1" | "realtime" => Ok(ClockId::Realtime),
        _ => Err("expected 0/monotonic or 1/realtime".into()),
    }
}

fn parse_policy(s: &str) -> Result<SchedPolicy, String> {
    match SchedPolicy::parse(s) {
        Some(SchedPolicy::Deadline) | None => {
            Err("expected other, normal, batch, idle, fifo or rr".into())
        }
        Some(p) => Ok(p),
    }
}

fn parse_cpus(flag: &str, text: &str, possible: &CpuSet) -> anyhow::Result<CpuSet> {
    let set = CpuSet::parse(text).map_err(|e| anyhow::anyhow!("{flag} {text}: {e}"))?;
    if set.is_empty() {
        bail!("{flag} '{text}': empty CPU list");
    }
    let missing = set.difference(possible);
    if !missing.is_empty() {
        bail!("{flag} {text}: CPU {missing} does not exist on this machine (CPUs {possible})");
    }
    Ok(set)
}

/// The CPUs of the machine a command line is resolved against.
struct Cpus {
    online: CpuSet,
    possible: CpuSet,
    /// The CPUs this process may use: its affinity on the live system, all online CPUs of a captured tree.
    allowed: CpuSet,
}

/// Where the threads go: the `-a` set, the thread count and each thread's CPU (cyclictest's rules), and the
/// main thread's CPUs.
struct ThreadPlacement {
    threads: u32,
    cpus: Vec<Option<u32>>,
    main_cpus: Option<CpuSet>,
}

fn place(a: &CyclicArgs, c: &Cpus, notes: &mut Vec<String>) -> anyhow::Result<ThreadPlacement> {
    let affinity: Option<CpuSet> = if a.smp {
        Some(c.allowed.clone())
    } else {
        match a.affinity.as_deref() {
            None => None,
            Some("") => Some(c.allowed.clone()),
            Some(t) => Some(parse_cpus("-a/--affinity", t, &c.possible)?),
        }
    };
    if let Some(set) = &affinity {
        let offline = set.difference(&c.online);
        if !offline.is_empty() {
            notes.push(format!(
                "-a/--affinity: CPU {offline} is offline; its threads run unpinned"
            ));
        }
    }
    let threads = match a.threads {
        Some(0) => affinity.as_ref().map_or(c.allowed.len(), CpuSet::len) as u32,
        Some(n) => n,
        None if a.smp => c.allowed.len() as u32,
        None => 1,
    };
    if threads == 0 {
        bail!("-t/--threads: no CPU available to run on");
    }
    if threads > 4096 {
        bail!("-t/--threads {threads}: at most 4096 threads");
    }
    if affinity.as_ref().is_some_and(|s| s.is_empty()) {
        bail!(
            "-a/--affinity: no CPU to run on (online CPUs: {})",
            c.online
        );
    }
    let cpus: Vec<Option<u32>> = (0..threads as usize)
        .map(|i| {
            affinity
                .as_ref()
                .map(|s| s.as_slice()[i % s.len()])
                .filter(|cpu| c.online.contains(*cpu))
        })
        .collect();
    let main_cpus = main_cpus(a, c, &cpus, affinity, notes)?;
    Ok(ThreadPlacement {
        threads,
        cpus,
        main_cpus,
    })
}

/// The main thread samples counters, drains rings (and the trace): keep it off the measured CPUs when there
/// is anywhere else to go (docs/cyclic.md: measured, 10+ alternating rounds), unless --mainaffinity says.
fn main_cpus(
    a: &CyclicArgs,
    c: &Cpus,
    cpus: &[Option<u32>],
    affinity: Option<CpuSet>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Option<CpuSet>> {
    if let Some(t) = &a.mainaffinity {
        return Ok(Some(parse_cpus("--mainaffinity", t, &c.possible)?));
    }
    let measured = CpuSet::new(cpus.iter().flatten().copied());
    let rest = c.online.difference(&measured);
    if measured.is_empty() {
        // Threads not pinned: nowhere is "off the measured CPUs".
        Ok(affinity)
    } else if rest.is_empty() {
        if a.trace || a.break_above.is_some() {
            notes.push(
                "--trace: every online CPU is measured; the trace is read on a measured CPU".into(),
            );
        }
        Ok(affinity)
    } else {
        Ok(Some(rest))
    }
}

/// Policy and priority, as cyclictest takes them: `-p` alone selects FIFO; a real-time policy without `-p`
/// gets threads + 1.
fn policy_and_priority(a: &CyclicArgs, threads: u32) -> anyhow::Result<(SchedPolicy, i32)> {
    let policy = a.policy.unwrap_or(if a.priority.is_some() {
        SchedPolicy::Fifo
    } else {
        SchedPolicy::Other
    });
    let priority = match (policy.is_realtime(), a.priority) {
        (true, Some(0)) => bail!("-p/--priority 0: {policy} needs a priority of 1-99"),
        (true, Some(p)) => p,
        (true, None) => (threads as i32 + 1).min(99),
        (false, Some(p)) if p > 0 => {
            bail!("-p/--priority {p}: --policy {policy} takes no real-time priority")
        }
        (false, _) => 0,
    };
    Ok((policy, priority))
}

/// Apply cyclictest's rules to the flags: thread count and placement, policy and priority, histogram and
/// distance, duration and loops. Reads the CPU topology through `root`.
pub fn resolve(a: &CyclicArgs, root: &HostRoot) -> anyhow::Result<Resolved<CyclicPlan>> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let possible = read_cpu_mask(root, CpuMask::Possible).unwrap_or_else(|_| online.clone());
    let allowed = super::allowed_cpus(root, &online);
    let mut notes = Vec::new();
    let ThreadPlacement {
        threads,
        cpus,
        main_cpus,
    } = place(
        a,
        &Cpus {
            online,
            possible,
            allowed,
        },
        &mut notes,
    )?;
    let (policy, priority) = policy_and_priority(a, threads)?;
    let hist_buckets = a.histofall.or(a.histogram);
    let distance_us = if hist_buckets.is_some() {
        0
    } else {
        a.distance
    };
    let interval_ns = Nanos::from_us(a.interval).as_ns();
    let last_interval = interval_ns.saturating_add(
        Nanos::from_us(distance_us)
            .as_ns()
            .saturating_mul(u64::from(threads - 1)),
    );
    if last_interval > 3_600_000_000_000 {
        bail!("-d/--distance {distance_us}: the last thread's interval would exceed 1 h");
    }
    let nodes = cpus
        .iter()
        .map(|c| c.and_then(|c| read_cpu_node(root, c)))
        .collect();
    let config = CyclicConfig {
        threads,
        interval_ns,
        distance_ns: Nanos::from_us(distance_us).as_ns(),
        policy,
        priority,
        priospread: a.priospread,
        cpus,
        duration: a.duration.filter(|d| d.as_ns() > 0),
        loops: a.loops.filter(|&l| l > 0),
        relative: a.relative,
        skip_missed: a.skip_missed,
        hist_buckets,
        unit_ns: if a.nsecs { 1 } else { 1000 },
        // The break sample is looked up in the spike list for its trace.
        spike_threshold_ns: a.spike.or(a.break_above).map(us_to_ns),
        break_threshold_ns: a.breaktrace.or(a.break_above).map(us_to_ns),
        timeline_interval_ns: a.timeline_interval.as_ns().max(1_000_000),
    };
    let why = rtgauge_session::why::WhyOpts {
        counters: !a.no_counters,
        trace: a.trace || a.break_above.is_some(),
        threshold: a.spike.map(rtgauge_session::kind::cyclic::spike_threshold),
        smi_intervals: a.smi,
    };
    Ok(Resolved {
        plan: CyclicPlan {
            config,
            clock: a.clock,
            mlockall: a.mlockall,
            dma_latency_us: (!a.default_system).then_some(a.latency),
            main_cpus,
            spike_nodes: a.spike_nodes.min(1 << 20),
            late_floor_ns: rtgauge_session::kind::cyclic::late_floor_ns(&why),
            nodes,
            tick: Duration::from_millis(100),
        },
        notes,
        why,
    })
}

/// A flag given in µs, in ns (saturating, as every flag conversion here).
fn us_to_ns(us: u64) -> u64 {
    Nanos::from_us(us).as_ns()
}

/// A profile's cyclic stage: the profile's duration and `--trace`, and its bound as the spike-episode
/// threshold unless the flags give one (`--spike`).
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let mut args: CyclicArgs = cx.parse(argv)?;
    args.duration = Some(cx.duration);
    args.trace |= cx.trace;
    let mut r = cx.named(resolve(&args, cx.root))?;
    if r.why.threshold.is_none() {
        r.why.threshold = cx.bound.clone();
        r.plan.late_floor_ns = rtgauge_session::kind::cyclic::late_floor_ns(&r.why);
    }
    Ok(super::stage::Stage {
        plan: Box::new(r),
        load: args.load.request(),
    })
}

impl super::stage::StagePlan for Resolved<CyclicPlan> {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Cyclic
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn why(&self) -> Option<rtgauge_session::why::WhyOpts> {
        Some(self.why.clone())
    }

    fn duration(&self) -> Option<Nanos> {
        self.plan.config.duration
    }

    fn rt_priority(&self) -> Option<i32> {
        self.plan
            .config
            .policy
            .is_realtime()
            .then_some(self.plan.config.priority)
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::cyclic::Cyclic(&self.plan))
    }
}

#[cfg(test)]
mod tests {
    //! cyclictest command lines, parsed by the verb's own parser and resolved against a captured CPU tree,
    //! field by field: each flag's meaning is tested here, beside its definition.

    use super::*;

    /// A captured /sys tree: `online` and `possible` CPU lists; CPUs 0-15 on node 0, 16-31 on node 1.
    fn tree(online: &str, possible: &str) -> tempfile::TempDir {
        crate::cpu_tree(32, 16, online, possible)
    }

    #[derive(clap::Parser)]
    #[command(no_binary_name = true, disable_help_flag = true)]
    struct Line {
        #[command(flatten)]
        args: CyclicArgs,
    }

    fn args(line: &str) -> CyclicArgs {
        <Line as clap::Parser>::try_parse_from(line.split_whitespace())
            .unwrap()
            .args
    }

    /// Resolve a command line on a machine with 32 CPUs, all online.
    fn resolved(line: &str) -> Resolved<CyclicPlan> {
        let t = tree("0-31", "0-31");
        match resolve(&args(line), &HostRoot::at(t.path())) {
            Ok(r) => r,
            Err(e) => panic!("{line}: {e:#}"),
        }
    }

    fn refused(line: &str) -> String {
        let t = tree("0-31", "0-31");
        match resolve(&args(line), &HostRoot::at(t.path())) {
            Ok(_) => panic!("{line}: accepted"),
            Err(e) => e.to_string(),
        }
    }

    fn set(text: &str) -> CpuSet {
        CpuSet::parse(text).unwrap()
    }

    #[test]
    fn the_seed_command_line() {
        let r = resolved("-m -p99 -D 1h -i 100 -h 100 -a 2-29 -t 28 --mainaffinity=1");
        let c = &r.plan.config;
        assert_eq!(c.threads, 28);
        assert_eq!(c.interval_ns, 100_000);
        assert_eq!(c.distance_ns, 0, "-h forces the distance to 0");
        assert_eq!(c.policy, SchedPolicy::Fifo, "-p selects FIFO");
        assert_eq!(c.priority, 99);
        assert!(!c.priospread);
        let cpus: Vec<Option<u32>> = (2..=29).map(Some).collect();
        assert_eq!(c.cpus, cpus);
        assert_eq!(c.duration, Some(Nanos::from_secs(3_600)));
        assert_eq!(c.loops, None);
        assert!(!c.relative && !c.skip_missed);
        assert_eq!(c.hist_buckets, Some(100));
        assert_eq!(c.unit_ns, 1000);
        assert_eq!(c.spike_threshold_ns, None);
        assert_eq!(c.break_threshold_ns, None);
        assert_eq!(c.timeline_interval_ns, 1_000_000_000);
        assert_eq!(r.plan.clock, ClockId::Monotonic);
        assert!(r.plan.mlockall);
        assert_eq!(r.plan.dma_latency_us, Some(0));
        assert_eq!(r.plan.main_cpus, Some(set("1")));
        assert_eq!(r.plan.spike_nodes, 1024);
        let nodes: Vec<Option<u32>> = (2..=29).map(|c| Some(c / 16)).collect();
        assert_eq!(r.plan.nodes, nodes);
        assert!(r.notes.is_empty());
        assert!(r.why.counters && !r.why.trace);
        assert_eq!(r.why.threshold, None);
        assert_eq!(
            r.plan.late_floor_ns, None,
            "no late samples handed over without --trace"
        );
    }

    #[test]
    fn defaults_are_cyclictests() {
        let r = resolved("");
        let c = &r.plan.config;
        assert_eq!(c.threads, 1);
        assert_eq!(c.interval_ns, 1_000_000);
        assert_eq!(c.distance_ns, 500_000);
        assert_eq!((c.policy, c.priority), (SchedPolicy::Other, 0));
        assert_eq!(c.cpus, vec![None]);
        assert_eq!((c.duration, c.loops, c.hist_buckets), (None, None, None));
        assert!(!r.plan.mlockall);
        assert_eq!(r.plan.main_cpus, None);
        assert_eq!(r.plan.nodes, vec![None]);
    }

    #[test]
    fn smp_is_one_pinned_thread_per_cpu() {
        let r = resolved("-S -p 80");
        let c = &r.plan.config;
        assert_eq!(c.threads, 32);
        let cpus: Vec<Option<u32>> = (0..32).map(Some).collect();
        assert_eq!(c.cpus, cpus);
        assert_eq!((c.policy, c.priority), (SchedPolicy::Fifo, 80));
        assert!(!c.priospread, "-S keeps one priority");
        assert_eq!(
            r.plan.main_cpus,
            Some(set("0-31")),
            "the main thread follows -a"
        );
    }

    #[test]
    fn threads_without_a_number_take_one_per_cpu() {
        let c = resolved("-t").plan.config;
        assert_eq!(c.threads, 32);
        assert_eq!(c.cpus, vec![None; 32], "-t alone does not pin");
        let c = resolved("-t -a 4-7").plan.config;
        assert_eq!(c.threads, 4);
        assert_eq!(c.cpus, vec![Some(4), Some(5), Some(6), Some(7)]);
        let c = resolved("-a -t 2").plan.config;
        assert_eq!(c.cpus, vec![Some(0), Some(1)], "-a alone is every CPU");
        let c = resolved("-t 3 -a 8-9").plan.config;
        assert_eq!(
            c.cpus,
            vec![Some(8), Some(9), Some(8)],
            "threads round-robin over -a"
        );
    }

    #[test]
    fn distance_spreads_the_intervals() {
        let c = resolved("-t 3 -i 200 -d 100").plan.config;
        assert_eq!((c.interval_ns, c.distance_ns), (200_000, 100_000));
        let c = resolved("-t 3 -d 100 -H 50").plan.config;
        assert_eq!(c.distance_ns, 0, "-H forces the distance to 0 like -h");
        assert_eq!(c.hist_buckets, Some(50));
        let c = resolved("-t 1 -d 20000000000000000").plan.config;
        assert_eq!(
            c.distance_ns,
            u64::MAX,
            "one thread: unused, saturated, no overflow"
        );
        assert_eq!(
            refused("-t 3 -d 2000000000"),
            "-d/--distance 2000000000: the last thread's interval would exceed 1 h"
        );
    }

    #[test]
    fn policy_and_priority() {
        let c = resolved("--policy rr -p 50").plan.config;
        assert_eq!((c.policy, c.priority), (SchedPolicy::Rr, 50));
        let c = resolved("--policy fifo -t 3").plan.config;
        assert_eq!(
            (c.policy, c.priority),
            (SchedPolicy::Fifo, 4),
            "without -p: threads + 1"
        );
        let c = resolved("--policy batch").plan.config;
        assert_eq!((c.policy, c.priority), (SchedPolicy::Batch, 0));
        let c = resolved("-p 90 -t 3 --priospread").plan.config;
        assert!(c.priospread);
        assert_eq!(
            refused("-p 0"),
            "-p/--priority 0: fifo needs a priority of 1-99"
        );
        assert_eq!(
            refused("--policy other -p 5"),
            "-p/--priority 5: --policy other takes no real-time priority"
        );
    }

    #[test]
    fn nsecs_loops_duration_and_clock() {
        let r = resolved("-N -h 50 -l 1000 -c 1 -r --skip-missed");
        let c = &r.plan.config;
        assert_eq!(c.unit_ns, 1, "-N: buckets and output in ns");
        assert_eq!(c.loops, Some(1000));
        assert!(c.relative && c.skip_missed);
        assert_eq!(r.plan.clock, ClockId::Realtime);
        let c = resolved("-l 0 -D 0").plan.config;
        assert_eq!((c.loops, c.duration), (None, None), "0 = unlimited");
        let c = resolved("-D 90 --timeline-interval 100ms").plan.config;
        assert_eq!(c.duration, Some(Nanos::from_secs(90)));
        assert_eq!(c.timeline_interval_ns, 100_000_000);
        let c = resolved("--timeline-interval 10us").plan.config;
        assert_eq!(c.timeline_interval_ns, 1_000_000, "at least 1 ms");
    }

    #[test]
    fn break_spike_and_trace_thresholds() {
        let r = resolved("-b 150");
        assert_eq!(r.plan.config.break_threshold_ns, Some(150_000));
        assert_eq!(r.plan.config.spike_threshold_ns, None);
        assert!(!r.why.trace);
        let r = resolved("--spike 30 -b 150 --spike-nodes 10");
        assert_eq!(r.plan.config.spike_threshold_ns, Some(30_000));
        assert_eq!(r.why.threshold.as_ref().map(|t| t.ns), Some(30_000));
        assert_eq!(r.plan.spike_nodes, 10);
        let r = resolved("--break-above 40 -a 0-3 -t 4");
        let c = &r.plan.config;
        assert_eq!(c.break_threshold_ns, Some(40_000));
        assert_eq!(c.spike_threshold_ns, Some(40_000));
        assert!(r.why.trace);
        assert_eq!(
            r.plan.late_floor_ns,
            Some(rtgauge_session::kind::cyclic::LATE_FLOOR_NS)
        );
        assert_eq!(
            r.plan.main_cpus,
            Some(set("4-31")),
            "the trace is read off the measured CPUs"
        );
        let r = resolved("--trace -t 1 -a 5");
        assert_eq!(
            r.plan.config.spike_threshold_ns, None,
            "no spike list: episodes come from the late samples"
        );
        assert_eq!(r.plan.config.break_threshold_ns, None);
        assert_eq!(r.why.threshold, None, "the rule decides");
        let r = resolved("--trace --spike 3 -a 5");
        assert_eq!(
            r.plan.late_floor_ns,
            Some(3_000),
            "an explicit threshold below the floor lowers it"
        );
        let r = resolved("--trace -S");
        assert_eq!(
            r.notes,
            vec!["--trace: every online CPU is measured; the trace is read on a measured CPU"]
        );
        assert_eq!(r.plan.main_cpus, Some(set("0-31")));
    }

    #[test]
    fn the_main_thread_stays_off_the_measured_cpus_unless_told() {
        assert_eq!(resolved("-a 1").plan.main_cpus, Some(set("0,2-31")));
        assert_eq!(
            resolved("-a 1 --mainaffinity 1").plan.main_cpus,
            Some(set("1"))
        );
        assert_eq!(
            resolved("-t 2").plan.main_cpus,
            None,
            "unpinned threads: unpinned main thread"
        );
        assert!(
            resolved("-S").notes.is_empty(),
            "every CPU measured: no note without --trace"
        );
    }

    #[test]
    fn pm_qos() {
        assert_eq!(resolved("--latency 10").plan.dma_latency_us, Some(10));
        assert_eq!(resolved("--default-system").plan.dma_latency_us, None);
        assert_eq!(resolved("--laptop").plan.dma_latency_us, None);
    }

    #[test]
    fn cpus_that_do_not_exist_or_are_offline() {
        assert_eq!(
            refused("-a 40"),
            "-a/--affinity 40: CPU 40 does not exist on this machine (CPUs 0-31)"
        );
        assert_eq!(
            refused("--mainaffinity 33"),
            "--mainaffinity 33: CPU 33 does not exist on this machine (CPUs 0-31)"
        );
        assert_eq!(
            refused("-t 5000"),
            "-t/--threads 5000: at most 4096 threads"
        );
        let t = tree("0-29", "0-31");
        let r = resolve(&args("-a 29-31 -t 3"), &HostRoot::at(t.path()))
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(r.plan.config.cpus, vec![Some(29), None, None]);
        assert_eq!(
            r.notes,
            vec!["-a/--affinity: CPU 30-31 is offline; its threads run unpinned"]
        );
    }
}

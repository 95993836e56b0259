//! `rtgauge oslat`'s flags: oslat's, with oslat's meaning, resolved into a probe plan.

use super::{parse_duration_arg, Resolved};
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, read_cpu_node, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::oslat::{OslatConfig, Workload};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::oslat::OslatPlan;
use std::path::PathBuf;
use std::time::Duration;

/// OS noise seen by a busy-polling thread: one thread per CPU reads the counter in a tight loop; every gap
/// between two reads is recorded in ns. Accepts oslat's options with oslat's meaning.
#[derive(Debug, Clone, Args)]
pub struct OslatArgs {
    /// Number of rt-tests buckets (4-1024).
    #[arg(short = 'b', long = "bucket-size", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(4..=1024))]
    pub bucket_size: u32,

    /// Subtract the smallest preheat gap from every bucketed value.
    #[arg(short = 'B', long = "bias")]
    pub bias: bool,

    /// CPUs to measure, kernel list syntax (default: every CPU this process may use).
    #[arg(short = 'c', long = "cpu-list", value_name = "LIST")]
    pub cpu_list: Option<String>,

    /// CPU of the main thread (default: the lowest CPU this process may use that is not measured; only
    /// when every such CPU is measured, the lowest of them, with a warning). Every 250 ms (100 ms with
    /// --trace, 5 ms with -T, at least once per --timeline-interval) the main thread drains the threads'
    /// rings, merges their accumulators, samples /proc and writes checkpoints (oslat's main thread only
    /// sleeps): on a measured CPU that work shows as the CPU's noise.
    #[arg(
        short = 'C',
        long = "cpu-main-thread",
        value_name = "CPU",
        default_value = "auto",
        hide_default_value = true,
        value_parser = parse_main_cpu
    )]
    pub cpu_main_thread: MainCpu,

    /// Duration: seconds, or with suffix s, m, h, d (e.g. 60, 20m, 2h).
    #[arg(short = 'D', long = "duration", value_name = "TIME", default_value = "1", allow_hyphen_values = true, value_parser = parse_duration_arg)]
    pub duration: Nanos,

    /// Write oslat-compatible JSON to FILE ('-' = stdout).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Run the measuring threads at SCHED_FIFO with this priority (1-99); default SCHED_OTHER.
    #[arg(short = 'f', long = "rtprio", value_name = "PRIO", allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(1..=99))]
    pub rtprio: Option<i32>,

    /// Memory per thread for the memmove workload (e.g. 4K, 1M).
    #[arg(short = 'm', long = "workload-mem", value_name = "SIZE", default_value = "16K", value_parser = parse_size)]
    pub workload_mem: u64,

    #[command(flatten)]
    pub load: super::load::ProbeLoad,

    /// Print only the summary.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Preheat with one thread only (only with CPU frequencies locked).
    #[arg(short = 's', long = "single-preheat")]
    pub single_preheat: bool,

    /// Trace the measured CPUs' kernel events and break the worst gaps down into IRQs, softirqs, threads,
    /// kernel work and an unattributed remainder (hypervisor, SMI/firmware). Needs root and tracefs.
    #[arg(long = "trace")]
    pub trace: bool,

    /// Count the SMIs of the measured CPUs every interval (cyclictest's --smi): each read of a CPU's
    /// MSR_SMI_COUNT interrupts it, so without it they are read at the start and the end only (Intel; root).
    #[arg(long = "smi")]
    pub smi: bool,

    /// Stop at the first gap ≥ US µs and write a marker into the ftrace buffer, then stop tracing. Unlike
    /// oslat, the summary and the JSON are still written.
    #[arg(short = 'T', long = "trace-threshold", value_name = "US", value_parser = clap::value_parser!(u64).range(1..))]
    pub trace_threshold: Option<u64>,

    /// Work done in each iteration: no, memmove.
    #[arg(short = 'w', long = "workload", value_name = "KIND", default_value = "no", value_parser = parse_workload)]
    pub workload: Workload,

    /// Width of an rt-tests bucket in ns (widths that are not whole µs switch output to 3 decimals).
    #[arg(short = 'W', long = "bucket-width", value_name = "NS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub bucket_width: u64,

    /// Do not print all-zero buckets.
    #[arg(short = 'z', long = "zero-omit")]
    pub zero_omit: bool,

    /// Length of the preheat run (oslat: 1 s).
    #[arg(long = "preheat", value_name = "TIME", default_value = "1", value_parser = parse_duration_arg)]
    pub preheat: Nanos,

    /// Gaps longer than this count as CPU time lost, for the availability figure (e.g. 5us).
    #[arg(long = "availability-threshold", value_name = "TIME", default_value = "5us", value_parser = parse_duration_arg)]
    pub availability_threshold: Nanos,

    /// Number of worst gaps kept with their timestamps, per CPU.
    #[arg(long = "worst", value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub worst: u32,

    /// Length of one timeline interval (iterations, max gap, gaps over the availability threshold).
    #[arg(long = "timeline-interval", value_name = "TIME", default_value = "1s", value_parser = parse_duration_arg)]
    pub timeline_interval: Nanos,

    #[command(flatten)]
    pub output: super::OutputArg,
}

/// `-C`: a CPU, or `auto` (the default: a CPU not measured, chosen when the flags are resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MainCpu(pub Option<u32>);

impl std::fmt::Display for MainCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(c) => write!(f, "{c}"),
            None => f.write_str("auto"),
        }
    }
}

fn parse_main_cpu(s: &str) -> Result<MainCpu, String> {
    if s == "auto" {
        return Ok(MainCpu(None));
    }
    s.parse::<u32>()
        .map(|c| MainCpu(Some(c)))
        .map_err(|_| format!("'{s}': expected a CPU number"))
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    match s {
        "no" => Ok(Workload::No),
        "memmove" => Ok(Workload::Memmove),
        _ => Err("expected no or memmove".into()),
    }
}

/// Sizes as oslat takes them: a number with an optional K, M or G suffix (binary units), at most 1G.
fn parse_size(s: &str) -> Result<u64, String> {
    let bytes = super::parse_size_max(s, u64::MAX)?;
    if bytes > 1 << 30 {
        return Err("at most 1G per thread".into());
    }
    Ok(bytes)
}

/// Apply oslat's rules: CPU list (default all usable CPUs), main-thread CPU, thresholds.
pub fn resolve(a: &OslatArgs, root: &HostRoot) -> anyhow::Result<Resolved<OslatPlan>> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let possible = read_cpu_mask(root, CpuMask::Possible).unwrap_or_else(|_| online.clone());
    let allowed = super::allowed_cpus(root, &online);
    let cpus = match &a.cpu_list {
        Some(t) => {
            let set = CpuSet::parse(t).map_err(|e| anyhow::anyhow!("-c/--cpu-list {t}: {e}"))?;
            if set.is_empty() {
                bail!("-c/--cpu-list '{t}': empty CPU list");
            }
            let missing = set.difference(&possible);
            if !missing.is_empty() {
                bail!("-c/--cpu-list {t}: CPU {missing} does not exist on this machine (CPUs {possible})");
            }
            let offline = set.difference(&online);
            if !offline.is_empty() {
                bail!("-c/--cpu-list {t}: CPU {offline} is offline (online: {online})");
            }
            set
        }
        None => allowed.clone(),
    };
    if let Some(c) = a.cpu_main_thread.0 {
        if !possible.contains(c) {
            bail!("-C/--cpu-main-thread {c}: CPU does not exist on this machine (CPUs {possible})");
        }
    }
    let mut notes = Vec::new();
    let main_cpu = main_cpu(a.cpu_main_thread.0, &cpus, &allowed, &mut notes);
    if a.duration.as_ns() == 0 {
        bail!("-D/--duration: must be longer than 0");
    }
    if a.availability_threshold.as_ns() < 1_000 {
        bail!("--availability-threshold: at least 1us");
    }
    let nodes = cpus.iter().map(|c| read_cpu_node(root, c)).collect();
    let plan = OslatPlan {
        config: OslatConfig {
            cpus: cpus.as_slice().to_vec(),
            main_cpu: Some(main_cpu),
            duration: a.duration,
            rtprio: a.rtprio,
            preheat_ns: a.preheat.as_ns(),
            single_preheat: a.single_preheat,
            bucket_count: a.bucket_size,
            bucket_width_ns: a.bucket_width,
            bias: a.bias,
            workload: a.workload,
            workload_mem_bytes: if a.workload == Workload::Memmove {
                a.workload_mem
            } else {
                0
            },
            trace_threshold_ns: a.trace_threshold.map(|us| Nanos::from_us(us).as_ns()),
            availability_threshold_ns: a.availability_threshold.as_ns(),
            thresholds_ns: vec![1_000, 5_000, 10_000, 20_000],
            worst_count: a.worst,
            timeline_interval_ns: a.timeline_interval.as_ns().max(1_000_000),
        },
        nodes,
        tick: main_tick(a),
    };
    Ok(Resolved {
        plan,
        notes,
        why: rtgauge_session::why::WhyOpts {
            counters: true,
            trace: a.trace,
            threshold: None,
            smi_intervals: a.smi,
        },
    })
}

/// The main thread's CPU: `-C`, else the lowest allowed CPU not measured (as cyclic keeps its main
/// thread off the measured CPUs), else — every allowed CPU measured — the lowest allowed one, as oslat's
/// `-C 0`. A main thread sharing a measured CPU is said: its work is that CPU's noise.
fn main_cpu(
    requested: Option<u32>,
    measured: &CpuSet,
    allowed: &CpuSet,
    notes: &mut Vec<String>,
) -> u32 {
    let cpu = requested.unwrap_or_else(|| {
        let rest = allowed.difference(measured);
        let lowest = |s: &CpuSet| s.as_slice().first().copied();
        lowest(&rest).or_else(|| lowest(allowed)).unwrap_or(0)
    });
    if measured.contains(cpu) {
        notes.push(format!(
            "the main thread shares CPU {cpu} with a measuring thread: its bookkeeping (draining, merging, \
             /proc samples, checkpoints) will show as CPU {cpu}'s noise{}",
            if requested.is_some() {
                ""
            } else {
                " (every CPU this process may use is measured; leave one out of -c or pass -C)"
            }
        ));
    }
    cpu
}

/// How often the main thread wakes to drain the rings, sample the interval counters and look for the end:
/// with `-T` every 5 ms (tracing is stopped soon after the hit), with `--trace` every 100 ms (the trace
/// buffers are drained then), else every 250 ms — the threads hand their accumulators over once per
/// timeline interval (at least 1 ms, rings sized for eight ticks, hand-overs wait when no spare is back),
/// checkpoints are seconds apart, and SIGINT is still answered within a quarter second.
fn main_tick(a: &OslatArgs) -> Duration {
    let tick = if a.trace_threshold.is_some() {
        Duration::from_millis(5)
    } else if a.trace {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(250)
    };
    // A thread hands an accumulator over per timeline interval and has three spares: with intervals
    // shorter than the tick they would run out between drains (hand-overs late, windows coarser).
    tick.min(Duration::from_nanos(a.timeline_interval.as_ns()).max(Duration::from_millis(5)))
}

/// A profile's oslat stage: the profile's duration and `--trace`, and its bound as the spike-episode
/// threshold.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let mut args: OslatArgs = cx.parse(argv)?;
    args.duration = cx.duration;
    args.trace |= cx.trace;
    let mut r = cx.named(resolve(&args, cx.root))?;
    r.why.threshold = cx.bound.clone();
    Ok(super::stage::Stage {
        plan: Box::new(r),
        load: args.load.request(),
    })
}

impl super::stage::StagePlan for Resolved<OslatPlan> {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Oslat
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn announce(&self, duration: Nanos, cpus: &CpuSet) -> Option<String> {
        Some(format!(
            "oslat on CPUs {cpus} for {duration} (after a {} preheat)…",
            Nanos(self.plan.config.preheat_ns)
        ))
    }

    fn why(&self) -> Option<rtgauge_session::why::WhyOpts> {
        Some(self.why.clone())
    }

    fn duration(&self) -> Option<Nanos> {
        Some(self.plan.config.duration)
    }

    fn rt_priority(&self) -> Option<i32> {
        self.plan.config.rtprio
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::oslat::Oslat(&self.plan))
    }
}

#[cfg(test)]
mod tests {
    //! oslat command lines, parsed by the verb's own parser and resolved against a captured CPU tree, field
    //! by field: each flag's meaning is tested here, beside its definition.

    use super::*;

    /// A captured /sys tree: `online` and `possible` CPU lists; CPUs 0-7 on node 0, 8-15 on node 1.
    fn tree(online: &str, possible: &str) -> tempfile::TempDir {
        crate::cpu_tree(16, 8, online, possible)
    }

    #[derive(clap::Parser)]
    #[command(no_binary_name = true)]
    struct Line {
        #[command(flatten)]
        args: OslatArgs,
    }

    fn resolve_on(online: &str, line: &str) -> anyhow::Result<OslatPlan> {
        let a = <Line as clap::Parser>::try_parse_from(line.split_whitespace())
            .unwrap()
            .args;
        let t = tree(online, "0-15");
        resolve(&a, &HostRoot::at(t.path())).map(|r| r.plan)
    }

    /// Resolve a command line on a machine with 16 CPUs, all online.
    fn resolved(line: &str) -> OslatPlan {
        resolve_on("0-15", line).unwrap_or_else(|e| panic!("{line}: {e:#}"))
    }

    fn refused(online: &str, line: &str) -> String {
        match resolve_on(online, line) {
            Ok(_) => panic!("{line}: accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_seed_command_line() {
        let p = resolved("-c 2-9 -C 1 -D 20m -f 1 -m 4K -w memmove -B -T 50 -z -q");
        let c = &p.config;
        assert_eq!(c.cpus, (2..=9).collect::<Vec<u32>>());
        assert_eq!(c.main_cpu, Some(1));
        assert_eq!(c.duration, Nanos::from_secs(1_200));
        assert_eq!(c.rtprio, Some(1));
        assert_eq!(c.workload, Workload::Memmove);
        assert_eq!(c.workload_mem_bytes, 4096);
        assert!(c.bias);
        assert_eq!(c.trace_threshold_ns, Some(50_000));
        assert_eq!(p.tick, Duration::from_millis(5), "-T polls the stop often");
        let nodes: Vec<Option<u32>> = (2..=9).map(|c| Some(c / 8)).collect();
        assert_eq!(p.nodes, nodes);
    }

    #[test]
    fn defaults_are_oslats() {
        let p = resolved("-c 3");
        let c = &p.config;
        assert_eq!(c.cpus, vec![3]);
        assert_eq!(c.main_cpu, Some(0), "the lowest CPU not measured");
        assert_eq!(c.duration, Nanos::from_secs(1));
        assert_eq!(c.rtprio, None);
        assert_eq!(c.preheat_ns, 1_000_000_000);
        assert!(!c.single_preheat && !c.bias);
        assert_eq!((c.bucket_count, c.bucket_width_ns), (32, 1000));
        assert_eq!(c.workload, Workload::No);
        assert_eq!(c.workload_mem_bytes, 0, "memory only for memmove");
        assert_eq!(c.trace_threshold_ns, None);
        assert_eq!(c.availability_threshold_ns, 5_000);
        assert_eq!(c.thresholds_ns, vec![1_000, 5_000, 10_000, 20_000]);
        assert_eq!(c.worst_count, 16);
        assert_eq!(c.timeline_interval_ns, 1_000_000_000);
        assert_eq!(p.tick, Duration::from_millis(250));
        assert_eq!(p.nodes, vec![Some(0)]);
    }

    fn resolved_with_notes(online: &str, line: &str) -> (OslatPlan, Vec<String>) {
        let a = <Line as clap::Parser>::try_parse_from(line.split_whitespace())
            .unwrap()
            .args;
        let t = tree(online, "0-15");
        let r = resolve(&a, &HostRoot::at(t.path())).unwrap();
        (r.plan, r.notes)
    }

    #[test]
    fn the_main_thread_stays_off_the_measured_cpus_unless_told() {
        let main = |online: &str, line: &str| {
            let (p, notes) = resolved_with_notes(online, line);
            (p.config.main_cpu, notes)
        };
        assert_eq!(main("0-15", "-c 0"), (Some(1), vec![]));
        assert_eq!(main("0-15", "-c 0-3,5"), (Some(4), vec![]));
        assert_eq!(main("0-15", "-c 0-3 -C 9"), (Some(9), vec![]));
        assert_eq!(main("0-15", "-c 1 -C auto"), (Some(0), vec![]));
        // Every allowed CPU measured (no -c: all of them): oslat's behaviour, said.
        let (cpu, notes) = main("0-3", "");
        assert_eq!(cpu, Some(0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("the main thread shares CPU 0 with a measuring thread")
                && notes[0].contains("will show as CPU 0's noise")
                && notes[0].contains("leave one out of -c or pass -C"),
            "{notes:?}"
        );
        // Pinned onto a measured CPU by the user: said too.
        let (cpu, notes) = main("0-15", "-c 1 -C 1");
        assert_eq!(cpu, Some(1));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("shares CPU 1") && !notes[0].contains("pass -C"),
            "{notes:?}"
        );
    }

    #[test]
    fn the_main_thread_sleeps_as_long_as_the_run_allows() {
        assert_eq!(resolved("-c 1").tick, Duration::from_millis(250));
        assert_eq!(resolved("-c 1 --trace").tick, Duration::from_millis(100));
        assert_eq!(resolved("-c 1 -T 20").tick, Duration::from_millis(5));
    }

    #[test]
    fn buckets_preheat_and_thresholds() {
        let c = resolved(
            "-c 8 -b 64 -W 250 -s --preheat 2s --availability-threshold 10us --worst 4 \
             --timeline-interval 100ms",
        )
        .config;
        assert_eq!((c.bucket_count, c.bucket_width_ns), (64, 250));
        assert!(c.single_preheat);
        assert_eq!(c.preheat_ns, 2_000_000_000);
        assert_eq!(c.availability_threshold_ns, 10_000);
        assert_eq!(c.worst_count, 4);
        assert_eq!(c.timeline_interval_ns, 100_000_000);
        let p = resolved("-c 8 --timeline-interval 1us");
        assert_eq!(p.config.timeline_interval_ns, 1_000_000, "at least 1 ms");
        assert_eq!(
            p.tick,
            Duration::from_millis(5),
            "waking once per interval, 5 ms at most often"
        );
        let p = resolved("-c 8 --timeline-interval 50ms");
        assert_eq!(
            p.tick,
            Duration::from_millis(50),
            "the spares come back every interval"
        );
    }

    #[test]
    fn refusals_name_the_flag() {
        assert_eq!(
            refused("0-15", "-c 20"),
            "-c/--cpu-list 20: CPU 20 does not exist on this machine (CPUs 0-15)"
        );
        assert_eq!(
            refused("0-11", "-c 10-13"),
            "-c/--cpu-list 10-13: CPU 12-13 is offline (online: 0-11)"
        );
        assert_eq!(
            refused("0-15", "-c 1 -C 16"),
            "-C/--cpu-main-thread 16: CPU does not exist on this machine (CPUs 0-15)"
        );
        assert_eq!(
            refused("0-15", "-c 1 -D 0"),
            "-D/--duration: must be longer than 0"
        );
        assert_eq!(
            refused("0-15", "-c 1 --availability-threshold 0"),
            "--availability-threshold: at least 1us"
        );
    }

    #[test]
    fn sizes_as_oslat_takes_them() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("16K"), Ok(16 << 10));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("2G").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("-1K").is_err());
        assert!(parse_size("").is_err());
    }
}

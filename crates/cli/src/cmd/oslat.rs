//! `rtgauge oslat`: oslat's flags with oslat's meaning, resolved into a probe plan, run, and rendered as
//! oslat text/JSON plus rtgauge's own figures and native run document.
//!
//! Differences from oslat, on purpose: `-T` stops the run but still prints the summary and writes the JSON;
//! the average is the exact mean of the gaps (oslat averages bucket upper edges, and adds thread 0's
//! overflow sum to every thread); rtgauge adds loop cost, gaps per second above 1/5/10/20 µs, CPU
//! availability, percentiles and the worst gaps with timestamps.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_formats::rttests;
use rtgauge_host::cpu::{read_cpu_mask, read_cpu_node, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::oslat::{OslatConfig, OslatResult, Workload};
use rtgauge_model::run::{ProbeResult, RunStatus};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::observe::Observer;
use rtgauge_probe::oslat::{self, OslatPlan};
use rtgauge_probe::stop::StopFlag;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
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

    /// CPU of the main thread.
    #[arg(
        short = 'C',
        long = "cpu-main-thread",
        value_name = "CPU",
        default_value_t = 0
    )]
    pub cpu_main_thread: u32,

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

    /// Put load on the system while measuring: KIND[,KIND…][:LEVEL][@housekeeping|measured|all|CPUS]
    /// (kinds cpu, memory, io, fork, timer, msg, ipi). Achieved load is recorded.
    #[arg(long = "load", value_name = "MIX", value_parser = super::load::parse_load)]
    pub load: Option<rtgauge_model::load::LoadSpec>,

    /// Run an external load command beside the probe (e.g. 'stress-ng --cpu 1'), on the CPUs not measured;
    /// stopped with the probe (its whole process group), its CPU use recorded with the result.
    #[arg(long = "load-cmd", value_name = "COMMAND")]
    pub load_cmd: Option<String>,

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

    /// Write rtgauge's native, versioned run document to FILE.
    #[arg(long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
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
pub fn resolve(a: &OslatArgs, root: &HostRoot) -> anyhow::Result<OslatPlan> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let possible = read_cpu_mask(root, CpuMask::Possible).unwrap_or_else(|_| online.clone());
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
        None => rtgauge_probe::rt::current_affinity().intersection(&online),
    };
    if !possible.contains(a.cpu_main_thread) {
        bail!(
            "-C/--cpu-main-thread {}: CPU does not exist on this machine (CPUs {possible})",
            a.cpu_main_thread
        );
    }
    if a.duration.as_ns() == 0 {
        bail!("-D/--duration: must be longer than 0");
    }
    if a.availability_threshold.as_ns() < 1_000 {
        bail!("--availability-threshold: at least 1us");
    }
    let nodes = cpus.iter().map(|c| read_cpu_node(root, c)).collect();
    Ok(OslatPlan {
        config: OslatConfig {
            cpus: cpus.as_slice().to_vec(),
            main_cpu: Some(a.cpu_main_thread),
            duration_ns: a.duration.as_ns(),
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
        tick: if a.trace_threshold.is_some() {
            Duration::from_millis(5)
        } else {
            Duration::from_millis(100)
        },
    })
}

/// oslat's progress lines.
struct Announce {
    quiet: bool,
    preheat_s: f64,
    /// CLOCK_MONOTONIC time the measurement started (after the preheat), ns.
    started_ns: u64,
}

impl Observer<OslatResult> for Announce {
    fn preheat(&mut self) {
        if !self.quiet {
            println!("Pre-heat for {} seconds...", self.preheat_s);
        }
    }
    fn start(&mut self, bias_ns: Option<u64>) {
        self.started_ns = rtgauge_probe::clock::now_ns(rtgauge_probe::clock::Clock::Monotonic);
        if let Some(b) = bias_ns {
            println!("Global bias set to {:.3} (us)", b as f64 / 1000.0);
        }
        if !self.quiet {
            println!("Test starts...");
        }
    }
}

/// Setting shortfalls worth a warning.
pub fn shortfalls(r: &OslatResult) -> Vec<String> {
    let mut w = super::process_shortfalls(&r.conditions);
    for t in &r.threads {
        w.extend(super::thread_shortfalls(
            &format!("CPU {}", t.cpu),
            &t.conditions,
        ));
    }
    if r.counter.cross_check_ppm.abs() > 1000.0 {
        w.push(format!(
            "counter frequency drifted {:+.0} ppm from CLOCK_MONOTONIC_RAW over the run: gap lengths are off by as much",
            r.counter.cross_check_ppm
        ));
    }
    w
}

/// Write oslat's trace marker and stop tracing, if tracefs is mounted (after the run: no I/O in the loop).
fn mark_trace(threshold_us: u64, cpu: u32, gap_ns: u64) -> Option<String> {
    let msg = format!(
        "rtgauge oslat: Trace threshold ({threshold_us} us) triggered on cpu {cpu} with {:.3} us!",
        gap_ns as f64 / 1000.0
    );
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let marker = std::path::Path::new(dir).join("trace_marker");
        if marker.exists() {
            let _ = std::fs::write(&marker, format!("{msg}\n"));
            let _ = std::fs::write(std::path::Path::new(dir).join("tracing_on"), "0");
            break;
        }
    }
    Some(msg)
}

/// `rtgauge oslat`.
pub fn run(a: &OslatArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let plan = resolve(a, &root)?;
    let cfg = &plan.config;
    if a.rtprio.is_some() && cfg.cpus.contains(&0) {
        eprintln!("rtgauge: warning: running a SCHED_FIFO busy loop on CPU 0 may starve its housekeeping work");
    }
    if !a.quiet {
        println!(
            "Total runtime: \t\t{} seconds",
            cfg.duration_ns as f64 / 1e9
        );
        println!(
            "Thread priority: \t{}",
            a.rtprio
                .map_or("default".to_string(), |p| format!("SCHED_FIFO:{p}"))
        );
        println!("CPU list: \t\t{}", CpuSet::new(cfg.cpus.iter().copied()));
        println!("CPU for main thread: \t{}", a.cpu_main_thread);
        println!(
            "Workload: \t\t{}",
            if a.workload == Workload::Memmove {
                "memmove"
            } else {
                "no"
            }
        );
        println!("Workload mem: \t\t{} (KiB)", cfg.workload_mem_bytes / 1024);
        println!(
            "Preheat cores: \t\t{}\n",
            if a.single_preheat { 1 } else { cfg.cpus.len() }
        );
    }
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::output::now_rfc3339();
    let started_2822 = crate::output::now_rfc2822();
    let stop = StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;
    let mut announce = Announce {
        quiet: a.quiet,
        preheat_s: a.preheat.as_secs_f64(),
        started_ns: 0,
    };
    let measured = rtgauge_model::CpuSet::new(plan.config.cpus.iter().copied());
    let load = super::load::start(a.load.as_ref(), a.load_cmd.as_deref(), &measured, &root)?;
    let before = rtgauge_host::accounting::read_snapshot(&root);
    let opts = super::why::WhyOpts {
        counters: true,
        trace: a.trace,
        threshold: None,
    };
    let mut why = super::why::OslatWhy::new(&mut announce, &plan, opts);
    let measured_result = oslat::run(&plan, &stop, &mut why);
    let load = super::load::finish(load);
    let mut result = measured_result?;
    why.finish(&mut result);
    result.load = load;
    result.accounting = Some(rtgauge_host::accounting::delta(
        &before,
        &rtgauge_host::accounting::read_snapshot(&root),
    ));
    let mut out = std::io::stdout().lock();
    if let (Some((cpu, gap)), Some(us)) = (result.trace_hit, a.trace_threshold) {
        if let Some(msg) = mark_trace(us, cpu, gap) {
            writeln!(out, "{msg}")?;
        }
    }
    if !a.quiet {
        writeln!(out, "Test completed.\n")?;
    }
    let warnings = shortfalls(&result);
    for w in &warnings {
        eprintln!("rtgauge: warning: {w}");
    }
    write!(
        out,
        "{}",
        rttests::render_oslat_summary(&result, a.zero_omit)
    )?;
    write!(
        out,
        "{}",
        rttests::render_oslat_extras(&result, announce.started_ns)
    )?;
    if a.trace {
        // Only with --trace: without it the output stays oslat's.
        let p = ProbeResult::Oslat(result.clone());
        write!(out, "{}", rtgauge_report::spikes::render_why(&p))?;
    }
    out.flush()?;

    if let Some(path) = &a.json {
        crate::output::write_rt_tests_json(path, &started_2822, &system, |env| {
            rttests::render_oslat_json(&result, env)
        })?;
    }
    if let Some(path) = &a.output {
        let probe = ProbeResult::Oslat(result);
        let status = RunStatus::of_probes(std::slice::from_ref(&probe), true);
        crate::output::write_output(path, started, system, probe, status, warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    //! oslat command lines, parsed by the verb's own parser and resolved against a captured CPU tree, field
    //! by field: each flag's meaning is tested here, beside its definition.

    use super::*;

    /// A captured /sys tree: `online` and `possible` CPU lists; CPUs 0-7 on node 0, 8-15 on node 1.
    fn tree(online: &str, possible: &str) -> tempfile::TempDir {
        crate::cmd::cpu_tree(16, 8, online, possible)
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
        resolve(&a, &HostRoot::at(t.path()))
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
        assert_eq!(c.duration_ns, 1_200_000_000_000);
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
        assert_eq!(c.main_cpu, Some(0));
        assert_eq!(c.duration_ns, 1_000_000_000);
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
        assert_eq!(p.tick, Duration::from_millis(100));
        assert_eq!(p.nodes, vec![Some(0)]);
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
        let c = resolved("-c 8 --timeline-interval 1us").config;
        assert_eq!(c.timeline_interval_ns, 1_000_000, "at least 1 ms");
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

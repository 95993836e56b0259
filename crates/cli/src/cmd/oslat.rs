//! `rtgauge oslat`: oslat's measurement, rendered as oslat text/JSON plus rtgauge's own figures and native
//! run document. The flags and their resolution are in `rtgauge_flags::oslat`.
//!
//! Differences from oslat, on purpose: `-T` stops the run but still prints the summary and writes the JSON;
//! the average is the exact mean of the gaps (oslat averages bucket upper edges, and adds thread 0's
//! overflow sum to every thread); rtgauge adds loop cost, gaps per second above 1/5/10/20 µs, CPU
//! availability, percentiles and the worst gaps with timestamps.

use rtgauge_flags::oslat::{resolve, OslatArgs};
use rtgauge_flags::Resolved;
use rtgauge_formats::rttests;
use rtgauge_host::HostRoot;
use rtgauge_model::oslat::Workload;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::units::us;
use rtgauge_model::CpuSet;
use rtgauge_session::SessionObserver;
use std::io::Write as _;
use std::process::ExitCode;

/// oslat's progress lines.
struct Announce {
    quiet: bool,
    preheat_s: f64,
    /// CLOCK_MONOTONIC time the measurement started (after the preheat), ns.
    started_ns: u64,
}

impl SessionObserver for Announce {
    fn preheat(&mut self) {
        if !self.quiet {
            println!("Pre-heat for {} seconds...", self.preheat_s);
        }
    }
    fn start(&mut self, bias_ns: Option<u64>) {
        self.started_ns = rtgauge_probe::time::now_ns(rtgauge_probe::time::ClockId::Monotonic);
        if let Some(b) = bias_ns {
            println!("Global bias set to {:.3} (us)", us(b));
        }
        if !self.quiet {
            println!("Test starts...");
        }
    }
}

/// Write oslat's trace marker and stop tracing, if tracefs is mounted (after the run: no I/O in the loop).
fn mark_trace(threshold_us: u64, cpu: u32, gap_ns: u64) -> String {
    let msg = format!(
        "rtgauge oslat: Trace threshold ({threshold_us} us) triggered on cpu {cpu} with {:.3} us!",
        us(gap_ns)
    );
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let marker = std::path::Path::new(dir).join("trace_marker");
        if marker.exists() {
            let _ = std::fs::write(&marker, format!("{msg}\n"));
            let _ = std::fs::write(std::path::Path::new(dir).join("tracing_on"), "0");
            break;
        }
    }
    msg
}

/// oslat's header lines (unless `-q`).
fn print_header(a: &OslatArgs, plan: &rtgauge_probe::oslat::OslatPlan) {
    let cfg = &plan.config;
    println!("Total runtime: \t\t{} seconds", cfg.duration.as_secs_f64());
    println!(
        "Thread priority: \t{}",
        a.rtprio
            .map_or("default".to_string(), |p| format!("SCHED_FIFO:{p}"))
    );
    println!("CPU list: \t\t{}", CpuSet::new(cfg.cpus.iter().copied()));
    if let Some(c) = cfg.main_cpu {
        println!("CPU for main thread: \t{c}");
    }
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

/// `rtgauge oslat`.
pub fn run(a: &OslatArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let Resolved { plan, notes, why } = resolve(a, &root)?;
    super::warn_all(&notes);
    if a.rtprio.is_some() && plan.config.cpus.contains(&0) {
        eprintln!("rtgauge: warning: running a SCHED_FIFO busy loop on CPU 0 may starve its housekeeping work");
    }
    if !a.quiet {
        print_header(a, &plan);
    }
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::output::now_rfc3339();
    let started_2822 = crate::output::now_rfc2822();
    let stop = super::stop_on_signals()?;
    let mut announce = Announce {
        quiet: a.quiet,
        preheat_s: a.preheat.as_secs_f64(),
        started_ns: 0,
    };
    let around = rtgauge_session::Around {
        load: a.load.request(),
        why: Some(why),
        accounting: true,
    };
    let (result, shortfalls) = super::measure_one(
        &root,
        &stop,
        &rtgauge_session::kind::oslat::Oslat(&plan),
        &around,
        &mut [&mut announce],
    )?;
    let mut out = std::io::stdout().lock();
    if let (Some((cpu, gap)), Some(us)) = (result.trace_hit, a.trace_threshold) {
        writeln!(out, "{}", mark_trace(us, cpu, gap))?;
    }
    if !a.quiet {
        writeln!(out, "Test completed.\n")?;
    }
    super::warn_all(&shortfalls);
    let mut warnings = notes;
    warnings.extend(shortfalls);
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
        write!(
            out,
            "{}",
            rtgauge_report::spikes::render_why(&result, rtgauge_report::text::TextOptions::full())
        )?;
    }
    out.flush()?;

    if let Some(path) = &a.json {
        crate::output::write_rt_tests_json(path, &started_2822, &system, |env| {
            rttests::render_oslat_json(&result, env)
        })?;
    }
    if let Some(path) = &a.output.output {
        let probe = ProbeResult::from(result);
        let status = rtgauge_analysis::judge::run_status(std::slice::from_ref(&probe), true);
        crate::output::write_output(path, started, system, probe, status, warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

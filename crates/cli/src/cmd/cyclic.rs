//! `rtgauge cyclic`: cyclictest's measurement, rendered as rt-tests text/JSON and as rtgauge's native run
//! document. The flags and their resolution are in `rtgauge_flags::cyclic`.
//!
//! Differences from cyclictest, on purpose (docs/METHODOLOGY.md explains why):
//! - periods already over at wake-up are measured and counted as missed deadlines (`--skip-missed` restores
//!   cyclictest's skip-ahead, and still counts what it skips);
//! - latencies are kept in ns in an HDR histogram that is never truncated; `-h` only shapes the rt-tests view;
//! - the summary lines are printed at the end even with `-q -h`, followed by percentiles and missed deadlines.

use anyhow::Context as _;
use rtgauge_flags::cyclic::{resolve, CyclicArgs};
use rtgauge_flags::Resolved;
use rtgauge_formats::rttests;
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_probe::cyclic::CyclicPlan;
use rtgauge_session::{SessionObserver, Tick};
use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

/// cyclictest's live screen on a terminal, redrawn in place every tick.
struct LiveScreen {
    policy: String,
    unit_ns: u64,
    drawn: bool,
    root: HostRoot,
}

impl SessionObserver for LiveScreen {
    fn tick(&mut self, tick: &Tick<'_>, _: Option<&mut dyn FnMut() -> ProbeResult>) {
        let mut out = std::io::stdout().lock();
        if self.drawn {
            let _ = write!(out, "\x1b[{}A", tick.threads.len() + 2);
        }
        let load = rtgauge_host::system::read_loadavg(&self.root);
        let _ = write!(
            out,
            "{}",
            rttests::render_live_screen(&self.policy, &load, tick.threads, self.unit_ns)
        );
        let _ = out.flush();
        self.drawn = true;
    }
}

/// `rtgauge cyclic`.
pub fn run(a: &CyclicArgs) -> anyhow::Result<ExitCode> {
    let root = a.root.open()?;
    let Resolved { plan, notes, why } = resolve(a, &root)?;
    for n in &notes {
        eprintln!("rtgauge: warning: {n}");
    }
    if a.dry_run {
        return dry_run(&plan);
    }
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::output::now_rfc3339();
    let started_2822 = crate::output::now_rfc2822();
    let stop = super::stop_on_signals()?;
    let mut screen = LiveScreen {
        policy: plan.config.policy.to_string(),
        unit_ns: plan.config.unit_ns,
        drawn: false,
        root: HostRoot::live(),
    };
    let live = !a.quiet && std::io::stdout().is_terminal();
    let around = rtgauge_session::Around {
        load: a.load.request(),
        why: Some(why.clone()),
        accounting: true,
    };
    let mut observers: Vec<&mut dyn SessionObserver> = Vec::new();
    if live {
        observers.push(&mut screen);
    }
    let (result, shortfalls) = super::measure_one(
        &root,
        &stop,
        &rtgauge_session::kind::cyclic::Cyclic(&plan),
        &around,
        &mut observers,
    )?;
    if screen.drawn {
        // Replace the live block by the final summary rather than printing the lines twice.
        print!("\x1b[{}A\x1b[J", plan.config.threads + 2);
    }
    super::warn_all(&shortfalls);
    let mut warnings = notes;
    warnings.extend(shortfalls);
    warnings.extend(histogram_limits(&result));
    print_text(&result, a)?;
    if why.trace {
        // Only with --trace: without it the output stays cyclictest's, byte for byte.
        print!(
            "{}",
            rtgauge_report::spikes::render_why(&result, rtgauge_report::text::TextOptions::full())
        );
    }
    if let Some(path) = &a.json {
        crate::output::write_rt_tests_json(path, &started_2822, &system, |env| {
            rttests::render_cyclictest_json(&result, env)
        })?;
    }
    if let Some(path) = &a.output.output {
        let probe = ProbeResult::from(result);
        let status = rtgauge_analysis::judge::run_status(std::slice::from_ref(&probe), true);
        crate::output::write_output(path, started, system, probe, status, warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--dry-run`: the resolved configuration as JSON.
fn dry_run(plan: &CyclicPlan) -> anyhow::Result<ExitCode> {
    let v = serde_json::json!({
        "config": plan.config,
        "mlockall": plan.mlockall,
        "cpu_dma_latency_us": plan.dma_latency_us,
        "main_cpus": plan.main_cpus,
        "clock": plan.clock.name(),
    });
    crate::output::write_json(std::path::Path::new("-"), &v)?;
    Ok(ExitCode::SUCCESS)
}

/// The rt-tests histogram (-h/-H) loses what lies beyond its range; its text and JSON, and any tool that
/// reads them, see only a count there. Said like `import` says it (printed and returned); our own
/// percentiles are exact.
fn histogram_limits(result: &CyclicResult) -> Vec<String> {
    let Some(limit) = result.config.overflow_threshold_ns() else {
        return Vec::new();
    };
    let mut w = Vec::new();
    for t in &result.threads {
        let over = t.linear.as_ref().map_or(0, |l| l.overflows);
        let what = format!("thread {}", t.index);
        if let Some(l) = rtgauge_model::latency::limit_warning(&what, &t.latency, limit, over) {
            let l = format!(
                "rt-tests histogram output: {l} there (rtgauge's own percentiles are exact)"
            );
            eprintln!("rtgauge: warning: {l}");
            w.push(l);
        }
    }
    w
}

/// Summary lines, percentiles, spikes, histogram (to --histfile if given) and break information, in
/// cyclictest's order of output.
fn print_text(r: &CyclicResult, a: &CyclicArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    write!(
        out,
        "{}",
        rttests::render_cyclic_summary(r, a.spike.is_some())
    )?;
    if r.config.hist_buckets.is_some() {
        let text = rttests::render_histogram(r, a.histofall.is_some());
        match &a.histfile {
            Some(p) => {
                std::fs::write(p, text).with_context(|| format!("--histfile {}", p.display()))?
            }
            None => write!(out, "{text}")?,
        }
    }
    write!(out, "{}", rttests::render_break(r))?;
    out.flush()?;
    Ok(())
}

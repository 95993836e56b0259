//! `rtgauge hwnoise`: the kernel's hwlat tracer (hwlatdetect's method) or osnoise with interrupts off (rtla
//! hwnoise's) on the chosen CPUs, with the SMIs each CPU took; per-CPU figures on the terminal,
//! rt-tests-style JSON with `--json`, the run document with `--output`. The flags and their resolution are
//! in `rtgauge_flags::hwnoise`, the tracers' driving in `rtgauge_probe::hwnoise`.

use rtgauge_flags::hwnoise::{resolve, HwnoiseArgs};
use rtgauge_flags::stage::StagePlan as _;
use rtgauge_host::HostRoot;
use rtgauge_model::run::ProbeResult;
use rtgauge_report::kind::KindView as _;
use std::process::ExitCode;

/// `rtgauge hwnoise`.
pub fn run(a: &HwnoiseArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let plan = resolve(a, &root)?;
    let stop = super::stop_on_signals()?;
    let started = crate::output::now_rfc3339();
    let started_2822 = crate::output::now_rfc2822();
    if let Some(why) = plan.unavailable() {
        anyhow::bail!("{why}");
    }
    let duration = plan.config.duration.unwrap_or_default();
    if let Some(l) = plan.announce(duration, &plan.config.cpus) {
        eprintln!("rtgauge: {l}");
    }
    let around = rtgauge_session::Around {
        why: plan.why(),
        ..rtgauge_session::Around::default()
    };
    let (result, warnings) = super::measure_one(
        &root,
        &stop,
        &rtgauge_session::kind::hwnoise::Hwnoise(&plan),
        &around,
        &mut [],
    )?;
    super::warn_all(&warnings);
    super::print_text(&result.terminal_section(
        &rtgauge_model::kind::RunFacts {
            missed_deadlines_known: true,
        },
        rtgauge_report::text::TextOptions::full(),
    ))?;
    let system = rtgauge_host::system::read_system_info(&root);
    if let Some(path) = &a.json {
        crate::output::write_rt_tests_json(path, &started_2822, &system, |env| {
            rtgauge_formats::rttests::hwnoise::render_json(&result, env)
        })?;
    }
    let probe = ProbeResult::from(result);
    if let Some(path) = &a.output.output {
        let status = rtgauge_analysis::judge::run_status(std::slice::from_ref(&probe), true);
        crate::output::write_output(path, started, system, probe, status, warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

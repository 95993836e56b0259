//! `rtgauge clock`: how well the clock is kept over a run — ptp4l, chrony, each PHC and the kernel,
//! polled at `--rate`; its time section on the terminal, stored like a run. The flags are
//! `rtgauge_flags::clock`, the polling `rtgauge_probe::clock`.

use super::keep::{keep_run, open_store, Keep};
use rtgauge_flags::clock::{resolve, ClockArgs};
use rtgauge_flags::stage::StagePlan as _;
use rtgauge_host::HostRoot;
use rtgauge_model::run::{ProbeResult, RunStatus};
use rtgauge_report::kind::KindView as _;
use std::process::ExitCode;

/// `rtgauge clock`.
pub fn run(a: &ClockArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let plan = resolve(a)?;
    let keep = Keep {
        store: &a.store,
        no_store: a.no_store,
        output: &a.output,
        label: &a.label,
    };
    let store = open_store(&keep)?;
    let stop = super::stop_on_signals()?;
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::output::now_rfc3339();
    let duration = plan.config.duration;
    if let Some(l) = plan.announce(duration, &rtgauge_model::CpuSet::new([])) {
        eprintln!("rtgauge: {l}");
    }
    let probe = rtgauge_session::kind::clock::Clock(&plan);
    let (result, warnings) = super::measure_one(
        &root,
        &stop,
        &probe,
        &rtgauge_session::Around::default(),
        &mut [],
    )?;
    let status = if stop.is_set() {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    };
    let text = result.terminal_section(
        &rtgauge_model::kind::RunFacts {
            missed_deadlines_known: true,
        },
        rtgauge_report::text::TextOptions::full(),
    );
    let mut doc = crate::output::document(
        started,
        system,
        vec![ProbeResult::from(result)],
        status,
        warnings.clone(),
    );
    keep_run(&keep, store, &mut doc, || {
        super::warn_all(&warnings);
        super::print_text(&text)?;
        Ok(ExitCode::SUCCESS)
    })
}

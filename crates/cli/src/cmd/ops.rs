//! `rtgauge ops`: OS-primitive costs in the manner of lmbench (null syscall, I/O, signals, IPC round trips,
//! context switch, process creation, mmap, page fault, sleep overshoot, clock and counter reads), measured,
//! rendered as a table and optionally written as a run document.

use rtgauge_flags::ops::{resolve, OpsArgs};
use rtgauge_host::HostRoot;
use rtgauge_model::run::{ProbeResult, RunStatus};
use std::process::ExitCode;

/// `rtgauge ops`.
pub fn run(a: &OpsArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let plan = resolve(a, &root)?;
    let stop = super::stop_on_signals()?;
    let started = crate::output::now_rfc3339();
    let around = rtgauge_session::Around {
        load: a.load.request(),
        ..rtgauge_session::Around::default()
    };
    let (result, warnings) = super::measure_one(
        &root,
        &stop,
        &rtgauge_session::kind::ops::Ops(&plan),
        &around,
        &mut [],
    )?;
    super::warn_all(&warnings);
    super::print_text(&rtgauge_report::kind::ops::render_table(&result))?;
    let probe = ProbeResult::from(result);
    if let Some(path) = &a.output.output {
        let status = if stop.is_set() {
            RunStatus::Interrupted
        } else {
            RunStatus::Complete
        };
        let system = rtgauge_host::system::read_system_info(&root);
        crate::output::write_output(path, started, system, probe, status, warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

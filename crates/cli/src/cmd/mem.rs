//! `rtgauge mem`: load-latency curve over a randomised pointer chain (cache and TLB steps, named after the
//! caches sysfs reports), read/write/copy bandwidth and the NUMA latency/bandwidth matrix.

use rtgauge_flags::mem::{resolve, MemArgs};
use rtgauge_host::HostRoot;
use rtgauge_model::run::{ProbeResult, RunStatus};
use std::process::ExitCode;

/// `rtgauge mem`.
pub fn run(a: &MemArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let plan = resolve(a, &root)?;
    let stop = super::stop_on_signals()?;
    let started = crate::output::now_rfc3339();
    let (result, warnings) = super::measure_one(
        &root,
        &stop,
        &rtgauge_session::kind::mem::Mem(&plan),
        &rtgauge_session::Around::default(),
        &mut [],
    )?;
    super::warn_all(&warnings);
    super::print_text(&rtgauge_report::kind::mem::render(&result, true))?;
    let probe = ProbeResult::from(result);
    if let Some(path) = &a.output.output {
        let system = rtgauge_host::system::read_system_info(&root);
        crate::output::write_output(path, started, system, probe, RunStatus::Complete, warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

//! `rtgauge numa`: NUMA locality of what runs (seed 002): per process and per cgroup, the share of resident
//! memory on the nodes of the CPUs it may run on, and the node allocation counters over an interval.

use anyhow::bail;
use rtgauge_flags::numa::*;
use rtgauge_host::HostRoot;
use rtgauge_model::numa::NumaResult;
use rtgauge_model::run::RunStatus;
use rtgauge_model::Nanos;
use std::process::ExitCode;

/// Measure: the listed PIDs (or every process when `pids` is empty).
pub fn measure(root: &HostRoot, pids: &[u32], interval: Nanos) -> NumaResult {
    rtgauge_host::numa::read_numa(root, (!pids.is_empty()).then_some(pids), interval.as_ns())
}

pub fn run(a: &NumaArgs) -> anyhow::Result<ExitCode> {
    if a.pids.is_empty() && !a.all {
        bail!("give PIDs or --all");
    }
    let root = a.root.open()?;
    for p in &a.pids {
        if !root.exists(&format!("/proc/{p}")) {
            bail!("PID {p}: no such process");
        }
    }
    let started = crate::output::now_rfc3339();
    let result = measure(&root, &a.pids, a.interval);
    super::print_text(&rtgauge_report::kind::numa::render(&result, a.top as usize))?;
    if let Some(path) = &a.output.output {
        crate::output::write_output(
            path,
            started,
            rtgauge_host::system::read_system_info(&root),
            result.into(),
            RunStatus::Complete,
            Vec::new(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

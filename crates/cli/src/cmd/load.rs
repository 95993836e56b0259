//! `rtgauge load MIX`: the load generators alone, beside another tool (the probes' `--load` runs them
//! through the session engine, `rtgauge_session::load`).

use anyhow::Context as _;
use rtgauge_flags::load::LoadArgs;
use rtgauge_host::HostRoot;
use rtgauge_model::load::LoadPlacement;
use rtgauge_model::CpuSet;
use rtgauge_probe::load::Load;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `rtgauge load`.
pub fn run(a: &LoadArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let mut spec = a.mix.clone();
    if let Some(l) = a.level {
        spec.level = l;
    }
    if let Some(c) = &a.cpus {
        spec.placement =
            LoadPlacement::Cpus(CpuSet::parse(c).map_err(|e| anyhow::anyhow!("--cpus {c}: {e}"))?);
    }
    let stop = super::stop_on_signals()?;
    let plan = rtgauge_session::load::plan(&spec, &CpuSet::default(), &root)?;
    let load =
        Load::start(&plan).with_context(|| format!("load {spec}: starting the generators"))?;
    let until = a
        .duration
        .map(|d| Instant::now() + Duration::from_nanos(d.as_ns()));
    while !stop.is_set() && until.is_none_or(|u| Instant::now() < u) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = load.stop();
    println!("{}", r.summary());
    for g in &r.generators {
        println!(
            "  {:<7} CPU {:>3}  {:>12.1} {:<10} {:>5.1} % CPU",
            g.kind.as_str(),
            g.cpu,
            g.rate,
            g.kind.unit(),
            g.cpu_percent
        );
    }
    if let Some(path) = &a.output.output {
        crate::output::write_json(path, &r)
            .with_context(|| format!("--output {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

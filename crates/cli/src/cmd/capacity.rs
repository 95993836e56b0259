//! `rtgauge capacity`: the timer-latency probe runs at each load level (repeated) through the session
//! engine, every run is judged against one gate, and the answer is the highest level up to which the gate
//! held at every level, with the whole latency-vs-load curve beside it (table, JSON, HTML). The search and
//! its answer are `rtgauge_analysis::capacity`, the views `rtgauge_report::capacity`.

use anyhow::{bail, Context as _};
use clap::Parser;
use rtgauge_analysis::capacity::{
    capacity_level, next_search_level, Capacity, CapacityPoint, CapacitySample,
};
use rtgauge_flags::capacity::CapacityArgs;
use rtgauge_host::HostRoot;
use rtgauge_model::load::LoadSpec;
use rtgauge_model::Nanos;
use rtgauge_probe::cyclic::CyclicPlan;
use rtgauge_probe::stop::StopFlag;
use std::process::ExitCode;

#[derive(Parser)]
#[command(no_binary_name = true)]
struct CyclicFlags {
    #[command(flatten)]
    args: rtgauge_flags::cyclic::CyclicArgs,
}

/// The timer probe capacity measures with: one SCHED_FIFO thread on `cpu`, as the flags say.
fn cyclic_plan(a: &CapacityArgs, cpu: u32, root: &HostRoot) -> anyhow::Result<CyclicPlan> {
    let argv: Vec<String> = [
        "-m".to_string(),
        "-q".into(),
        "-p".into(),
        a.priority.to_string(),
        "-i".into(),
        a.interval.to_string(),
        "-a".into(),
        cpu.to_string(),
        "-D".into(),
        format!("{}ms", (a.duration.as_ns() / 1_000_000).max(1)),
    ]
    .into();
    let args = CyclicFlags::try_parse_from(&argv)
        .map_err(|e| anyhow::anyhow!("capacity: building the cyclic probe: {e}"))?
        .args;
    Ok(rtgauge_flags::cyclic::resolve(&args, root)?.plan)
}

/// Measures the levels of one capacity search.
struct LevelSearch<'a> {
    a: &'a CapacityArgs,
    plan: CyclicPlan,
    root: HostRoot,
    stop: StopFlag,
    /// Set when a run did not get what it asked for (SCHED_FIFO refused, …): the search stops, as a curve of
    /// a normal-priority thread answers nothing about the platform's capacity.
    refused: std::cell::Cell<bool>,
}

impl LevelSearch<'_> {
    /// One level: its runs, or None when a signal stopped the measurement.
    fn measure(&self, level: u8) -> anyhow::Result<Option<CapacityPoint>> {
        let a = self.a;
        let mut runs = Vec::new();
        for rep in 0..a.repeat {
            if self.stop.is_set() {
                return Ok(None);
            }
            eprintln!(
                "capacity: level {level} %, run {}/{} ({})…",
                rep + 1,
                a.repeat,
                Nanos(a.duration.as_ns())
            );
            let spec = (level > 0).then(|| LoadSpec {
                level,
                ..a.load.clone()
            });
            let around = rtgauge_session::Around {
                load: rtgauge_session::load::LoadRequest::generators(spec),
                why: Some(rtgauge_session::why::WhyOpts {
                    counters: true,
                    ..Default::default()
                }),
                accounting: false,
            };
            let m = rtgauge_session::Session {
                root: &self.root,
                stop: &self.stop,
            }
            .measure_kind(
                &rtgauge_session::kind::cyclic::Cyclic(&self.plan),
                &around,
                &mut [],
            )?;
            let unmet = crate::output::unmet_of(&m.results);
            if rtgauge_model::conditions::degrades(&unmet) {
                for u in &unmet {
                    eprintln!("rtgauge: NOT MET: {}", u.line());
                }
                self.refused.set(true);
                return Ok(None);
            }
            let r = rtgauge_session::first::<rtgauge_model::cyclic::CyclicResult, _>(&m.results)?;
            runs.push(CapacitySample::of(r, &a.gate).context("the probe returned no thread")?);
        }
        Ok(Some(CapacityPoint::new(level, runs)))
    }
}

/// `rtgauge capacity`.
pub fn run(a: &CapacityArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let allowed = rtgauge_probe::rt::current_affinity();
    let cpu = match a.cpu {
        Some(c) if allowed.contains(c) => c,
        Some(c) => bail!("-a/--cpu {c}: not a CPU this process may use (CPUs {allowed})"),
        None => allowed
            .iter()
            .last()
            .context("no CPU available to run on")?,
    };
    let levels = LevelSearch {
        a,
        plan: cyclic_plan(a, cpu, &root)?,
        root,
        stop: super::stop_on_signals()?,
        refused: std::cell::Cell::new(false),
    };
    let mut curve: Vec<CapacityPoint> = Vec::new();
    match a.search {
        None => {
            for &level in &a.levels.0 {
                match levels.measure(level)? {
                    Some(p) => curve.push(p),
                    None => break,
                }
            }
        }
        Some(step) => {
            let (mut lo, mut hi) = (None::<u8>, None::<u8>);
            while let Some(level) = next_search_level(lo, hi, step) {
                let Some(p) = levels.measure(level)? else {
                    break;
                };
                if p.holds {
                    lo = Some(level);
                } else {
                    hi = Some(level);
                }
                curve.push(p);
            }
            curve.sort_by_key(|p| p.level);
        }
    }
    if levels.refused.get() {
        eprintln!(
            "capacity: not judged: the probe did not get what it asked for (above); no level was searched"
        );
        return Ok(ExitCode::from(super::run::NOT_JUDGED));
    }
    let answer = Capacity {
        gate: a.gate.clone(),
        load: a.load.to_string(),
        cpu,
        duration_ns: a.duration.as_ns(),
        repeat: a.repeat,
        capacity_level: capacity_level(&curve),
        curve,
    };
    // As every --output: a file before the text (a closed stdout does not cost it), '-' after it. A file
    // that cannot be written fails the verb only after the table is printed: the search may have taken
    // hours, and its answer is not lost to a mistyped path.
    let output = a.output.output.as_deref();
    let file = crate::output::write_output_file(output, &answer);
    let page = a.html.html.as_ref().map(|path| {
        super::report::write_html(path, &rtgauge_report::capacity::render_html(&answer))
    });
    super::print_text(&rtgauge_report::capacity::render_table(&answer))?;
    crate::output::write_output_to_stdout(output, &answer)?;
    file?;
    page.transpose()?;
    Ok(if answer.capacity_level.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

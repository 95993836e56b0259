//! `rtgauge capacity`: the method of the NFV-to-KVM slides — vary the load, collect latency, determine
//! capacity. The timer-latency probe runs at each load level (repeated), every run is judged against one
//! gate, and the answer is the highest level up to which the gate held at every level, with the whole
//! latency-vs-load curve beside it (table, JSON).
//!
//! A level holds when the gate holds in *every* repetition (the worst run decides): a capacity is a promise,
//! and one failing run out of three is a failure to keep it.

use super::load::parse_load;
use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::{Args, Parser};
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::load::{LoadResult, LoadSpec};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::stop::StopFlag;
use serde::Serialize;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Find the highest load level at which a latency gate still holds, and the latency-vs-load curve.
#[derive(Debug, Clone, Args)]
pub struct CapacityArgs {
    /// The requirement: cyclic.max, cyclic.p50, cyclic.p90, cyclic.p99, cyclic.p99.9 or cyclic.p99.99,
    /// then '<=' and a duration, e.g. 'cyclic.max<=120us'.
    #[arg(long, value_name = "GATE", value_parser = parse_gate)]
    pub gate: CapacityGate,

    /// The load to vary: generators and placement as for --load (its level is replaced by each of --levels).
    #[arg(long, value_name = "MIX", value_parser = parse_load)]
    pub load: LoadSpec,

    /// Load levels to measure at, duty-cycle percent, comma-separated; 0 = no load (the idle baseline).
    #[arg(long, value_name = "LIST", default_value = "0,25,50,75,100", value_parser = parse_levels)]
    pub levels: Levels,

    /// Search instead of --levels: bisect 0..100 % until the highest level that holds and the lowest that
    /// fails are STEP apart (e.g. --search 5).
    #[arg(long, value_name = "STEP", conflicts_with = "levels", value_parser = clap::value_parser!(u8).range(1..=50))]
    pub search: Option<u8>,

    /// Runs per level; the level holds only if the gate holds in every run.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Length of each run.
    #[arg(short = 'D', long, value_name = "TIME", default_value = "5s", value_parser = parse_duration_arg)]
    pub duration: Nanos,

    /// The measured CPU (default: the last CPU this process may use).
    #[arg(short = 'a', long, value_name = "CPU")]
    pub cpu: Option<u32>,

    /// SCHED_FIFO priority of the measuring thread.
    #[arg(short = 'p', long, value_name = "PRIO", default_value_t = 80, value_parser = clap::value_parser!(i32).range(1..=99))]
    pub priority: i32,

    /// Timer interval, µs.
    #[arg(short = 'i', long, value_name = "US", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=1_000_000))]
    pub interval: u64,

    /// Write the curve and the answer as JSON to FILE ('-' = stdout instead of the table).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Write a self-contained HTML page with the latency-vs-load chart and the table to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Which latency figure a gate bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    Max,
    Percentile(f64),
}

/// `cyclic.FIGURE<=BOUND`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityGate {
    pub text: String,
    pub figure: Figure,
    pub max_ns: u64,
}

fn parse_gate(s: &str) -> Result<CapacityGate, String> {
    let (metric, bound) = s
        .split_once("<=")
        .ok_or_else(|| format!("'{s}' is not METRIC<=BOUND (e.g. cyclic.max<=120us)"))?;
    let figure = match metric.trim().strip_prefix("cyclic.") {
        Some("max") => Figure::Max,
        Some(p) => {
            let v: f64 = p
                .strip_prefix('p')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("'{metric}' is not cyclic.max or cyclic.pNN"))?;
            if !rtgauge_model::latency::DEFAULT_PERCENTILES.contains(&v) {
                return Err(format!(
                    "'{metric}': percentiles kept are p50, p90, p99, p99.9, p99.99 and p99.999"
                ));
            }
            Figure::Percentile(v)
        }
        None => return Err(format!("'{metric}' is not a cyclic.* metric")),
    };
    let max_ns = rtgauge_model::units::parse_duration(bound.trim())
        .map_err(|e| format!("bound '{bound}': {e}"))?
        .as_ns();
    Ok(CapacityGate {
        text: s.trim().to_string(),
        figure,
        max_ns,
    })
}

/// Load levels, ascending, no duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels(pub Vec<u8>);

fn parse_levels(s: &str) -> Result<Levels, String> {
    let mut v = Vec::new();
    for t in s.split(',').map(str::trim) {
        let l: u8 = t
            .parse()
            .ok()
            .filter(|l| *l <= 100)
            .ok_or_else(|| format!("level '{t}' is not 0..100"))?;
        v.push(l);
    }
    v.sort_unstable();
    v.dedup();
    Ok(Levels(v))
}

/// One run at one level.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// The gated figure.
    pub value_ns: u64,
    pub holds: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadResult>,
}

/// One level of the curve: its runs and the worst of them.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub level: u8,
    pub runs: Vec<Sample>,
    /// Worst (largest) gated figure over the runs.
    pub worst_ns: u64,
    pub holds: bool,
}

/// What `capacity` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    pub gate: CapacityGate,
    pub load: String,
    pub cpu: u32,
    pub duration_ns: u64,
    pub repeat: u32,
    /// The highest level up to which every measured level held; None = no level holds.
    pub capacity_level: Option<u8>,
    pub curve: Vec<Point>,
}

/// The highest level such that it and every lower level held.
pub fn capacity_level(curve: &[Point]) -> Option<u8> {
    curve.iter().take_while(|p| p.holds).last().map(|p| p.level)
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct CyclicFlags {
    #[command(flatten)]
    args: super::cyclic::CyclicArgs,
}

fn sample(r: &CyclicResult, gate: &CapacityGate) -> anyhow::Result<Sample> {
    let t = r.threads.first().context("the probe returned no thread")?;
    let l = &t.latency;
    let p = |v: f64| l.percentile(v).unwrap_or(l.max_ns);
    let value_ns = match gate.figure {
        Figure::Max => l.max_ns,
        Figure::Percentile(v) => p(v),
    };
    Ok(Sample {
        p50_ns: p(50.0),
        p99_ns: p(99.0),
        p999_ns: p(99.9),
        max_ns: l.max_ns,
        value_ns,
        holds: value_ns <= gate.max_ns,
        load: r.load.clone(),
    })
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
    let measured = CpuSet::new([cpu]);
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
    let resolved = super::cyclic::resolve(&args, &root)?;
    let stop = StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;

    // One level: its runs, or None when a signal stopped the measurement.
    let measure_level = |level: u8| -> anyhow::Result<Option<Point>> {
        let mut runs = Vec::new();
        for rep in 0..a.repeat {
            if stop.is_set() {
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
            let load = super::load::start(spec.as_ref(), None, &measured, &root)?;
            let measured_result = super::cyclic::measure(
                &resolved.plan,
                &resolved.why,
                true,
                &stop,
                &mut |_, _, _| {},
            );
            let achieved = load.map(super::load::stop);
            let mut r = measured_result?;
            r.load = achieved;
            runs.push(sample(&r, &a.gate)?);
        }
        let worst_ns = runs.iter().map(|s| s.value_ns).max().unwrap_or(0);
        Ok(Some(Point {
            level,
            holds: runs.iter().all(|s| s.holds),
            worst_ns,
            runs,
        }))
    };
    let mut curve: Vec<Point> = Vec::new();
    match a.search {
        None => {
            for &level in &a.levels.0 {
                match measure_level(level)? {
                    Some(p) => curve.push(p),
                    None => break,
                }
            }
        }
        Some(step) => {
            // Bisection over 0..=100: the bound between the highest level seen to hold and the lowest seen
            // to fail narrows until they are `step` apart (about log2(100 / step) + 2 levels measured).
            let (mut lo, mut hi) = (None::<u8>, None::<u8>);
            let mut next = Some(100u8);
            while let Some(level) = next {
                let Some(p) = measure_level(level)? else {
                    break;
                };
                if p.holds {
                    lo = Some(level);
                } else {
                    hi = Some(level);
                }
                curve.push(p);
                next = match (lo, hi) {
                    (Some(_), None) => None,      // 100 % holds
                    (None, Some(100)) => Some(0), // then try idle
                    (None, Some(_)) => None,      // idle fails: nothing holds
                    (Some(l), Some(h)) if h > l && h - l > step => Some(l + (h - l) / 2),
                    _ => None,
                };
            }
            curve.sort_by_key(|p| p.level);
        }
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
    let to_stdout = a.output.as_deref() == Some(std::path::Path::new("-"));
    if !to_stdout {
        print_table(&answer)?;
    }
    if let Some(path) = &a.output {
        crate::output::write_json(path, &answer)
            .with_context(|| format!("--output {}", path.display()))?;
    }
    if let Some(path) = &a.html {
        std::fs::write(path, html_page(&answer))
            .with_context(|| format!("--html {}", path.display()))?;
    }
    Ok(if answer.capacity_level.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One line saying what was found.
fn answer_line(c: &Capacity) -> String {
    match c.capacity_level {
        Some(l) => format!("capacity: the gate holds up to load level {l} %"),
        None => format!("capacity: no level holds ({})", c.gate.text),
    }
}

/// The worst run of each level (by the gated figure).
fn worst_runs(c: &Capacity) -> Vec<(&Point, &Sample)> {
    c.curve
        .iter()
        .filter_map(|p| p.runs.iter().max_by_key(|s| s.value_ns).map(|s| (p, s)))
        .collect()
}

fn html_page(c: &Capacity) -> String {
    let worst = worst_runs(c);
    let curve = |f: fn(&Sample) -> u64| -> Vec<(f64, f64)> {
        worst
            .iter()
            .map(|(p, s)| (f64::from(p.level), f(s) as f64))
            .collect()
    };
    let series = vec![
        ("p50".to_string(), curve(|s| s.p50_ns)),
        ("p99".to_string(), curve(|s| s.p99_ns)),
        ("p99.9".to_string(), curve(|s| s.p999_ns)),
        ("max".to_string(), curve(|s| s.max_ns)),
    ];
    let rows: Vec<Vec<String>> = worst
        .iter()
        .map(|(p, s)| {
            vec![
                format!("{} %", p.level),
                us(s.p50_ns),
                us(s.p99_ns),
                us(s.p999_ns),
                us(s.max_ns),
                us(p.worst_ns),
                if p.holds { "holds" } else { "FAILS" }.to_string(),
                s.load
                    .as_ref()
                    .map_or_else(|| "none".to_string(), |l| l.summary()),
            ]
        })
        .collect();
    rtgauge_report::html::render_load_curve(
        &format!(
            "capacity of CPU {} under {} for {}",
            c.cpu, c.load, c.gate.text
        ),
        &answer_line(c),
        &series,
        Some((c.gate.max_ns as f64, c.gate.text.clone())),
        &[
            "level",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "gated µs",
            "gate",
            "load achieved",
        ],
        &rows,
    )
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn print_table(c: &Capacity) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "capacity of CPU {} under {} for {} ({} × {} per level)",
        c.cpu,
        c.load,
        c.gate.text,
        c.repeat,
        Nanos(c.duration_ns)
    )?;
    writeln!(
        out,
        "{:>5}  {:>9} {:>9} {:>9} {:>9}  {:>9}  {:<5}  load achieved (µs; the run with the worst gated figure)",
        "level", "p50", "p99", "p99.9", "max", "gated", "gate"
    )?;
    for (p, worst) in worst_runs(c) {
        let load = worst
            .load
            .as_ref()
            .map_or_else(|| "none".to_string(), |l| l.summary());
        writeln!(
            out,
            "{:>4}%  {:>9} {:>9} {:>9} {:>9}  {:>9}  {:<5}  {load}",
            p.level,
            us(worst.p50_ns),
            us(worst.p99_ns),
            us(worst.p999_ns),
            us(worst.max_ns),
            us(p.worst_ns),
            if p.holds { "holds" } else { "FAILS" },
        )?;
    }
    writeln!(out, "{}", answer_line(c))?;
    if let Some(l) = c.capacity_level {
        if let Some(p) = c.curve.iter().find(|p| p.level > l && p.holds) {
            writeln!(
                out,
                "note: level {} % held again after a failing level; the capacity stops at the first failure",
                p.level
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_and_refuse_nonsense() {
        let g = parse_gate("cyclic.max<=120us").expect("valid");
        assert_eq!((g.figure, g.max_ns), (Figure::Max, 120_000));
        let g = parse_gate("cyclic.p99.9 <= 50us").expect("valid");
        assert_eq!(g.figure, Figure::Percentile(99.9));
        assert!(parse_gate("cyclic.p42<=1us").is_err());
        assert!(parse_gate("oslat.max<=1us").is_err());
        assert!(parse_gate("cyclic.max<120us").is_err());
        assert_eq!(
            parse_levels("50,10,10,0").expect("valid"),
            Levels(vec![0, 10, 50])
        );
        assert!(parse_levels("101").is_err());
    }

    #[test]
    fn capacity_stops_at_the_first_failing_level() {
        let pt = |level: u8, holds: bool| Point {
            level,
            runs: vec![],
            worst_ns: 0,
            holds,
        };
        assert_eq!(
            capacity_level(&[pt(0, true), pt(50, true), pt(100, false)]),
            Some(50)
        );
        assert_eq!(
            capacity_level(&[pt(0, true), pt(50, false), pt(100, true)]),
            Some(0)
        );
        assert_eq!(capacity_level(&[pt(0, false), pt(50, true)]), None);
    }
}

//! `rtgauge capacity`'s flags: the gate, the load to vary and its levels (or a search), the runs.

use super::load::parse_load;
use super::parse_duration_arg;
use clap::Args;
use rtgauge_analysis::capacity::CapacityGate;
use rtgauge_model::load::LoadSpec;
use rtgauge_model::Nanos;

/// Find the highest load level at which a latency gate still holds, and the latency-vs-load curve.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("output", |a| a.help("Also write the curve and the answer as JSON to FILE ('-' = standard output, after the table)")))]
#[command(mut_arg("html", |a| a.help("Also write a self-contained HTML page with the latency-vs-load chart and the table to FILE ('-' = standard output)")))]
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

    #[command(flatten)]
    pub output: super::OutputArg,

    #[command(flatten)]
    pub html: super::HtmlArg,
}

fn parse_gate(s: &str) -> Result<CapacityGate, String> {
    CapacityGate::parse(s)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_sorted_once_each() {
        assert_eq!(
            parse_levels("50,10,10,0").expect("valid"),
            Levels(vec![0, 10, 50])
        );
        assert!(parse_levels("101").is_err());
        assert!(parse_gate("cyclic.max<=120us").is_ok());
    }
}

//! `rtgauge load`'s flags, and `--load MIX` as the probes take it.

use super::parse_duration_arg;
use clap::Args;
use rtgauge_model::load::{LoadKind, LoadPlacement, LoadSpec};
use rtgauge_model::CpuSet;
use rtgauge_model::Nanos;

/// `--load` as clap parses it.
pub fn parse_load(s: &str) -> Result<LoadSpec, String> {
    parse_load_spec(s).map_err(|e| e.to_string())
}

/// Why a load specification was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadSpecError {
    /// A name that is not a load kind.
    #[error("'{0}' is not a load kind (cpu, memory, io, fork, timer, msg, ipi)")]
    Kind(String),
    /// A level that is not a whole percentage from 1 to 100.
    #[error("level '{0}' is not a whole percentage from 1 to 100")]
    Level(String),
    /// A placement that is neither a keyword nor a CPU list.
    #[error("placement '{0}' is not housekeeping, measured, all or a CPU list")]
    Placement(String),
    /// The specification names no kind.
    #[error("no load kind given")]
    Empty,
}

/// Parse `KIND[,KIND…][:LEVEL][@housekeeping|measured|all|CPULIST]`.
pub fn parse_load_spec(text: &str) -> Result<LoadSpec, LoadSpecError> {
    let (rest, placement) = match text.split_once('@') {
        Some((r, p)) => (r, parse_placement(p.trim())?),
        None => (text, LoadPlacement::Housekeeping),
    };
    let (kinds, level) = match rest.split_once(':') {
        Some((k, l)) => {
            let level: u8 = l
                .trim()
                .parse()
                .ok()
                .filter(|v| (1..=100).contains(v))
                .ok_or_else(|| LoadSpecError::Level(l.to_string()))?;
            (k, level)
        }
        None => (rest, 100),
    };
    let mut out = Vec::new();
    for k in kinds.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        let kind = LoadKind::from_name(k).ok_or_else(|| LoadSpecError::Kind(k.to_string()))?;
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    if out.is_empty() {
        return Err(LoadSpecError::Empty);
    }
    Ok(LoadSpec {
        kinds: out,
        level,
        placement,
    })
}

fn parse_placement(p: &str) -> Result<LoadPlacement, LoadSpecError> {
    match p {
        "housekeeping" | "hk" => Ok(LoadPlacement::Housekeeping),
        "measured" | "rt" => Ok(LoadPlacement::Measured),
        "all" | "both" => Ok(LoadPlacement::All),
        list => CpuSet::parse(list)
            .ok()
            .filter(|s| !s.is_empty())
            .map(LoadPlacement::Cpus)
            .ok_or_else(|| LoadSpecError::Placement(p.to_string())),
    }
}

/// `--load` and `--load-cmd` of the probes that measure on chosen CPUs (cyclic, oslat, ops): the load they
/// put beside themselves, started and stopped with the measurement.
#[derive(Debug, Clone, Default, Args)]
pub struct ProbeLoad {
    /// Put load on the system while measuring: KIND[,KIND…][:LEVEL][@housekeeping|measured|all|CPUS]
    /// (kinds cpu, memory, io, fork, timer, msg, ipi; e.g. cpu,memory@housekeeping; docs/load.md). Achieved
    /// load is recorded.
    #[arg(long = "load", value_name = "MIX", value_parser = parse_load)]
    pub load: Option<LoadSpec>,

    /// Run an external load command beside the probe (e.g. 'stress-ng --cpu 1'), on the CPUs not measured;
    /// stopped with the probe (its whole process group), its CPU use recorded with the result.
    #[arg(long = "load-cmd", value_name = "COMMAND")]
    pub load_cmd: Option<String>,
}

impl ProbeLoad {
    /// What the session engine starts beside the probe.
    pub fn request(&self) -> rtgauge_session::load::LoadRequest {
        rtgauge_session::load::LoadRequest {
            spec: self.load.clone(),
            command: self.load_cmd.clone(),
        }
    }
}

/// Run measured, bounded load generators alone (e.g. beside cyclictest), then report what they achieved.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("output", |a| a.help("Also write what the load achieved as JSON to FILE ('-' = standard output, after the text)")))]
pub struct LoadArgs {
    /// Generators and placement: cpu, memory, io, fork, timer, msg, ipi, comma-separated, with an optional
    /// ':LEVEL' (duty cycle %, default 100) and '@CPUS' (a CPU list; default: every online CPU).
    #[arg(value_name = "MIX", value_parser = parse_load)]
    pub mix: LoadSpec,

    /// CPUs to load (overrides the MIX's '@CPUS').
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Duty cycle of each generator, percent of each 10 ms period (overrides the MIX's ':LEVEL').
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub level: Option<u8>,

    /// How long to load (default: until SIGINT/SIGTERM).
    #[arg(short = 'D', long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,

    #[command(flatten)]
    pub output: super::OutputArg,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_refuse_nonsense() {
        let s = parse_load_spec("cpu,memory:50@housekeeping").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.kinds, [LoadKind::Cpu, LoadKind::Memory]);
        assert_eq!((s.level, &s.placement), (50, &LoadPlacement::Housekeeping));
        assert_eq!(s.to_string(), "cpu,memory:50@housekeeping");
        let d = parse_load_spec("io").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((d.level, d.placement), (100, LoadPlacement::Housekeeping));
        assert_eq!(
            parse_load_spec("fork@2-3").map(|s| s.placement),
            Ok(LoadPlacement::Cpus(CpuSet::new([2, 3])))
        );
        assert_eq!(
            parse_load_spec("gpu"),
            Err(LoadSpecError::Kind("gpu".into()))
        );
        assert_eq!(
            parse_load_spec("cpu:0"),
            Err(LoadSpecError::Level("0".into()))
        );
        assert_eq!(
            parse_load_spec("cpu:101"),
            Err(LoadSpecError::Level("101".into()))
        );
        assert_eq!(
            parse_load_spec("cpu@moon"),
            Err(LoadSpecError::Placement("moon".into()))
        );
        assert_eq!(parse_load_spec(":50"), Err(LoadSpecError::Empty));
    }
}

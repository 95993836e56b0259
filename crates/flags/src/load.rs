//! `rtgauge load`'s flags, and `--load MIX` as the probes take it.

use super::parse_duration_arg;
use clap::Args;
use rtgauge_model::load::LoadSpec;
use rtgauge_model::Nanos;
use std::path::PathBuf;

/// `--load` as clap parses it.
pub fn parse_load(s: &str) -> Result<LoadSpec, String> {
    LoadSpec::parse(s).map_err(|e| e.to_string())
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

    /// Write what was achieved as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

//! `rtgauge vm`'s flags: `observe` (on the host), `clock-serve` (in the guest), `join` (anywhere).

use super::{parse_duration_arg, DbArg};
use clap::{Args, Subcommand};
use rtgauge_model::Nanos;
use std::path::PathBuf;

/// The virtualization tax from both sides: what a VM's host did to its vCPU threads, joined with a guest run.
#[derive(Debug, Args)]
pub struct VmArgs {
    #[command(subcommand)]
    pub command: VmCommand,
}

#[derive(Debug, Subcommand)]
pub enum VmCommand {
    /// On the host (root): record what the host does to a running VM's vCPU threads — who ran instead when
    /// they were runnable, host IRQs and softirqs on their CPUs, VM exits with their reasons — and the
    /// guest's clock over a channel, until -D, SIGINT or the VM's end.
    Observe(ObserveArgs),
    /// In the guest: answer the host's clock exchanges on CHANNEL (a serial or virtio-serial port, or
    /// tcp:ADDR:PORT to listen on) until -D or SIGINT.
    ClockServe(ClockServeArgs),
    /// Join a guest run (its --output document, with --trace or --spike) with a host record: each spike
    /// episode's unattributed time charged to what the host did to its vCPU meanwhile.
    Join(JoinArgs),
}

/// `rtgauge vm observe`.
#[derive(Debug, Args)]
pub struct ObserveArgs {
    /// The VM's QEMU process id (its vCPU threads are found by their names, `CPU n/KVM`).
    #[arg(long, value_name = "PID", conflicts_with = "domain")]
    pub pid: Option<u32>,
    /// The VM's libvirt domain name (its QEMU and vCPU threads from libvirt's status file).
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    /// How long to observe (default: until SIGINT or the VM ends).
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,
    /// The clock channel to the guest's `rtgauge vm clock-serve`: unix:PATH (a QEMU chardev socket),
    /// tcp:HOST:PORT, or a device path (a QEMU pty). Without it the record cannot be joined.
    #[arg(long, value_name = "CHANNEL")]
    pub clock: Option<String>,
    /// Write the host record here (JSON; `vm join` reads it).
    #[arg(long, value_name = "FILE", default_value = "vm-host.json")]
    pub record: PathBuf,
    /// Host CPUs to trace (default: every online CPU; a wake-up is recorded on the waker's CPU).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<rtgauge_model::CpuSet>,
    /// How often the clock is measured.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_interval)]
    pub sync_interval: Nanos,
    /// Host intervals kept at most (the oldest are dropped and counted beyond it).
    #[arg(long, value_name = "N", default_value_t = rtgauge_model::vm::MAX_INTERVALS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000_000))]
    pub max_intervals: usize,
    /// The observer's nice value: it yields to the vCPU threads on the CPUs they share (a kernel ring
    /// buffer holds what it reads late; what overflows is counted as lost). Better still, run it on CPUs
    /// the vCPUs do not use (taskset -c HOUSEKEEPING rtgauge vm observe …).
    #[arg(long, value_name = "N", default_value_t = 19, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: i32,
}

/// `rtgauge vm clock-serve`.
#[derive(Debug, Args)]
pub struct ClockServeArgs {
    /// Where the host's probes arrive: a serial port (/dev/ttyS1), a virtio-serial port
    /// (/dev/virtio-ports/NAME), or tcp:ADDR:PORT to listen on.
    #[arg(value_name = "CHANNEL")]
    pub channel: String,
    /// How long to answer (default: until SIGINT/SIGTERM).
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,
}

/// `rtgauge vm join`.
#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.short('o').help("Write the joined run document to FILE ('-' = standard output; import it with `rtgauge import` to compare it)")))]
#[command(mut_arg("html", |a| a.help("Also write the HTML report of the joined run to FILE ('-' = standard output; one timeline per episode with both sides)")))]
#[command(mut_arg("format", |a| a.help("What to print: the summary (text), or the joined run document (json)")))]
pub struct JoinArgs {
    /// The guest run: its run document (`--output` of cyclic, oslat or run; `rtgauge export RUN`).
    #[arg(value_name = "GUEST_RUN")]
    pub guest: PathBuf,
    /// The host record (`rtgauge vm observe --record`).
    #[arg(value_name = "HOST_RECORD")]
    pub host: PathBuf,
    #[command(flatten)]
    pub output: super::OutputArg,
    #[command(flatten)]
    pub html: super::HtmlArg,
    /// Store the joined run in the database (then `rtgauge compare` it with a bare-metal run).
    #[arg(long)]
    pub store: bool,
    #[command(flatten)]
    pub format: super::FormatArg,
    #[command(flatten)]
    pub db: DbArg,
}

fn parse_cpus(s: &str) -> Result<rtgauge_model::CpuSet, String> {
    let c = rtgauge_model::CpuSet::parse(s).map_err(|e| e.to_string())?;
    if c.is_empty() {
        return Err("no CPUs".into());
    }
    Ok(c)
}

fn parse_interval(s: &str) -> Result<Nanos, String> {
    let d = parse_duration_arg(s)?;
    if d.as_ns() < 100_000_000 {
        return Err("at least 100ms".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    #[derive(clap::Parser)]
    struct Vm {
        #[command(flatten)]
        vm: super::VmArgs,
    }

    fn parse(args: &[&str]) -> Result<super::VmCommand, String> {
        let argv = std::iter::once(&"vm").chain(args);
        <Vm as clap::Parser>::try_parse_from(argv)
            .map(|v| v.vm.command)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn observe_needs_one_vm_and_takes_durations() {
        let Ok(super::VmCommand::Observe(o)) = parse(&["observe", "--pid", "42", "-D", "30s"])
        else {
            panic!("observe");
        };
        assert_eq!(
            (o.pid, o.duration.map(|d| d.as_ns())),
            (Some(42), Some(30_000_000_000))
        );
        assert_eq!(o.record, std::path::Path::new("vm-host.json"));
        assert_eq!(o.sync_interval.as_ns(), 1_000_000_000);
        assert!(parse(&["observe", "--pid", "1", "--domain", "x"]).is_err());
        assert!(parse(&["observe", "--pid", "x"]).is_err());
        assert!(parse(&["observe", "--pid", "1", "--sync-interval", "1ms"]).is_err());
        assert!(parse(&["observe", "--pid", "1", "--cpus", "z"]).is_err());
        assert!(parse(&["observe", "--pid", "1", "--max-intervals", "0"]).is_err());
        assert!(parse(&["clock-serve"]).is_err(), "a channel");
        assert!(parse(&["join", "a.json"]).is_err(), "two documents");
    }
}

//! The command line: one clap definition per verb is the single source of truth for parsing and `--help`,
//! and the verbs' dispatch to their modules (the one place in the binary that lists the verbs).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Prove a platform meets hard real-time latency bounds: measure, audit, judge, store, compare, report.
#[derive(Debug, Parser)]
#[command(
    name = "rtgauge",
    version,
    propagate_version = true,
    max_term_width = 110
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Timer wake-up latency (cyclictest's measurement; accepts cyclictest's flags).
    Cyclic(Box<rtgauge_flags::cyclic::CyclicArgs>),
    /// OS noise seen by a busy-polling thread (oslat's measurement; accepts oslat's flags).
    Oslat(Box<rtgauge_flags::oslat::OslatArgs>),
    /// Network-function capacity: connections per second, throughput, and a reference HTTP server.
    Net(Box<NetVerb>),
    /// The main job: fingerprint and audit the platform, run a profile of probes, judge, store.
    Run(rtgauge_flags::run::RunArgs),
    /// List, show, delete or export stored runs.
    Runs(rtgauge_flags::runs::RunsArgs),
    /// Export a stored run as JSON, CSV or rt-tests JSON.
    Export(rtgauge_flags::runs::ExportArgs),
    /// Import rt-tests results (cyclictest JSON or text, oslat JSON or text) or rtgauge run documents as runs.
    Import(rtgauge_flags::runs::ImportArgs),
    /// Copy local runs to a central store (PostgreSQL): idempotent, resumable.
    Push(rtgauge_flags::push::PushArgs),
    /// Render a stored run: on the terminal, and as a self-contained HTML page with charts (--html).
    Report(rtgauge_flags::report::ReportArgs),
    /// Compare stored runs with the first: ratios with 95 % intervals and a verdict per measure.
    Compare(rtgauge_flags::report::CompareArgs),
    /// Check a report page or PDF record against the stored run (its embedded content hash).
    Verify(rtgauge_flags::verify::VerifyArgs),
    /// Real-time readiness audit of this host or guest (or a captured tree), or lint of a .vmx, libvirt XML or
    /// Kubernetes YAML definition.
    Audit(rtgauge_flags::audit::AuditArgs),
    /// The platform fingerprint: CPU, topology, NUMA, kernel and preemption, clocksource, virtualization, tuning.
    Fingerprint(rtgauge_flags::fingerprint::FingerprintArgs),
    /// Hardware and firmware noise: the kernel's hwlat tracer (hwlatdetect's method) or osnoise with
    /// interrupts off (rtla hwnoise's), and the SMIs each CPU took.
    Hwnoise(Box<rtgauge_flags::hwnoise::HwnoiseArgs>),
    /// How well the clock is kept: ptp4l (offset, port state, grandmaster), chrony (offset, frequency, leap),
    /// each PHC against the system clock, the kernel's state and steps; locks, holdovers, changes.
    Clock(Box<rtgauge_flags::clock::ClockArgs>),
    /// OS-primitive costs in the manner of lmbench: syscalls, signals, IPC, context switch, fork/exec, mmap.
    Ops(Box<rtgauge_flags::ops::OpsArgs>),
    /// Memory load-latency curve (cache/TLB steps), read/write/copy bandwidth, NUMA matrix.
    Mem(Box<rtgauge_flags::mem::MemArgs>),
    /// NUMA locality of running processes and cgroups, and node-local allocation counters.
    Numa(rtgauge_flags::numa::NumaArgs),
    /// Compute the real-time CPU partition from the topology and write its configuration (kernel, tuned,
    /// irqbalance, systemd, libvirt, .vmx, Kubernetes); --numa advises bindings for non-local memory.
    Plan(Box<rtgauge_flags::plan::PlanArgs>),
    /// Measured, bounded load generators (cpu, memory, io, fork, timer, msg, ipi) alone, for use beside another tool.
    Load(Box<rtgauge_flags::load::LoadArgs>),
    /// The highest load level at which a latency gate still holds, with the latency-vs-load curve.
    Capacity(Box<rtgauge_flags::capacity::CapacityArgs>),
    /// Every host of the store with its latest run per profile, and the hosts that differ from the majority.
    Fleet(rtgauge_flags::fleet::FleetArgs),
    /// Always-on timer-latency and tuning-drift monitoring with a Prometheus endpoint and textfile output.
    Monitor(Box<rtgauge_flags::monitor::MonitorArgs>),
    /// The virtualization tax from both sides: what a VM's host did to its vCPU threads (observe, on the
    /// host), the guest's clock (clock-serve, in the guest), and a guest run's spikes joined with it (join).
    Vm(rtgauge_flags::vm::VmArgs),
}

/// `rtgauge net`: two kinds under one verb, network-function capacity (`serve`, `cps`, `throughput`) and
/// packet latency (`latency`, `reflect`).
#[derive(Debug, clap::Args)]
pub struct NetVerb {
    #[command(subcommand)]
    pub command: NetSubcommand,
}

#[derive(Debug, Subcommand)]
pub enum NetSubcommand {
    #[command(flatten)]
    Capacity(Box<rtgauge_flags::net::NetCommand>),
    #[command(flatten)]
    Latency(rtgauge_flags::net_latency::NetLatencyCommand),
}

impl Command {
    /// Run the verb: its module of [`crate::cmd`] (the `net` verb's `latency` and `reflect` are the packet
    /// latency kind's).
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        use crate::cmd;
        use rtgauge_flags::net_latency::NetLatencyCommand;
        match self {
            Command::Cyclic(a) => cmd::cyclic::run(a),
            Command::Capacity(a) => cmd::capacity::run(a),
            Command::Oslat(a) => cmd::oslat::run(a),
            Command::Net(a) => match &a.command {
                NetSubcommand::Capacity(c) => cmd::net::run(c),
                NetSubcommand::Latency(NetLatencyCommand::Latency(l)) => cmd::net_latency::run(l),
                NetSubcommand::Latency(NetLatencyCommand::Reflect(r)) => {
                    cmd::net_latency::reflect(r)
                }
            },
            Command::Run(a) => cmd::run::run(a),
            Command::Runs(a) => cmd::runs::run(a),
            Command::Export(a) => cmd::runs::export(a, &a.db),
            Command::Import(a) => cmd::runs::import(a),
            Command::Push(a) => cmd::push::run(a),
            Command::Report(a) => cmd::report::report(a),
            Command::Compare(a) => cmd::compare::compare(a),
            Command::Verify(a) => cmd::verify::run(a),
            Command::Audit(a) => cmd::audit::run(a),
            Command::Fingerprint(a) => cmd::fingerprint::run(a),
            Command::Ops(a) => cmd::ops::run(a),
            Command::Hwnoise(a) => cmd::hwnoise::run(a),
            Command::Clock(a) => cmd::clock::run(a),
            Command::Mem(a) => cmd::mem::run(a),
            Command::Numa(a) => cmd::numa::run(a),
            Command::Plan(a) => cmd::plan::run(a),
            Command::Monitor(a) => cmd::monitor::run(a),
            Command::Load(a) => cmd::load::run(a),
            Command::Fleet(a) => cmd::fleet::run(a),
            Command::Vm(a) => cmd::vm::run(a),
        }
    }
}

/// Print a command-line error as one line naming the offending flag, and exit 2 (help and version exit 0).
pub fn report_parse_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            use clap::error::{ContextKind, ContextValue};
            use rtgauge_report::escape::{visible, visible_field};
            let rendered = e.render().to_string();
            let mut first = rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid command line")
                .trim_start_matches("error: ")
                .to_string();
            // clap quotes a refused value as typed, minus the escape sequences its rendering strips, and a
            // newline in it cuts the line short of the flag: such a value is quoted escaped instead.
            if let (Some(ContextValue::String(v)), Some(ContextValue::String(arg))) = (
                e.get(ContextKind::InvalidValue),
                e.get(ContextKind::InvalidArg),
            ) {
                let shown = visible_field(v);
                if shown != v.as_str() {
                    let why = std::error::Error::source(e)
                        .map(|s| format!(": {s}"))
                        .unwrap_or_default();
                    first = format!("invalid value '{shown}' for '{arg}'{why}");
                }
            }
            // A missing argument is named on the lines after clap's first ("…were not provided:").
            if e.kind() == ErrorKind::MissingRequiredArgument {
                if let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg) {
                    first = format!(
                        "{}: {}",
                        first.trim_end_matches(':').trim_end(),
                        missing.join(", ")
                    );
                }
            }
            let first = name_flags_as_typed(&first);
            eprintln!("rtgauge: error: {}", visible(&first));
            ExitCode::from(2)
        }
    }
}

/// clap names an argument by its long form (`'--interval <INTV>'`); users of cyclictest type `-i`, so name
/// both (`-i/--interval`).
fn name_flags_as_typed(line: &str) -> String {
    use clap::CommandFactory as _;
    let cmd = Cli::command();
    let mut out = line.to_string();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_arguments() {
            let (Some(long), Some(short)) = (arg.get_long(), arg.get_short()) else {
                continue;
            };
            let value = arg
                .get_value_names()
                .and_then(|v| v.first())
                .map(|v| v.to_string());
            let forms = match value {
                Some(v) => vec![format!("'--{long} <{v}>'"), format!("'--{long} [<{v}>]'")],
                None => vec![format!("'--{long}'")],
            };
            for quoted in forms {
                out = out.replace(&quoted, &format!("-{short}/--{long}"));
            }
        }
    }
    out
}

//! `rtgauge monitor`'s flags, resolved into what the monitor watches and where it serves.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::{CpuSet, Nanos};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Watch timer latency and tuning continuously; serve them to Prometheus.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("root", |a| a.help("Audit a captured tree instead of this host (latency is always measured here)")))]
pub struct MonitorArgs {
    /// CPUs to measure (kernel list syntax); default: the RT CPU set the audit finds (tuned isolated_cores,
    /// nohz_full, isolcpus), else every online CPU.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Period of each measuring thread (e.g. 1ms, 500us); longer is cheaper, shorter sees more. Each
    /// wake-up costs the kernel a timer and a context switch (about 30 µs in a VM, where arming a timer
    /// exits to the hypervisor): 5 ms keeps the monitor under 1 % of a CPU.
    #[arg(long, value_name = "D", default_value = "5ms", value_parser = parse_duration_arg)]
    pub interval: Nanos,

    /// SCHED_FIFO priority of the measuring threads (1-99).
    #[arg(long, value_name = "PRIO", default_value_t = 90, value_parser = clap::value_parser!(i32).range(1..=99))]
    pub priority: i32,

    /// Address of the /metrics endpoint, or 'off'. Loopback only unless --allow-remote.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub listen: String,

    /// Allow --listen on a non-loopback address (the series describe the host's tuning).
    #[arg(long)]
    pub allow_remote: bool,

    /// Also write the series to DIR/rtgauge.prom (atomically, every 10 s) for node_exporter's textfile
    /// collector.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,

    /// How often to re-run the audit (0 = never).
    #[arg(long, value_name = "D", default_value = "5m", value_parser = parse_duration_arg)]
    pub audit_every: Nanos,

    /// Latency bound: samples at or above it are counted (rtgauge_samples_above_gate_total).
    #[arg(long, value_name = "D", default_value = "100us", value_parser = parse_duration_arg)]
    pub gate: Nanos,

    /// Span of rtgauge_latency_window_max_seconds; keep it at least one scrape interval.
    #[arg(long, value_name = "D", default_value = "15s", value_parser = parse_duration_arg)]
    pub window: Nanos,

    /// Store a snapshot run (the latency of the period, as a cyclic probe result) this often, and at exit.
    #[arg(long, value_name = "D", value_parser = parse_duration_arg)]
    pub store_every: Option<Nanos>,

    /// Label of the stored snapshots.
    #[arg(long, value_name = "TEXT", value_parser = super::parse_name)]
    pub label: Option<String>,

    #[command(flatten)]
    pub watch: super::kinds::WatchArgs,

    #[command(flatten)]
    pub db: super::DbArg,

    #[command(flatten)]
    pub root: super::RootArg,

    /// Stop after this long (default: run until SIGINT/SIGTERM).
    #[arg(short = 'D', long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,
}

/// What the monitor measures, resolved from the flags.
pub struct MonitorPlan {
    /// The CPUs watched.
    pub cpus: CpuSet,
    /// The CPUs the monitor's own threads run on (none when every CPU is watched).
    pub housekeeping: Option<CpuSet>,
    /// The /metrics endpoint, if any.
    pub listen: Option<SocketAddr>,
    /// The kinds watched beside the timer threads, not started.
    pub watches: Vec<Box<dyn rtgauge_session::watch::Watch>>,
}

/// Check the flags and find the CPUs to watch on this machine.
pub fn resolve(a: &MonitorArgs) -> anyhow::Result<MonitorPlan> {
    let live = HostRoot::live();
    let online = read_cpu_mask(&live, CpuMask::Online).context("reading the online CPUs")?;
    let cpus = match &a.cpus {
        Some(t) => {
            let set = CpuSet::parse(t).map_err(|e| anyhow::anyhow!("--cpus {t}: {e}"))?;
            let offline = set.difference(&online);
            if !offline.is_empty() {
                bail!("--cpus {t}: CPU {offline} is not online");
            }
            set
        }
        None => {
            // The measured CPUs are this machine's, whatever tree the audit reads.
            let cmdline = rtgauge_host::fingerprint::read_cmdline(&live);
            rtgauge_audit::derive_isolated(&live, &cmdline, &online, None)
                .map(|(s, _)| s.intersection(&online))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| online.clone())
        }
    };
    if cpus.is_empty() {
        bail!("--cpus: no CPU to measure");
    }
    if a.interval.as_ns() < 50_000 || a.interval.as_ns() > 1_000_000_000 {
        bail!(
            "--interval {}: between 50us and 1s (a monitor runs for months; use rtgauge cyclic for dense sampling)",
            a.interval
        );
    }
    if a.window.as_ns() < 1_000_000_000 {
        bail!("--window {}: at least 1s", a.window);
    }
    let listen = if a.listen == "off" {
        None
    } else {
        let addr: SocketAddr = a.listen.parse().map_err(|_| {
            anyhow::anyhow!(
                "--listen {}: not an address such as 127.0.0.1:9464 (or 'off')",
                a.listen
            )
        })?;
        if !addr.ip().is_loopback() && !a.allow_remote {
            bail!(
                "--listen {addr}: not a loopback address; the series describe this host's tuning, so serving \
                 them beyond it needs --allow-remote"
            );
        }
        Some(addr)
    };
    if listen.is_none() && a.textfile.is_none() && a.store_every.is_none() {
        bail!("--listen off: give --textfile DIR or --store-every D, or the monitor has no output");
    }
    let rest = online.difference(&cpus);
    let watches = a.watch.watches(&super::stage::WatchPlace {
        cpus: &cpus,
        online: &online,
        priority: a.priority,
        duration: a.duration,
    })?;
    Ok(MonitorPlan {
        housekeeping: (!rest.is_empty()).then_some(rest),
        cpus,
        listen,
        watches,
    })
}

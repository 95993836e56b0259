//! `rtgauge monitor`'s flags, resolved into what the monitor watches and where it serves.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::netlat::{EthernetConfig, NetLatencyConfig, RxMode, StreamRole};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::netlat::NetLatencyPlan;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Watch timer latency and tuning continuously; serve them to Prometheus.
#[derive(Debug, Clone, Args)]
#[command(group = clap::ArgGroup::new("net_source").args(["net_bind", "net_dev"]))]
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

    /// Also watch a packet stream: UDP to this IP:PORT (a multicast group is joined), sent by `rtgauge
    /// net latency --send-only` elsewhere; its latency, loss and reordering become rtgauge_net_* series.
    /// The send times are the sender's CLOCK_REALTIME: both ends' clocks must agree (PTP).
    #[arg(long = "net-bind", value_name = "ADDR", conflicts_with = "net_dev")]
    pub net_bind: Option<String>,

    /// Watch a stream of raw Ethernet frames (a Sampled Values-like stream) received on this interface.
    #[arg(long = "net-dev", value_name = "DEV")]
    pub net_dev: Option<String>,

    /// Frames: the multicast group they go to (the interface is subscribed), e.g. 01:0c:cd:04:00:01.
    #[arg(long = "net-dst-mac", value_name = "MAC")]
    pub net_dst_mac: Option<String>,

    /// Frames: their EtherType (default 0x88ba, IEC 61850-9-2 Sampled Values).
    #[arg(long = "net-ethertype", value_name = "HEX", value_parser = super::net::parse_ethertype)]
    pub net_ethertype: Option<u16>,

    /// The watched stream's id (the sender's --stream).
    #[arg(long = "net-stream", value_name = "ID", default_value_t = super::net::SPLIT_STREAM, requires = "net_source")]
    pub net_stream: u32,

    /// The packet receiver's CPU (default: the last measured CPU, beside its timer thread, one priority
    /// below it).
    #[arg(long = "net-cpu", value_name = "CPU", requires = "net_source")]
    pub net_cpu: Option<u32>,

    /// Packets this late or later are counted (rtgauge_net_packets_above_gate_total).
    #[arg(long = "net-gate", value_name = "D", default_value = "250us", value_parser = parse_duration_arg, requires = "net_source")]
    pub net_gate: Nanos,

    /// Also follow how well the clock is kept (as `rtgauge clock`): the time sources found (ptp4l's and
    /// chrony's default sockets) and the kernel's steps become rtgauge_clock_* series.
    #[arg(long = "clock")]
    pub clock: bool,

    /// A time source to follow instead of those found, as KIND:PATH: ptp4l:/var/run/ptp4l,
    /// chrony:/run/chrony/chronyd.sock, phc:/dev/ptp0, host:CHANNEL (in a guest, its host's clock over
    /// `rtgauge vm`'s channel) (repeatable; implies --clock).
    #[arg(long = "clock-source", value_name = "KIND:PATH", value_parser = super::clock::parse_source)]
    pub clock_source: Vec<rtgauge_probe::timesync::SourceSpec>,

    /// Time-source polls per second (0.1 to 100).
    #[arg(long = "clock-rate", value_name = "HZ", default_value_t = 1.0)]
    pub clock_rate: f64,

    /// The PTP domain ptp4l runs in (24 under G.8275.1, 44 under G.8275.2).
    #[arg(long = "clock-ptp-domain", value_name = "N", default_value_t = 0)]
    pub clock_ptp_domain: u8,

    /// A source is locked while its |offset| stays within this (rtgauge_clock_locked). Default: 1us for
    /// ptp4l and a PHC, 1ms for chrony and the host's clock.
    #[arg(long = "clock-lock", value_name = "TIME", value_parser = parse_duration_arg)]
    pub clock_lock: Option<Nanos>,

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
    /// The watched packet stream's receiver (a receive-only plan), if any.
    pub net: Option<NetLatencyPlan>,
    /// The time sources followed, if asked.
    pub clock: Option<rtgauge_probe::timesync::ClockPlan>,
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
    let net = net_plan(a, &cpus, &online)?;
    let clock = (a.clock || !a.clock_source.is_empty())
        .then(|| {
            let duration = a.duration.unwrap_or(Nanos(u64::MAX));
            super::clock::plan(
                a.clock_rate,
                a.clock_lock,
                duration,
                a.clock_source.clone(),
                a.clock_ptp_domain,
            )
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().replacen("--", "--clock-", 1)))
        })
        .transpose()?;
    Ok(MonitorPlan {
        housekeeping: (!rest.is_empty()).then_some(rest),
        cpus,
        listen,
        net,
        clock,
    })
}

/// The watched stream's receiver: a receive-only plan on `--net-cpu` (else the last measured CPU), one
/// priority below the timer threads so that their measurement is not the stream's.
fn net_plan(
    a: &MonitorArgs,
    measured: &CpuSet,
    online: &CpuSet,
) -> anyhow::Result<Option<NetLatencyPlan>> {
    if a.net_dev.is_none() {
        for (flag, given) in [
            ("--net-ethertype", a.net_ethertype.is_some()),
            ("--net-dst-mac", a.net_dst_mac.is_some()),
        ] {
            if given {
                bail!("{flag}: only for a stream of frames (--net-dev DEV)");
            }
        }
    }
    let (addr, ethernet) = match (&a.net_bind, &a.net_dev) {
        (Some(b), _) => {
            let addr = super::net::resolve_addr("--net-bind", b)?;
            if addr.port() == 0 {
                bail!("--net-bind {addr}: needs the port the sender sends to");
            }
            (addr, None)
        }
        (None, Some(dev)) => {
            if let Some(m) = &a.net_dst_mac {
                if rtgauge_probe::netlat::parse_mac(m).is_none() {
                    bail!("--net-dst-mac {m}: not a MAC address such as 01:0c:cd:04:00:01");
                }
            }
            let e = EthernetConfig {
                tx_dev: String::new(),
                rx_dev: dev.clone(),
                ethertype: a.net_ethertype.unwrap_or(0x88ba),
                vlan: None,
                pcp: None,
                dst_mac: a.net_dst_mac.clone(),
            };
            (SocketAddr::from(([0, 0, 0, 0], 0)), Some(e))
        }
        (None, None) => return Ok(None),
    };
    let cpu = match a.net_cpu {
        Some(c) if !online.contains(c) => bail!("--net-cpu {c}: CPU {c} is not online"),
        Some(c) => Some(c),
        None => measured.iter().last(),
    };
    if a.net_gate.as_ns() == 0 {
        bail!("--net-gate: must be longer than 0");
    }
    Ok(Some(NetLatencyPlan {
        config: NetLatencyConfig {
            target: match &ethernet {
                Some(e) => e.rx_dev.clone(),
                None => addr.to_string(),
            },
            round_trip: false,
            // Unknown here and unused: a watched stream is counted by sequence number, not by schedule.
            rate_per_s: 4000.0,
            burst: 1,
            // The largest UDP payload: the receive buffer takes whatever size the sender sends.
            size: 65_507,
            tx_cpu: None,
            rx_cpu: cpu,
            rtprio: Some((a.priority - 1).max(1)),
            rx_mode: RxMode::Block,
            tx_netns: None,
            rx_netns: None,
            ethernet,
            deadline_ns: Some(a.net_gate.as_ns()),
            duration: Nanos::from_secs(1),
            drain_ns: 0,
            timeline_interval_ns: 1_000_000_000,
            role: StreamRole::Receive,
            stream: Some(a.net_stream),
            peer_clock: None,
            listen_ns: None,
        },
        addr,
        peer_shift_ns: None,
    }))
}

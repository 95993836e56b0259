//! `rtgauge net latency`'s and `rtgauge net reflect`'s flags, resolved into the packet-latency probe's
//! plan: the stream (UDP to an address, or raw Ethernet frames between two interfaces), its rate and size,
//! the sender's and the receiver's CPUs and priorities, one-way, split (`--send-only`/`--receive-only`)
//! or round trip through a reflector; and the profile stage of kind `net_latency`.

use super::net::resolve_addr;
use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::net_latency::{EthernetConfig, NetLatencyConfig, RxMode, StreamRole};
use rtgauge_model::Nanos;
pub use rtgauge_probe::net_latency::NetLatencyPlan;
use std::net::SocketAddr;

/// The `net` verb's packet-latency subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum NetLatencyCommand {
    /// Packet latency: a periodic UDP stream from a pinned sender to a pinned receiver, one-way (both ends
    /// on this host: loopback, or network namespaces; or a split stream, --send-only here and
    /// --receive-only in a guest) or round trip through a reflector; each packet's latency split at the
    /// kernel's receive timestamp into path and wake-up; loss, reordering, duplicates.
    Latency(Box<LatencyArgs>),
    /// The round trip's far end for `latency --reflector`: every datagram sent back where it came from.
    Reflect(ReflectArgs),
}

#[derive(Debug, Clone, Args)]
pub struct LatencyArgs {
    /// One-way: the address the receiver binds and the sender sends to, IP:PORT (port 0 picks one). In
    /// another namespace with --rx-netns. A split stream's: where --send-only sends, where --receive-only
    /// binds (both with the port).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        conflicts_with = "reflector"
    )]
    pub bind: String,
    /// Round trip: send to the reflector at IP:PORT (`rtgauge net reflect`) and receive its echoes.
    #[arg(long, value_name = "ADDR")]
    pub reflector: Option<String>,
    /// Raw Ethernet frames (AF_PACKET, a Sampled Values-like stream) put on this interface (in
    /// --tx-netns), to the MAC address of --rx-dev (--dst-mac with --send-only); instead of UDP.
    #[arg(long = "tx-dev", value_name = "DEV", conflicts_with_all = ["reflector", "bind", "receive_only"])]
    pub tx_dev: Option<String>,
    /// The interface (in --rx-netns) the frames are received on.
    #[arg(long = "rx-dev", value_name = "DEV", conflicts_with_all = ["reflector", "bind", "send_only"])]
    pub rx_dev: Option<String>,
    /// The frames' EtherType (IEC 61850-9-2 Sampled Values: 0x88ba).
    #[arg(long, value_name = "HEX", default_value = "0x88ba", value_parser = parse_ethertype)]
    pub ethertype: u16,
    /// Tag the frames (802.1Q) with this VLAN id and priority (9-2 LE: priority 4).
    #[arg(long, value_name = "ID[:PCP]", value_parser = parse_vlan, requires = "tx_dev")]
    pub vlan: Option<(u16, u8)>,
    /// Only the sender: the receiver is another run (`--receive-only` in a guest, on another host) with
    /// the same --stream: UDP to --bind, or frames on --tx-dev to --dst-mac.
    #[arg(long = "send-only", conflicts_with_all = ["receive_only", "reflector", "rx_netns"])]
    pub send_only: bool,
    /// Only the receiver: the sender is another run (`--send-only`) with the same --stream; it listens for
    /// -D, then --drain. Its send times are put on this clock through --clock, else taken to be this
    /// CLOCK_REALTIME's (both ends synchronised: PTP).
    #[arg(long = "receive-only", conflicts_with_all = ["reflector", "tx_netns"])]
    pub receive_only: bool,
    /// Receive only: how long to wait for the stream's first packet; from it the run lasts -D (the
    /// sender's) and --drain.
    #[arg(long, value_name = "TIME", default_value = "60s", value_parser = parse_duration_arg, requires = "receive_only")]
    pub listen: Nanos,
    /// The stream id of a split stream: the same at both ends (default 1).
    #[arg(long, value_name = "ID")]
    pub stream: Option<u32>,
    /// Frames: the MAC address they go to — a multicast group the receiver subscribes its interface to
    /// (9-2 LE: 01:0c:cd:04:00:01), or a unicast one (default: --rx-dev's; broadcast with --send-only).
    #[arg(long = "dst-mac", value_name = "MAC")]
    pub dst_mac: Option<String>,
    /// Receive only: the sender's clock, through the channel its `rtgauge vm clock-serve` answers on (in
    /// a guest: the serial or virtio-serial port whose host end the host's clock-serve holds; unix:PATH,
    /// tcp:HOST:PORT). Each send time is put on this clock with the exchanges' bound.
    #[arg(long, value_name = "CHANNEL", requires = "receive_only")]
    pub clock: Option<String>,
    /// Packets per second (a protection relay's Sampled Values stream: 4,000/s at 50 Hz).
    #[arg(long, value_name = "N", default_value_t = 4000.0, value_parser = parse_packet_rate)]
    pub rate: f64,
    /// Packets sent back to back at each period (the rate still counts packets).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub burst: u32,
    /// UDP payload bytes (32 at least: tag, stream, sequence number, send time on two clocks).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = clap::value_parser!(u32).range(32..=65_507))]
    pub size: u32,
    /// The sender's CPU (default: the next-to-last usable CPU, the last one when there is only one).
    #[arg(long = "tx-cpu", value_name = "CPU")]
    pub tx_cpu: Option<u32>,
    /// The receiver's CPU (default: the last usable CPU).
    #[arg(long = "rx-cpu", value_name = "CPU")]
    pub rx_cpu: Option<u32>,
    /// SCHED_FIFO priority of the sender and the receiver (0: SCHED_OTHER).
    #[arg(short = 'p', long, value_name = "PRIO", default_value_t = 80, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub priority: i32,
    /// How the receiver waits: block (in recvmsg, woken by the kernel) or poll (spins, as a poll-mode
    /// driver: no wake-up, a whole CPU).
    #[arg(long, value_name = "MODE", default_value = "block", value_parser = parse_rx_mode)]
    pub rx: RxMode,
    /// A packet this late or later counts as late (the deadline's overflow count, gate net.latency.late).
    #[arg(long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub deadline: Option<Nanos>,
    /// How long the sender sends (a sender behind its schedule stops at the end all the same: what was
    /// left unsent is said).
    #[arg(short = 'D', long, value_name = "TIME", default_value = "10s", value_parser = parse_duration_arg)]
    pub duration: Nanos,
    /// How long the receiver waits for stragglers after the last send.
    #[arg(long, value_name = "TIME", default_value = "500ms", value_parser = parse_duration_arg)]
    pub drain: Nanos,
    /// The sender's network namespace (a name under /run/netns, or a path such as /proc/PID/ns/net).
    #[arg(long = "tx-netns", value_name = "NS")]
    pub tx_netns: Option<String>,
    /// The receiver's network namespace (one-way only).
    #[arg(long = "rx-netns", value_name = "NS", conflicts_with = "reflector")]
    pub rx_netns: Option<String>,
    /// Length of one timeline interval.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_duration_arg)]
    pub interval: Nanos,
    /// Trace the sender's and the receiver's CPUs and say what ran during the slowest packets' longest
    /// stage (the wake-up on the receiver's CPU, the path on the sender's): those past --deadline, else
    /// past the rule's threshold (docs/why.md).
    #[arg(long)]
    pub trace: bool,
    /// Name of the platform, for comparisons (e.g. bare-metal, kvm-virtio).
    #[arg(long, value_parser = super::parse_name)]
    pub label: Option<String>,
    #[command(flatten)]
    pub store: super::StoreArgs,
    /// Do not store the run.
    #[arg(long = "no-store")]
    pub no_store: bool,
    #[command(flatten)]
    pub output: super::OutputArg,
    /// Background load beside the stream (`--load`, `--load-cmd`), as for the other probes.
    #[command(flatten)]
    pub load: super::load::ProbeLoad,
}

#[derive(Debug, Clone, Args)]
pub struct ReflectArgs {
    /// Address to listen on, IP:PORT (port 0 picks one; the address is printed).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// The reflector's CPU.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority (0: SCHED_OTHER).
    #[arg(short = 'p', long, value_name = "PRIO", default_value_t = 80, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub priority: i32,
    /// Stop after this long (default: until SIGINT or SIGTERM).
    #[arg(short = 'D', long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,
}

fn parse_packet_rate(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r >= 1.0 && *r <= 2_000_000.0)
        .ok_or_else(|| format!("'{s}' is not a packet rate per second (1 to 2000000)"))
}

pub(crate) fn parse_ethertype(s: &str) -> Result<u16, String> {
    let hex = s.trim().trim_start_matches("0x").trim_start_matches("0X");
    u16::from_str_radix(hex, 16)
        .ok()
        .filter(|t| *t >= 0x0600)
        .ok_or_else(|| format!("'{s}' is not an EtherType (hexadecimal, 0x0600 to 0xffff)"))
}

fn parse_vlan(s: &str) -> Result<(u16, u8), String> {
    let (id, pcp) = s.split_once(':').unwrap_or((s, "0"));
    let id: u16 = id
        .trim()
        .parse()
        .ok()
        .filter(|i| *i < 4095)
        .ok_or_else(|| format!("'{s}': the VLAN id must be 0 to 4094"))?;
    let pcp: u8 = pcp
        .trim()
        .parse()
        .ok()
        .filter(|p| *p < 8)
        .ok_or_else(|| format!("'{s}': the priority must be 0 to 7"))?;
    Ok((id, pcp))
}

fn parse_rx_mode(s: &str) -> Result<RxMode, String> {
    match s {
        "block" => Ok(RxMode::Block),
        "poll" => Ok(RxMode::Poll),
        _ => Err("expected block or poll".into()),
    }
}

impl LatencyArgs {
    /// Validate the flags into the probe's plan, with what it collects besides its packets.
    pub fn resolve(&self, root: &HostRoot) -> anyhow::Result<super::Resolved<NetLatencyPlan>> {
        Ok(super::Resolved {
            plan: self.plan(root)?,
            notes: Vec::new(),
            why: rtgauge_session::why::WhyOpts {
                counters: true,
                trace: self.trace,
                threshold: None,
                smi_intervals: false,
            },
        })
    }

    /// Validate the flags into the probe's plan.
    fn plan(&self, root: &HostRoot) -> anyhow::Result<NetLatencyPlan> {
        let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
        let usable: Vec<u32> = rtgauge_probe::rt::current_affinity()
            .intersection(&online)
            .iter()
            .collect();
        let check = |flag: &str, c: Option<u32>| -> anyhow::Result<Option<u32>> {
            match c {
                Some(c) if !online.contains(c) => {
                    bail!("{flag} {c}: CPU {c} is not online (online: {online})")
                }
                c => Ok(c),
            }
        };
        let last = usable.last().copied();
        let before_last = usable.iter().rev().nth(1).copied().or(last);
        let tx_cpu = check("--tx-cpu", self.tx_cpu)?.or(before_last);
        let rx_cpu = check("--rx-cpu", self.rx_cpu)?.or(last);
        if self.duration.as_ns() == 0 {
            bail!("-D/--duration: must be longer than 0");
        }
        if self.interval.as_ns() < 1_000_000 {
            bail!("--interval: at least 1ms");
        }
        if self.deadline.is_some_and(|d| d.as_ns() == 0) {
            bail!("--deadline: must be longer than 0");
        }
        let (addr, round_trip) = match &self.reflector {
            Some(r) => (resolve_addr("--reflector", r)?, true),
            None => (resolve_addr("--bind", &self.bind)?, false),
        };
        let role = self.role();
        let ethernet = self.ethernet(role)?;
        if self.stream.is_some() && role == StreamRole::Both {
            bail!("--stream: only for a split stream (--send-only, --receive-only)");
        }
        if role != StreamRole::Both && ethernet.is_none() && addr.port() == 0 {
            bail!(
                "--bind {addr}: a split stream needs the receiver's port (both ends give the same)"
            );
        }
        if round_trip && addr.port() == 0 {
            bail!("--reflector {addr}: needs the reflector's port");
        }
        if addr.ip().is_unspecified() && role != StreamRole::Receive {
            let flag = if round_trip { "--reflector" } else { "--bind" };
            bail!("{flag} {addr}: the sender sends there: give the receiver's own address (e.g. 127.0.0.1:0)");
        }
        let prio = (self.priority > 0).then_some(self.priority);
        if self.rx == RxMode::Poll && prio.is_some() && tx_cpu == rx_cpu && role == StreamRole::Both
        {
            bail!(
                "--rx poll: a polling receiver at SCHED_FIFO never lets the sender on the same CPU ({}) run: give them two CPUs (--tx-cpu, --rx-cpu) or -p 0",
                rx_cpu.map_or("unpinned".to_string(), |c| c.to_string())
            );
        }
        let plan = NetLatencyPlan {
            config: NetLatencyConfig {
                target: match (&ethernet, role) {
                    (Some(e), StreamRole::Send) => format!(
                        "{} → {}",
                        e.tx_dev,
                        e.dst_mac.as_deref().unwrap_or("broadcast")
                    ),
                    (Some(e), StreamRole::Receive) => format!("another run → {}", e.rx_dev),
                    (Some(e), StreamRole::Both) => format!("{} → {}", e.tx_dev, e.rx_dev),
                    (None, _) => addr.to_string(),
                },
                ethernet,
                round_trip,
                rate_per_s: self.rate,
                burst: self.burst,
                size: self.size,
                tx_cpu,
                rx_cpu,
                rtprio: prio,
                rx_mode: self.rx,
                tx_netns: self.tx_netns.clone(),
                rx_netns: self.rx_netns.clone(),
                deadline_ns: self.deadline.map(|d| d.as_ns()),
                duration: self.duration,
                drain_ns: self.drain.as_ns(),
                timeline_interval_ns: self.interval.as_ns(),
                role,
                stream: (role != StreamRole::Both).then(|| self.stream.unwrap_or(SPLIT_STREAM)),
                peer_clock: self.clock.clone(),
                listen_ns: (role == StreamRole::Receive).then(|| self.listen.as_ns()),
            },
            addr,
            peer_shift_ns: None,
        };
        Ok(plan)
    }

    fn role(&self) -> StreamRole {
        match (self.send_only, self.receive_only) {
            (true, _) => StreamRole::Send,
            (_, true) => StreamRole::Receive,
            _ => StreamRole::Both,
        }
    }

    /// Raw frames: the interfaces this run's end(s) need (`None`: UDP).
    fn ethernet(&self, role: StreamRole) -> anyhow::Result<Option<EthernetConfig>> {
        let (tx_dev, rx_dev) = match (role, &self.tx_dev, &self.rx_dev) {
            (_, None, None) => {
                if let Some(m) = &self.dst_mac {
                    bail!("--dst-mac {m}: only for frames (--tx-dev, --rx-dev)");
                }
                return Ok(None);
            }
            (StreamRole::Both, Some(t), Some(r)) => (t.clone(), r.clone()),
            (StreamRole::Both, Some(_), None) => bail!("--tx-dev: needs --rx-dev (or --send-only)"),
            (StreamRole::Both, None, Some(_)) => {
                bail!("--rx-dev: needs --tx-dev (or --receive-only)")
            }
            (StreamRole::Send, Some(t), _) => (t.clone(), String::new()),
            (StreamRole::Receive, _, Some(r)) => (String::new(), r.clone()),
            (StreamRole::Send, None, Some(_)) => bail!("--rx-dev: not with --send-only"),
            (StreamRole::Receive, Some(_), None) => bail!("--tx-dev: not with --receive-only"),
        };
        if let Some(m) = &self.dst_mac {
            if rtgauge_probe::net_latency::parse_mac(m).is_none() {
                bail!("--dst-mac {m}: not a MAC address (aa:bb:cc:dd:ee:ff)");
            }
        }
        Ok(Some(EthernetConfig {
            tx_dev,
            rx_dev,
            ethertype: self.ethertype,
            vlan: self.vlan.map(|v| v.0),
            pcp: self.vlan.map(|v| v.1),
            dst_mac: self.dst_mac.clone(),
        }))
    }
}

/// A split stream's id when --stream is not given: the same at both ends.
pub(crate) const SPLIT_STREAM: u32 = 1;

/// A profile's net latency stage: the profile's duration and `--trace`; its bound is the stream's deadline
/// unless the flags give one (every packet past it is counted late and kept for the trace to explain), and
/// the spike-episode threshold.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let mut args: LatencyArgs = cx.parse(argv)?;
    if let Some(c) = &args.clock {
        // The sender's clock is read by `net latency` itself, around its probe.
        bail!("{}: --clock {c}: a receive-only stream reads the sender's clock with `rtgauge net latency`, not in a profile stage", cx.what);
    }
    args.duration = cx.duration;
    args.trace |= cx.trace;
    let mut r = cx.named(args.resolve(cx.root))?;
    if r.plan.config.deadline_ns.is_none() {
        r.plan.config.deadline_ns = cx.bound.as_ref().map(|b| b.ns);
    }
    r.why.threshold = cx.bound.clone();
    Ok(super::stage::Stage {
        plan: Box::new(r),
        load: args.load.request(),
    })
}

impl super::stage::StagePlan for super::Resolved<NetLatencyPlan> {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::NetLatency
    }

    fn announce(&self, duration: Nanos, _cpus: &rtgauge_model::CpuSet) -> Option<String> {
        let c = &self.plan.config;
        Some(format!(
            "net latency: {} packets/s {} to {} for {duration}…",
            c.rate_per_s,
            if c.round_trip {
                "round trip"
            } else {
                "one-way"
            },
            c.target
        ))
    }

    fn why(&self) -> Option<rtgauge_session::why::WhyOpts> {
        Some(self.why.clone())
    }

    fn duration(&self) -> Option<Nanos> {
        Some(self.plan.config.duration)
    }

    fn rt_priority(&self) -> Option<i32> {
        self.plan.config.rtprio
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::net_latency::NetLatency(&self.plan))
    }
}

/// `rtgauge monitor`'s flags for a packet stream watched beside its timer threads.
#[derive(Debug, Clone, Args)]
#[command(group = clap::ArgGroup::new("net_source").args(["net_bind", "net_dev"]))]
pub struct StreamWatchArgs {
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
    #[arg(long = "net-ethertype", value_name = "HEX", value_parser = parse_ethertype)]
    pub net_ethertype: Option<u16>,

    /// The watched stream's id (the sender's --stream).
    #[arg(long = "net-stream", value_name = "ID", default_value_t = SPLIT_STREAM, requires = "net_source")]
    pub net_stream: u32,

    /// The packet receiver's CPU (default: the last measured CPU, beside its timer thread, one priority
    /// below it).
    #[arg(long = "net-cpu", value_name = "CPU", requires = "net_source")]
    pub net_cpu: Option<u32>,

    /// Packets this late or later are counted (rtgauge_net_packets_above_gate_total).
    #[arg(long = "net-gate", value_name = "D", default_value = "250us", value_parser = parse_duration_arg, requires = "net_source")]
    pub net_gate: Nanos,
}

impl StreamWatchArgs {
    /// The watch asked for, if any: the stream's receiver, a receive-only plan on `--net-cpu` (else the
    /// last measured CPU), one priority below the timer threads so that their measurement is not the
    /// stream's.
    pub fn watch(
        &self,
        m: &super::stage::WatchPlace<'_>,
    ) -> anyhow::Result<Option<Box<dyn rtgauge_session::watch::Watch>>> {
        let (measured, online) = (m.cpus, m.online);
        if self.net_dev.is_none() {
            for (flag, given) in [
                ("--net-ethertype", self.net_ethertype.is_some()),
                ("--net-dst-mac", self.net_dst_mac.is_some()),
            ] {
                if given {
                    bail!("{flag}: only for a stream of frames (--net-dev DEV)");
                }
            }
        }
        let (addr, ethernet) = match (&self.net_bind, &self.net_dev) {
            (Some(b), _) => {
                let addr = resolve_addr("--net-bind", b)?;
                if addr.port() == 0 {
                    bail!("--net-bind {addr}: needs the port the sender sends to");
                }
                (addr, None)
            }
            (None, Some(dev)) => {
                if let Some(m) = &self.net_dst_mac {
                    if rtgauge_probe::net_latency::parse_mac(m).is_none() {
                        bail!("--net-dst-mac {m}: not a MAC address such as 01:0c:cd:04:00:01");
                    }
                }
                let e = EthernetConfig {
                    tx_dev: String::new(),
                    rx_dev: dev.clone(),
                    ethertype: self.net_ethertype.unwrap_or(0x88ba),
                    vlan: None,
                    pcp: None,
                    dst_mac: self.net_dst_mac.clone(),
                };
                (SocketAddr::from(([0, 0, 0, 0], 0)), Some(e))
            }
            (None, None) => return Ok(None),
        };
        let cpu = match self.net_cpu {
            Some(c) if !online.contains(c) => bail!("--net-cpu {c}: CPU {c} is not online"),
            Some(c) => Some(c),
            None => measured.iter().last(),
        };
        if self.net_gate.as_ns() == 0 {
            bail!("--net-gate: must be longer than 0");
        }
        let plan = NetLatencyPlan {
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
                rtprio: Some((m.priority - 1).max(1)),
                rx_mode: RxMode::Block,
                tx_netns: None,
                rx_netns: None,
                ethernet,
                deadline_ns: Some(self.net_gate.as_ns()),
                duration: Nanos::from_secs(1),
                drain_ns: 0,
                timeline_interval_ns: 1_000_000_000,
                role: StreamRole::Receive,
                stream: Some(self.net_stream),
                peer_clock: None,
                listen_ns: None,
            },
            addr,
            peer_shift_ns: None,
        };
        // The receiver's errors name the probe's flags: these are the monitor's.
        let flag = |f| match f {
            "--bind" => "--net-bind",
            "--rx-dev" => "--net-dev",
            f => f,
        };
        Ok(Some(Box::new(
            rtgauge_session::kind::net_latency::StreamWatch::new(plan, flag),
        )))
    }
}

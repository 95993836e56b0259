//! `rtgauge net`'s flags, resolved into the network probe's plan: its points (one per swept CPU count
//! and, with `--rate`, per offered rate), the target or the reference server, and the limits.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::net::{CloseMode, NetMode};
use rtgauge_model::netlat::{EthernetConfig, NetLatencyConfig, RxMode, StreamRole};
use rtgauge_model::{CpuSet, Nanos};
pub use rtgauge_probe::net::plan::NetPlan;
use rtgauge_probe::net::plan::PointsSpec;
pub use rtgauge_probe::netlat::NetLatencyPlan;
use std::net::{SocketAddr, ToSocketAddrs as _};

/// Network-function capacity: L4/L7 connections per second and throughput, and a reference server.
#[derive(Debug, Clone, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    pub command: NetCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum NetCommand {
    /// Reference HTTP/1.1 server: /2b, /128k and /N bytes (/64k, /1m), keep-alive and close; one epoll loop
    /// per CPU on a shared SO_REUSEPORT port.
    Serve(ServeArgs),
    /// Connections per second: new TCP connection, one GET with Connection: close, the whole response,
    /// teardown; N connections in flight per client CPU.
    Cps(CpsArgs),
    /// Throughput: keep-alive GETs (default the 128 KB object) over N connections, in Gbit/s and requests/s.
    Throughput(ThroughputArgs),
    /// Packet latency: a periodic UDP stream from a pinned sender to a pinned receiver, one-way (both ends
    /// on this host: loopback, or network namespaces; or a split stream, --send-only here and
    /// --receive-only in a guest) or round trip through a reflector; each packet's latency split at the
    /// kernel's receive timestamp into path and wake-up; loss, reordering, duplicates.
    Latency(LatencyArgs),
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
            if rtgauge_probe::netlat::parse_mac(m).is_none() {
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
pub fn latency_from_profile(
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
        Box::new(rtgauge_session::kind::netlat::NetLatency(&self.plan))
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on, IP:PORT (port 0 picks a free one; the address is printed).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// CPUs of the server's event loops, one loop per CPU (default: CPU 0).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Stop after this long (default: until SIGINT or SIGTERM).
    #[arg(short = 'D', long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,
}

/// Flags shared by the two load modes.
#[derive(Debug, Clone, Args)]
pub struct TrafficArgs {
    /// Server to load, IP:PORT or HOST:PORT (any HTTP/1.1 server: nginx, an ADC's virtual server). Not
    /// with --serve-cpus.
    #[arg(long, value_name = "ADDR")]
    pub target: Option<String>,
    /// Start rtgauge's reference server on loopback on these CPUs and load it (no --target needed).
    #[arg(long = "serve-cpus", value_name = "LIST")]
    pub serve_cpus: Option<String>,
    /// Request path (cps: /2b, throughput: /128k).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Length of the measurement.
    #[arg(short = 'D', long, value_name = "TIME", default_value = "10s", value_parser = parse_duration_arg)]
    pub duration: Nanos,
    /// CPUs of the load generator, one pinned event loop each (default: every usable CPU not in
    /// --serve-cpus; all of them if none is left).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// A connection (cps) or request (throughput) not complete after this long is closed and counted.
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = parse_duration_arg)]
    pub timeout: Nanos,
    /// Stop after this many successful transactions in all (the duration bounds the run too).
    #[arg(long = "max-transactions", value_name = "N", default_value_t = 1_000_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_transactions: u64,
    /// Repeat on growing CPU sets: the first K CPUs of --serve-cpus (when rtgauge serves), else of --cpus,
    /// for each K of the list (e.g. 1,2,4,8); prints CPS or throughput per core count.
    #[arg(long = "sweep-cpus", value_name = "K,K,…")]
    pub sweep_cpus: Option<String>,
    /// Failed attempts tolerated before the exit status says failure (1).
    #[arg(long = "max-errors", value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Name of the platform, for comparisons (e.g. bare-metal, kvm-sriov).
    #[arg(long, value_parser = super::parse_name)]
    pub label: Option<String>,
    #[command(flatten)]
    pub store: super::StoreArgs,
    /// Do not store the run.
    #[arg(long = "no-store")]
    pub no_store: bool,
    #[command(flatten)]
    pub output: super::OutputArg,
    /// Background load on the CPUs not used by the client or the server (or @CPUS, …), as for cyclic
    /// (docs/load.md); the achieved load is stored with each point.
    #[arg(long = "load", value_name = "MIX", value_parser = super::load::parse_load)]
    pub bg_load: Option<rtgauge_model::load::LoadSpec>,
    /// An external load command beside the measurement, on the CPUs not used by it (docs/load.md).
    #[arg(long = "load-cmd", value_name = "COMMAND")]
    pub load_cmd: Option<String>,
}

impl TrafficArgs {
    /// What the session engine starts beside the measurement.
    pub fn load_request(&self) -> rtgauge_session::load::LoadRequest {
        rtgauge_session::load::LoadRequest {
            spec: self.bg_load.clone(),
            command: self.load_cmd.clone(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CpsArgs {
    #[command(flatten)]
    pub load: TrafficArgs,
    /// Connections in flight per client CPU.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub concurrency: u32,
    /// Who ends the connection: server (wait for its FIN; it keeps TIME_WAIT), client (close at once, as
    /// wrk; the client keeps TIME_WAIT and uses up ephemeral ports), reset (SO_LINGER 0: RST, no TIME_WAIT).
    #[arg(long, value_name = "WHO", default_value = "server", value_parser = parse_close)]
    pub close: CloseMode,
    /// At each point of --sweep-cpus, also measure keep-alive throughput of this path (e.g. /128k): the two
    /// columns of the Intel/A10 ADC white paper's figure 3.
    #[arg(long = "and-throughput", value_name = "PATH")]
    pub and_throughput: Option<String>,
    /// Open loop: offer new connections at this fixed rate per second in all (whatever the server's pace;
    /// latency counts from each scheduled start), one measurement per rate of the list, e.g. 500,1000,2000.
    /// --concurrency is then the pool of slots per CPU; a start due with every slot busy is missed.
    #[arg(long, value_name = "RATE[,RATE…]", value_parser = parse_rates)]
    pub rate: Option<Rates>,
    /// With --rate: the capacity is the highest offered rate whose p99 connection latency stays within this
    /// bound (and that missed no start); exit 1 if none does.
    #[arg(long = "p99-max", value_name = "TIME", requires = "rate", value_parser = parse_duration_arg)]
    pub p99_max: Option<Nanos>,
}

#[derive(Debug, Clone, Args)]
pub struct ThroughputArgs {
    #[command(flatten)]
    pub load: TrafficArgs,
    /// Keep-alive connections in all, spread over the client CPUs.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
}

fn parse_close(s: &str) -> Result<CloseMode, String> {
    match s {
        "server" => Ok(CloseMode::Server),
        "client" => Ok(CloseMode::Client),
        "reset" => Ok(CloseMode::Reset),
        _ => Err("expected server, client or reset".into()),
    }
}

/// A parsed `--sweep-cpus`: strictly increasing CPU counts.
fn parse_sweep(s: &str) -> anyhow::Result<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    for part in s.split(',') {
        let k: u32 =
            part.trim().parse().ok().filter(|k| *k > 0).ok_or_else(|| {
                anyhow::anyhow!("--sweep-cpus {s}: '{part}' is not a CPU count ≥ 1")
            })?;
        if out.last().is_some_and(|l| *l >= k) {
            bail!("--sweep-cpus {s}: counts must increase");
        }
        out.push(k);
    }
    Ok(out)
}

pub fn cpu_list(flag: &str, text: &str, online: &CpuSet) -> anyhow::Result<CpuSet> {
    let set = CpuSet::parse(text).map_err(|e| anyhow::anyhow!("{flag} {text}: {e}"))?;
    if set.is_empty() {
        bail!("{flag} '{text}': empty CPU list");
    }
    let missing = set.difference(online);
    if !missing.is_empty() {
        bail!("{flag} {text}: CPU {missing} is not online (online: {online})");
    }
    Ok(set)
}

pub fn resolve_addr(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if !text.contains(':') {
        bail!("{flag} {text}: expected IP:PORT or HOST:PORT");
    }
    text.to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("{flag} {text}: {e}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{flag} {text}: no address"))
}

fn default_path(mode: NetMode) -> &'static str {
    match mode {
        NetMode::Cps => "/2b",
        NetMode::Throughput => "/128k",
    }
}

fn check_path(p: &str) -> anyhow::Result<String> {
    if !p.starts_with('/') || p.bytes().any(|b| b <= b' ' || b == 0x7f) {
        bail!("--path {p}: must start with / and contain no spaces or control characters");
    }
    Ok(p.to_string())
}

/// Validate a load command into a plan.
pub fn resolve(
    mode: NetMode,
    a: &TrafficArgs,
    concurrency: u32,
    close: CloseMode,
    and_throughput: Option<&str>,
    root: &HostRoot,
) -> anyhow::Result<NetPlan> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let target = match (&a.target, &a.serve_cpus) {
        (Some(_), Some(_)) => {
            bail!("--target: not with --serve-cpus (which loads rtgauge's own server)")
        }
        (None, None) => bail!("--target: required (or --serve-cpus to load rtgauge's own server)"),
        (Some(t), None) => Some(resolve_addr("--target", t)?),
        (None, Some(_)) => None,
    };
    let serve = a
        .serve_cpus
        .as_deref()
        .map(|t| cpu_list("--serve-cpus", t, &online))
        .transpose()?;
    let client = client_cpus(a.cpus.as_deref(), serve.as_ref(), &online)?;
    if a.duration.as_ns() == 0 {
        bail!("-D/--duration: must be longer than 0");
    }
    if a.timeout.as_ns() < 1_000_000 {
        bail!("--timeout: at least 1ms");
    }
    let path = check_path(a.path.as_deref().unwrap_or(default_path(mode)))?;
    let and_throughput = and_throughput.map(check_path).transpose()?;
    if and_throughput.is_some() && a.sweep_cpus.is_none() {
        bail!("--and-throughput: only with --sweep-cpus");
    }
    let sweep = a.sweep_cpus.as_deref().map(parse_sweep).transpose()?;
    // A sweep grows over the server's CPUs when rtgauge serves, else over the client's.
    if let Some(k) = sweep.iter().flatten().copied().find(|&k| match &serve {
        Some(s) => k as usize > s.len(),
        None => k as usize > client.len(),
    }) {
        match &serve {
            Some(s) => bail!("--sweep-cpus: {k} CPUs asked, --serve-cpus has {}", s.len()),
            None => bail!(
                "--sweep-cpus: {k} CPUs asked, the client has {} (--cpus {client})",
                client.len()
            ),
        }
    }
    let plan = NetPlan {
        target,
        points: rtgauge_probe::net::plan::points(&PointsSpec {
            mode,
            path,
            client_cpus: client.as_slice().to_vec(),
            server_cpus: serve.as_ref().map(|s| s.as_slice().to_vec()),
            sweep,
            concurrency,
            and_throughput,
        }),
        duration: a.duration,
        timeout_ns: a.timeout.as_ns(),
        close,
        max_transactions: a.max_transactions,
        max_errors: a.max_errors,
    };
    // Slots are file descriptors: check them against RLIMIT_NOFILE (raised to the hard limit).
    let nofile = rtgauge_probe::rt::raise_nofile();
    if let Some(fds) = plan.short_of_descriptors(nofile) {
        let flag = match mode {
            NetMode::Cps => "--concurrency",
            NetMode::Throughput => "--connections",
        };
        bail!("{flag}: {fds} connections need more file descriptors than RLIMIT_NOFILE ({nofile}) allows");
    }
    Ok(plan)
}

/// The load generator's CPUs: `--cpus`, else every usable CPU that does not serve (all of them if none is
/// left); a client sweep grows over them.
fn client_cpus(
    cpus: Option<&str>,
    serve: Option<&CpuSet>,
    online: &CpuSet,
) -> anyhow::Result<CpuSet> {
    let client = match cpus {
        Some(t) => cpu_list("--cpus", t, online)?,
        None => {
            let usable = rtgauge_probe::rt::current_affinity().intersection(online);
            let free = match serve {
                Some(s) => usable.difference(s),
                None => usable.clone(),
            };
            if free.is_empty() {
                usable
            } else {
                free
            }
        }
    };
    if client.is_empty() {
        bail!("--cpus: no CPU available to the load generator");
    }
    Ok(client)
}

impl NetCommand {
    /// The measurement `cps` or `throughput` asks for (throughput lets the server close); `serve` is none.
    pub fn plan(&self, root: &HostRoot) -> anyhow::Result<NetPlan> {
        match self {
            NetCommand::Cps(c) => resolve(
                NetMode::Cps,
                &c.load,
                c.concurrency,
                c.close,
                c.and_throughput.as_deref(),
                root,
            )
            .map(|p| expand_rates(p, c.rate.as_ref())),
            NetCommand::Throughput(t) => resolve(
                NetMode::Throughput,
                &t.load,
                t.connections,
                CloseMode::Server,
                None,
                root,
            ),
            NetCommand::Serve(_) => bail!("'serve' is not a measurement (use cps or throughput)"),
            NetCommand::Reflect(_) => {
                bail!("'reflect' is not a measurement (use latency --reflector, kind net_latency)")
            }
            NetCommand::Latency(_) => bail!("'latency' is a probe of its own (kind net_latency)"),
        }
    }
}

/// Offered rates, connections per second, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub Vec<f64>);

/// `--rate R[,R…]`.
pub fn parse_rates(s: &str) -> Result<Rates, String> {
    let mut v = Vec::new();
    for t in s.split(',').map(str::trim) {
        let r: f64 = t
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite() && *r >= 1.0 && *r <= 10_000_000.0)
            .ok_or_else(|| {
                format!("rate '{t}' is not a number of connections per second (1 to 10000000)")
            })?;
        v.push(r);
    }
    Ok(Rates(v))
}

/// One point per offered rate for each point of the plan (closed loop when no rate is given).
pub fn expand_rates(mut plan: NetPlan, rates: Option<&Rates>) -> NetPlan {
    let Some(rates) = rates else {
        return plan;
    };
    plan.points = plan
        .points
        .iter()
        .flat_map(|p| {
            rates.0.iter().map(move |&r| {
                let mut q = p.clone();
                // `--and-throughput` points stay closed-loop: the rate is for new connections.
                if q.mode == rtgauge_model::net::NetMode::Cps {
                    q.rate = Some(r);
                }
                q
            })
        })
        .collect();
    plan.points.dedup_by(|a, b| {
        a.rate.is_none() && b.rate.is_none() && a.mode == b.mode && a.sweep == b.sweep
    });
    plan
}

/// A profile's net stage (`cps …` or `throughput …`): the profile's duration for every point.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let mut args: NetArgs = cx.parse(argv)?;
    match &mut args.command {
        NetCommand::Cps(c) => c.load.duration = cx.duration,
        NetCommand::Throughput(t) => t.load.duration = cx.duration,
        NetCommand::Serve(s) => s.duration = Some(cx.duration),
        NetCommand::Reflect(r) => r.duration = Some(cx.duration),
        NetCommand::Latency(l) => l.duration = cx.duration,
    }
    let load = match &args.command {
        NetCommand::Cps(CpsArgs { load: l, .. })
        | NetCommand::Throughput(ThroughputArgs { load: l, .. }) => l.load_request(),
        _ => rtgauge_session::load::LoadRequest::none(),
    };
    Ok(super::stage::Stage {
        plan: Box::new(cx.named(args.command.plan(cx.root))?),
        load,
    })
}

impl super::stage::StagePlan for rtgauge_probe::net::plan::NetPlan {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Net
    }

    fn announce(&self, duration: Nanos, _cpus: &rtgauge_model::CpuSet) -> Option<String> {
        Some(format!("net for {duration} per measurement…"))
    }

    fn probe<'a>(&'a self, root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::net::Net {
            plan: self,
            sysctls: rtgauge_host::system::read_net_sysctls(root),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_must_increase() {
        assert_eq!(parse_sweep("1,2,4,8").unwrap(), vec![1, 2, 4, 8]);
        assert!(parse_sweep("2,1").is_err());
        assert!(parse_sweep("0,1").is_err());
        assert!(parse_sweep("1,,2").is_err());
        assert!(parse_sweep("x").is_err());
    }

    fn plan(args: &[&str]) -> anyhow::Result<NetPlan> {
        #[derive(clap::Parser)]
        struct Net {
            #[command(subcommand)]
            command: NetCommand,
        }
        let net = <Net as clap::Parser>::try_parse_from(
            std::iter::once("net").chain(args.iter().copied()),
        )?;
        net.command.plan(&HostRoot::live())
    }

    #[test]
    fn a_sweep_beyond_its_cpus_names_them() {
        let e = plan(&["cps", "--serve-cpus", "0", "--sweep-cpus", "1,2,3"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sweep-cpus: 2 CPUs asked, --serve-cpus has 1"
        );
        let e = plan(&[
            "cps",
            "--target",
            "127.0.0.1:1",
            "--cpus",
            "0",
            "--sweep-cpus",
            "1,2",
        ])
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sweep-cpus: 2 CPUs asked, the client has 1 (--cpus 0)"
        );
    }

    #[test]
    fn flags_resolve_into_points() {
        let p = plan(&[
            "cps",
            "--serve-cpus",
            "0",
            "--sweep-cpus",
            "1",
            "--and-throughput",
            "/64k",
            "--concurrency",
            "6",
        ])
        .unwrap();
        assert_eq!(p.target, None);
        let modes: Vec<_> = p
            .points
            .iter()
            .map(|q| (q.mode, q.path.as_str(), q.concurrency))
            .collect();
        assert_eq!(
            modes,
            [(NetMode::Cps, "/2b", 6), (NetMode::Throughput, "/64k", 3)]
        );
        assert!(p
            .points
            .iter()
            .all(|q| q.server_cpus.as_deref() == Some(&[0][..])));
    }

    #[test]
    fn paths_are_checked() {
        assert!(check_path("/2b").is_ok());
        assert!(check_path("2b").is_err());
        assert!(check_path("/a b").is_err());
        assert!(check_path("/a\r\nX: y").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(
            parse_rates("500, 1000").expect("valid"),
            Rates(vec![500.0, 1000.0])
        );
        assert!(parse_rates("0").is_err());
        assert!(parse_rates("fast").is_err());
        assert!(parse_rates("1,,2").is_err());
    }
}

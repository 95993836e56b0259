//! `rtgauge net`'s flags, resolved into the network probe's plan: its points (one per swept CPU count
//! and, with `--rate`, per offered rate), the target or the reference server, and the limits.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::net::{CloseMode, NetMode};
use rtgauge_model::{CpuSet, Nanos};
pub use rtgauge_probe::net::plan::NetPlan;
use rtgauge_probe::net::plan::PointsSpec;
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

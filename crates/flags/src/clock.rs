//! `rtgauge clock`'s flags, resolved into the clock probe's plan: which sources, how often, how close
//! counts as locked.

use super::{parse_duration_arg, parse_positive_duration};
use anyhow::bail;
use clap::Args;
use rtgauge_host::HostRoot;
use rtgauge_model::clock::{ClockConfig, SourceKind};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::clock::{discover, ClockPlan, SourceSpec};

/// How well the clock is kept: every 1/--rate s, what disciplines it and how well — ptp4l through its
/// management socket (offset from the master, port state, grandmaster), chrony through its command socket
/// (last offset, frequency, leap status), each PHC against the system clock (PTP_SYS_OFFSET_EXTENDED),
/// and the kernel's adjtimex state and every step of CLOCK_REALTIME. Reads only: nothing is changed.
/// Without --ptp4l, --chrony, --phc or --host it follows what it finds: ptp4l's and chrony's default
/// sockets.
#[derive(Debug, Clone, Args)]
pub struct ClockArgs {
    /// How long (60, 30s, 24h; default 60s). In a profile: the run's duration.
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = parse_positive_duration)]
    pub duration: Option<Nanos>,

    /// Polls per second (0.1 to 100).
    #[arg(long = "rate", value_name = "HZ", default_value_t = 1.0)]
    pub rate: f64,

    /// A source is locked once its |offset| stays within this for 4 measurements in a row; the offset
    /// distribution and the gate count from its first lock (e.g. 100ns, 1us, 1ms). Default: 1us for
    /// ptp4l and a PHC, 1ms for chrony and the host's clock.
    #[arg(long = "lock", value_name = "TIME", value_parser = parse_duration_arg)]
    pub lock: Option<Nanos>,

    /// ptp4l's management socket (its uds_address; repeatable). Default where no source is named:
    /// /var/run/ptp4l if it exists.
    #[arg(long = "ptp4l", value_name = "SOCKET")]
    pub ptp4l: Vec<String>,

    /// The PTP domain ptp4l runs in (its domainNumber: 24 under G.8275.1, 44 under G.8275.2):
    /// management messages carry it.
    #[arg(long = "ptp-domain", value_name = "N", default_value_t = 0)]
    pub ptp_domain: u8,

    /// chronyd's command socket (repeatable). Default where no source is named:
    /// /run/chrony/chronyd.sock if it exists.
    #[arg(long = "chrony", value_name = "SOCKET")]
    pub chrony: Vec<String>,

    /// In a guest: its host's clock over `rtgauge vm`'s channel, answered there by `rtgauge vm
    /// clock-serve` (unix:PATH, tcp:HOST:PORT, or a device: /dev/ttyS1, /dev/virtio-ports/NAME): the drift
    /// of the two CLOCK_MONOTONICs since the first exchange, with its bound (repeatable).
    #[arg(long = "host", value_name = "CHANNEL")]
    pub host: Vec<String>,

    /// A PTP hardware clock to read against the system clock (repeatable): the one phc2sys ties the
    /// system clock to (or ptp4l's NIC's). PHCs are never looked for: another is arbitrarily far off.
    #[arg(long = "phc", value_name = "DEVICE")]
    pub phc: Vec<String>,

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
}

/// How long the verb polls without `-D`.
pub const DEFAULT_DURATION: Nanos = Nanos::from_secs(60);

/// `KIND:PATH` (`--clock-source`): a time source of kind ptp4l, chrony or phc at PATH.
pub fn parse_source(s: &str) -> Result<SourceSpec, String> {
    let (kind, path) = s.split_once(':').ok_or_else(|| {
        format!("'{s}': expected KIND:PATH (ptp4l:/var/run/ptp4l, chrony:SOCKET, phc:/dev/ptp0, host:CHANNEL)")
    })?;
    let kind = match kind {
        "ptp4l" => SourceKind::Ptp4l,
        "chrony" => SourceKind::Chrony,
        "phc" => SourceKind::Phc,
        "host" => SourceKind::Host,
        _ => {
            return Err(format!(
                "'{s}': no source kind '{kind}' (ptp4l, chrony, phc, host)"
            ))
        }
    };
    if path.is_empty() || path.chars().any(char::is_control) {
        return Err(format!("'{s}': no path"));
    }
    if kind == SourceKind::Host {
        rtgauge_vmhost::channel::Channel::parse(path, "host").map_err(|e| format!("'{s}': {e}"))?;
    }
    Ok(SourceSpec {
        kind,
        path: path.to_string(),
        domain: 0,
        found: false,
    })
}

/// The plan of `rate` polls per second for `duration_ns`, locked within `lock`, of `sources` (those
/// found when none is named); ptp4l's are asked in `ptp_domain`.
pub fn plan(
    rate: f64,
    lock: Option<Nanos>,
    duration: Nanos,
    sources: Vec<SourceSpec>,
    ptp_domain: u8,
) -> anyhow::Result<ClockPlan> {
    if !(0.1..=100.0).contains(&rate) {
        bail!("--rate {rate}: from 0.1 to 100 polls per second");
    }
    if let Some(l) = lock.filter(|l| l.as_ns() == 0) {
        bail!("--lock {l}: must be above 0");
    }
    let mut sources = if sources.is_empty() {
        discover(ptp_domain)
    } else {
        sources
    };
    for s in sources.iter_mut().filter(|s| s.kind == SourceKind::Ptp4l) {
        s.domain = ptp_domain;
    }
    Ok(ClockPlan {
        config: ClockConfig {
            rate_hz: rate,
            duration,
            lock_ns: lock.map(|l| l.as_ns()),
            sources: sources.iter().map(SourceSpec::name).collect(),
        },
        sources,
        peer: Some(rtgauge_vmhost::channel::peer_opener()),
    })
}

/// Check the flags and name the sources: those given, else those found.
pub fn resolve(a: &ClockArgs) -> anyhow::Result<ClockPlan> {
    let mut sources = Vec::new();
    for (kind, paths) in [
        (SourceKind::Ptp4l, &a.ptp4l),
        (SourceKind::Chrony, &a.chrony),
        (SourceKind::Phc, &a.phc),
        (SourceKind::Host, &a.host),
    ] {
        for p in paths {
            sources.push(
                parse_source(&format!("{}:{p}", kind.as_str()))
                    .map_err(|e| anyhow::anyhow!("--{}: {e}", kind.as_str()))?,
            );
        }
    }
    let duration = a.duration.unwrap_or(DEFAULT_DURATION);
    plan(a.rate, a.lock, duration, sources, a.ptp_domain)
}

/// A profile's clock stage: its sources for the profile's duration.
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let mut args: ClockArgs = cx.parse(argv)?;
    args.duration = Some(cx.duration);
    Ok(super::stage::Stage::unloaded(cx.named(resolve(&args))?))
}

impl super::stage::StagePlan for ClockPlan {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Clock
    }

    fn announce(&self, duration: Nanos, _cpus: &CpuSet) -> Option<String> {
        Some(format!(
            "clock for {duration} at {} Hz: {}…",
            self.config.rate_hz,
            if self.config.sources.is_empty() {
                "the kernel only (no ptp4l or chrony socket, no PHC found)".to_string()
            } else {
                format!("the kernel, {}", self.config.sources.join(", "))
            }
        ))
    }

    fn duration(&self) -> Option<Nanos> {
        Some(self.config.duration)
    }

    /// It reads daemons' state: a load beside it would say nothing about it.
    fn loadable(&self) -> bool {
        false
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::clock::Clock(self))
    }
}

/// `rtgauge monitor`'s flags for the time sources followed beside its timer threads.
#[derive(Debug, Clone, Args)]
pub struct SourcesWatchArgs {
    /// Also follow how well the clock is kept (as `rtgauge clock`): the time sources found (ptp4l's and
    /// chrony's default sockets) and the kernel's steps become rtgauge_clock_* series.
    #[arg(long = "clock")]
    pub clock: bool,

    /// A time source to follow instead of those found, as KIND:PATH: ptp4l:/var/run/ptp4l,
    /// chrony:/run/chrony/chronyd.sock, phc:/dev/ptp0, host:CHANNEL (in a guest, its host's clock over
    /// `rtgauge vm`'s channel) (repeatable; implies --clock).
    #[arg(long = "clock-source", value_name = "KIND:PATH", value_parser = parse_source)]
    pub clock_source: Vec<rtgauge_probe::clock::SourceSpec>,

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
}

impl SourcesWatchArgs {
    /// The watch asked for (`--clock`, or a `--clock-source`), if any: its sources polled until the
    /// monitor's end.
    pub fn watch(
        &self,
        m: &super::stage::WatchPlace<'_>,
    ) -> anyhow::Result<Option<Box<dyn rtgauge_session::watch::Watch>>> {
        if !self.clock && self.clock_source.is_empty() {
            return Ok(None);
        }
        let plan = plan(
            self.clock_rate,
            self.clock_lock,
            m.duration.unwrap_or(Nanos(u64::MAX)),
            self.clock_source.clone(),
            self.clock_ptp_domain,
        )
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().replacen("--", "--clock-", 1)))?;
        Ok(Some(Box::new(
            rtgauge_session::kind::clock::SourcesWatch::new(plan, "--clock-source"),
        )))
    }
}

//! How well the clock is kept (`rtgauge clock`): every `1/rate` s, each source of time is read the way its
//! own tool reads it — ptp4l through its management socket ([`ptp4l`], what `pmc` asks), chrony through
//! its command socket ([`chrony`], what `chronyc tracking` asks), each PHC against the system clock
//! ([`phc`], `PTP_SYS_OFFSET_EXTENDED`), in a guest its host's clock over `rtgauge vm`'s channel (a
//! [`ChannelClock`], opened by the caller's [`PeerOpener`]) — and the kernel's own state and steps
//! ([`kernel`]). Each source is followed by a [`track::Tracker`]: lock, reference and state changes,
//! holdovers, |offset|.
//!
//! Nothing here changes the clock or the daemons: every request is a read (a management GET, a chrony
//! monitoring request, an ioctl that reads, `adjtimex` with no mode).

pub mod chrony;
pub mod kernel;
pub mod phc;
pub mod ptp4l;
pub mod socket;
pub mod track;

use crate::observe::ProbeObserver;
use crate::stop::StopFlag;
use crate::time::{now_ns, sleep_until, ClockId};
use rtgauge_model::clock::{ClockConfig, ClockResult, SourceKind};
use rtgauge_model::kind::StopReason;
use std::time::Duration;

/// Where ptp4l's management socket is unless its config says otherwise (`uds_address`).
pub const PTP4L_SOCKET: &str = "/var/run/ptp4l";
/// Where Debian's chronyd listens for commands.
pub const CHRONY_SOCKET: &str = "/run/chrony/chronyd.sock";

/// One source to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// What it is.
    pub kind: SourceKind,
    /// Its socket or device.
    pub path: String,
    /// ptp4l: the PTP domain its management messages carry.
    pub domain: u8,
    /// Found rather than named: one that cannot be read is left out (said), not refused.
    pub found: bool,
}

impl SourceSpec {
    /// `kind:path`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.path)
    }
}

/// The other side's clock, read over a channel (`rtgauge vm`'s, implemented above this crate).
pub trait ChannelClock: Send {
    /// One burst of exchanges: the other side's CLOCK_MONOTONIC minus this side's, ns, and its bound
    /// (half the best exchange's round trip); an error when no exchange was answered.
    fn sample(&mut self) -> std::io::Result<(i64, u64)>;
}

/// Opens a channel to the other side's clock, given as `unix:PATH`, `tcp:HOST:PORT` or a device.
pub type OpenChannel = dyn Fn(&str) -> std::io::Result<Box<dyn ChannelClock>> + Send + Sync;

/// Opens a channel (`unix:PATH`, `tcp:HOST:PORT`, a device) to the other side's clock.
#[derive(Clone)]
pub struct PeerOpener(pub std::sync::Arc<OpenChannel>);

impl std::fmt::Debug for PeerOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerOpener")
    }
}

/// The probe's plan.
#[derive(Debug, Clone)]
pub struct ClockPlan {
    /// Its configuration, as the result records it.
    pub config: ClockConfig,
    /// The sources.
    pub sources: Vec<SourceSpec>,
    /// How a `host` source's channel is opened (required for one).
    pub peer: Option<PeerOpener>,
}

impl ClockPlan {
    /// The sources followed: `config.sources` names them.
    fn set_sources(&mut self, sources: Vec<SourceSpec>) {
        self.config.sources = sources.iter().map(SourceSpec::name).collect();
        self.sources = sources;
    }
}

/// Why the probe could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    /// A source named on the command line cannot be read.
    #[error("{source_name}: {why}")]
    Source {
        /// `kind:path`.
        source_name: String,
        /// What failed.
        why: String,
    },
}

/// The sources this host has where nothing was named: ptp4l's (in `ptp_domain`) and chrony's default
/// sockets where they exist. PHCs are not looked for: one that nothing ties to the system clock (another
/// port of the NIC) is arbitrarily far from it, and would fail every bound; name them (`--phc`).
pub fn discover(ptp_domain: u8) -> Vec<SourceSpec> {
    [
        (SourceKind::Ptp4l, PTP4L_SOCKET),
        (SourceKind::Chrony, CHRONY_SOCKET),
    ]
    .into_iter()
    .filter(|(_, p)| std::path::Path::new(p).exists())
    .map(|(kind, path)| SourceSpec {
        kind,
        path: path.into(),
        domain: if kind == SourceKind::Ptp4l {
            ptp_domain
        } else {
            0
        },
        found: true,
    })
    .collect()
}

/// How long a daemon may take to answer: half the poll period, within 10–500 ms, so that a daemon that
/// stopped answering does not stretch the schedule.
fn answer_timeout(rate_hz: f64) -> Duration {
    Duration::from_secs_f64(0.5 / rate_hz)
        .clamp(Duration::from_millis(10), Duration::from_millis(500))
}

/// A source opened for reading.
enum SourceReader {
    Ptp4l(ptp4l::Pmc),
    Chrony(chrony::Chronyc),
    Phc(phc::Phc),
    /// The other side's clock, its offset and bound at the first burst, its channel.
    Host(Box<dyn ChannelClock>, Option<(i64, u64)>, String),
}

/// One burst of a peer's clock: the drift since the first as the offset, its bound (this burst's and the
/// first's) as its delay.
fn peer_reading(
    p: &mut dyn ChannelClock,
    first: &mut Option<(i64, u64)>,
    channel: &str,
) -> std::io::Result<track::Reading> {
    let (offset, bound) = p.sample()?;
    let (first, first_bound) = *first.get_or_insert((offset, bound));
    Ok(track::Reading {
        state: "answering".into(),
        has_reference: true,
        reference: Some(rtgauge_model::clock::Reference {
            id: channel.to_string(),
            class: None,
        }),
        offset_ns: Some(offset.saturating_sub(first)),
        delay_ns: Some(bound.saturating_add(first_bound).min(i64::MAX as u64) as i64),
        ..track::Reading::default()
    })
}

impl SourceReader {
    fn open(
        s: &SourceSpec,
        timeout: Duration,
        peer: Option<&PeerOpener>,
    ) -> std::io::Result<SourceReader> {
        Ok(match s.kind {
            SourceKind::Ptp4l => {
                SourceReader::Ptp4l(ptp4l::Pmc::connect(&s.path, s.domain, timeout)?)
            }
            SourceKind::Chrony => SourceReader::Chrony(chrony::Chronyc::connect(&s.path, timeout)?),
            SourceKind::Phc => SourceReader::Phc(phc::Phc::open(&s.path)?),
            SourceKind::Host => {
                let open = peer.ok_or_else(|| {
                    std::io::Error::other("no channel opener for the host's clock in this build")
                })?;
                SourceReader::Host((open.0)(&s.path)?, None, s.path.clone())
            }
        })
    }

    fn read(&mut self, tai_s: i32) -> std::io::Result<track::Reading> {
        match self {
            SourceReader::Ptp4l(p) => p.read(),
            SourceReader::Chrony(c) => c.read(),
            SourceReader::Phc(p) => p.read(tai_s),
            SourceReader::Host(p, first, channel) => peer_reading(p.as_mut(), first, channel),
        }
    }

    /// Count the next offset as new (after the read that checked the source).
    fn forget(&mut self) {
        match self {
            SourceReader::Ptp4l(p) => p.forget(),
            SourceReader::Chrony(c) => c.forget(),
            SourceReader::Phc(_) | SourceReader::Host(..) => {}
        }
    }
}

/// Every source opened, read once, and followed: the probe between its start (where a source named but
/// unreadable is refused) and its polling.
pub struct Poller {
    plan: ClockPlan,
    readers: Vec<SourceReader>,
    trackers: Vec<track::Tracker>,
    kernel: kernel::KernelTracker,
    /// Sources found but not readable, each with why: left out.
    pub left_out: Vec<String>,
}

impl Poller {
    /// Open every source and read each once: one named that cannot be read is refused with its reason,
    /// before anything is measured; one found is left out (in `left_out`).
    pub fn open(plan: &ClockPlan) -> Result<Poller, ClockError> {
        let (mut readers, mut kept, mut left_out) = (Vec::new(), Vec::new(), Vec::new());
        for s in &plan.sources {
            let timeout = answer_timeout(plan.config.rate_hz);
            let opened = SourceReader::open(s, timeout, plan.peer.as_ref()).and_then(|mut r| {
                r.read(0)?;
                r.forget();
                Ok(r)
            });
            match opened {
                Ok(r) => {
                    readers.push(r);
                    kept.push(s.clone());
                }
                Err(e) if s.found => left_out.push(format!("{}: {e}", s.name())),
                Err(e) => {
                    return Err(ClockError::Source {
                        source_name: s.name(),
                        why: e.to_string(),
                    })
                }
            }
        }
        let mut plan = plan.clone();
        plan.set_sources(kept);
        Ok(Poller {
            trackers: plan
                .sources
                .iter()
                .map(|s| {
                    let lock = plan
                        .config
                        .lock_ns
                        .unwrap_or_else(|| rtgauge_model::clock::default_lock_ns(s.kind));
                    track::Tracker::new(s.kind, &s.path, lock)
                })
                .collect(),
            plan,
            readers,
            kernel: kernel::KernelTracker::default(),
            left_out,
        })
    }

    /// The sources it reads (those found and unreadable left out).
    pub fn sources(&self) -> &[SourceSpec] {
        &self.plan.sources
    }

    /// What was measured so far.
    fn result(&self, elapsed_ns: u64, stop_reason: StopReason) -> ClockResult {
        ClockResult {
            config: self.plan.config.clone(),
            stop_reason,
            elapsed_ns,
            kernel: self.kernel.result(),
            sources: self.trackers.iter().map(track::Tracker::result).collect(),
            left_out: self.left_out.clone(),
        }
    }

    /// One poll of the kernel and every source, `at_ns` after the start.
    fn poll(&mut self, at_ns: u64) {
        self.kernel.poll(at_ns);
        let tai = self.kernel.tai_s();
        for (r, t) in self.readers.iter_mut().zip(self.trackers.iter_mut()) {
            match r.read(tai) {
                Ok(reading) => t.read(at_ns, reading),
                Err(e) => t.failed(at_ns, e.to_string()),
            }
        }
    }

    /// Poll at the plan's rate until its duration or `stop`; the observer is told each poll.
    pub fn run(
        mut self,
        stop: &StopFlag,
        observer: &mut dyn ProbeObserver<ClockResult>,
    ) -> ClockResult {
        let period_ns = (1e9 / self.plan.config.rate_hz).round().max(1.0) as u64;
        let duration_ns = self.plan.config.duration.as_ns();
        observer.start(None);
        let t0 = now_ns(ClockId::Monotonic);
        let stop_reason = loop {
            let at_ns = now_ns(ClockId::Monotonic) - t0;
            self.poll(at_ns);
            observer.tick(Duration::from_nanos(at_ns), &(), &mut || {
                self.result(at_ns, StopReason::Duration)
            });
            // The next slot of the schedule still ahead (slots a slow poll overran are skipped, not
            // caught up).
            let next = t0 + ((now_ns(ClockId::Monotonic) - t0) / period_ns + 1) * period_ns;
            if next - t0 > duration_ns {
                break StopReason::Duration;
            }
            // Sleep in slices so that a stop is seen within 100 ms at any rate.
            while now_ns(ClockId::Monotonic) < next && !stop.is_set() {
                sleep_until(
                    ClockId::Monotonic,
                    next.min(now_ns(ClockId::Monotonic) + 100_000_000),
                );
            }
            if stop.is_set() {
                break StopReason::Signal;
            }
        };
        self.result(now_ns(ClockId::Monotonic) - t0, stop_reason)
    }
}

/// Open every source, then poll them at the plan's rate until its duration or `stop`.
pub fn run(
    plan: &ClockPlan,
    stop: &StopFlag,
    observer: &mut dyn ProbeObserver<ClockResult>,
) -> Result<ClockResult, ClockError> {
    Ok(Poller::open(plan)?.run(stop, observer))
}

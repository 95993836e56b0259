//! How well the platform keeps time over a run (`rtgauge clock`): what disciplines the clock (ptp4l,
//! chrony, the kernel's own state, each PHC against the system clock) and how well, polled at a fixed
//! rate. Each source keeps the distribution of its |offset| once it has locked, its lock and state
//! changes, grandmaster changes, holdovers (the reference lost: how far the clock had drifted when it came
//! back) and a bounded timeline; the kernel keeps every step of CLOCK_REALTIME against CLOCK_MONOTONIC.

use crate::kind::StopReason;
use crate::latency::LatencyStats;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// How the probe was configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockConfig {
    /// Polls per second.
    pub rate_hz: f64,
    /// How long it polled for, as asked.
    #[serde(rename = "duration_ns")]
    pub duration: Nanos,
    /// A source is locked while its |offset| stays within this, ns; `None`: each kind's default
    /// ([`default_lock_ns`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_ns: Option<u64>,
    /// The sources asked for or found, as `kind:path` (`ptp4l:/var/run/ptp4l`, `chrony:…`, `phc:/dev/ptp0`).
    pub sources: Vec<String>,
}

/// The lock bound of a kind where none is asked: 1 µs for PTP (ptp4l, a PHC), 1 ms for chrony (NTP over a
/// network is rarely within 1 µs; IEC 61850-5's T1).
pub fn default_lock_ns(kind: SourceKind) -> u64 {
    match kind {
        SourceKind::Ptp4l | SourceKind::Phc => 1_000,
        SourceKind::Chrony | SourceKind::Host => 1_000_000,
    }
}

/// What a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// linuxptp's `ptp4l`, read through its management socket (what `pmc` reads).
    Ptp4l,
    /// chrony, read through its command socket (what `chronyc tracking` reads).
    Chrony,
    /// A PTP hardware clock against the system clock (`PTP_SYS_OFFSET_EXTENDED`).
    Phc,
    /// The other side's clock over `rtgauge vm`'s channel (a guest reading its host's, which `rtgauge vm
    /// clock-serve` answers): the drift of CLOCK_MONOTONIC between the two since the first exchange.
    Host,
}

impl SourceKind {
    /// The name in `kind:path` and in the views.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Ptp4l => "ptp4l",
            SourceKind::Chrony => "chrony",
            SourceKind::Phc => "phc",
            SourceKind::Host => "host",
        }
    }
}

/// One poll's reading of a source's reference, when the source has one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Reference {
    /// Its identity: a PTP grandmaster's clockIdentity (`001122.fffe.334455`), chrony's reference (an
    /// address or refclock name).
    pub id: String,
    /// PTP: the grandmaster's clockClass; chrony: its stratum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<u8>,
}

/// Something that happened to a source, at `at_ns` after the probe's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockEvent {
    /// ns after the start.
    pub at_ns: u64,
    /// What.
    #[serde(flatten)]
    pub what: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// Its state changed (a ptp4l port state, chrony's leap status, a PHC readable or not).
    State {
        /// Before (empty at the first poll).
        from: String,
        /// After.
        to: String,
    },
    /// Its reference changed (a new grandmaster; chrony's selected source).
    Reference {
        /// Before, where there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Reference>,
        /// After, where there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<Reference>,
    },
    /// |offset| came within the lock bound and stayed for [`LOCK_RUN`] measurements.
    Locked {
        /// Since the start, or since it was last unlocked, ns.
        after_ns: u64,
    },
    /// |offset| went beyond the lock bound while locked.
    Unlocked {
        /// The offset that went beyond it, ns.
        offset_ns: i64,
    },
    /// The reference was lost (holdover starts).
    ReferenceLost,
    /// The reference came back after a holdover.
    ReferenceBack {
        /// How long it was gone, ns.
        after_ns: u64,
    },
    /// Reading the source failed (the first of a run of failures).
    Unreadable {
        /// Why.
        error: String,
    },
}

/// Measurements in a row within the lock bound that make a source locked.
pub const LOCK_RUN: u32 = 4;

/// A period without a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holdover {
    /// When the reference was lost, ns after the start.
    pub start_ns: u64,
    /// When it came back (`None`: not by the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
    /// The first offset measured after it came back: how far the clock drifted over the outage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_ns: Option<i64>,
}

/// One stretch of a source's timeline (a poll interval, merged pairwise past [`MAX_CLOCK_TIMELINE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockPoint {
    /// Start, ns after the probe's start.
    pub start_ns: u64,
    /// Measurements in it.
    pub count: u32,
    /// Smallest and largest offset measured in it, ns.
    pub offset_min_ns: i64,
    /// See `offset_min_ns`.
    pub offset_max_ns: i64,
    /// Largest path delay (PTP) or root delay (chrony) or read bound (PHC) in it, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ns: Option<i64>,
}

/// Most timeline points kept per source: past it, neighbours merge into stretches twice as long.
pub const MAX_CLOCK_TIMELINE: usize = 2048;

impl crate::latency::Bucket for ClockPoint {
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    fn set_start_ns(&mut self, start_ns: u64) {
        self.start_ns = start_ns;
    }
    fn merge(&mut self, p: &Self) {
        self.count = self.count.saturating_add(p.count);
        self.offset_min_ns = self.offset_min_ns.min(p.offset_min_ns);
        self.offset_max_ns = self.offset_max_ns.max(p.offset_max_ns);
        self.delay_ns = self.delay_ns.max(p.delay_ns);
    }
    const MAX: usize = MAX_CLOCK_TIMELINE;
}
/// Most events kept per source (the first ones); past it they are only counted.
pub const MAX_CLOCK_EVENTS: usize = 1024;

/// The last state a source was read in.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SourceStatus {
    /// ptp4l's port state (`SLAVE`, `LISTENING`, …), chrony's leap status (`normal`, `unsynchronised`, …),
    /// a PHC's `readable`.
    pub state: String,
    /// The reference, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Reference>,
    /// The last offset it measured, ns (kept until a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_ns: Option<i64>,
    /// The frequency correction it applies, parts per billion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_ppb: Option<f64>,
    /// Path delay (PTP's mean path delay, chrony's root delay), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ns: Option<i64>,
    /// chrony's RMS of recent offsets, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rms_offset_ns: Option<i64>,
    /// chrony's skew estimate of the frequency, ppb.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew_ppb: Option<f64>,
}

/// One source over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceResult {
    /// What it is.
    pub kind: SourceKind,
    /// Its socket or device.
    pub path: String,
    /// It is locked while its |offset| stays within this, ns.
    #[serde(default)]
    pub lock_ns: u64,
    /// Polls made.
    pub polls: u64,
    /// New offsets measured (a ptp4l or chrony offset counts once, however often it was polled).
    pub measurements: u64,
    /// Polls that failed.
    pub errors: u64,
    /// The |offset| distribution from the moment it first locked (every measurement when it never did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<LatencyStats>,
    /// Whether it ever locked; `offset` then holds only what followed.
    pub locked: bool,
    /// Whether it is locked at the end (at the last poll; not while it cannot be read).
    #[serde(default)]
    pub locked_now: bool,
    /// Whether it follows a reference at the end (a PTP port UNCALIBRATED or SLAVE; chrony synchronised).
    #[serde(default)]
    pub following: bool,
    /// Whether it is a reference itself at the end, following none (a PTP port MASTER: a grandmaster).
    #[serde(default)]
    pub serving: bool,
    /// Whether its last poll read it.
    #[serde(default)]
    pub readable: bool,
    /// Times its lock was lost.
    #[serde(default)]
    pub unlocks: u64,
    /// Times it came to follow another reference than the one before (a new grandmaster, chrony's new
    /// source; not the first, not the same one back after a holdover).
    #[serde(default)]
    pub reference_changes: u64,
    /// From the start to its first lock, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_ns: Option<u64>,
    /// The largest |offset| over every measurement, convergence included, ns.
    pub offset_max_all_ns: u64,
    /// Periods without a reference (the first [`MAX_CLOCK_EVENTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holdovers: Vec<Holdover>,
    /// Holdovers past [`MAX_CLOCK_EVENTS`], counted only.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub holdovers_dropped: u64,
    /// Whether it is in a holdover at the end.
    #[serde(default)]
    pub in_holdover: bool,
    /// State, lock and reference changes (the first [`MAX_CLOCK_EVENTS`]).
    pub events: Vec<ClockEvent>,
    /// Events past [`MAX_CLOCK_EVENTS`], counted only.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub events_dropped: u64,
    /// The offset over time.
    pub timeline: Vec<ClockPoint>,
    /// How it was read last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<SourceStatus>,
}

impl SourceResult {
    /// `kind:path`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.path)
    }

    /// The bound of its readings where each offset is read with one (a PHC against the system clock, the
    /// host's clock over the channel): the largest over the run, ns. An |offset| no larger than it is
    /// unresolved: the clocks may agree exactly. None for ptp4l and chrony, whose offsets are the servo's.
    pub fn read_bound_ns(&self) -> Option<u64> {
        if !matches!(self.kind, SourceKind::Phc | SourceKind::Host) {
            return None;
        }
        self.timeline
            .iter()
            .filter_map(|p| p.delay_ns)
            .map(i64::unsigned_abs)
            .max()
    }

    /// The largest |offset| that counts against a gate: since the first lock, or over everything when it
    /// never locked.
    pub fn offset_max_ns(&self) -> Option<u64> {
        self.offset
            .as_ref()
            .filter(|s| s.count > 0)
            .map(|s| s.max_ns)
    }

    /// Every holdover, kept or only counted.
    pub fn holdover_count(&self) -> u64 {
        self.holdovers.len() as u64 + self.holdovers_dropped
    }
}

/// The kernel's state as `adjtimex(2)` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Adjtimex {
    /// The clock state it returned (`TIME_OK` 0, `TIME_INS` 1, `TIME_DEL` 2, `TIME_OOP` 3, `TIME_WAIT` 4,
    /// `TIME_ERROR` 5: unsynchronised).
    pub state: i32,
    /// The status bits (`STA_*`).
    pub status: u32,
    /// The PLL's remaining offset, ns.
    pub offset_ns: i64,
    /// The frequency correction, ppb.
    pub freq_ppb: i64,
    /// Maximum error, µs (grows by 500 ppm while nobody updates it).
    pub maxerror_us: i64,
    /// Estimated error, µs.
    pub esterror_us: i64,
    /// TAI − UTC, s.
    pub tai_s: i32,
}

/// `STA_UNSYNC`: nobody disciplines the clock.
pub const STA_UNSYNC: u32 = 0x0040;

impl Adjtimex {
    /// Whether the kernel counts the clock as synchronised (neither `STA_UNSYNC` nor `TIME_ERROR`).
    pub fn synchronised(&self) -> bool {
        self.status & STA_UNSYNC == 0 && self.state != 5
    }
}

/// A step of CLOCK_REALTIME: its difference to CLOCK_MONOTONIC moved (a frequency correction moves both
/// clocks alike; only a set, an offset adjustment or a leap second moves one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockStep {
    /// When it was seen (the poll after it), ns after the start.
    pub at_ns: u64,
    /// By how much, ns (positive: forward).
    pub by_ns: i64,
    /// Its uncertainty, ± ns (the two readings' bounds).
    pub bound_ns: u64,
}

/// Most steps kept; past it they are only counted.
pub const MAX_STEPS: usize = 1024;

/// The kernel's view over the run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelClock {
    /// Polls made.
    pub polls: u64,
    /// Steps of CLOCK_REALTIME seen (the first [`MAX_STEPS`]).
    pub steps: Vec<ClockStep>,
    /// Steps past [`MAX_STEPS`], counted only.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub steps_dropped: u64,
    /// The last step, kept or only counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step: Option<ClockStep>,
    /// Polls at which the kernel counted the clock unsynchronised.
    pub unsynchronised_polls: u64,
    /// The smallest bound a step could be told with: the largest uncertainty of a REALTIME − MONOTONIC
    /// reading, ns.
    pub read_bound_max_ns: u64,
    /// Its state at the first and the last poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<Adjtimex>,
    /// See `first`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<Adjtimex>,
}

impl KernelClock {
    /// Every step seen, kept or only counted.
    pub fn step_count(&self) -> u64 {
        self.steps.len() as u64 + self.steps_dropped
    }
}

/// The whole probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockResult {
    /// How it was configured.
    pub config: ClockConfig,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// From the first poll to the last, ns.
    pub elapsed_ns: u64,
    /// The kernel's view.
    pub kernel: KernelClock,
    /// Each source.
    pub sources: Vec<SourceResult>,
    /// Sources found (not named) that could not be read, with why: left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl ClockResult {
    /// The largest |offset| any source measured since it locked, ns (`None`: no source measured one).
    pub fn offset_max_ns(&self) -> Option<u64> {
        self.sources.iter().filter_map(|s| s.offset_max_ns()).max()
    }
}

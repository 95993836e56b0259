//! Which kind of probe a result is ([`ProbeKind`]), and the facts every kind shares: how a timed probe
//! ended ([`StopReason`]), what a document knows of its results ([`RunFacts`]).
//!
//! The one place that lists the kinds is `crate::run::ProbeResult`, whose `kinds!` list gives each result
//! type its `crate::run::Kind` (the downcast a kind's own verb uses to get its typed result back). What
//! each kind's result says about itself is `rtgauge_analysis::kind::KindData`, its views
//! `rtgauge_report::kind::KindView`: one module per kind in each.

use serde::{Deserialize, Serialize};

/// The kinds of probe. The serialised name (`cyclic`, …) is the run document's `"probe"` tag, a profile's
/// `kind`, a measure key's prefix and the verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The timer wake-up latency probe (`rtgauge cyclic` flags).
    Cyclic,
    /// The busy-loop OS-noise probe (`rtgauge oslat` flags).
    Oslat,
    /// `rtgauge net` flags: `cps …` or `throughput …`.
    Net,
    /// `rtgauge net latency` flags: packet latency, one-way or round trip.
    NetLatency,
    /// The OS-primitive latency probe (`rtgauge ops` flags).
    Ops,
    /// The memory latency and bandwidth probe (`rtgauge mem` flags).
    Mem,
    /// The NUMA locality probe (`rtgauge numa` flags).
    Numa,
    /// The hardware/firmware noise probe (`rtgauge hwnoise` flags).
    Hwnoise,
    /// How well the clock is kept (`rtgauge clock` flags).
    Clock,
}

impl ProbeKind {
    /// Every kind, in the order the views show them.
    pub const ALL: [ProbeKind; 9] = [
        ProbeKind::Cyclic,
        ProbeKind::Oslat,
        ProbeKind::Hwnoise,
        ProbeKind::Net,
        ProbeKind::NetLatency,
        ProbeKind::Ops,
        ProbeKind::Mem,
        ProbeKind::Numa,
        ProbeKind::Clock,
    ];

    /// The kind's name, as the verbs, the store's probe list and measure keys spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Cyclic => "cyclic",
            ProbeKind::Oslat => "oslat",
            ProbeKind::Net => "net",
            ProbeKind::NetLatency => "net_latency",
            ProbeKind::Ops => "ops",
            ProbeKind::Mem => "mem",
            ProbeKind::Numa => "numa",
            ProbeKind::Hwnoise => "hwnoise",
            ProbeKind::Clock => "clock",
        }
    }

    /// Whether its results are per-thread latency distributions with windows, a timeline and a "why" (the
    /// timer and the busy-loop probe).
    pub fn is_latency(self) -> bool {
        matches!(self, ProbeKind::Cyclic | ProbeKind::Oslat)
    }
}

/// What a document knows about its results that no result holds (where it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFacts {
    /// Whether missed deadlines were counted (not for an imported cyclictest result).
    pub missed_deadlines_known: bool,
}

/// Why the probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The requested duration (`-D`) elapsed.
    Duration,
    /// Every thread completed its cycles (`-l`).
    Loops,
    /// SIGINT or SIGTERM ended it.
    Signal,
    /// A sample crossed the break threshold (`-b`).
    Break,
}

//! The kinds as the flags know them: the one place in this crate that lists them. Each kind's flags module
//! makes its own profile stage ([`from_profile`]), and a kind that `rtgauge monitor` can watch contributes
//! its flags to the monitor's ([`WatchArgs`]), its watch (`rtgauge_session::watch::Watch`) and its part of
//! the Prometheus rules ([`WATCH_RULES`]).

use super::stage::{FromProfile, WatchPlace};
use super::{clock, cyclic, hwnoise, mem, net, net_latency, numa, ops, oslat};
use clap::Args;
use rtgauge_model::kind::ProbeKind;
use rtgauge_session::watch::Watch;

/// How each kind's flags become a profile stage: its module's `from_profile`.
pub fn from_profile(kind: ProbeKind) -> FromProfile {
    match kind {
        ProbeKind::Cyclic => cyclic::from_profile,
        ProbeKind::Oslat => oslat::from_profile,
        ProbeKind::Hwnoise => hwnoise::from_profile,
        ProbeKind::Net => net::from_profile,
        ProbeKind::NetLatency => net_latency::from_profile,
        ProbeKind::Ops => ops::from_profile,
        ProbeKind::Mem => mem::from_profile,
        ProbeKind::Numa => numa::from_profile,
        ProbeKind::Clock => clock::from_profile,
    }
}

/// The flags of every kind `rtgauge monitor` can watch beside its timer threads, flattened into the
/// monitor's.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub net_latency: net_latency::StreamWatchArgs,
    #[command(flatten)]
    pub clock: clock::SourcesWatchArgs,
}

impl WatchArgs {
    /// The watches asked for, resolved, in the order they start and their series are served.
    pub fn watches(&self, place: &WatchPlace<'_>) -> anyhow::Result<Vec<Box<dyn Watch>>> {
        Ok([self.net_latency.watch(place)?, self.clock.watch(place)?]
            .into_iter()
            .flatten()
            .collect())
    }
}

/// The Prometheus rules each watched kind brings (its recording rules and alerts, by name), which
/// deploy/prometheus/rtgauge-rules.yml defines.
pub const WATCH_RULES: [&[&str]; 2] = [
    rtgauge_session::kind::net_latency::RULES,
    rtgauge_session::kind::clock::RULES,
];

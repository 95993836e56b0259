//! Each probe kind as the session runs it: one module per kind, with its [`crate::Probe`] over the probe
//! crate's plan and, for a kind with a "why", how what the counters and the trace collected joins its result
//! (its [`crate::why::Scope`]'s finisher). Nothing else in the session names a kind.

pub mod clock;
pub mod cyclic;
pub mod hwnoise;
pub mod mem;
pub mod net;
pub mod net_latency;
pub mod numa;
pub mod ops;
pub mod oslat;

use crate::{SessionObserver, Tick};
use rtgauge_model::run::ProbeResult;
use std::time::Duration;

/// The session's observers as a probe's, for the probes whose ticks carry no live threads (oslat,
/// hwnoise, clock): phases passed on, each checkpoint as a [`ProbeResult`].
pub(crate) struct Threadless<'o>(pub(crate) &'o mut dyn SessionObserver);

impl<R: Into<ProbeResult>> rtgauge_probe::observe::ProbeObserver<R> for Threadless<'_> {
    fn preheat(&mut self) {
        self.0.preheat();
    }
    fn start(&mut self, bias_ns: Option<u64>) {
        self.0.start(bias_ns);
    }
    fn tick(&mut self, elapsed: Duration, _: &(), checkpoint: &mut dyn FnMut() -> R) {
        let tick = Tick {
            elapsed,
            threads: &[],
            cpus: &[],
        };
        self.0.tick(&tick, Some(&mut || checkpoint().into()));
    }
}

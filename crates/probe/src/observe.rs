//! What the caller of a running probe sees, from the probe's main thread (never from a measurement thread):
//! the phases it goes through and, every tick, its live figures and a way to build the result so far. One
//! trait for every probe that reports while it runs (cyclic, oslat), generic over the result type `R` and
//! the live data `L` (cyclic: one [`crate::cyclic::LiveThread`] per thread; oslat: none, `()`).

use std::time::Duration;

/// Receives a running probe's phases and ticks. Every method has a default that ignores it.
pub trait ProbeObserver<R, L: ?Sized = ()> {
    /// The probe warms up before it measures (oslat's "Pre-heat…").
    fn preheat(&mut self) {}

    /// Measuring starts now; `bias_ns` is the bias subtracted from every sample, if any (oslat's
    /// "Global bias").
    fn start(&mut self, _bias_ns: Option<u64>) {}

    /// Called once per plan tick while measuring, with the live figures. `checkpoint` builds the result of
    /// what was measured so far (it merges histograms: call it only when a checkpoint is due, every few
    /// seconds, not every tick).
    fn tick(&mut self, _elapsed: Duration, _live: &L, _checkpoint: &mut dyn FnMut() -> R) {}

    /// The timer probe's late samples (at or above its plan's `late_floor_ns`) since the last call, each
    /// thread's in time order, delivered just before a tick. Other probes never call it.
    fn late(&mut self, _late: &[rtgauge_model::latency::Spike]) {}
}

/// A closure over the elapsed time and the live figures observes the ticks only.
impl<R, L: ?Sized, F: FnMut(Duration, &L)> ProbeObserver<R, L> for F {
    fn tick(&mut self, elapsed: Duration, live: &L, _: &mut dyn FnMut() -> R) {
        self(elapsed, live)
    }
}

/// Observes nothing.
pub struct Silent;

impl<R, L: ?Sized> ProbeObserver<R, L> for Silent {}

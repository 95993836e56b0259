//! Kinds `rtgauge monitor` watches without end beside its timer threads (a packet stream, the time
//! sources): each a [`Watch`], in its kind's module of [`crate::kind`], made by the kind's flags from the
//! monitor's (`rtgauge_flags::kinds::WatchArgs`). The monitor starts them, ticks them and says what they
//! say; it names none of them. Each keeps its series in the monitor's state
//! ([`MonitorState::watched`]: a [`rtgauge_analysis::monitor::WatchSeries`] of its kind), which the
//! renderers serve, and its part of the Prometheus rules is its module's `RULES`
//! (deploy/prometheus/rtgauge-rules.yml holds each kind's, a test checks).

use crate::SessionError;
use rtgauge_analysis::monitor::{MonitorState, WatchSeries};
use rtgauge_probe::stop::StopFlag;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a watch is given when it starts.
pub struct WatchContext {
    /// The monitor's state: the watch puts its series in it and updates them.
    pub state: Arc<Mutex<MonitorState>>,
    /// Set when the monitor ends (SIGINT/SIGTERM, its duration).
    pub stop: StopFlag,
}

/// A kind watched without end.
pub trait Watch: Send {
    /// Start watching: open what it reads (a refusal names the monitor's flag), put its series in the
    /// state, start a thread of its own if it needs one. What to say of how it runs, what it did not get
    /// first (`NOT MET: …`), one line each.
    fn start(&mut self, cx: &WatchContext) -> Result<Vec<String>, SessionError>;

    /// Every tick of the monitor's timer probe (100 ms), from its main thread with the state locked: copy
    /// live figures into its series. `now_ns` is the time since the monitor started, `window_ns` the
    /// window maximum series' span.
    fn tick(&mut self, _state: &mut MonitorState, _now_ns: u64, _window_ns: u64) {}

    /// At the end of each of the monitor's segments (10 s): what went wrong since, to say once.
    fn segment(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The monitor's state, locked. A panic while it was held cannot leave the plain-data state half-written
/// in a way that matters for the next scrape: the monitor keeps serving.
pub fn lock(state: &Mutex<MonitorState>) -> MutexGuard<'_, MonitorState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Put a watch's series in the state: its place there, where it updates them.
pub fn add_series(state: &Mutex<MonitorState>, series: Box<dyn WatchSeries>) -> usize {
    let mut g = lock(state);
    g.watched.push(series);
    g.watched.len() - 1
}

/// The series of type `S` at `slot` of the state, for the watch that put them there.
pub fn series_mut<S: 'static>(state: &mut MonitorState, slot: usize) -> Option<&mut S> {
    state
        .watched
        .get_mut(slot)?
        .as_any_mut()
        .downcast_mut::<S>()
}

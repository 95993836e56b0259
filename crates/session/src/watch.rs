//! Kinds `rtgauge monitor` watches without end beside its timer threads: each a [`Watch`], in its kind's module of [`crate::kind`], made by the kind's flags from the
//! monitor's (`rtgauge_flags::kinds::WatchArgs`). The monitor starts them, ticks them and says what they
//! say; it names none of them. Each keeps its series, as plain families, at its place in the monitor's
//! state ([`MonitorState::watched`]), which the renderers serve; its part of the Prometheus rules is its
//! module's (deploy/prometheus/rtgauge-rules.yml holds each kind's, a test checks).

use crate::SessionError;
use rtgauge_analysis::monitor::{Family, MonitorState};
use rtgauge_probe::stop::StopFlag;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a watch is given when it starts.
pub struct WatchContext {
    /// The monitor's state: the watch puts its series in it and updates them.
    pub state: Arc<Mutex<MonitorState>>,
    /// Set when the monitor ends (SIGINT/SIGTERM, its duration).
    pub stop: StopFlag,
    /// Says one line on the monitor's log, from whichever thread, when it happens: how the watch runs,
    /// what it did not get (`NOT MET: …`), what went wrong.
    pub say: fn(&str),
}

/// A kind watched without end.
pub trait Watch: Send {
    /// Start watching: open what it reads (a refusal names the monitor's flag), say how it runs (what it
    /// did not get first), put its series in the state, start a thread of its own if it needs one.
    fn start(&mut self, cx: &WatchContext) -> Result<(), SessionError>;

    /// Every tick of the monitor's timer probe (100 ms), from its main thread with the state locked: copy
    /// live figures into its series. `now_ns` is the time since the monitor started, `window_ns` the
    /// window maximum series' span.
    fn tick(&mut self, _state: &mut MonitorState, _now_ns: u64, _window_ns: u64) {}

    /// At the end of each of the monitor's segments (10 s): say what went wrong since, once.
    fn segment(&mut self) {}
}

/// Why a watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// What it reads could not be opened: the monitor's flag for it, and why.
    #[error("{flag} {error}")]
    Open {
        /// The monitor's flag (`--clock-source`).
        flag: &'static str,
        /// Why.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Its thread could not start.
    #[error("starting the {what} thread: {error}")]
    Thread {
        /// Which thread (`clock`).
        what: &'static str,
        /// What the system said.
        error: std::io::Error,
    },
}

/// The monitor's state, locked. A panic while it was held cannot leave the plain-data state half-written
/// in a way that matters for the next scrape: the monitor keeps serving.
pub fn lock(state: &Mutex<MonitorState>) -> MutexGuard<'_, MonitorState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Put a watch's first series in the state: its place there, where it replaces them as they change
/// ([`set_series`]).
pub fn add_series(state: &Mutex<MonitorState>, families: Vec<Family>) -> usize {
    let mut g = lock(state);
    g.watched.push(families);
    g.watched.len() - 1
}

/// Replace the series at a watch's place in the state.
pub fn set_series(state: &mut MonitorState, slot: usize, families: Vec<Family>) {
    if let Some(s) = state.watched.get_mut(slot) {
        *s = families;
    }
}

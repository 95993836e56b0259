//! The stop flag: one atomic shared by the main thread, the measurement threads and the signal handlers.
//! SIGINT and SIGTERM only set it (signal-hook does nothing else in the handler), so an interrupted run ends
//! through the normal path and still reports.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A cloneable handle on one stop flag.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not set.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }
    /// Set the flag when SIGINT or SIGTERM arrives (and record which, for the result).
    pub fn on_termination_signals(&self) -> std::io::Result<()> {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(&self.0))?;
        }
        Ok(())
    }
    /// Whether a stop was asked for (one relaxed load: cheap enough for the measuring loops).
    #[inline(always)]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// Ask every holder of the flag to stop.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

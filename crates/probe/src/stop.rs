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
    /// Set the flag when SIGINT or SIGTERM arrives, or SIGHUP (the terminal or ssh session that started the
    /// run closed) unless SIGHUP is ignored: a run under `nohup` keeps measuring, as nohup asks.
    pub fn on_termination_signals(&self) -> std::io::Result<()> {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(&self.0))?;
        }
        if !ignored(signal_hook::consts::SIGHUP) {
            signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&self.0))?;
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

/// Whether `sig` is ignored (SIG_IGN) in this process, as `nohup` leaves SIGHUP.
fn ignored(sig: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`, a zeroed sigaction.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

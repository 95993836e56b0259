//! The real-time measurement engine.
//!
//! Every probe works in three phases:
//! 1. *prepare* — pin the thread, allocate and pre-fault every buffer (histograms, rt-tests buckets, spike
//!    list, timeline ring), set the scheduling policy, wait on a start barrier;
//! 2. *measure* — a loop of integer arithmetic on thread-owned data: no allocation, no lock, no I/O, no
//!    printing. Live figures are published through relaxed atomic stores; the per-interval timeline leaves
//!    through a wait-free SPSC ring. The loop ends on a shared atomic stop flag (set by SIGINT/SIGTERM, a
//!    break threshold or the main thread) or on its own duration/loop bound;
//! 3. *drain* — join, and turn thread-owned state into model results.
//!
//! While the timer and busy-loop probes measure, their main thread reports phases, ticks and late samples
//! to a [`observe::ProbeObserver`] (the session crate adapts it to its `SessionObserver`).
//!
//! The crate never prints (`clippy::print_stdout`/`print_stderr` are denied): it returns data.

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(missing_docs)]

pub mod clock;
pub mod contention;
pub mod counter;
pub mod cyclic;
mod handover;
pub mod hwnoise;
pub mod load;
pub mod load_cmd;
pub mod mem;
pub mod net;
pub mod net_latency;
pub mod observe;
pub mod ops;
pub mod oslat;
pub mod recorder;
pub mod rt;
pub mod scratch;
pub mod smi;
pub mod stop;
pub mod time;
pub mod trace;

/// Undo what runs killed with -9 left switched on, before measuring anything: a hwlat or osnoise tracer
/// (which spins with interrupts off whether or not tracefs is still mounted), tracing instances, a tracefs
/// mount, load processes and their scratch directories under `tmp`. One sentence per thing undone.
pub fn clean_killed_runs(tmp: &std::path::Path) -> Vec<String> {
    let mut cleaned: Vec<String> = hwnoise::clean_killed_run().into_iter().collect();
    cleaned.extend(trace::clean_killed_runs());
    let loads = scratch::clean_leftovers(tmp);
    if loads > 0 {
        cleaned.push(format!("stopped the load of {loads} killed rtgauge run(s)"));
    }
    cleaned
}

/// Why a probe could not run at all (as opposed to a setting that could not be had, which is recorded in the
/// result and does not stop the probe).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    // The cause is in the message, not a `source` (a chained report would print it twice).
    /// A measurement thread could not be started.
    #[error("cannot start measurement thread {index}: {cause}")]
    Spawn {
        /// The thread's index among the probe's threads.
        index: usize,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// A measurement thread ended without a result.
    #[error("measurement thread {index} failed: {reason}")]
    Thread {
        /// The thread's index among the probe's threads.
        index: usize,
        /// How it ended (e.g. "panicked").
        reason: String,
    },
    /// The plan asks for something the probe cannot do (no CPUs, a zero interval, …).
    #[error("invalid probe configuration: {0}")]
    Config(String),
}

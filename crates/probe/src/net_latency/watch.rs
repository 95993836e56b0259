//! A packet stream watched for as long as `rtgauge monitor` runs (`--net-bind`, `--net-dev`): the
//! receiving half of a split stream whose sender (`rtgauge net latency --send-only`) runs elsewhere,
//! counted without end. One pinned receiver thread takes each packet as the probe's receiver does
//! ([`RxState::following`]: sequence numbers from the first packet received, and again from a restarted
//! sender's) and publishes its counts and export buckets in atomics the monitor's main thread reads at
//! every tick: one writer, relaxed loads and stores, no lock, no allocation, no I/O but the socket.
//!
//! The send time is the sender's CLOCK_REALTIME, taken as the receiver's: the two ends' clocks must agree
//! (PTP), and their difference is in every figure.

use super::rx::RxState;
use super::{payload, setup_receiver, wire, NetLatencyPlan, StreamError};
use crate::rt;
use rtgauge_model::latency::{BucketCounts, EXPORT_BUCKETS_NS};
use rtgauge_model::net_latency::{StreamCounts, WATCH_SILENCE_NS};
use rtgauge_model::rt::ThreadConditions;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};

const BUCKETS: usize = EXPORT_BUCKETS_NS.len() + 1;

/// One stage's export buckets, count and sum, written by the receiver only.
#[derive(Default)]
struct LiveBuckets {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

/// Add without a read-modify-write: the receiver is the only writer.
#[inline]
fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
}

impl LiveBuckets {
    #[inline]
    fn record(&self, ns: u64) {
        bump(&self.buckets[BucketCounts::bucket_of(ns)], 1);
        bump(&self.count, 1);
        bump(&self.sum_ns, ns);
    }

    fn read(&self) -> BucketCounts {
        BucketCounts {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            count: self.count.load(Relaxed),
            sum_ns: u128::from(self.sum_ns.load(Relaxed)),
        }
    }
}

/// What the receiver publishes.
#[derive(Default)]
struct WatchLive {
    latency: LiveBuckets,
    path: LiveBuckets,
    wakeup: LiveBuckets,
    /// The counts, at the indices of [`at`].
    counts: [AtomicU64; at::N],
    /// The largest latency since the main thread last looked.
    peak_ns: AtomicU64,
    /// The first receive call's errno that failed other than for want of a packet (0: none).
    first_errno: AtomicU64,
}

/// Where each count is in [`WatchLive::counts`].
mod at {
    pub const RECEIVED: usize = 0;
    pub const LOST: usize = 1;
    pub const STALE: usize = 2;
    pub const REORDERED: usize = 3;
    pub const DUPLICATES: usize = 4;
    pub const FOREIGN: usize = 5;
    pub const ABOVE_GATE: usize = 6;
    pub const RESTARTS: usize = 7;
    pub const RECEIVE_ERRORS: usize = 8;
    pub const LAST_UNIX_NS: usize = 9;
    pub const N: usize = 10;
}

impl WatchLive {
    #[inline]
    fn publish(&self, st: &RxState, last_unix_ns: u64) {
        for (i, v) in [
            (at::RECEIVED, st.received),
            (at::LOST, st.unseen),
            (at::STALE, st.stale),
            (at::REORDERED, st.reordered),
            (at::DUPLICATES, st.duplicates),
            (at::FOREIGN, st.foreign),
            (at::ABOVE_GATE, st.late),
            (at::RESTARTS, st.restarts),
            (at::RECEIVE_ERRORS, st.receive_errors),
            (at::LAST_UNIX_NS, last_unix_ns),
        ] {
            self.counts[i].store(v, Relaxed);
        }
    }
}

/// What the receiver found when it set up, before its first packet.
pub struct WatchStart {
    /// The address it bound (UDP), with the port.
    pub bound: Option<SocketAddr>,
    /// Its CPU and policy, as asked and as got.
    pub conditions: ThreadConditions,
    /// Why kernel receive timestamps are missing (then there is no path and wake-up split).
    pub timestamps_error: Option<String>,
}

/// A running watch: read it at every tick, end it with [`NetWatch::finish`] (or by dropping it).
pub struct NetWatch {
    live: Arc<WatchLive>,
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NetWatch {
    /// Open the receiver of `plan` (a receive-only plan: its socket, CPU and priority; the stream id) and
    /// start it; packets at or above its deadline are counted. Fails with the receiver's setup error (the
    /// address cannot be bound, the interface does not exist, …).
    pub fn start(plan: &NetLatencyPlan) -> Result<(NetWatch, WatchStart), StreamError> {
        let live = Arc::new(WatchLive::default());
        let quit = Arc::new(AtomicBool::new(false));
        let (ready, started) = mpsc::sync_channel(1);
        let thread = {
            let (plan, live, quit) = (plan.clone(), Arc::clone(&live), Arc::clone(&quit));
            std::thread::Builder::new()
                .name("rtgauge-nl-watch".into())
                .spawn(move || receive(&plan, &live, &quit, &ready))
                .map_err(|e| StreamError::ReceiverThread(e.to_string()))?
        };
        let mut watch = NetWatch {
            live,
            quit,
            thread: Some(thread),
        };
        match started.recv() {
            Ok(Ok(s)) => Ok((watch, s)),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                watch.finish();
                Err(StreamError::ReceiverEnded)
            }
        }
    }

    /// The stream's counts since the start.
    pub fn counts(&self) -> StreamCounts {
        let c = |i: usize| self.live.counts[i].load(Relaxed);
        StreamCounts {
            latency: self.live.latency.read(),
            path: self.live.path.read(),
            wakeup: self.live.wakeup.read(),
            received: c(at::RECEIVED),
            lost: c(at::LOST),
            stale: c(at::STALE),
            reordered: c(at::REORDERED),
            duplicates: c(at::DUPLICATES),
            foreign: c(at::FOREIGN),
            above_gate: c(at::ABOVE_GATE),
            restarts: c(at::RESTARTS),
            receive_errors: c(at::RECEIVE_ERRORS),
            last_unix_ns: c(at::LAST_UNIX_NS),
        }
    }

    /// Why the first failed receive call failed, once one has.
    pub fn first_error(&self) -> Option<String> {
        match self.live.first_errno.load(Relaxed) {
            0 => None,
            e => Some(crate::net::errno_text(e as i32)),
        }
    }

    /// Whether the receiver still runs (it ends only when told to, or by a panic).
    pub fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// The largest latency since the last call, ns (0: no packet since).
    pub fn take_peak(&self) -> u64 {
        self.live.peak_ns.swap(0, Relaxed)
    }

    /// Stop the receiver (within its 20 ms receive timeout) and wait for it.
    pub fn finish(&mut self) {
        self.quit.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for NetWatch {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The receiver thread: set up, say how, then take packets until told to quit.
fn receive(
    plan: &NetLatencyPlan,
    live: &WatchLive,
    quit: &AtomicBool,
    ready: &mpsc::SyncSender<Result<WatchStart, StreamError>>,
) {
    rt::block_signals();
    let cfg = &plan.config;
    // No sender in this process to tell where packets go.
    let (to_sender, _) = mpsc::channel();
    let (_, from_sender) = mpsc::channel();
    let mut rx = match setup_receiver(plan, &to_sender, &from_sender) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut state = RxState::following(plan);
    let _ = ready.send(Ok(WatchStart {
        bound: rx.bound,
        conditions: rx.conditions,
        timestamps_error: rx.timestamps_error,
    }));
    let stream = cfg.stream.unwrap_or_else(wire::stream_id);
    let ethertype = cfg.ethernet.as_ref().map(|e| e.ethertype);
    let (mut last_unix_ns, mut last_mono_ns) = (0, 0);
    while !quit.load(Relaxed) {
        match rx.sock.recv_stamped(&mut rx.buf, false) {
            Ok((n, kernel_ns)) => {
                let user_ns = wire::realtime_ns();
                let data = payload(&rx.buf[..n], ethertype);
                if let Some((latency, split)) =
                    state.take(data, stream, (user_ns, kernel_ns), None, cfg.deadline_ns)
                {
                    live.latency.record(latency);
                    if let Some((path, wakeup)) = split {
                        live.path.record(path);
                        live.wakeup.record(wakeup);
                    }
                    if latency > live.peak_ns.load(Relaxed) {
                        live.peak_ns.store(latency, Relaxed);
                    }
                    (last_unix_ns, last_mono_ns) = (user_ns, wire::monotonic_ns());
                }
            }
            // Nothing within the receive timeout, or the wait cut short (the process stopped and
            // continued).
            Err(libc::EAGAIN | libc::EINTR) => {}
            Err(e) => {
                state.receive_errors += 1;
                if state.receive_error.is_none() {
                    state.receive_error = Some(e);
                    live.first_errno.store(e as u64, Relaxed);
                }
            }
        }
        // No packet of the stream for a while (whatever else comes): every number up to the highest is
        // settled (a sender that stopped, or lost its last packets).
        if let Some(h) = state.highest.filter(|&h| h >= state.base) {
            if wire::monotonic_ns().saturating_sub(last_mono_ns) >= WATCH_SILENCE_NS {
                state.settle(h + 1);
            }
        }
        live.publish(&state, last_unix_ns);
    }
}

//! Packet latency through the platform (`rtgauge net latency`): a pinned sender puts a periodic stream of
//! UDP datagrams on the wire with absolute-time sleeps; a pinned receiver takes each one with the kernel's
//! receive timestamp and splits its latency into the path (send → kernel) and the wake-up (kernel →
//! thread). One-way when the receiver binds the target itself (both ends read this host's CLOCK_REALTIME:
//! loopback, or two network namespaces joined by a veth pair); round trip when the target is a reflector
//! ([`reflect`]) and the receiver reads the sender's own socket.
//!
//! Each packet carries a tag, the run's stream id, its sequence number and its send time, so that loss,
//! reordering and duplicates are counted: the receiver marks each sequence number in a sliding window
//! (`rtgauge_model::netlat::WINDOW`). No allocation, lock or I/O other than the socket calls in either
//! loop: the recorders, the window, the intervals' counts and the late-packet lists are allocated before
//! the barrier; the threads hand their state back when they end.
//!
//! Sockets are raw `libc` calls (as in [`crate::net`]): the timestamps arrive as a control message of
//! `recvmsg`, which no socket crate we use wraps.

mod frame;
mod reflect;
mod wire;

pub use reflect::{reflect, ReflectPlan};

use crate::recorder::LatencyRecorder;
use crate::rt::{self, DmaLatencyGuard};
use crate::stop::StopFlag;
use crate::ProbeError;
use rtgauge_model::kind::StopReason;
use rtgauge_model::latency::{push_bounded, TimelineEntry, MAX_TIMELINE};
use rtgauge_model::netlat::{
    LatePacket, NetLatencyConfig, NetLatencyResult, RxMode, RxTimestamps, MAX_LATE_PACKETS, WINDOW,
    WORST_PACKETS,
};
use rtgauge_model::rt::ThreadConditions;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use wire::{Packet, Socket};

/// How far past the duration a sender behind its schedule may still send, ns: a late wake-up for the last
/// packets is not falling behind.
const END_GRACE_NS: u64 = 100_000_000;

/// The main thread's tick while the probe runs, ms.
const TICK_MS: u64 = 100;

/// What `net latency` measures, resolved: the configuration and the address packets go to.
#[derive(Debug, Clone)]
pub struct NetLatencyPlan {
    /// What the document records.
    pub config: NetLatencyConfig,
    /// One-way: the address the receiver binds (port 0: any); round trip: the reflector's.
    pub addr: SocketAddr,
}

impl NetLatencyPlan {
    /// Nanoseconds between two sends (of `burst` packets each), exactly (a rate of 3,000/s is a period of
    /// 333,333.3 ns: the schedule does not drift by the rounding).
    pub fn period_ns(&self) -> f64 {
        (self.config.burst as f64 * 1e9 / self.config.rate_per_s).max(1.0)
    }

    /// Sequence numbers the run can use: every send due within the duration, `burst` each.
    pub fn capacity(&self) -> u64 {
        // The bursts due before the duration's end (a hair of rounding forgiven: 0.5 s at 3,000/s is 1,500).
        let bursts = (self.config.duration_ns as f64 / self.period_ns() - 1e-6)
            .ceil()
            .max(1.0);
        bursts as u64 * self.config.burst as u64
    }

    /// Where each sequence number falls in time: the intervals the counts are kept in while it runs.
    pub fn schedule(&self) -> Schedule {
        // The timeline's interval, doubled until the run fits in `MAX_TIMELINE` of them: what the timeline
        // would be thinned to anyway, so that a week's run keeps a few thousand counters, not 600,000.
        let mut span = self.config.timeline_interval_ns.max(1);
        while self.config.duration_ns.div_ceil(span) > MAX_TIMELINE as u64 {
            span = span.saturating_mul(2);
        }
        Schedule {
            period_ns: self.period_ns(),
            burst: u64::from(self.config.burst.max(1)),
            span_ns: span,
            intervals: self.config.duration_ns.div_ceil(span) as usize + 1,
        }
    }
}

/// The sender's schedule as the counters need it.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Between two bursts, ns (not rounded).
    pub period_ns: f64,
    /// Packets per burst.
    pub burst: u64,
    /// One counting interval, ns.
    pub span_ns: u64,
    /// Counting intervals in the run (the last one catches rounding).
    pub intervals: usize,
}

impl Schedule {
    /// When burst `k` is due, ns after the first.
    #[inline]
    pub fn burst_due_ns(&self, k: u64) -> u64 {
        (k as f64 * self.period_ns).round() as u64
    }

    /// When packet `seq` was due, ns after the first send.
    #[inline]
    pub fn due_ns(&self, seq: u64) -> u64 {
        self.burst_due_ns(seq / self.burst)
    }

    /// The counting interval packet `seq` belongs to.
    #[inline]
    pub fn interval(&self, seq: u64) -> usize {
        ((self.due_ns(seq) / self.span_ns) as usize).min(self.intervals - 1)
    }
}

/// Where the receiver takes packets, as the sender needs it: its UDP address, or its interface's MAC.
enum Peer {
    Udp(SocketAddr),
    Mac([u8; 6]),
}

/// What the sender hands back.
struct SenderOut {
    conditions: ThreadConditions,
    lateness: LatencyRecorder,
    sent: u64,
    /// Sends the kernel refused, per counting interval (not lost: never sent).
    failed_in: Vec<u64>,
    send_errors: u64,
    /// The first refused send's errno.
    send_error: Option<i32>,
    /// Packets of the schedule not sent: the duration ran out while the sender was behind.
    unsent: u64,
    elapsed_ns: u64,
    cpu_ns: u64,
    stopped_early: bool,
}

/// What the receiver hands back.
struct ReceiverOut {
    /// The address it bound (one-way), with the port the kernel picked.
    bound: Option<SocketAddr>,
    conditions: ThreadConditions,
    state: RxState,
    cpu_ns: u64,
}

/// What the sender tells the receiver (and the receiver the sender) while they run.
struct Handover {
    /// Set by the sender when it has sent its last packet, with its count.
    sender_done: AtomicBool,
    sent: AtomicU64,
    /// CLOCK_MONOTONIC of the sender's end, ns.
    sender_end_ns: AtomicU64,
    /// The receiver gave up (its setup failed): the sender stops.
    receiver_failed: AtomicBool,
    /// The sender went through the start barrier (a sender that panics before it must still release the
    /// receiver waiting there).
    sender_started: AtomicBool,
}

impl Handover {
    /// The sender's side of the start barrier.
    fn sender_start(&self, start: &Barrier) {
        start.wait();
        self.sender_started.store(true, Ordering::Release);
    }
}

/// Run the probe: sender and receiver threads until the duration elapsed (or `stop`), then the receiver
/// drains the stragglers for `drain_ns`.
pub fn run(
    plan: &NetLatencyPlan,
    stop: &StopFlag,
    tick: &mut dyn FnMut(std::time::Duration),
) -> Result<NetLatencyResult, ProbeError> {
    let cfg = &plan.config;
    if cfg.rate_per_s <= 0.0 || cfg.burst == 0 || cfg.duration_ns == 0 {
        return Err(ProbeError::Config(
            "rate, burst and duration must be above 0".into(),
        ));
    }
    if (cfg.size as usize) < wire::HEADER {
        return Err(ProbeError::Config(format!(
            "packets of {} bytes cannot carry the {}-byte header",
            cfg.size,
            wire::HEADER
        )));
    }
    let mlock = rt::lock_memory(true);
    let dma = DmaLatencyGuard::hold(None);
    let process = rt::process_conditions(None, mlock, &dma);
    let stream = wire::stream_id();
    let capacity = plan.capacity();
    let shared = Arc::new(Handover {
        sender_done: AtomicBool::new(false),
        sent: AtomicU64::new(0),
        sender_end_ns: AtomicU64::new(0),
        receiver_failed: AtomicBool::new(false),
        sender_started: AtomicBool::new(false),
    });
    let start = Arc::new(Barrier::new(2));
    let realtime_offset_before = wire::realtime_minus_monotonic();

    // The receiver binds first (one-way) and says where; round trip, the sender's socket is handed to it.
    let (to_sender, from_receiver) = mpsc::channel::<Result<Peer, String>>();
    let (to_receiver, from_sender) = mpsc::channel::<Result<Socket, String>>();
    let rx = {
        let (plan, shared, start, stop) = (
            plan.clone(),
            Arc::clone(&shared),
            Arc::clone(&start),
            stop.clone(),
        );
        rt::spawn_thread("rtgauge-nl-rx".into(), 1, move || {
            receiver(
                &plan,
                stream,
                &shared,
                &start,
                &stop,
                to_sender,
                from_sender,
            )
        })?
    };
    let tx = {
        let (plan, handover, barrier, stop) = (
            plan.clone(),
            Arc::clone(&shared),
            Arc::clone(&start),
            stop.clone(),
        );
        let spawned = rt::spawn_thread("rtgauge-nl-tx".into(), 0, move || {
            let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sender(
                    &plan,
                    stream,
                    capacity,
                    &handover,
                    &barrier,
                    &stop,
                    from_receiver,
                    to_receiver,
                )
            }));
            // However the sender ended, the receiver hears it is done (and is let through the barrier).
            if sent.is_err() && !handover.sender_started.load(Ordering::Acquire) {
                handover.sender_start(&barrier);
            }
            handover.sender_done.store(true, Ordering::Release);
            sent.unwrap_or_else(|_| Err("the sender thread panicked".into()))
        });
        match spawned {
            Ok(t) => t,
            Err(e) => {
                // The receiver waits at the barrier for a sender that will never come: stand in for it.
                shared.sender_done.store(true, Ordering::Release);
                shared.sender_start(&start);
                let _ = rx.join();
                return Err(e);
            }
        }
    };
    // The main thread ticks while they run (the trace is drained and the counters sampled there).
    let begun = std::time::Instant::now();
    while !(tx.is_finished() && rx.is_finished()) {
        std::thread::sleep(std::time::Duration::from_millis(TICK_MS));
        tick(begun.elapsed());
    }
    let sent = tx.join().map_err(|_| ProbeError::Thread {
        index: 0,
        reason: "panicked".into(),
    })?;
    let received = rx.join().map_err(|_| ProbeError::Thread {
        index: 1,
        reason: "panicked".into(),
    })?;
    let (sent, received) = match (sent, received) {
        (Ok(s), Ok(r)) => (s, r),
        // The receiver's failure is the cause when both failed: the sender only stopped for it.
        (_, Err(e)) | (Err(e), _) => return Err(ProbeError::Config(e)),
    };
    let moved = wire::realtime_minus_monotonic() - realtime_offset_before;
    Ok(finish(plan, sent, received, process, moved, stop.is_set()))
}

/// The sender: socket (in its namespace), pinned, FIFO, then one burst per period at absolute times.
#[allow(clippy::too_many_arguments)]
fn sender(
    plan: &NetLatencyPlan,
    stream: u32,
    capacity: u64,
    shared: &Handover,
    start: &Barrier,
    stop: &StopFlag,
    from_receiver: mpsc::Receiver<Result<Peer, String>>,
    to_receiver: mpsc::Sender<Result<Socket, String>>,
) -> Result<SenderOut, String> {
    rt::block_signals();
    let cfg = &plan.config;
    let (sock, header) = match open_sender(plan, &from_receiver) {
        Ok(s) => s,
        Err(e) => {
            let _ = to_receiver.send(Err(e.clone()));
            shared.sender_done.store(true, Ordering::Release);
            shared.sender_start(start);
            return Err(e);
        }
    };
    if cfg.round_trip {
        let dup = sock.try_clone().map_err(|e| format!("sender socket: {e}"));
        let _ = to_receiver.send(dup);
    }
    let conditions = thread_conditions(cfg.tx_cpu, cfg.rtprio);
    // SCHED_OTHER sleeps carry a 50 µs timer slack by default: the schedule is the probe's, not the
    // kernel's to coalesce (a real-time policy has none).
    // SAFETY: plain prctl on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let lateness = LatencyRecorder::new();
    let schedule = plan.schedule();
    let mut failed_in = vec![0u64; schedule.intervals];
    touch(&mut failed_in);
    // A frame: its headers once, the probe's header at `payload_at` for each packet, at least Ethernet's minimum.
    let payload_at = header.map_or(0, |h| h.len());
    let mut buf =
        vec![0u8; (payload_at + cfg.size as usize).max(if header.is_some() { 60 } else { 0 })];
    if let Some(h) = header {
        let payload = buf.len() - payload_at;
        h.write(&mut buf, payload);
    }
    let mut out = SenderOut {
        conditions,
        lateness,
        sent: 0,
        failed_in,
        send_errors: 0,
        send_error: None,
        unsent: 0,
        elapsed_ns: 0,
        cpu_ns: 0,
        stopped_early: false,
    };
    rt::prefault_stack(64 * 1024);
    let cpu0 = wire::thread_cpu_ns();
    shared.sender_start(start);
    if shared.receiver_failed.load(Ordering::Acquire) {
        shared.sender_done.store(true, Ordering::Release);
        return Err("the receiver could not start".into());
    }
    // The first send a little after the start, aligned to nothing: both threads are ready.
    let t0 = wire::monotonic_ns() + 1_000_000;
    // A sender that fell behind catches up with back-to-back sends, until the duration (and a grace for
    // an ordinary late wake-up of the last sends) is over.
    let end = t0 + cfg.duration_ns + END_GRACE_NS.max(schedule.period_ns as u64);
    let mut seq = 0u64;
    let mut k = 0u64;
    while seq < capacity {
        if stop.is_set() {
            out.stopped_early = true;
            break;
        }
        let at = t0 + schedule.burst_due_ns(k);
        wire::sleep_until(at);
        let now = wire::monotonic_ns();
        if now >= end {
            out.unsent = capacity - seq;
            break;
        }
        out.lateness.record(now.saturating_sub(at));
        for _ in 0..cfg.burst {
            if seq >= capacity {
                break;
            }
            let p = Packet {
                stream,
                seq,
                sent_realtime_ns: wire::realtime_ns(),
            };
            p.write(&mut buf[payload_at..]);
            match sock.send(&buf) {
                Ok(_) => out.sent += 1,
                Err(e) => {
                    out.send_errors += 1;
                    out.send_error.get_or_insert(e);
                    out.failed_in[schedule.interval(seq)] += 1;
                }
            }
            seq += 1;
        }
        k += 1;
    }
    let end = wire::monotonic_ns();
    // The time the sends stood for: the periods of the bursts sent, or the whole duration when it ran out.
    out.elapsed_ns = if out.unsent > 0 {
        cfg.duration_ns
    } else {
        schedule.burst_due_ns(k)
    };
    out.cpu_ns = wire::thread_cpu_ns().saturating_sub(cpu0);
    shared.sent.store(out.sent, Ordering::Release);
    shared.sender_end_ns.store(end, Ordering::Release);
    shared.sender_done.store(true, Ordering::Release);
    Ok(out)
}

/// Write every element of a zeroed table, so that its pages are mapped before the loop (a fresh
/// allocation's zero pages would fault on first write).
fn touch(v: &mut [u64]) {
    v.fill(0);
    std::hint::black_box(&*v);
}

/// The sender's socket (in its namespace), and the Ethernet header before each frame's payload (none
/// for UDP): to the reflector, or to where the receiver says it takes packets.
fn open_sender(
    plan: &NetLatencyPlan,
    from_receiver: &mpsc::Receiver<Result<Peer, String>>,
) -> Result<(Socket, Option<frame::FrameHeader>), String> {
    let cfg = &plan.config;
    if let Some(ns) = &cfg.tx_netns {
        wire::enter_netns(ns).map_err(|e| format!("--tx-netns {ns}: {e}"))?;
    }
    let peer = if cfg.round_trip {
        Peer::Udp(plan.addr)
    } else {
        from_receiver
            .recv()
            .map_err(|_| "the receiver ended before it bound its socket".to_string())??
    };
    match (peer, &cfg.ethernet) {
        (Peer::Mac(dst), Some(e)) => {
            let (sock, src) =
                frame::open(&e.tx_dev, None).map_err(|x| format!("--tx-dev {}: {x}", e.tx_dev))?;
            let vlan = e.vlan.map(|id| frame::Vlan {
                id,
                pcp: e.pcp.unwrap_or(0),
            });
            let header = frame::FrameHeader {
                dst,
                src,
                vlan,
                ethertype: e.ethertype,
            };
            Ok((sock, Some(header)))
        }
        (Peer::Udp(target), _) => {
            let sock = Socket::udp(&target).map_err(|e| format!("sender socket: {e}"))?;
            sock.connect(&target)
                .map_err(|e| format!("sender: connect to {target}: {e}"))?;
            Ok((sock, None))
        }
        (Peer::Mac(_), None) => Err("a MAC address for a UDP stream".into()),
    }
}

/// Pin the calling thread, set its policy, and say what it got.
fn thread_conditions(cpu: Option<u32>, rtprio: Option<i32>) -> ThreadConditions {
    let cpu = rt::pin_thread(cpu);
    let (policy, priority) = rt::set_fifo_or_other(rtprio);
    ThreadConditions {
        policy,
        priority,
        cpu,
    }
}

/// The receiver's counts and recorders, all allocated before the start.
struct RxState {
    /// Sequence numbers the run can use; one at or beyond it is not of this stream.
    capacity: u64,
    schedule: Schedule,
    /// One bit per sequence number of `[base, base + WINDOW)`, at `seq % WINDOW`: received.
    window: Vec<u64>,
    /// The lowest sequence number not yet settled (received or lost).
    base: u64,
    /// Settled and never received, per counting interval (refused sends among them).
    unseen_in: Vec<u64>,
    /// Receive calls that failed other than for want of a packet, and the first one's errno.
    receive_errors: u64,
    receive_error: Option<i32>,
    /// Arrived after their number was settled.
    stale: u64,
    received: u64,
    duplicates: u64,
    reordered: u64,
    foreign: u64,
    late: u64,
    highest: Option<u64>,
    latency: LatencyRecorder,
    path: LatencyRecorder,
    wakeup: LatencyRecorder,
    /// Packets received without a kernel timestamp.
    unstamped: u64,
    /// Per timeline interval (by scheduled send time): packets received and the worst latency.
    interval_count: Vec<u64>,
    interval_max: Vec<u64>,
    late_packets: Vec<LatePacket>,
    late_dropped: u64,
    /// The slowest packets so far, and the latency a packet must exceed to join them once they are full.
    worst: Vec<LatePacket>,
    worst_floor: u64,
    timestamps_error: Option<String>,
}

impl RxState {
    fn new(plan: &NetLatencyPlan, capacity: u64) -> RxState {
        let schedule = plan.schedule();
        let intervals = schedule.intervals;
        let mut s = RxState {
            capacity,
            schedule,
            window: vec![0; (WINDOW.min(capacity.next_multiple_of(64)) / 64) as usize],
            base: 0,
            unseen_in: vec![0; intervals],
            receive_errors: 0,
            receive_error: None,
            stale: 0,
            received: 0,
            duplicates: 0,
            reordered: 0,
            foreign: 0,
            late: 0,
            highest: None,
            latency: LatencyRecorder::new(),
            path: LatencyRecorder::new(),
            wakeup: LatencyRecorder::new(),
            unstamped: 0,
            interval_count: vec![0; intervals],
            interval_max: vec![0; intervals],
            late_packets: Vec::with_capacity(MAX_LATE_PACKETS),
            late_dropped: 0,
            worst: Vec::with_capacity(WORST_PACKETS),
            worst_floor: 0,
            timestamps_error: None,
        };
        touch(&mut s.window);
        touch(&mut s.unseen_in);
        touch(&mut s.interval_count);
        touch(&mut s.interval_max);
        rt::prefault_vec(&mut s.late_packets, LatePacket::default());
        rt::prefault_vec(&mut s.worst, LatePacket::default());
        s
    }

    /// Bits of the window: its length in sequence numbers.
    fn window_len(&self) -> u64 {
        self.window.len() as u64 * 64
    }

    /// Settle every sequence number below `to`: those never received counted in their interval.
    #[inline]
    fn settle(&mut self, to: u64) {
        let len = self.window_len();
        while self.base < to {
            let at = self.base % len;
            let (w, b) = ((at / 64) as usize, 1u64 << (at % 64));
            if self.window[w] & b == 0 {
                self.unseen_in[self.schedule.interval(self.base)] += 1;
            }
            self.window[w] &= !b;
            self.base += 1;
        }
    }

    /// Account for one datagram received at `user_ns` (CLOCK_REALTIME) with the kernel's timestamp.
    #[inline]
    fn take(
        &mut self,
        data: &[u8],
        stream: u32,
        user_ns: u64,
        kernel_ns: Option<u64>,
        deadline: Option<u64>,
    ) {
        let Some(p) = Packet::read(data, stream).filter(|p| p.seq < self.capacity) else {
            self.foreign += 1;
            return;
        };
        if p.seq < self.base {
            self.stale += 1;
            return;
        }
        let len = self.window_len();
        if p.seq >= self.base + len {
            self.settle(p.seq + 1 - len);
        }
        let at = p.seq % len;
        let (word, bit) = ((at / 64) as usize, 1u64 << (at % 64));
        if self.window[word] & bit != 0 {
            self.duplicates += 1;
            return;
        }
        self.window[word] |= bit;
        self.received += 1;
        match self.highest {
            Some(h) if p.seq < h => self.reordered += 1,
            _ => self.highest = Some(p.seq),
        }
        let latency = user_ns.saturating_sub(p.sent_realtime_ns);
        self.latency.record(latency);
        let split = kernel_ns.map(|k| {
            (
                k.saturating_sub(p.sent_realtime_ns),
                user_ns.saturating_sub(k),
            )
        });
        match split {
            Some((path, wake)) => {
                self.path.record(path);
                self.wakeup.record(wake);
            }
            None => self.unstamped += 1,
        }
        let sched_ns = self.schedule.due_ns(p.seq);
        let i = self.schedule.interval(p.seq);
        self.interval_count[i] += 1;
        self.interval_max[i] = self.interval_max[i].max(latency);
        let is_late = deadline.is_some_and(|d| latency >= d);
        if !is_late && latency <= self.worst_floor {
            return;
        }
        // The trace's clock, read only for a packet worth explaining (a few ns after `user_ns`).
        let packet = LatePacket {
            seq: p.seq,
            sent_ns: sched_ns,
            latency_ns: latency,
            path_ns: split.map(|s| s.0),
            wakeup_ns: split.map(|s| s.1),
            received_mono_ns: wire::monotonic_ns(),
        };
        if is_late {
            self.late += 1;
            if self.late_packets.len() < MAX_LATE_PACKETS {
                self.late_packets.push(packet);
            } else {
                self.late_dropped += 1;
            }
        }
        if latency > self.worst_floor {
            self.keep_worst(packet);
        }
    }

    /// Keep `p` among the [`WORST_PACKETS`] slowest (it is slower than the fastest of them when the list is
    /// full): in place of the fastest; the floor becomes the new fastest. No allocation (preallocated).
    #[inline]
    fn keep_worst(&mut self, p: LatePacket) {
        if self.worst.len() < WORST_PACKETS {
            self.worst.push(p);
        } else if let Some(min) = self.worst.iter_mut().min_by_key(|w| w.latency_ns) {
            *min = p;
        }
        if self.worst.len() == WORST_PACKETS {
            self.worst_floor = self.worst.iter().map(|w| w.latency_ns).min().unwrap_or(0);
        }
    }
}

/// The receiver: its socket (bound in its namespace, or the sender's for a round trip), pinned, FIFO, then
/// every datagram until the sender is done and everything arrived or the drain time passed.
fn receiver(
    plan: &NetLatencyPlan,
    stream: u32,
    shared: &Handover,
    start: &Barrier,
    stop: &StopFlag,
    to_sender: mpsc::Sender<Result<Peer, String>>,
    from_sender: mpsc::Receiver<Result<Socket, String>>,
) -> Result<ReceiverOut, String> {
    rt::block_signals();
    let cfg = &plan.config;
    let setup = || -> Result<(Socket, Option<SocketAddr>), String> {
        if cfg.round_trip {
            return from_sender
                .recv()
                .map_err(|_| "the sender ended before it opened its socket".to_string())?
                .map(|s| (s, None));
        }
        if let Some(ns) = &cfg.rx_netns {
            wire::enter_netns(ns).map_err(|e| format!("--rx-netns {ns}: {e}"))?;
        }
        if let Some(e) = &cfg.ethernet {
            let (sock, mac) = frame::open(&e.rx_dev, Some(e.ethertype))
                .map_err(|x| format!("--rx-dev {}: {x}", e.rx_dev))?;
            let _ = to_sender.send(Ok(Peer::Mac(mac)));
            return Ok((sock, None));
        }
        let sock = Socket::udp(&plan.addr).map_err(|e| format!("receiver socket: {e}"))?;
        sock.bind(&plan.addr)
            .map_err(|e| format!("--bind {}: {e}", plan.addr))?;
        let bound = sock
            .local_addr()
            .map_err(|e| format!("receiver socket: {e}"))?;
        let _ = to_sender.send(Ok(Peer::Udp(bound)));
        Ok((sock, Some(bound)))
    };
    let (sock, bound) = match setup() {
        Ok(s) => s,
        Err(e) => {
            let _ = to_sender.send(Err(e.clone()));
            shared.receiver_failed.store(true, Ordering::Release);
            start.wait();
            return Err(e);
        }
    };
    // Pinned first: what it allocates is first touched on its own CPU (its node).
    let conditions = thread_conditions(cfg.rx_cpu, cfg.rtprio);
    let mut state = RxState::new(plan, plan.capacity());
    if let Err(e) = sock.timestamp_rx_software() {
        state.timestamps_error = Some(format!("SO_TIMESTAMPING (software receive): {e}"));
    }
    // Bursts must not overflow the socket's queue while the receiver wakes (capped by rmem_max).
    sock.grow_receive_buffer(4 << 20);
    let poll = cfg.rx_mode == RxMode::Poll;
    // Blocking: wake at least every 20 ms to see whether the sender is done. Polling asks each call not
    // to wait (MSG_DONTWAIT), leaving the socket's own flags alone: a round trip's socket is the sender's.
    if let Err(e) = sock.receive_timeout(20_000_000) {
        shared.receiver_failed.store(true, Ordering::Release);
        start.wait();
        return Err(format!("receiver socket: {e}"));
    }
    let mut buf = vec![0u8; (cfg.size as usize + 64).max(2048)];
    rt::prefault_stack(64 * 1024);
    let cpu0 = wire::thread_cpu_ns();
    start.wait();
    let ethertype = cfg.ethernet.as_ref().map(|e| e.ethertype);
    // When the user's stop was first seen, ns: the receiver drains from then even if the sender, stuck
    // behind it on one CPU, never says it is done.
    let mut stopped_at = None;
    loop {
        match sock.recv_stamped(&mut buf, poll) {
            Ok((n, kernel_ns)) => {
                let user_ns = wire::realtime_ns();
                let data = match ethertype {
                    Some(t) => frame::payload(&buf[..n], t).unwrap_or(&[]),
                    None => &buf[..n],
                };
                state.take(data, stream, user_ns, kernel_ns, cfg.deadline_ns);
            }
            // Nothing yet (or the blocking timeout).
            Err(libc::EAGAIN) => {}
            // Another error (an ICMP error on a connected socket, the interface gone): counted, the first
            // named; the loop's end is decided below either way.
            Err(e) => {
                state.receive_errors += 1;
                state.receive_error.get_or_insert(e);
            }
        }
        if shared.sender_done.load(Ordering::Acquire) {
            let sent = shared.sent.load(Ordering::Acquire);
            let end = shared.sender_end_ns.load(Ordering::Acquire);
            if state.received >= sent || wire::monotonic_ns() >= end.saturating_add(cfg.drain_ns) {
                break;
            }
        } else if stop.is_set() {
            let at = *stopped_at.get_or_insert_with(wire::monotonic_ns);
            if wire::monotonic_ns() >= at.saturating_add(cfg.drain_ns) {
                break;
            }
        }
    }
    Ok(ReceiverOut {
        bound,
        conditions,
        state,
        cpu_ns: wire::thread_cpu_ns().saturating_sub(cpu0),
    })
}

/// The result of both threads' states.
fn finish(
    plan: &NetLatencyPlan,
    s: SenderOut,
    r: ReceiverOut,
    process: rtgauge_model::rt::ProcessConditions,
    realtime_moved_ns: i64,
    signalled: bool,
) -> NetLatencyResult {
    let cfg = &plan.config;
    let mut st = r.state;
    let issued = s.sent + s.send_errors;
    st.settle(issued);
    let schedule = st.schedule;
    // Lost: sent (not refused) and never received; in each interval, what was settled unseen there less
    // the sends refused there.
    let lost = s.sent.saturating_sub(st.received);
    let mut timeline = Vec::new();
    let mut span = schedule.span_ns;
    // The intervals the sends fell in (not one past the last send's).
    let intervals = match issued {
        0 => 0,
        n => schedule.interval(n - 1) + 1,
    };
    let per_interval = st
        .interval_count
        .iter()
        .zip(&st.interval_max)
        .zip(st.unseen_in.iter().zip(&s.failed_in));
    for (i, ((&count, &max_ns), (&unseen, &failed))) in per_interval.enumerate().take(intervals) {
        push_bounded(
            &mut timeline,
            &mut span,
            TimelineEntry {
                start_ns: i as u64 * schedule.span_ns,
                count,
                max_ns,
                missed: unseen.saturating_sub(failed),
            },
        );
    }
    let timestamps = if let Some(e) = st.timestamps_error {
        RxTimestamps::Unavailable { reason: e }
    } else if st.received == 0 {
        RxTimestamps::Unavailable {
            reason: "no packet was received".into(),
        }
    } else if st.unstamped == st.received {
        RxTimestamps::Unavailable {
            reason: "no packet carried a kernel receive timestamp".into(),
        }
    } else if st.unstamped > 0 {
        RxTimestamps::Partial {
            missing: st.unstamped,
        }
    } else {
        RxTimestamps::Software
    };
    let stamped = st.received > st.unstamped;
    NetLatencyResult {
        config: Box::new(cfg.clone()),
        bound: r.bound.map(|a| a.to_string()),
        stop_reason: if signalled || s.stopped_early {
            StopReason::Signal
        } else {
            StopReason::Duration
        },
        elapsed_ns: s.elapsed_ns,
        sent: s.sent,
        send_errors: s.send_errors,
        received: st.received,
        lost,
        unsent: s.unsent,
        send_error: s.send_error.map(crate::net::errno_text),
        receive_errors: st.receive_errors,
        receive_error: st.receive_error.map(crate::net::errno_text),
        stale: st.stale,
        reordered: st.reordered,
        duplicates: st.duplicates,
        foreign: st.foreign,
        late: st.late,
        send_lateness: Box::new(s.lateness.stats()),
        latency: st.latency.stats(),
        path: stamped.then(|| Box::new(st.path.stats())),
        wakeup: stamped.then(|| Box::new(st.wakeup.stats())),
        timestamps,
        timeline,
        timeline_span_ns: span,
        late_packets: st.late_packets,
        late_packets_dropped: st.late_dropped,
        worst: {
            let mut w = st.worst;
            w.sort_by_key(|p| std::cmp::Reverse(p.latency_ns));
            w
        },
        why: None,
        sender: s.conditions,
        receiver: r.conditions,
        process: Box::new(process),
        sender_cpu_ns: s.cpu_ns,
        receiver_cpu_ns: r.cpu_ns,
        realtime_moved_ns,
        load: None,
    }
}

#[cfg(test)]
mod tests;

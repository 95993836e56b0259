//! Packet latency through the platform (`rtgauge net latency`): a pinned sender puts a periodic stream of
//! UDP datagrams on the wire with absolute-time sleeps; a pinned receiver takes each one with the kernel's
//! receive timestamp and splits its latency into the path (send → kernel) and the wake-up (kernel →
//! thread). One-way when the receiver binds the target itself (both ends read this host's CLOCK_REALTIME:
//! loopback, or two network namespaces joined by a veth pair); round trip when the target is a reflector
//! ([`reflect`]) and the receiver reads the sender's own socket. A split stream has one of the two threads
//! per run (`StreamRole::Send`, `StreamRole::Receive`: a host and its guest); its receiver puts the
//! sender's CLOCK_MONOTONIC send times on its own CLOCK_REALTIME with a shift its caller measured over
//! `rtgauge vm`'s clock channel ([`NetLatencyPlan::peer_shift_ns`]).
//!
//! Each packet carries a tag, the stream id, its sequence number and its send time on both clocks, so that loss,
//! reordering and duplicates are counted: the receiver marks each sequence number in a sliding window
//! (`rtgauge_model::net_latency::WINDOW`). No allocation, lock or I/O other than the socket calls in either
//! loop: the recorders, the window, the intervals' counts and the late-packet lists are allocated before
//! the barrier; the threads hand their state back when they end.
//!
//! Sockets are raw `libc` calls (as in [`crate::net`]): the timestamps arrive as a control message of
//! `recvmsg`, which no socket crate we use wraps.

mod error;
mod frame;
mod reflect;
mod rx;
mod tx;
mod watch;
mod wire;

pub use error::StreamError;
pub use frame::parse_mac;
pub use reflect::{reflect, ReflectPlan};
pub use watch::{NetWatch, WatchStart};

use crate::recorder::LatencyRecorder;
use crate::rt::{self, DmaLatencyGuard};
use crate::stop::StopFlag;
use crate::ProbeError;
use rtgauge_model::kind::StopReason;
use rtgauge_model::latency::{push_bounded, TimelineEntry, MAX_TIMELINE};
use rtgauge_model::net_latency::{
    KernelStamps, NetLatencyConfig, NetLatencyResult, RxMode, StreamRole,
};
use rtgauge_model::rt::ThreadConditions;
use rx::RxState;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use wire::{Packet, Socket};

/// How far past the duration a sender behind its schedule may still send, ns: a late wake-up for the last
/// packets is not falling behind.
const END_GRACE_NS: u64 = 100_000_000;

/// Where the kernel sends and joins a multicast group, said when either fails.
const MULTICAST_ROUTE_HINT: &str = "the group is sent to and joined on the interface the kernel routes it to: a default route, or ip route add 224.0.0.0/4 dev DEV";

/// The main thread's tick while the probe runs, ms.
const TICK_MS: u64 = 100;

/// What `net latency` measures, resolved: the configuration and the address packets go to.
#[derive(Debug, Clone)]
pub struct NetLatencyPlan {
    /// What the document records.
    pub config: NetLatencyConfig,
    /// One-way: the address the receiver binds (port 0: any), or a send-only run's destination; round
    /// trip: the reflector's.
    pub addr: SocketAddr,
    /// Receive only, with the sender's clock read through a channel: its CLOCK_MONOTONIC send times are put
    /// on this receiver's CLOCK_REALTIME by adding this, ns (receiver's CLOCK_REALTIME − sender's
    /// CLOCK_MONOTONIC). `None`: the send times are the sender's CLOCK_REALTIME, used as they are.
    pub peer_shift_ns: Option<i64>,
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
        let bursts = (self.config.duration.as_ns() as f64 / self.period_ns() - 1e-6)
            .ceil()
            .max(1.0);
        bursts as u64 * self.config.burst as u64
    }

    /// Where each sequence number falls in time: the intervals the counts are kept in while it runs.
    pub fn schedule(&self) -> Schedule {
        // The timeline's interval, doubled until the run fits in `MAX_TIMELINE` of them: what the timeline
        // would be thinned to anyway, so that a week's run keeps a few thousand counters, not 600,000.
        let mut span = self.config.timeline_interval_ns.max(1);
        while self.config.duration.as_ns().div_ceil(span) > MAX_TIMELINE as u64 {
            span = span.saturating_mul(2);
        }
        Schedule {
            period_ns: self.period_ns(),
            burst: u64::from(self.config.burst.max(1)),
            span_ns: span,
            intervals: self.config.duration.as_ns().div_ceil(span) as usize + 1,
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
    /// Its packets' software transmit timestamps (`None`: the sender is another run).
    tx: Option<tx::TxStamps>,
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

/// Run the probe: sender and receiver threads (one of them for a split stream) until the duration elapsed
/// (or `stop`), then the receiver drains the stragglers for `drain_ns`; a receive-only run ends on its
/// own clock ([`OwnEnd`]).
pub fn run(
    plan: &NetLatencyPlan,
    stop: &StopFlag,
    tick: &mut dyn FnMut(std::time::Duration),
) -> Result<NetLatencyResult, ProbeError> {
    let cfg = &plan.config;
    if cfg.rate_per_s <= 0.0 || cfg.burst == 0 || cfg.duration.as_ns() == 0 {
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
    let stream = cfg.stream.unwrap_or_else(wire::stream_id);
    let capacity = plan.capacity();
    let shared = Arc::new(Handover {
        sender_done: AtomicBool::new(false),
        sent: AtomicU64::new(0),
        sender_end_ns: AtomicU64::new(0),
        receiver_failed: AtomicBool::new(false),
        sender_started: AtomicBool::new(false),
    });
    // A split stream's run has one of the two threads: the other end is another rtgauge.
    let start = Arc::new(Barrier::new(if cfg.role == StreamRole::Both {
        2
    } else {
        1
    }));
    let realtime_offset_before = crate::time::realtime_minus_monotonic();

    // The receiver binds first (one-way) and says where; round trip, the sender's socket is handed to it.
    let (to_sender, from_receiver) = mpsc::channel::<Result<Peer, StreamError>>();
    let (to_receiver, from_sender) = mpsc::channel::<Result<Socket, StreamError>>();
    if cfg.role == StreamRole::Send {
        // The receiver is another run: where it takes packets is the flags'.
        let _ = to_sender.send(remote_peer(plan));
    }
    let common = Common {
        plan: plan.clone(),
        handover: Arc::clone(&shared),
        start: Arc::clone(&start),
        stop: stop.clone(),
    };
    let rx = match cfg.role {
        StreamRole::Send => None,
        _ => Some(spawn_receiver(
            common.clone(),
            stream,
            to_sender,
            from_sender,
        )?),
    };
    let tx = match cfg.role {
        StreamRole::Receive => None,
        _ => Some(spawn_sender(
            common,
            (stream, capacity),
            from_receiver,
            to_receiver,
        )),
    };
    let tx = match tx.transpose() {
        Ok(t) => t,
        Err(e) => {
            // The receiver waits at the barrier for a sender that will never come: stand in for it.
            shared.sender_done.store(true, Ordering::Release);
            shared.sender_start(&start);
            if let Some(rx) = rx {
                let _ = rx.join();
            }
            return Err(e);
        }
    };
    // The main thread ticks while they run (the trace is drained and the counters sampled there).
    let begun = std::time::Instant::now();
    let done = |t: Option<bool>| t.unwrap_or(true);
    while !(done(tx.as_ref().map(|t| t.is_finished()))
        && done(rx.as_ref().map(|t| t.is_finished())))
    {
        std::thread::sleep(std::time::Duration::from_millis(TICK_MS));
        tick(begun.elapsed());
    }
    let sent = tx
        .map(|t| t.join())
        .transpose()
        .map_err(|_| ProbeError::Thread {
            index: 0,
            reason: "panicked".into(),
        })?
        .transpose();
    let received = rx
        .map(|t| t.join())
        .transpose()
        .map_err(|_| ProbeError::Thread {
            index: 1,
            reason: "panicked".into(),
        })?
        .transpose();
    let (sent, received) = match (sent, received) {
        (Ok(s), Ok(r)) => (s, r),
        // The receiver's failure is the cause when both failed: the sender only stopped for it.
        (_, Err(e)) | (Err(e), _) => return Err(ProbeError::Config(e.to_string())),
    };
    let moved = crate::time::realtime_minus_monotonic() - realtime_offset_before;
    Ok(finish(plan, sent, received, process, moved, stop.is_set()))
}

/// What both threads hold: the plan, the handover between them, the start barrier and the stop flag.
#[derive(Clone)]
struct Common {
    plan: NetLatencyPlan,
    handover: Arc<Handover>,
    start: Arc<Barrier>,
    stop: StopFlag,
}

/// Start the receiver thread.
fn spawn_receiver(
    c: Common,
    stream: u32,
    to_sender: mpsc::Sender<Result<Peer, StreamError>>,
    from_sender: mpsc::Receiver<Result<Socket, StreamError>>,
) -> Result<std::thread::JoinHandle<Result<ReceiverOut, StreamError>>, ProbeError> {
    rt::spawn_thread("rtgauge-nl-rx".into(), 1, move || {
        receiver(
            &c.plan,
            stream,
            &c.handover,
            &c.start,
            &c.stop,
            to_sender,
            from_sender,
        )
    })
}

/// Start the sender thread: however it ends (a panic included), the receiver hears it is done and is
/// let through the start barrier.
fn spawn_sender(
    c: Common,
    (stream, capacity): (u32, u64),
    from_receiver: mpsc::Receiver<Result<Peer, StreamError>>,
    to_receiver: mpsc::Sender<Result<Socket, StreamError>>,
) -> Result<std::thread::JoinHandle<Result<SenderOut, StreamError>>, ProbeError> {
    rt::spawn_thread("rtgauge-nl-tx".into(), 0, move || {
        let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sender(
                &c.plan,
                stream,
                capacity,
                &c.handover,
                &c.start,
                &c.stop,
                from_receiver,
                to_receiver,
            )
        }));
        if sent.is_err() && !c.handover.sender_started.load(Ordering::Acquire) {
            c.handover.sender_start(&c.start);
        }
        c.handover.sender_done.store(true, Ordering::Release);
        sent.unwrap_or(Err(StreamError::Panicked("sender")))
    })
}

/// A send-only run's destination: the UDP address, or the MAC address frames go to (broadcast unless
/// given).
fn remote_peer(plan: &NetLatencyPlan) -> Result<Peer, StreamError> {
    match &plan.config.ethernet {
        Some(e) => match &e.dst_mac {
            Some(m) => frame::parse_mac(m)
                .map(Peer::Mac)
                .ok_or_else(|| StreamError::flag("--dst-mac", m, "not a MAC address")),
            None => Ok(Peer::Mac([0xff; 6])),
        },
        None => Ok(Peer::Udp(plan.addr)),
    }
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
    from_receiver: mpsc::Receiver<Result<Peer, StreamError>>,
    to_receiver: mpsc::Sender<Result<Socket, StreamError>>,
) -> Result<SenderOut, StreamError> {
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
        let dup = sock.try_clone().map_err(StreamError::socket("sender"));
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
    let (mut buf, payload_at) = packet_buffer(cfg.size as usize, header);
    let mut out = SenderOut {
        conditions,
        lateness,
        // A round trip's receiver reads this socket: a transmit stamp queued on it would wake that
        // receiver once more per packet, so none are asked for there.
        tx: (!cfg.round_trip).then(|| tx::TxStamps::new(&sock, buf.len())),
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
        return Err(StreamError::ReceiverFailed);
    }
    // The first send a little after the start, aligned to nothing: both threads are ready.
    let t0 = wire::monotonic_ns() + 1_000_000;
    // A sender that fell behind catches up with back-to-back sends, until the duration (and a grace for
    // an ordinary late wake-up of the last sends) is over.
    let end = t0 + cfg.duration.as_ns() + END_GRACE_NS.max(schedule.period_ns as u64);
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
                sent_mono_ns: wire::monotonic_ns(),
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
        // The burst's stamps, once it is out (its sends stay back to back).
        if let Some(t) = out.tx.as_mut() {
            t.drain(&sock, stream, out.sent);
        }
        k += 1;
    }
    let end = wire::monotonic_ns();
    if let Some(t) = out.tx.as_mut() {
        t.finish(&sock, stream, out.sent);
    }
    // The time the sends stood for: the periods of the bursts sent, or the whole duration when it ran out.
    out.elapsed_ns = if out.unsent > 0 {
        cfg.duration.as_ns()
    } else {
        schedule.burst_due_ns(k)
    };
    out.cpu_ns = wire::thread_cpu_ns().saturating_sub(cpu0);
    shared.sent.store(out.sent, Ordering::Release);
    shared.sender_end_ns.store(end, Ordering::Release);
    shared.sender_done.store(true, Ordering::Release);
    Ok(out)
}

/// The buffer each packet is sent from, and where the probe's header goes in it: a frame's headers written
/// once before it (at least Ethernet's minimum frame), nothing before a datagram's.
fn packet_buffer(size: usize, header: Option<frame::FrameHeader>) -> (Vec<u8>, usize) {
    let payload_at = header.map_or(0, |h| h.len());
    let mut buf = vec![0u8; (payload_at + size).max(if header.is_some() { 60 } else { 0 })];
    if let Some(h) = header {
        let payload = buf.len() - payload_at;
        h.write(&mut buf, payload);
    }
    (buf, payload_at)
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
    from_receiver: &mpsc::Receiver<Result<Peer, StreamError>>,
) -> Result<(Socket, Option<frame::FrameHeader>), StreamError> {
    let cfg = &plan.config;
    if let Some(ns) = &cfg.tx_netns {
        wire::enter_netns(ns).map_err(|e| StreamError::flag("--tx-netns", ns, e))?;
    }
    let peer = if cfg.round_trip {
        Peer::Udp(plan.addr)
    } else {
        from_receiver
            .recv()
            .map_err(|_| StreamError::Ended("receiver", "bound its socket"))??
    };
    match (peer, &cfg.ethernet) {
        (Peer::Mac(dst), Some(e)) => {
            let (sock, src) = frame::open(&e.tx_dev, None, None)
                .map_err(|x| StreamError::flag("--tx-dev", &e.tx_dev, x))?;
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
            let sock = Socket::udp(&target).map_err(StreamError::socket("sender"))?;
            sock.connect(&target).map_err(|e| {
                let hint = match target.ip().is_multicast() {
                    true => format!(" ({MULTICAST_ROUTE_HINT})"),
                    false => String::new(),
                };
                StreamError::Connect {
                    target,
                    cause: format!("{e}{hint}"),
                }
            })?;
            Ok((sock, None))
        }
        (Peer::Mac(_), None) => Err(StreamError::MacForUdp),
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

/// The receiver's socket: bound in its namespace (a UDP group joined, frames' group subscribed), or the
/// sender's for a round trip; where packets go is told to the sender.
fn open_receiver(
    plan: &NetLatencyPlan,
    to_sender: &mpsc::Sender<Result<Peer, StreamError>>,
    from_sender: &mpsc::Receiver<Result<Socket, StreamError>>,
) -> Result<(Socket, Option<SocketAddr>), StreamError> {
    let cfg = &plan.config;
    if cfg.round_trip {
        return from_sender
            .recv()
            .map_err(|_| StreamError::Ended("sender", "opened its socket"))?
            .map(|s| (s, None));
    }
    if let Some(ns) = &cfg.rx_netns {
        wire::enter_netns(ns).map_err(|e| StreamError::flag("--rx-netns", ns, e))?;
    }
    if let Some(e) = &cfg.ethernet {
        let group = e.dst_mac.as_deref().and_then(frame::parse_mac);
        let (sock, mac) = frame::open(&e.rx_dev, Some(e.ethertype), group)
            .map_err(|x| StreamError::flag("--rx-dev", &e.rx_dev, x))?;
        // Frames go to the group when one is given, else to this interface.
        let _ = to_sender.send(Ok(Peer::Mac(group.unwrap_or(mac))));
        return Ok((sock, None));
    }
    let sock = Socket::udp(&plan.addr).map_err(StreamError::socket("receiver"))?;
    sock.bind(&plan.addr)
        .map_err(|e| StreamError::flag("--bind", plan.addr, e))?;
    // A group: bound to it (only its datagrams), and joined.
    if plan.addr.ip().is_multicast() {
        sock.join_group(&plan.addr.ip()).map_err(|e| {
            StreamError::flag(
                "--bind",
                plan.addr,
                format!("joining the group: {e} ({MULTICAST_ROUTE_HINT})"),
            )
        })?;
    }
    let bound = sock.local_addr().map_err(StreamError::socket("receiver"))?;
    let _ = to_sender.send(Ok(Peer::Udp(bound)));
    Ok((sock, Some(bound)))
}

/// A receiver set up: its socket (bound, or the sender's), the thread pinned and at its policy, and a
/// buffer for the largest packet.
struct RxSetup {
    sock: Socket,
    bound: Option<SocketAddr>,
    conditions: ThreadConditions,
    /// Why kernel receive timestamps were refused, if they were.
    timestamps_error: Option<String>,
    buf: Vec<u8>,
}

/// Open the receiver's socket (a failure is told to the sender too), pin the thread and set its policy
/// (first: what it allocates next is touched on its own CPU, its node), ask for receive timestamps, grow the
/// queue so that bursts do not overflow it while the thread wakes (capped by rmem_max), and wake at least
/// every 20 ms when blocking (a poller asks each call not to wait: MSG_DONTWAIT leaves the socket's own
/// flags alone, and a round trip's socket is the sender's).
fn setup_receiver(
    plan: &NetLatencyPlan,
    to_sender: &mpsc::Sender<Result<Peer, StreamError>>,
    from_sender: &mpsc::Receiver<Result<Socket, StreamError>>,
) -> Result<RxSetup, StreamError> {
    let cfg = &plan.config;
    let (sock, bound) = open_receiver(plan, to_sender, from_sender).inspect_err(|e| {
        let _ = to_sender.send(Err(e.clone()));
    })?;
    let conditions = thread_conditions(cfg.rx_cpu, cfg.rtprio);
    let timestamps_error = sock
        .timestamp_software(true, false)
        .err()
        .map(|e| format!("SO_TIMESTAMPING (software receive): {e}"));
    sock.grow_receive_buffer(4 << 20);
    sock.receive_timeout(20_000_000)
        .map_err(StreamError::socket("receiver"))?;
    let buf = vec![0u8; (cfg.size as usize + 64).max(2048)];
    rt::prefault_stack(64 * 1024);
    Ok(RxSetup {
        sock,
        bound,
        conditions,
        timestamps_error,
        buf,
    })
}

/// What a received packet carries for the probe: the datagram, or a frame's payload.
#[inline]
fn payload(packet: &[u8], ethertype: Option<u16>) -> &[u8] {
    match ethertype {
        Some(t) => frame::payload(packet, t).unwrap_or(&[]),
        None => packet,
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
    to_sender: mpsc::Sender<Result<Peer, StreamError>>,
    from_sender: mpsc::Receiver<Result<Socket, StreamError>>,
) -> Result<ReceiverOut, StreamError> {
    rt::block_signals();
    let cfg = &plan.config;
    let mut rx = match setup_receiver(plan, &to_sender, &from_sender) {
        Ok(s) => s,
        Err(e) => {
            shared.receiver_failed.store(true, Ordering::Release);
            start.wait();
            return Err(e);
        }
    };
    let mut state = RxState::new(plan, plan.capacity());
    state.timestamps_error = rx.timestamps_error.take();
    let poll = cfg.rx_mode == RxMode::Poll;
    let mut cpu0 = wire::thread_cpu_ns();
    start.wait();
    let ethertype = cfg.ethernet.as_ref().map(|e| e.ethertype);
    // When the user's stop was first seen, ns: the receiver drains from then even if the sender, stuck
    // behind it on one CPU, never says it is done.
    let mut stopped_at = None;
    let mut own_end = OwnEnd::new(cfg);
    loop {
        match rx.sock.recv_stamped(&mut rx.buf, poll) {
            Ok((n, kernel_ns)) => {
                let user_ns = wire::realtime_ns();
                let data = payload(&rx.buf[..n], ethertype);
                let _ = state.take(
                    data,
                    stream,
                    (user_ns, kernel_ns),
                    plan.peer_shift_ns,
                    cfg.deadline_ns,
                );
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
        if own_end.as_mut().is_some_and(|e| e.done(&state, &mut cpu0)) {
            break;
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
        bound: rx.bound,
        conditions: rx.conditions,
        state,
        cpu_ns: wire::thread_cpu_ns().saturating_sub(cpu0),
    })
}

/// A receive-only run's end, with no sender here to say it is done: until the stream's first packet, the
/// listen time; from it, the stream's schedule (the first packet's due time taken back) for the duration,
/// then the drain; at once when every packet of the schedule has arrived.
struct OwnEnd {
    at: u64,
    anchored: bool,
    duration_ns: u64,
    drain_ns: u64,
}

impl OwnEnd {
    fn new(cfg: &NetLatencyConfig) -> Option<OwnEnd> {
        (cfg.role == StreamRole::Receive).then(|| OwnEnd {
            at: wire::monotonic_ns() + cfg.listen_ns.unwrap_or(cfg.duration.as_ns()),
            anchored: false,
            duration_ns: cfg.duration.as_ns(),
            drain_ns: cfg.drain_ns,
        })
    }

    /// Whether the run is over; at the first packet the end is set from it, and the receiver's CPU time
    /// counted from there (`cpu0`: the wait before it is not the stream's cost).
    #[inline]
    fn done(&mut self, state: &RxState, cpu0: &mut u64) -> bool {
        let now = wire::monotonic_ns();
        if !self.anchored {
            if let Some(first) = state.highest {
                let due = state.schedule.due_ns(first);
                self.at = now.saturating_sub(due) + self.duration_ns + self.drain_ns;
                self.anchored = true;
                *cpu0 = wire::thread_cpu_ns();
            }
        }
        state.received >= state.capacity || now >= self.at
    }
}

/// What the run's absent thread stands for: conditions as asked (the other run's to say), nothing
/// measured.
fn absent(cpu: Option<u32>, rtprio: Option<i32>) -> ThreadConditions {
    fn setting<T: Clone>(v: T) -> rtgauge_model::rt::Setting<T> {
        rtgauge_model::rt::Setting {
            requested: v.clone(),
            achieved: v,
            error: None,
        }
    }
    ThreadConditions {
        policy: setting(match rtprio {
            Some(_) => rtgauge_model::rt::SchedPolicy::Fifo,
            None => rtgauge_model::rt::SchedPolicy::Other,
        }),
        priority: setting(rtprio.unwrap_or(0)),
        cpu: setting(cpu),
    }
}

/// A receive-only run's sender, as far as the receiver can tell: the schedule both ends were given (rate
/// × duration), or, when the run was stopped early, every sequence number up to the highest received.
fn remote_sender(plan: &NetLatencyPlan, highest: Option<u64>, stopped: bool) -> SenderOut {
    let cfg = &plan.config;
    let schedule = plan.schedule();
    let sent = match stopped {
        true => highest.map_or(0, |h| h + 1),
        false => plan.capacity(),
    };
    SenderOut {
        conditions: absent(cfg.tx_cpu, cfg.rtprio),
        lateness: LatencyRecorder::new(),
        tx: None,
        sent,
        failed_in: vec![0; schedule.intervals],
        send_errors: 0,
        send_error: None,
        unsent: 0,
        elapsed_ns: match sent {
            0 => 0,
            n => schedule.due_ns(n - 1) + schedule.period_ns as u64,
        },
        cpu_ns: 0,
        stopped_early: false,
    }
}

/// What the kernel's receive timestamps were, over the packets received.
fn timestamps(st: &RxState, send_only: bool) -> KernelStamps {
    if send_only {
        return KernelStamps::Unavailable {
            reason: "send only: the receiving run has them".into(),
        };
    }
    kernel_stamps(
        st.timestamps_error.as_deref(),
        (st.received, st.received - st.unstamped),
        (
            "no packet was received",
            "no packet carried a kernel receive timestamp",
        ),
    )
}

/// What a socket's kernel timestamps were: refused (`error`), or of `stamped` of `packets`; with what to
/// say when there were no packets (`no_packets`), and when none had one (`none_stamped`).
fn kernel_stamps(
    error: Option<&str>,
    (packets, stamped): (u64, u64),
    (no_packets, none_stamped): (&str, &str),
) -> KernelStamps {
    let unavailable = |reason: &str| KernelStamps::Unavailable {
        reason: reason.into(),
    };
    match error {
        Some(e) => unavailable(e),
        None if packets == 0 => unavailable(no_packets),
        None if stamped == 0 => unavailable(none_stamped),
        None if stamped < packets => KernelStamps::Partial {
            missing: packets - stamped,
        },
        None => KernelStamps::Software,
    }
}

/// The result of both threads' states (a split stream's run has one of them).
fn finish(
    plan: &NetLatencyPlan,
    s: Option<SenderOut>,
    r: Option<ReceiverOut>,
    process: rtgauge_model::rt::ProcessConditions,
    realtime_moved_ns: i64,
    signalled: bool,
) -> NetLatencyResult {
    let cfg = &plan.config;
    let send_only = r.is_none();
    let r = r.unwrap_or_else(|| ReceiverOut {
        bound: None,
        conditions: absent(cfg.rx_cpu, cfg.rtprio),
        state: RxState::new(plan, 0),
        cpu_ns: 0,
    });
    let s = s.unwrap_or_else(|| remote_sender(plan, r.state.highest, signalled));
    let mut st = r.state;
    let issued = s.sent + s.send_errors;
    if !send_only {
        st.settle(issued);
    }
    let schedule = st.schedule;
    // Lost: sent (not refused) and never received; in each interval, what was settled unseen there less
    // the sends refused there. A send-only run cannot tell: the receiver's run says.
    let lost = match send_only {
        true => 0,
        false => s.sent.saturating_sub(st.received),
    };
    let mut timeline = Vec::new();
    let mut span = schedule.span_ns;
    // The intervals the sends fell in (not one past the last send's); none for a send-only run (the
    // receiving run has them).
    let intervals = match issued {
        _ if send_only => 0,
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
    let timestamps = timestamps(&st, send_only);
    let stamped = st.received > st.unstamped;
    let send_stack =
        s.tx.as_ref()
            .filter(|t| t.stamped > 0)
            .map(|t| Box::new(t.stack.stats()));
    let tx_timestamps = s.tx.as_ref().map(|t| t.status(s.sent));
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
        latency: Box::new(st.latency.stats()),
        path: stamped.then(|| Box::new(st.path.stats())),
        wakeup: stamped.then(|| Box::new(st.wakeup.stats())),
        timestamps,
        send_stack,
        tx_timestamps,
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
        clock: None,
        unresolved: Vec::new(),
    }
}

#[cfg(test)]
mod tests;

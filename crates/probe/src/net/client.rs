//! The load generator: one pinned thread per CPU, each an edge-triggered epoll loop over a fixed array of
//! connection slots, closed loop (a slot starts its next transaction when the previous one ends).
//!
//! CPS: non-blocking connect → request (`Connection: close`) → whole response → teardown → a new
//! connection in the same slot. By default the client waits for the server's FIN before closing (the
//! server then holds TIME_WAIT, so the client's ephemeral ports are not used up); see [`CloseMode`].
//! Throughput: keep-alive connections, the next GET as soon as a response is complete.
//!
//! Bounds: the loop ends at the duration, at `max_transactions`, or when the stop flag is set, and checks
//! the clock at least every 10 ms; a connection or request that takes longer than the timeout is closed
//! and counted. A failed connect (refused, no port, no route) is retried after at most 1 ms, so a dead
//! target is counted, not hammered in a busy loop.
//!
//! No allocation after the start barrier: slots (with their response-head buffers), the receive buffer,
//! histograms and the per-second table are allocated before it.

use super::http::{HttpError, ParseProgress, ResponseReader};
use super::sys::{self, Epoll, RawAddr, EV_ERR, EV_ET, EV_IN, EV_OUT, EV_RDHUP};
use crate::recorder::LatencyRecorder as Lat;
use crate::stop::StopFlag;
use crate::time::{now_ns, ClockId};
use crate::ProbeError;
use rtgauge_model::latency::LatencyStats;
use rtgauge_model::net::{CloseMode, NetErrors, NetMode, NetSecond};
use rtgauge_model::Nanos;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

/// What to run.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// Connections per second or keep-alive throughput.
    pub mode: NetMode,
    /// The server's address.
    pub target: SocketAddr,
    /// The request bytes, sent as is.
    pub request: Vec<u8>,
    /// One event loop per CPU.
    pub cpus: Vec<u32>,
    /// Connection slots of each loop (same length as `cpus`).
    pub slots: Vec<u32>,
    /// How long to offer load.
    pub duration: Nanos,
    /// A transaction still unanswered after this long counts as a timeout, ns.
    pub timeout_ns: u64,
    /// How connections end (FIN or RST).
    pub close: CloseMode,
    /// Stop after this many successful transactions in all.
    pub max_transactions: u64,
    /// Open loop (CPS only): new connections offered at this fixed rate in all, spread evenly over the loops,
    /// whatever the server's pace; `None` = closed loop (each slot reopens as soon as its connection ends).
    pub rate_per_s: Option<f64>,
}

/// What the loops measured, merged.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// How long the loops ran, ns.
    pub elapsed_ns: u64,
    /// Connections opened.
    pub connections: u64,
    /// Transactions (request and complete response) that succeeded.
    pub transactions: u64,
    /// Response bytes received.
    pub bytes: u64,
    /// Failed attempts, by cause.
    pub errors: NetErrors,
    /// Time to establish a connection.
    pub connect: LatencyStats,
    /// Time from sending the request to the first response byte.
    pub ttfb: LatencyStats,
    /// Time of a whole transaction, connection included.
    pub total: LatencyStats,
    /// Transactions, errors and latency per second of the run.
    pub per_second: Vec<NetSecond>,
    /// Connections still open when the run ended.
    pub in_flight_at_end: u64,
    /// CPUs a loop could not be pinned to.
    pub unpinned: Vec<u32>,
    /// Open loop: connection starts the schedule called for, and those not made because every slot was
    /// busy (the generator's pool, not the server, was the limit for those).
    pub scheduled: u64,
    /// Scheduled starts not made because every slot was busy.
    pub missed_starts: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnPhase {
    /// No socket: (re)open at the next turn of the loop.
    Idle,
    Connecting,
    /// Writing the request (a partial write waits for EPOLLOUT).
    Sending,
    /// Request sent, reading the response.
    Reading,
    /// Response complete, waiting for the server's FIN (CloseMode::Server).
    Draining,
}

struct Slot {
    fd: i32,
    gen: u32,
    phase: ConnPhase,
    /// connect() called.
    t_start: u64,
    /// Request written (first byte).
    t_sent: u64,
    got_first: bool,
    sent: usize,
    deadline: u64,
    reader: ResponseReader,
    /// The response was a success (2xx); counted when the connection ends (CPS).
    ok: bool,
}

#[derive(Debug, Clone, Copy)]
enum ErrKind {
    Refused,
    Reset,
    Timeout,
    Port,
    Unreachable,
    ClosedEarly,
    Bad,
    Other,
}

fn classify(errno: i32) -> ErrKind {
    match errno {
        libc::ECONNREFUSED => ErrKind::Refused,
        libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED => ErrKind::Reset,
        libc::ETIMEDOUT => ErrKind::Timeout,
        libc::EADDRNOTAVAIL | libc::EADDRINUSE => ErrKind::Port,
        libc::ENETUNREACH | libc::EHOSTUNREACH | libc::ENETDOWN | libc::EHOSTDOWN => {
            ErrKind::Unreachable
        }
        _ => ErrKind::Other,
    }
}

/// One loop's state and counters.
struct Worker<'a> {
    plan: &'a ClientPlan,
    addr: RawAddr,
    ep: Epoll,
    slots: Vec<Slot>,
    buf: Vec<u8>,
    t0: u64,
    tally: Tally,
    idle: usize,
    /// This loop's share of `max_transactions`.
    budget: u64,
    /// Open loop: ns between this loop's scheduled starts (0 = closed loop), the next start, and counts.
    gap_ns: u64,
    next_start: u64,
    scheduled: u64,
    missed: u64,
    /// Open loop: where the search for a free slot starts (after the slot last opened).
    free_hint: usize,
}

/// What one loop counted; the loops' tallies are merged into the outcome.
struct Tally {
    connections: u64,
    transactions: u64,
    bytes: u64,
    errors: NetErrors,
    connect: Lat,
    ttfb: Lat,
    total: Lat,
    per_second: Vec<NetSecond>,
}

impl Tally {
    fn new(secs: usize) -> Self {
        Tally {
            connections: 0,
            transactions: 0,
            bytes: 0,
            errors: NetErrors::default(),
            connect: Lat::new(),
            ttfb: Lat::new(),
            total: Lat::new(),
            per_second: vec![NetSecond::default(); secs],
        }
    }

    /// Add another loop's counts; its per-second series is cut to the length of this one.
    fn merge(&mut self, o: &Tally) {
        self.connections += o.connections;
        self.transactions += o.transactions;
        self.bytes += o.bytes;
        self.errors.add(&o.errors);
        self.connect.merge(&o.connect);
        self.ttfb.merge(&o.ttfb);
        self.total.merge(&o.total);
        for (a, b) in self.per_second.iter_mut().zip(&o.per_second) {
            a.transactions += b.transactions;
            a.bytes += b.bytes;
            a.errors += b.errors;
        }
    }
}

const RECV_BUF: usize = 256 * 1024;

impl<'a> Worker<'a> {
    /// Loop `index` of `plan`, with everything it will use allocated: the slots (with their response-head
    /// buffers), the receive buffer, the histograms and the per-second table. Its clock (`t0`, the first
    /// scheduled start) is set at the start barrier.
    fn new(plan: &'a ClientPlan, index: usize) -> Result<Worker<'a>, ProbeError> {
        let ep = Epoll::new().map_err(|e| ProbeError::Thread {
            index,
            reason: format!("epoll_create1: {e}"),
        })?;
        let n = plan.slots[index] as usize;
        let secs = (plan.duration.as_ns() / 1_000_000_000) as usize + 2;
        let head_request = plan.request.starts_with(b"HEAD ");
        Ok(Worker {
            plan,
            addr: RawAddr::new(&plan.target),
            ep,
            slots: (0..n)
                .map(|_| Slot {
                    fd: -1,
                    gen: 0,
                    phase: ConnPhase::Idle,
                    t_start: 0,
                    t_sent: 0,
                    got_first: false,
                    sent: 0,
                    deadline: 0,
                    reader: ResponseReader::new(head_request),
                    ok: false,
                })
                .collect(),
            buf: vec![0u8; RECV_BUF],
            t0: 0,
            tally: Tally::new(secs),
            idle: n,
            budget: plan.max_transactions.div_ceil(plan.cpus.len() as u64),
            gap_ns: match (plan.mode, plan.rate_per_s) {
                (NetMode::Cps, Some(r)) if r > 0.0 => {
                    ((1e9 * plan.cpus.len() as f64 / r) as u64).max(1)
                }
                _ => 0,
            },
            next_start: 0,
            scheduled: 0,
            missed: 0,
            free_hint: 0,
        })
    }
}

impl Worker<'_> {
    /// Open loop: every start that is due by `now` (and before `end`), each in a free slot; a due start with
    /// no free slot is missed (counted) rather than queued, so the offered rate never bends to the server's
    /// pace.
    #[inline]
    fn start_due(&mut self, now: u64, end: u64) {
        while self.next_start <= now
            && self.next_start < end
            && self.tally.transactions < self.budget
        {
            let due = self.next_start;
            self.next_start += self.gap_ns;
            self.scheduled += 1;
            let n = self.slots.len();
            match (0..n)
                .map(|k| (self.free_hint + k) % n)
                .find(|&i| self.slots[i].phase == ConnPhase::Idle)
            {
                Some(i) => {
                    self.free_hint = i + 1;
                    self.open_at(i, due);
                }
                None => self.missed += 1,
            }
        }
    }

    /// Closed loop: a new connection in every idle slot (one whose connect failed, or that found no socket).
    #[inline]
    fn reopen_idle(&mut self) {
        for i in 0..self.slots.len() {
            if self.slots[i].phase == ConnPhase::Idle {
                self.open(i);
            }
        }
    }

    /// How long epoll may wait at `now`, ms: the open loop until its next scheduled start (0 polls when
    /// that is under 1 ms), a closed loop with an idle slot 1 ms (to retry it), else up to 10 ms, so the
    /// clock is read at least that often; never past `end` by more than 1 ms.
    #[inline]
    fn wait_ms(&self, now: u64, end: u64) -> i32 {
        let left_ms = ((end - now) / 1_000_000).clamp(1, 10) as i32;
        if self.gap_ns > 0 {
            (self.next_start.saturating_sub(now) / 1_000_000).min(left_ms as u64) as i32
        } else if self.idle > 0 {
            1
        } else {
            left_ms
        }
    }

    /// Hand each event to its slot. An event whose generation is not the slot's current connection is for
    /// a socket already closed and is dropped.
    #[inline]
    fn dispatch(&mut self, events: &[libc::epoll_event], now: u64) {
        for ev in events {
            let (data, bits) = (ev.u64, ev.events);
            let i = (data & 0xffff_ffff) as usize;
            let gen = (data >> 32) as u32;
            match self.slots.get(i) {
                Some(s) if s.gen == gen && s.fd >= 0 => self.on_event(i, bits, now),
                _ => {}
            }
        }
    }

    /// Close every connection still open at the end; returns how many there were.
    fn close_all(&mut self) -> u64 {
        let mut in_flight = 0;
        for s in &mut self.slots {
            if s.fd >= 0 {
                in_flight += 1;
                sys::close(s.fd);
                s.fd = -1;
            }
        }
        in_flight
    }

    #[inline]
    fn second(&mut self, now: u64) -> &mut NetSecond {
        let i = (now.saturating_sub(self.t0) / 1_000_000_000) as usize;
        let last = self.tally.per_second.len() - 1;
        &mut self.tally.per_second[i.min(last)]
    }

    fn fail(&mut self, i: usize, kind: ErrKind, now: u64) {
        self.count(kind, now);
        self.drop_conn(i);
    }

    fn count(&mut self, kind: ErrKind, now: u64) {
        let e = &mut self.tally.errors;
        match kind {
            ErrKind::Refused => e.refused += 1,
            ErrKind::Reset => e.reset += 1,
            ErrKind::Timeout => e.timeout += 1,
            ErrKind::Port => e.port_exhaustion += 1,
            ErrKind::Unreachable => e.unreachable += 1,
            ErrKind::ClosedEarly => e.closed_early += 1,
            ErrKind::Bad => e.bad_response += 1,
            ErrKind::Other => e.other += 1,
        }
        self.second(now).errors += 1;
    }

    /// Close the slot's socket; it is reopened at the next turn of the loop.
    fn drop_conn(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if s.fd >= 0 {
            sys::close(s.fd);
            s.fd = -1;
        }
        if s.phase != ConnPhase::Idle {
            s.phase = ConnPhase::Idle;
            self.idle += 1;
        }
    }

    /// Open a new connection in slot `i` (which must be idle).
    fn open(&mut self, i: usize) {
        self.open_at(i, 0);
    }

    /// Open a connection in idle slot `i`; an open loop passes the scheduled start (`due`, else 0), from
    /// which its latencies count: a start made late because the loop was busy is charged to the latency,
    /// not hidden (no coordinated omission).
    fn open_at(&mut self, i: usize, due: u64) {
        // A fresh timestamp: a slot reopened late in a batch of events must not be charged the time spent
        // on the events before it (one vDSO clock read, ~20 ns).
        let now = now_ns(ClockId::Monotonic);
        let fd = match sys::tcp_socket(self.addr.family()) {
            Ok(fd) => fd,
            Err(e) => {
                // No socket at all (EMFILE, …): stays idle, counted, retried later.
                return self.count(classify(e), now);
            }
        };
        self.tally.connections += 1;
        let reset = self.plan.close == CloseMode::Reset;
        if reset {
            let _ = sys::set_linger_reset(fd);
        }
        if self.plan.mode == NetMode::Throughput {
            let _ = sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        }
        let s = &mut self.slots[i];
        s.fd = fd;
        s.gen = s.gen.wrapping_add(1);
        s.phase = ConnPhase::Connecting;
        s.t_start = if due > 0 { due.min(now) } else { now };
        s.deadline = now.saturating_add(self.plan.timeout_ns);
        s.got_first = false;
        s.ok = false;
        s.sent = 0;
        s.reader.reset();
        self.idle -= 1;
        let data = ((s.gen as u64) << 32) | i as u64;
        if let Err(e) = self.ep.add(fd, EV_IN | EV_OUT | EV_RDHUP | EV_ET, data) {
            return self.fail(i, classify(e), now);
        }
        match sys::connect(fd, &self.addr) {
            Ok(true) => self.on_connected(i, now),
            Ok(false) => {}
            Err(e) => self.fail(i, classify(e), now),
        }
    }

    fn on_connected(&mut self, i: usize, batch_now: u64) {
        // A fresh timestamp: the request's time counts from its send, not from the batch's start.
        let now = now_ns(ClockId::Monotonic).max(batch_now);
        let t = now.saturating_sub(self.slots[i].t_start);
        self.tally.connect.record(t);
        let s = &mut self.slots[i];
        s.phase = ConnPhase::Sending;
        s.sent = 0;
        s.t_sent = now;
        self.send(i, now);
    }

    fn send(&mut self, i: usize, now: u64) {
        let req = &self.plan.request;
        let s = &mut self.slots[i];
        while s.sent < req.len() {
            match sys::send(s.fd, &req[s.sent..]) {
                Ok(n) => s.sent += n,
                Err(libc::EAGAIN) => return,
                Err(libc::EINTR) => {}
                Err(e) => return self.fail(i, classify(e), now),
            }
        }
        s.phase = ConnPhase::Reading;
    }

    fn on_event(&mut self, i: usize, ev: u32, now: u64) {
        match self.slots[i].phase {
            ConnPhase::Idle => {}
            ConnPhase::Connecting => {
                if ev & (EV_OUT | EV_ERR) == 0 {
                    return;
                }
                // EPOLLOUT without EPOLLERR is a completed connect: SO_ERROR is read only on failure,
                // saving a system call per connection.
                if ev & EV_ERR != 0 {
                    let e = match sys::so_error(self.slots[i].fd) {
                        0 => libc::ECONNRESET,
                        e => e,
                    };
                    return self.fail(i, classify(e), now);
                }
                self.on_connected(i, now);
                if self.slots[i].phase == ConnPhase::Reading && ev & (EV_IN | EV_RDHUP) != 0 {
                    self.read(i, ev, now);
                }
            }
            ConnPhase::Sending => {
                self.send(i, now);
                if self.slots[i].phase == ConnPhase::Reading
                    && ev & (EV_IN | EV_RDHUP | EV_ERR) != 0
                {
                    self.read(i, ev, now);
                }
            }
            ConnPhase::Reading | ConnPhase::Draining => self.read(i, ev, now),
        }
    }

    /// Read until EAGAIN, end of stream, or the end of the transaction. `ev` are the epoll bits that woke
    /// the slot: EPOLLRDHUP means the server's FIN is already in, after all the data.
    fn read(&mut self, i: usize, ev: u32, batch_now: u64) {
        let mut now = batch_now;
        loop {
            let fd = self.slots[i].fd;
            let r = sys::recv(fd, &mut self.buf);
            if r.is_ok() {
                // A fresh timestamp per read: a keep-alive connection sends its next request from inside
                // this loop and its response can be read in the same loop, which with the batch's time
                // counted 0 ns (a throughput run's transaction min was 1 ns); a slot read late in a batch
                // is not charged the events before it either (one vDSO clock read, ~20 ns).
                now = now_ns(ClockId::Monotonic);
            }
            match r {
                Ok(0) => return self.on_eof(i, now),
                Ok(n) => {
                    self.tally.bytes += n as u64;
                    self.second(now).bytes += n as u64;
                    let s = &mut self.slots[i];
                    if s.phase == ConnPhase::Draining {
                        continue;
                    }
                    if !s.got_first {
                        s.got_first = true;
                        let t = now.saturating_sub(s.t_sent);
                        self.tally.ttfb.record(t);
                    }
                    let s = &mut self.slots[i];
                    match s.reader.feed(&self.buf[..n]) {
                        Ok(ParseProgress::More) => {}
                        Ok(ParseProgress::Done) => {
                            if !self.on_response(i, now) {
                                return;
                            }
                            if self.slots[i].phase == ConnPhase::Draining && ev & EV_RDHUP != 0 {
                                // The FIN came with the response: no need to read the end of stream.
                                return self.finish(i, now);
                            }
                        }
                        Err(e) => return self.fail(i, http_kind(e), now),
                    }
                }
                Err(libc::EAGAIN) => return,
                Err(libc::EINTR) => {}
                Err(e) => {
                    // A reset after the whole response arrived still ends a successful transaction.
                    if self.slots[i].phase == ConnPhase::Draining {
                        return self.finish(i, now);
                    }
                    return self.fail(i, classify(e), now);
                }
            }
        }
    }

    fn on_eof(&mut self, i: usize, now: u64) {
        match self.slots[i].phase {
            ConnPhase::Draining => self.finish(i, now),
            _ => match self.slots[i].reader.eof() {
                Ok(_) => {
                    if self.on_response(i, now) {
                        // The response ended with the stream: nothing left to drain.
                        self.finish(i, now);
                    }
                }
                Err(e) => self.fail(i, http_kind(e), now),
            },
        }
    }

    /// A response is complete. Returns whether to keep reading this slot's socket.
    fn on_response(&mut self, i: usize, now: u64) -> bool {
        let s = &mut self.slots[i];
        let ok = (200..300).contains(&s.reader.status);
        let from = match self.plan.mode {
            NetMode::Cps => s.t_start,
            NetMode::Throughput => s.t_sent,
        };
        self.tally.total.record(now.saturating_sub(from));
        if !ok {
            self.tally.errors.status += 1;
        }
        match self.plan.mode {
            NetMode::Cps => {
                let s = &mut self.slots[i];
                s.ok = ok;
                if self.plan.close == CloseMode::Server && !s.reader.keep_alive {
                    s.phase = ConnPhase::Draining;
                    return true;
                }
                self.finish(i, now);
                false
            }
            NetMode::Throughput => {
                if ok {
                    self.tally.transactions += 1;
                    self.second(now).transactions += 1;
                } else {
                    self.second(now).errors += 1;
                }
                let s = &mut self.slots[i];
                if !s.reader.keep_alive {
                    self.drop_conn(i);
                    return false;
                }
                s.reader.reset();
                s.got_first = false;
                s.deadline = now.saturating_add(self.plan.timeout_ns);
                s.phase = ConnPhase::Sending;
                s.sent = 0;
                s.t_sent = now;
                self.send(i, now);
                self.slots[i].phase == ConnPhase::Reading
            }
        }
    }

    /// A CPS connection ends (or a throughput connection ends with the stream).
    fn finish(&mut self, i: usize, now: u64) {
        if self.plan.mode == NetMode::Cps {
            if self.slots[i].ok {
                self.tally.transactions += 1;
                self.second(now).transactions += 1;
            } else {
                self.second(now).errors += 1;
            }
        }
        self.drop_conn(i);
        if self.gap_ns == 0 && self.tally.transactions < self.budget {
            // Reopen at once: the closed loop's next transaction (the open loop opens on its schedule).
            self.open(i);
        }
    }

    fn expire(&mut self, now: u64) {
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            // Draining included: the response was complete but the server did not close, so the connection
            // did not end within the bound.
            if s.phase != ConnPhase::Idle && now > s.deadline {
                self.fail(i, ErrKind::Timeout, now);
            }
        }
    }
}

fn http_kind(e: HttpError) -> ErrKind {
    match e {
        HttpError::Malformed | HttpError::TooLarge => ErrKind::Bad,
        HttpError::Truncated => ErrKind::ClosedEarly,
    }
}

/// Output of one loop.
struct Part {
    tally: Tally,
    in_flight: u64,
    pinned: bool,
    cpu: u32,
    scheduled: u64,
    missed: u64,
}

/// Loop `index` of the plan, on its own pinned thread: prepares, waits at the start barrier (`go`), then
/// runs until the duration, its share of the transactions or the stop flag. Nothing is allocated once the
/// loop runs.
fn worker(
    plan: &ClientPlan,
    index: usize,
    stop: &StopFlag,
    go: &AtomicBool,
    t0_cell: &std::sync::OnceLock<u64>,
) -> Result<Part, ProbeError> {
    let cpu = plan.cpus[index];
    crate::rt::block_signals();
    let pin = crate::rt::pin_thread(Some(cpu));
    let prepared = Worker::new(plan, index);
    // Start together, once every loop is prepared (or the run was called off).
    while !go.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let mut w = prepared?;
    let t0 = *t0_cell.get_or_init(|| now_ns(ClockId::Monotonic));
    w.t0 = t0;
    // Loops start their schedules evenly staggered, so the offered load is smooth in all.
    w.next_start = t0 + w.gap_ns * index as u64 / plan.cpus.len() as u64;
    let end = t0.saturating_add(plan.duration.as_ns());
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut last_scan = t0;
    let mut now = t0;
    loop {
        if w.gap_ns > 0 {
            w.start_due(now, end);
        } else if w.idle > 0 && w.tally.transactions < w.budget {
            w.reopen_idle();
        }
        if now >= end || stop.is_set() || w.tally.transactions >= w.budget {
            break;
        }
        let n = w.ep.wait(&mut events, w.wait_ms(now, end));
        now = now_ns(ClockId::Monotonic);
        w.dispatch(&events[..n], now);
        if now.saturating_sub(last_scan) >= 10_000_000 {
            last_scan = now;
            w.expire(now);
        }
    }
    let in_flight = w.close_all();
    Ok(Part {
        tally: w.tally,
        in_flight,
        pinned: pin.achieved == Some(cpu),
        cpu,
        scheduled: w.scheduled,
        missed: w.missed,
    })
}

/// Run the load: one thread per CPU of the plan, until the duration, the transaction bound or the stop flag.
pub fn run(plan: &ClientPlan, stop: &StopFlag) -> Result<ClientOutcome, ProbeError> {
    if plan.cpus.is_empty() || plan.cpus.len() != plan.slots.len() {
        return Err(ProbeError::Config("one slot count per client CPU".into()));
    }
    if plan.duration.as_ns() == 0 || plan.timeout_ns == 0 {
        return Err(ProbeError::Config(
            "duration and timeout must be > 0".into(),
        ));
    }
    let go = AtomicBool::new(false);
    let t0_cell = std::sync::OnceLock::new();
    let parts: Vec<Result<Part, ProbeError>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut failed = None;
        for index in 0..plan.cpus.len() {
            let (go, t0_cell) = (&go, &t0_cell);
            let h = std::thread::Builder::new()
                .name(format!("rtgauge-net-{index}"))
                .spawn_scoped(scope, move || worker(plan, index, stop, go, t0_cell));
            match h {
                Ok(h) => handles.push(h),
                Err(source) => {
                    // The threads already started see the stop flag and end at once.
                    stop.set();
                    failed = Some(ProbeError::Spawn {
                        index,
                        cause: source,
                    });
                    break;
                }
            }
        }
        go.store(true, Ordering::Release);
        let mut out: Vec<Result<Part, ProbeError>> = handles
            .into_iter()
            .enumerate()
            .map(|(index, h)| {
                h.join().unwrap_or_else(|_| {
                    Err(ProbeError::Thread {
                        index,
                        reason: "panicked".into(),
                    })
                })
            })
            .collect();
        if let Some(e) = failed {
            out.push(Err(e));
        }
        out
    });
    let t_end = now_ns(ClockId::Monotonic);
    let t0 = t0_cell.get().copied().unwrap_or(t_end);
    let elapsed_ns = t_end.saturating_sub(t0).max(1);
    let secs = (elapsed_ns.div_ceil(1_000_000_000) as usize).max(1);
    let mut all = Tally::new(secs);
    let (mut in_flight_at_end, mut unpinned) = (0, Vec::new());
    let (mut scheduled, mut missed_starts) = (0, 0);
    for p in parts {
        let p = p?;
        all.merge(&p.tally);
        in_flight_at_end += p.in_flight;
        scheduled += p.scheduled;
        missed_starts += p.missed;
        if !p.pinned {
            unpinned.push(p.cpu);
        }
    }
    Ok(ClientOutcome {
        elapsed_ns,
        connections: all.connections,
        transactions: all.transactions,
        bytes: all.bytes,
        errors: all.errors,
        connect: all.connect.stats(),
        ttfb: all.ttfb.stats(),
        total: all.total.stats(),
        per_second: all.per_second,
        in_flight_at_end,
        unpinned,
        scheduled,
        missed_starts,
    })
}

//! The packet-latency receiver's state: the sliding window of sequence numbers, the counts, the
//! recorders of each stage and the late and slowest packets, all allocated before the start so that
//! taking a packet allocates nothing.

use super::{touch, wire, NetLatencyPlan, Schedule};
use crate::recorder::LatencyRecorder;
use crate::rt;
use rtgauge_model::net_latency::{
    LatePacket, MAX_LATE_PACKETS, WATCH_WINDOW, WINDOW, WORST_PACKETS,
};
use wire::Packet;

/// Stale packets in a row after which a watched stream's sender is taken to have started again with a
/// clock behind its old run's (a rebooted host's CLOCK_MONOTONIC), so that no packet looks sent after the
/// highest.
const RESTART_AFTER_STALE: u64 = 64;

/// The shortest time between two sends a watched stream's numbers are taken to allow, ns (10 million
/// packets/s): a jump beyond what the sender's clock allows is not the stream's numbering.
const FASTEST_SEND_NS: u64 = 100;

/// The receiver's counts and recorders, all allocated before the start.
pub(super) struct RxState {
    /// Sequence numbers the run can use; one at or beyond it is not of this stream.
    pub(super) capacity: u64,
    pub(super) schedule: Schedule,
    /// One bit per sequence number of `[base, base + WINDOW)`, at `seq % WINDOW`: received.
    pub(super) window: Vec<u64>,
    /// The lowest sequence number not yet settled (received or lost).
    pub(super) base: u64,
    /// Settled and never received, per counting interval (refused sends among them), and in all.
    pub(super) unseen_in: Vec<u64>,
    pub(super) unseen: u64,
    /// A watched stream ([`RxState::following`]): numbers count from the first packet received, and again
    /// from a restarted sender's; with the send time (the sender's CLOCK_MONOTONIC, which no clock step
    /// moves) of the highest packet, which tells a restart from a late packet, and the restarts seen.
    pub(super) follow: bool,
    pub(super) top_sent_mono_ns: u64,
    pub(super) restarts: u64,
    /// Stale packets in a row.
    pub(super) stale_run: u64,
    /// Receive calls that failed other than for want of a packet, and the first one's errno.
    pub(super) receive_errors: u64,
    pub(super) receive_error: Option<i32>,
    /// Arrived after their number was settled.
    pub(super) stale: u64,
    pub(super) received: u64,
    pub(super) duplicates: u64,
    pub(super) reordered: u64,
    pub(super) foreign: u64,
    pub(super) late: u64,
    pub(super) highest: Option<u64>,
    pub(super) latency: LatencyRecorder,
    pub(super) path: LatencyRecorder,
    pub(super) wakeup: LatencyRecorder,
    /// Packets received without a kernel timestamp.
    pub(super) unstamped: u64,
    /// Per timeline interval (by scheduled send time): packets received and the worst latency.
    pub(super) interval_count: Vec<u64>,
    pub(super) interval_max: Vec<u64>,
    pub(super) late_packets: Vec<LatePacket>,
    pub(super) late_dropped: u64,
    /// The slowest packets so far, and the latency a packet must exceed to join them once they are full.
    pub(super) worst: Vec<LatePacket>,
    pub(super) worst_floor: u64,
    pub(super) timestamps_error: Option<String>,
}

impl RxState {
    pub(super) fn new(plan: &NetLatencyPlan, capacity: u64) -> RxState {
        // At least a word: a send-only run's empty state never settles, but must not divide by 0.
        let words = (WINDOW.min(capacity.next_multiple_of(64)) / 64).max(1);
        RxState::with_window(plan, capacity, words as usize, false)
    }

    /// A stream watched for as long as it runs (`rtgauge monitor`): any sequence number, counted from the
    /// first packet received (and again from a restarted sender's), in a window of [`WATCH_WINDOW`].
    pub(super) fn following(plan: &NetLatencyPlan) -> RxState {
        // Numbers from 2^62 on are not the stream's: far beyond any sender's, and no sum overflows.
        RxState::with_window(plan, 1 << 62, (WATCH_WINDOW / 64) as usize, true)
    }

    fn with_window(plan: &NetLatencyPlan, capacity: u64, words: usize, follow: bool) -> RxState {
        let schedule = plan.schedule();
        let intervals = schedule.intervals;
        let mut s = RxState {
            capacity,
            schedule,
            window: vec![0; words],
            base: 0,
            unseen_in: vec![0; intervals],
            unseen: 0,
            follow,
            top_sent_mono_ns: 0,
            restarts: 0,
            stale_run: 0,
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
    pub(super) fn window_len(&self) -> u64 {
        self.window.len() as u64 * 64
    }

    /// Settle every sequence number below `to`: those never received counted in their interval.
    #[inline]
    pub(super) fn settle(&mut self, to: u64) {
        let len = self.window_len();
        if self.follow && to > self.base + len {
            // A watched stream's numbers are unbounded: beyond the window nothing was marked, so what lies
            // there is counted at once (in its one interval), not number by number.
            let beyond = to - (self.base + len);
            self.settle(self.base + len);
            self.unseen = self.unseen.saturating_add(beyond);
            let last = &mut self.unseen_in[self.schedule.intervals - 1];
            *last = last.saturating_add(beyond);
            self.base = to;
            return;
        }
        while self.base < to {
            let at = self.base % len;
            let (w, b) = ((at / 64) as usize, 1u64 << (at % 64));
            if self.window[w] & b == 0 {
                self.unseen_in[self.schedule.interval(self.base)] += 1;
                self.unseen += 1;
            }
            self.window[w] &= !b;
            self.base += 1;
        }
    }

    /// Start counting again at `seq`: a watched stream's first packet, or a restarted sender's (what the
    /// old run left unsettled is lost: its sender is gone).
    fn anchor(&mut self, seq: u64) {
        self.stale_run = 0;
        if let Some(h) = self.highest.take() {
            self.settle(h + 1);
            self.restarts += 1;
        }
        self.window.fill(0);
        self.base = seq;
    }

    /// A watched stream's packet before it is counted: whether it is the stream's numbering to count (a
    /// restart starts the count again at it), else counted `foreign`.
    /// - The first packet starts the count.
    /// - One numbered at or below the highest but sent after it is a restarted sender's (a reordered or
    ///   duplicated packet was sent before it); so is one sent before it after [`RESTART_AFTER_STALE`]
    ///   stale packets in a row (a sender whose clock is behind its old run's).
    /// - One numbered above the highest but sent before it is the old run's, late after a restart (its
    ///   number is the new run's, to come); one further above than the sender's clock allows at
    ///   [`FASTEST_SEND_NS`] is not the stream's numbering (another sender on the same stream id).
    #[inline]
    fn follows(&mut self, p: &Packet) -> bool {
        let Some(h) = self.highest else {
            self.anchor(p.seq);
            return true;
        };
        let top = self.top_sent_mono_ns;
        let restart = match p.sent_mono_ns.cmp(&top) {
            std::cmp::Ordering::Greater => p.seq <= h,
            std::cmp::Ordering::Less => p.seq <= h && self.stale_run >= RESTART_AFTER_STALE,
            std::cmp::Ordering::Equal => false,
        };
        if restart {
            self.anchor(p.seq);
            return true;
        }
        let allowed =
            (p.sent_mono_ns.saturating_sub(top) / FASTEST_SEND_NS).saturating_add(WATCH_WINDOW);
        if p.seq > h && (p.sent_mono_ns < top || p.seq - h > allowed) {
            self.foreign += 1;
            return false;
        }
        true
    }

    /// Account for one datagram received at `user_ns` (CLOCK_REALTIME) with the kernel's timestamp; the
    /// send time is the packet's CLOCK_REALTIME, or with `peer_shift` its CLOCK_MONOTONIC put on ours.
    /// A packet counted as received gives back its latency and, with a kernel timestamp, its split
    /// (path, wake-up).
    #[inline]
    pub(super) fn take(
        &mut self,
        data: &[u8],
        stream: u32,
        (user_ns, kernel_ns): (u64, Option<u64>),
        peer_shift: Option<i64>,
        deadline: Option<u64>,
    ) -> Option<(u64, Option<(u64, u64)>)> {
        let Some(p) = Packet::read(data, stream).filter(|p| p.seq < self.capacity) else {
            self.foreign += 1;
            return None;
        };
        if self.follow && !self.follows(&p) {
            return None;
        }
        if p.seq < self.base {
            self.stale += 1;
            self.stale_run += 1;
            return None;
        }
        let len = self.window_len();
        if p.seq >= self.base + len {
            self.settle(p.seq + 1 - len);
        }
        let at = p.seq % len;
        let (word, bit) = ((at / 64) as usize, 1u64 << (at % 64));
        if self.window[word] & bit != 0 {
            self.duplicates += 1;
            return None;
        }
        self.window[word] |= bit;
        self.received += 1;
        self.stale_run = 0;
        match self.highest {
            Some(h) if p.seq < h => self.reordered += 1,
            _ => {
                self.highest = Some(p.seq);
                self.top_sent_mono_ns = p.sent_mono_ns;
            }
        }
        let sent = match peer_shift {
            Some(d) => {
                (i128::from(p.sent_mono_ns) + i128::from(d)).clamp(0, u64::MAX as i128) as u64
            }
            None => p.sent_realtime_ns,
        };
        let latency = user_ns.saturating_sub(sent);
        self.latency.record(latency);
        let split = kernel_ns.map(|k| (k.saturating_sub(sent), user_ns.saturating_sub(k)));
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
            return Some((latency, split));
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
        Some((latency, split))
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

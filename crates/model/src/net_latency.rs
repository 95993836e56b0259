//! Result of the packet-latency probe (`rtgauge net latency`): a periodic stream of UDP datagrams, each
//! carrying its sequence number and send time, from a pinned sender to a pinned receiver (one-way, where
//! both ends read this host's clock: loopback, or network namespaces joined by a veth pair) or back through
//! a reflector (round trip).
//!
//! Each packet's latency splits at the kernel's receive timestamp (`SO_TIMESTAMPING`, software RX) into
//! the **path** (send → the kernel took the packet in) and the **wake-up** (the kernel took it in → the
//! receiving thread had it). The sender's own lateness against its schedule is kept apart, so that sender
//! jitter is never charged to the path.
//!
//! Invariants: `received + lost == sent` once the receiver has drained; the timeline's `missed` add up
//! to `lost`; a duplicate or a packet of another stream is never counted as received; `reordered ≤
//! received`; `late ≤ received`. The receiver tells sequence numbers apart in a sliding window of 4,194,304
//! (512 KiB, whatever the run's length), so a week-long stream costs what a minute's does.

use crate::kind::StopReason;
use crate::latency::{LatencyStats, TimelineEntry};
use crate::rt::{ProcessConditions, ThreadConditions};
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// How the receiving thread waits for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RxMode {
    /// Blocks in `recvmsg` until the kernel wakes it (interrupt-driven, as most applications).
    Block,
    /// Spins on a non-blocking `recvmsg` (the poll-mode driver's way: no wake-up, a whole CPU).
    Poll,
}

impl RxMode {
    /// The name used on the command line and in documents.
    pub fn as_str(self) -> &'static str {
        match self {
            RxMode::Block => "block",
            RxMode::Poll => "poll",
        }
    }
}

/// How the probe was configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetLatencyConfig {
    /// Where packets are sent, `IP:PORT`: the receiver's own address as asked (one-way; port 0: any) or a
    /// reflector's; for frames, `TX_DEV → RX_DEV`.
    pub target: String,
    /// Round trip through a reflector at `target` (else one-way to a receiver this probe binds there).
    pub round_trip: bool,
    /// Packets per second offered.
    pub rate_per_s: f64,
    /// Packets sent back to back at each period (the rate counts packets, not bursts).
    pub burst: u32,
    /// UDP payload bytes.
    pub size: u32,
    /// The sender's CPU (`None`: not pinned).
    pub tx_cpu: Option<u32>,
    /// The receiver's CPU (`None`: not pinned).
    pub rx_cpu: Option<u32>,
    /// SCHED_FIFO priority of both threads (`None`: SCHED_OTHER).
    pub rtprio: Option<i32>,
    /// How the receiver waits.
    pub rx_mode: RxMode,
    /// Network namespace the sender's socket lives in (`None`: rtgauge's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_netns: Option<String>,
    /// Network namespace the receiver's socket lives in (one-way only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_netns: Option<String>,
    /// Raw Ethernet frames instead of UDP datagrams (`None`: UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethernet: Option<EthernetConfig>,
    /// A packet received this long or more after it was sent counts as late (the overflow of a deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// How long the sender sends.
    #[serde(rename = "duration_ns")]
    pub duration: Nanos,
    /// How long the receiver waits for stragglers once the sender stopped, ns.
    pub drain_ns: u64,
    /// Length of one timeline interval, ns.
    pub timeline_interval_ns: u64,
    /// Which end(s) of the stream this run is.
    #[serde(default, skip_serializing_if = "StreamRole::is_both")]
    pub role: StreamRole,
    /// The stream id both ends of a split stream use (`None`: a random one, both ends in this run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
    /// Receive only: the channel the sender's clock was read through (its `rtgauge vm clock-serve`);
    /// `None`: both ends' CLOCK_REALTIME, taken to agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_clock: Option<String>,
    /// Receive only: how long to wait for the stream's first packet, ns; from it the run lasts the
    /// stream's duration (`duration_ns`, the sender's) and the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_ns: Option<u64>,
}

/// Which end(s) of the stream a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamRole {
    /// Sender and receiver, in this run (one clock).
    #[default]
    Both,
    /// Only the sender: the receiver is another rtgauge (a guest, another host), with the same stream id.
    Send,
    /// Only the receiver: the sender is another rtgauge; the one-way latency needs the two clocks (the
    /// sender's read through `rtgauge vm`'s clock channel, or both CLOCK_REALTIME as synchronised as they
    /// are).
    Receive,
}

impl StreamRole {
    /// Whether it is [`StreamRole::Both`] (the default, not written).
    pub fn is_both(&self) -> bool {
        *self == StreamRole::Both
    }
}

/// Raw Ethernet frames (`AF_PACKET`): a Sampled Values-like stream, one interface at each end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EthernetConfig {
    /// The interface the sender puts frames on (in its namespace).
    pub tx_dev: String,
    /// The interface the receiver takes them from (in its namespace); frames go to its MAC address.
    pub rx_dev: String,
    /// The frames' EtherType (0x88BA: IEC 61850-9-2 Sampled Values).
    pub ethertype: u16,
    /// The 802.1Q tag's VLAN id, where tagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// The tag's priority (PCP), where tagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<u8>,
    /// The MAC address frames go to: a multicast group the receiver subscribes its interface to (Sampled
    /// Values: 01:0C:CD:04:xx:xx), or a unicast address (`None`: the receiving interface's, broadcast for
    /// a send-only run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_mac: Option<String>,
}

/// What the kernel's timestamps were, over the packets (received, or sent for `tx_timestamps`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum KernelStamps {
    /// Software timestamps (taken as the packet entered the receive stack, or as the driver took it to
    /// send), on every packet.
    Software,
    /// On some packets only: the others have no split there.
    Partial {
        /// Packets without one.
        missing: u64,
    },
    /// None: the split is unknown.
    Unavailable {
        /// Why (the socket option refused, or no packet carried one).
        reason: String,
    },
}

/// One packet that reached the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LatePacket {
    /// Its sequence number.
    pub seq: u64,
    /// When it was sent, ns after the first packet's scheduled time.
    pub sent_ns: u64,
    /// Its latency (one-way or round trip), ns.
    pub latency_ns: u64,
    /// Send → kernel receive, ns, where the kernel timestamped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_ns: Option<u64>,
    /// Kernel receive → receiving thread, ns, where the kernel timestamped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeup_ns: Option<u64>,
    /// CLOCK_MONOTONIC when the receiving thread had it, ns (the trace's clock: where `--trace` looks).
    #[serde(default)]
    pub received_mono_ns: u64,
}

impl LatePacket {
    /// The stage to explain and its window (CLOCK_MONOTONIC ns): `(true, …)` for the wake-up (kernel
    /// receive → thread, on the receiver's CPU), `(false, …)` for the path (send → kernel receive) when it
    /// took longer and `local_path` says the sender's CPU carried the packet through the stack (one-way
    /// on one host; a round trip's path crosses the reflector, whose CPUs are not traced). Without the
    /// split, the whole latency as the wake-up's.
    pub fn longest_stage(&self, local_path: bool) -> (bool, u64, u64) {
        let end = self.received_mono_ns;
        match (self.path_ns, self.wakeup_ns) {
            (Some(p), Some(w)) if p > w && local_path => {
                let kernel = end.saturating_sub(w);
                (false, kernel.saturating_sub(p), kernel)
            }
            (_, Some(w)) => (true, end.saturating_sub(w), end),
            _ => (true, end.saturating_sub(self.latency_ns), end),
        }
    }
}

/// Most of the slowest packets a result keeps whatever the deadline (for `--trace` to explain).
pub const WORST_PACKETS: usize = 16;

/// Sequence numbers the receiver tells apart at once (a power of two, a multiple of 64): a packet is lost
/// once one this many later has arrived, or at the end; one arriving even later is `stale` (late beyond
/// reordering, or a duplicate of a finished one: not told apart). 4,194,304 packets: 17 minutes at 4,000/s,
/// 512 KiB of bits whatever the run's length.
pub const WINDOW: u64 = 1 << 22;

/// Sequence numbers a watched stream (`rtgauge monitor --net-bind`) tells apart at once: a packet is
/// lost once one this many later has arrived, or after [`WATCH_SILENCE_NS`] without a packet. 8,192: 2 s
/// at 4,000/s, so that the loss counter lags by seconds, not the probe's 17 minutes.
pub const WATCH_WINDOW: u64 = 1 << 13;

/// A watched stream silent this long settles every sequence number up to the highest received (lost if
/// never received), ns.
pub const WATCH_SILENCE_NS: u64 = 1_000_000_000;

/// A watched stream's counts since the watch started: what `rtgauge monitor` exports per stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounts {
    /// Send → the receiving thread had it.
    pub latency: crate::latency::BucketCounts,
    /// Send → the kernel took it in (packets with a kernel receive timestamp).
    pub path: crate::latency::BucketCounts,
    /// The kernel took it in → the receiving thread had it.
    pub wakeup: crate::latency::BucketCounts,
    /// Packets of the stream received (duplicates not counted).
    pub received: u64,
    /// Sequence numbers settled and never received (see [`WATCH_WINDOW`]).
    pub lost: u64,
    /// Arrived after their number was counted lost.
    pub stale: u64,
    /// Received after a higher-numbered packet.
    pub reordered: u64,
    /// Received again.
    pub duplicates: u64,
    /// Datagrams on the port that are not of the stream, or not of its sender's current run (numbered
    /// beyond what its clock allows, or an old run's arriving late).
    pub foreign: u64,
    /// Received at or above the gate.
    pub above_gate: u64,
    /// The sender started again (a packet numbered at or below the highest, sent after it): the count
    /// starts again from its number.
    pub restarts: u64,
    /// Receive calls that failed other than for want of a packet.
    pub receive_errors: u64,
    /// When the last packet was received, Unix time, ns (0: none yet).
    pub last_unix_ns: u64,
}

/// Most late packets a result keeps (the first ones); beyond it they are only counted
/// (`late_packets_dropped`).
pub const MAX_LATE_PACKETS: usize = 4096;

/// The whole probe. (The configuration, the process's conditions and the stages' distributions are boxed: the result is one variant of the run document's
/// probe list, whose size is its largest variant's.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetLatencyResult {
    /// How the probe was configured.
    pub config: Box<NetLatencyConfig>,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// The address the receiver bound (one-way UDP), with the port the kernel picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// From the first scheduled send to the last, ns.
    pub elapsed_ns: u64,
    /// Packets sent (a send the kernel refused is counted in `send_errors`, not here).
    pub sent: u64,
    /// Sends the kernel refused: those sequence numbers never left.
    pub send_errors: u64,
    /// Why the first refused send was refused (the errno's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_error: Option<String>,
    /// Packets of the schedule never sent: the duration ran out while the sender was behind (it catches up
    /// with back-to-back sends until 100 ms past the duration).
    #[serde(default)]
    pub unsent: u64,
    /// Receive calls that failed other than for want of a packet.
    #[serde(default)]
    pub receive_errors: u64,
    /// Why the first of them failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_error: Option<String>,
    /// Distinct packets of this stream received.
    pub received: u64,
    /// Packets sent and never received (`sent − received`; the stale ones among them).
    pub lost: u64,
    /// Packets that arrived more than [`WINDOW`] sequence numbers after their turn, once counted
    /// lost: late beyond any reordering, or duplicates of settled ones (not told apart).
    #[serde(default)]
    pub stale: u64,
    /// Packets received after one with a higher sequence number.
    pub reordered: u64,
    /// Packets received a second time (not counted in `received`).
    pub duplicates: u64,
    /// Datagrams that were not of this stream (wrong size or tag), ignored.
    pub foreign: u64,
    /// Packets whose latency reached `config.deadline_ns`.
    pub late: u64,
    /// The sender's lateness against its schedule (absolute-time sleeps), ns: its own jitter, not the path's.
    pub send_lateness: Box<LatencyStats>,
    /// Send → receiving thread (one-way, or round trip through the reflector).
    pub latency: Box<LatencyStats>,
    /// Send → kernel receive timestamp, where the kernel gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Box<LatencyStats>>,
    /// Kernel receive timestamp → receiving thread, where the kernel gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeup: Option<Box<LatencyStats>>,
    /// What the kernel's receive timestamps were.
    pub timestamps: KernelStamps,
    /// The sender's send → the kernel's software transmit timestamp (taken as the driver hands the packet
    /// to the device): the sender's own stack, qdisc included, which is part of the path. Where the kernel
    /// gave one (documents before it have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_stack: Option<Box<LatencyStats>>,
    /// What the kernel's transmit timestamps were (`None`: a document from before they were asked for, or
    /// a receive-only run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_timestamps: Option<KernelStamps>,
    /// Per interval (by send time): packets received, their worst latency, packets lost in it (`missed`).
    pub timeline: Vec<TimelineEntry>,
    /// Length of one timeline entry, ns (doubles past `latency::MAX_TIMELINE` entries).
    pub timeline_span_ns: u64,
    /// Packets at or above the deadline, in order sent (at most [`MAX_LATE_PACKETS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_packets: Vec<LatePacket>,
    /// Late packets beyond [`MAX_LATE_PACKETS`], counted only.
    #[serde(default)]
    pub late_packets_dropped: u64,
    /// The slowest packets of the run, slowest first (at most [`WORST_PACKETS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worst: Vec<LatePacket>,
    /// Counters and, with `--trace`, what ran on the sender's and the receiver's CPUs during the slowest
    /// packets' longest stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::attribution::Why>,
    /// The sender's scheduling, priority and CPU, as asked and as got.
    pub sender: ThreadConditions,
    /// The receiver's.
    pub receiver: ThreadConditions,
    /// Memory locking and the other process-wide conditions.
    pub process: Box<ProcessConditions>,
    /// CPU time of the sender thread over the run, ns.
    pub sender_cpu_ns: u64,
    /// CPU time of the receiver thread over the run, ns.
    pub receiver_cpu_ns: u64,
    /// How far CLOCK_REALTIME moved against CLOCK_MONOTONIC during the run, ns (a step or a slew; the
    /// send times and the kernel's timestamps are CLOCK_REALTIME, so a step falsifies the figures across
    /// it).
    pub realtime_moved_ns: i64,
    /// Background load while it measured (`--load`, `--load-cmd`), as achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadResult>,
    /// Receive only: the sender's clock as this receiver put its send times on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Box<crate::vm::PeerClock>>,
    /// Receive only on the sender's clock: the figures of [`NetLatencyResult::unresolved_figures`] (those
    /// within the clock's bound, which cannot tell them from 0), as `stage.statistic` (`latency.p50`,
    /// `path.min`). Set once the clock is known, for readers of the document; the views compute it again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<String>,
}

/// The statistics of a stage that the views print, with how to read each from its distribution.
pub const STAGE_FIGURES: [&str; 5] = ["min", "p50", "p99", "p99.9", "max"];

impl NetLatencyResult {
    /// The bound of the clock the one-way figures were measured on, where they were measured on another
    /// host's clock (receive only with a bound): each such figure lies within ± this of the true latency.
    pub fn clock_bound_ns(&self) -> Option<u64> {
        if self.config.role != StreamRole::Receive || self.config.round_trip {
            return None;
        }
        self.clock.as_deref().and_then(|c| c.bound_ns)
    }

    /// Whether a one-way figure of the latency or its path (both end on this host's clock, start on the
    /// sender's) is within the clock's bound: the true latency is then anywhere from 0 to the figure plus
    /// the bound, and the figure says no more than that.
    pub fn is_unresolved(&self, value_ns: u64) -> bool {
        crate::units::unresolved_upper(value_ns, self.clock_bound_ns()).is_some()
    }

    /// The figures ([`STAGE_FIGURES`] of the latency and its path) within the clock's bound.
    pub fn unresolved_figures(&self) -> Vec<String> {
        let mut out = Vec::new();
        let stages = [
            ("latency", Some(&*self.latency)),
            ("path", self.path.as_deref()),
        ];
        for (stage, stats) in stages {
            let Some(s) = stats.filter(|s| s.count > 0) else {
                continue;
            };
            for name in STAGE_FIGURES {
                if self.is_unresolved(stage_figure(s, name)) {
                    out.push(format!("{stage}.{name}"));
                }
            }
        }
        out
    }

    /// Packets per second actually sent.
    pub fn sent_per_s(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.sent as f64 * 1e9 / self.elapsed_ns as f64
        }
    }

    /// Where the packets went: the receiver's bound address, else the configured target.
    pub fn destination(&self) -> &str {
        self.bound.as_deref().unwrap_or(&self.config.target)
    }

    /// "one-way" or "round trip".
    pub fn direction(&self) -> &'static str {
        if self.config.round_trip {
            "round trip"
        } else {
            "one-way"
        }
    }

    /// CPU time per 1,000 packets/s offered, as a fraction of one CPU: (sender, receiver).
    pub fn cpu_per_kpps(&self) -> (f64, f64) {
        let rate = self.sent_per_s();
        if rate <= 0.0 || self.elapsed_ns == 0 {
            return (0.0, 0.0);
        }
        // The thread's share of the run's wall time, per thousand packets per second.
        let share = |cpu_time: u64| cpu_time as f64 / self.elapsed_ns as f64;
        let per_kpps = 1000.0 / rate;
        (
            share(self.sender_cpu_ns) * per_kpps,
            share(self.receiver_cpu_ns) * per_kpps,
        )
    }
}

/// Statistic `name` of [`STAGE_FIGURES`] of a stage's distribution, ns (a percentile past the histogram's
/// reach reads as the max).
pub fn stage_figure(s: &crate::latency::LatencyStats, name: &str) -> u64 {
    match name {
        "min" => s.min_ns,
        "max" => s.max_ns,
        p => p
            .strip_prefix('p')
            .and_then(|q| q.parse::<f64>().ok())
            .and_then(|q| s.percentile(q))
            .unwrap_or(s.max_ns),
    }
}

//! The packet-latency probe (`rtgauge net latency`) in every view: its terminal summary (counts, the
//! latency and its two stages side by side, the sender's own lateness, the worst intervals and the late
//! packets), its section of the run page, and its shortfalls (timestamps missing, the clock moved, send
//! errors, late packets not kept).

use super::KindView;
use crate::text::TextOptions;
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::latency::LatencyStats;
use rtgauge_model::net_latency::{
    stage_figure, KernelStamps, NetLatencyResult, StreamRole, MAX_LATE_PACKETS, STAGE_FIGURES,
};
use rtgauge_model::units::{unresolved_upper, us, us_f64};
use rtgauge_model::vm::PeerClock;
use std::fmt::Write as _;

/// Most late packets listed on the terminal.
const LATE_SHOWN: usize = 10;

fn row(name: &str, s: &LatencyStats) -> String {
    stage_row(name, s, None)
}

/// A stage's row; with `bound` (the one-way figures on another host's clock), a figure within it is shown
/// as what it says: "≤ figure + bound" (the true latency anywhere from 0 to that).
fn stage_row(name: &str, s: &LatencyStats, bound: Option<u64>) -> String {
    let mut out = format!("  {name:<28}");
    for figure in STAGE_FIGURES {
        let v = stage_figure(s, figure);
        // No space after "≤": the cell is 9 wide.
        let cell = match unresolved_upper(v, bound) {
            Some(most) => format!("≤{:.1}", us(most)),
            None => format!("{:.1}", us(v)),
        };
        let _ = write!(out, " {cell:>9}");
    }
    let _ = writeln!(out, " {:>10}", s.count);
    out
}

/// The line under the table that says what "≤" means, where a figure is unresolved.
fn unresolved_line(r: &NetLatencyResult) -> Option<String> {
    let b = r.clock_bound_ns()?;
    (!r.unresolved_figures().is_empty()).then(|| {
        format!(
            "  ≤: within the clock's ± {:.1} µs, unresolved by the clock: the latency lies anywhere from 0 to the figure shown",
            us(b)
        )
    })
}

/// Who ran where, and for a split stream which end this is: `false` when nothing more is this run's to
/// show (send only: the receiving run has the rest).
fn ends(r: &NetLatencyResult, s: &mut String) -> bool {
    let c = &r.config;
    let cpu = |c: Option<u32>| c.map_or("not pinned".to_string(), |c| format!("CPU {c}"));
    let policy = match c.rtprio {
        Some(p) => format!("SCHED_FIFO {p} asked"),
        None => "SCHED_OTHER".to_string(),
    };
    let stream = c.stream.unwrap_or(0);
    match c.role {
        StreamRole::Both => {
            let _ = writeln!(
                s,
                "  sender {}, receiver {} ({}), {policy}",
                cpu(r.sender.cpu.achieved),
                cpu(r.receiver.cpu.achieved),
                c.rx_mode.as_str(),
            );
        }
        StreamRole::Send => {
            let _ = writeln!(
                s,
                "  send only (stream {stream}): sent {} ({:.0}/s), sender {}, {policy}; the receiving run has the latency, loss and order",
                r.sent,
                r.sent_per_s(),
                cpu(r.sender.cpu.achieved),
            );
            s.push_str(&row("sender lateness (its own)", &r.send_lateness));
            send_stack(r, "sender stack (→ driver)", s);
            return false;
        }
        StreamRole::Receive => {
            let _ = writeln!(
                s,
                "  receive only (stream {stream}): receiver {} ({}), {policy}; sent = up to the highest sequence number received (the sending run has its count)",
                cpu(r.receiver.cpu.achieved),
                c.rx_mode.as_str(),
            );
            let _ = writeln!(s, "  {}", clock_line(r));
        }
    }
    true
}

/// The sender's own stack (send → the driver's transmit timestamp), the first part of the path; or why
/// it is unknown.
fn send_stack(r: &NetLatencyResult, label: &str, s: &mut String) {
    match (&r.send_stack, &r.tx_timestamps) {
        (Some(st), _) => s.push_str(&row(label, st)),
        (None, Some(KernelStamps::Unavailable { reason })) => {
            let _ = writeln!(s, "    no send-stack split: {reason}");
        }
        _ => {}
    }
}

/// The terminal summary.
pub fn render(r: &NetLatencyResult) -> String {
    let c = &r.config;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nnet latency, {} to {} — {:.0} packets/s offered ({} per burst), {} B, {:.1} s",
        r.direction(),
        r.destination(),
        c.rate_per_s,
        c.burst,
        c.size,
        r.elapsed_ns as f64 / 1e9
    );
    if let Some(e) = &c.ethernet {
        let vlan = e.vlan.map_or(String::new(), |v| {
            format!(", VLAN {v} priority {}", e.pcp.unwrap_or(0))
        });
        let _ = writeln!(
            s,
            "  raw Ethernet frames (AF_PACKET), EtherType 0x{:04x}{vlan}",
            e.ethertype
        );
    }
    if !ends(r, &mut s) {
        return s;
    }
    let _ = writeln!(
        s,
        "  sent {} ({:.0}/s), received {}, lost {}, reordered {}, duplicates {}{}{}",
        r.sent,
        r.sent_per_s(),
        r.received,
        r.lost,
        r.reordered,
        r.duplicates,
        if r.send_errors > 0 {
            format!(", send errors {}", r.send_errors)
        } else {
            String::new()
        },
        if r.foreign > 0 {
            format!(", foreign datagrams {}", r.foreign)
        } else {
            String::new()
        },
    );
    if r.stale > 0 {
        let _ = writeln!(
            s,
            "  {} packets arrived more than {} packets after their turn (counted lost; a duplicate of one that old is counted with them)",
            r.stale,
            rtgauge_model::net_latency::WINDOW
        );
    }
    if let Some(d) = c.deadline_ns {
        let _ = writeln!(
            s,
            "  late (≥ {:.1} µs deadline): {} of {} received",
            us(d),
            r.late,
            r.received
        );
    }
    let _ = writeln!(
        s,
        "  {:<28} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "µs", "min", "p50", "p99", "p99.9", "max", "packets"
    );
    let bound = r.clock_bound_ns();
    s.push_str(&stage_row(
        &format!("latency ({})", r.direction()),
        &r.latency,
        bound,
    ));
    match (&r.path, &r.wakeup) {
        (Some(p), Some(w)) => {
            s.push_str(&stage_row("  path (send → kernel)", p, bound));
            if c.role == StreamRole::Both {
                send_stack(r, "    of it, sender stack", &mut s);
            }
            s.push_str(&row("  wake-up (kernel → thread)", w));
        }
        _ => {
            if let KernelStamps::Unavailable { reason } = &r.timestamps {
                let _ = writeln!(s, "  no path/wake-up split: {reason}");
            }
        }
    }
    if c.role == StreamRole::Both {
        s.push_str(&row("sender lateness (its own)", &r.send_lateness));
    }
    if let Some(l) = unresolved_line(r) {
        let _ = writeln!(s, "{l}");
    }
    let (tx, rx) = r.cpu_per_kpps();
    let sender = match c.role {
        StreamRole::Both => format!("sender {:.2} %, ", tx * 100.0),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "  cost: {sender}receiver {:.2} % of a CPU per 1,000 packets/s",
        rx * 100.0
    );
    s.push_str(&where_late(r));
    s
}

/// What a receive-only run's figures rest on and fell short of: no sender's clock at all, a bound not well
/// below the deadline, exchanges that mostly failed. (`net latency` attaches the clock after the probe, so
/// it adds these to the warnings it already has.)
pub fn clock_shortfalls(r: &NetLatencyResult) -> Vec<String> {
    let mut w = Vec::new();
    if r.config.role != StreamRole::Receive {
        return w;
    }
    if r.config.peer_clock.is_none() {
        w.push(
            "net latency: receive only without --clock: the send times are the sender's CLOCK_REALTIME taken as this one's; the one-way figures are as right as the two clocks agree (unknown here)"
                .to_string(),
        );
    }
    let Some(c) = r.clock.as_deref() else {
        return w;
    };
    if let (Some(b), Some(d)) = (c.bound_ns, r.config.deadline_ns) {
        if b.saturating_mul(4) >= d {
            w.push(format!(
                "net latency: the clock's bound ±{:.1} µs is not well below the {:.1} µs deadline: a packet within the bound of it may be counted on the wrong side",
                us(b),
                us(d)
            ));
        }
    }
    if let Some(s) = &c.sync {
        if s.failed * 2 > s.exchanges {
            w.push(format!(
                "net latency: {} of {} clock exchanges failed over {}: the offset was followed from {} bursts only",
                s.failed,
                s.exchanges,
                s.channel,
                s.samples.len()
            ));
        }
    }
    w
}

/// How a receive-only run put the sender's send times on its clock.
pub fn clock_line(r: &NetLatencyResult) -> String {
    match r.clock.as_deref() {
        Some(PeerClock {
            method,
            offset_ns,
            bound_ns: Some(b),
            wander_ns,
            ..
        }) => format!(
            "send times on this clock: {method}; offset {:+.1} µs, each latency ± {:.1} µs (the offset wandered {:.1} µs)",
            us_f64(*offset_ns as f64),
            us(*b),
            us(*wander_ns)
        ),
        Some(p) => format!(
            "send times on this clock: {}; no bound: the figures are as right as the two clocks agree",
            p.method
        ),
        None => "send times: the sender's clock, taken as this one's".to_string(),
    }
}

/// The worst intervals and the latest packets.
fn where_late(r: &NetLatencyResult) -> String {
    let mut s = String::new();
    let mut worst: Vec<_> = r
        .timeline
        .iter()
        .filter(|t| t.count > 0 || t.missed > 0)
        .collect();
    worst.sort_by_key(|t| std::cmp::Reverse((t.max_ns, t.missed)));
    if worst.len() > 1 {
        let _ = writeln!(
            s,
            "  worst intervals ({:.1} s each):",
            r.timeline_span_ns as f64 / 1e9
        );
        for t in worst.iter().take(3) {
            let _ = writeln!(
                s,
                "    at {:>7.1} s: max {:.1} µs over {} packets, {} lost",
                t.start_ns as f64 / 1e9,
                us(t.max_ns),
                t.count,
                t.missed
            );
        }
    }
    if !r.late_packets.is_empty() {
        let mut late: Vec<_> = r.late_packets.iter().collect();
        late.sort_by_key(|p| std::cmp::Reverse(p.latency_ns));
        let _ = writeln!(s, "  latest packets:");
        for p in late.iter().take(LATE_SHOWN) {
            let split = match (p.path_ns, p.wakeup_ns) {
                (Some(a), Some(b)) => format!(" (path {:.1}, wake-up {:.1})", us(a), us(b)),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "    #{} sent at {:.3} s: {:.1} µs{split}",
                p.seq,
                p.sent_ns as f64 / 1e9,
                us(p.latency_ns)
            );
        }
    }
    s
}

impl KindView for NetLatencyResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        format!("Packet latency ({}, net latency)", self.direction())
    }

    fn terminal_section(&self, _facts: &RunFacts, _opts: TextOptions) -> String {
        render(self)
    }

    fn headline(&self) -> Option<(String, u64)> {
        (self.latency.count > 0).then(|| {
            // A max within the clock's bound is judged at the most it can be: max + bound.
            let max = self.latency.max_ns;
            (
                format!("net latency max ({})", self.direction()),
                unresolved_upper(max, self.clock_bound_ns()).unwrap_or(max),
            )
        })
    }

    /// The figures that are not what was asked or are not all there.
    fn shortfalls(&self) -> Vec<String> {
        // The clock first: what every one-way figure of a receive-only run rests on.
        let mut w = clock_shortfalls(self);
        w.extend(crate::shortfalls::process(&self.process));
        match &self.timestamps {
            _ if self.config.role == StreamRole::Send => {}
            KernelStamps::Unavailable { reason } => w.push(format!(
                "net latency: no kernel receive timestamps ({reason}): path and wake-up are not split"
            )),
            KernelStamps::Partial { missing } => w.push(format!(
                "net latency: {missing} packets came without a kernel receive timestamp: the split covers the others"
            )),
            KernelStamps::Software => {}
        }
        match &self.tx_timestamps {
            Some(KernelStamps::Unavailable { reason }) if self.sent > 0 => w.push(format!(
                "net latency: no kernel transmit timestamps ({reason}): the sender's stack is not split off the path"
            )),
            Some(KernelStamps::Partial { missing }) => w.push(format!(
                "net latency: {missing} packets sent came back without a kernel transmit timestamp: the send stack covers the others"
            )),
            _ => {}
        }
        if self.realtime_moved_ns.unsigned_abs() >= 1_000_000 {
            w.push(format!(
                "net latency: CLOCK_REALTIME moved {:.1} ms against CLOCK_MONOTONIC during the run (a step or slew): the send times and kernel timestamps are wall-clock, so latencies across it are off by as much",
                self.realtime_moved_ns as f64 / 1e6
            ));
        }
        if self.send_errors > 0 {
            w.push(format!(
                "net latency: {} sends refused by the kernel, the first with '{}' (not counted as sent or lost)",
                self.send_errors,
                self.send_error.as_deref().unwrap_or("?")
            ));
        }
        if self.unsent > 0 {
            w.push(format!(
                "net latency: the sender fell behind its schedule and {} packets were still unsent when the duration ran out: the rate achieved is {:.0}/s, not {}/s",
                self.unsent,
                self.sent_per_s(),
                self.config.rate_per_s
            ));
        }
        if self.receive_errors > 0 {
            w.push(format!(
                "net latency: {} receive calls failed, the first with '{}'",
                self.receive_errors,
                self.receive_error.as_deref().unwrap_or("?")
            ));
        }
        if self.late_packets_dropped > 0 {
            w.push(format!(
                "net latency: {} late packets beyond the first {MAX_LATE_PACKETS} counted, not listed",
                self.late_packets_dropped
            ));
        }
        if self.sent == 0 && self.send_errors > 0 {
            w.push(format!(
                "net latency: no packet could be sent: '{}'",
                self.send_error.as_deref().unwrap_or("?")
            ));
        }
        if self.config.role == StreamRole::Receive && self.foreign > 0 {
            w.push(format!(
                "net latency: {} datagrams were not of this stream or its schedule (another --stream, or a sequence number beyond --rate × -D here: give both ends the same)",
                self.foreign
            ));
        }
        if self.config.role == StreamRole::Receive && self.received == 0 {
            w.push(format!(
                "net latency: no packet of stream {} arrived at {}: is the sending run going, with --stream {0}?",
                self.config.stream.unwrap_or(0),
                self.destination()
            ));
        }
        if self.received == 0 && self.sent > 0 && self.config.role == StreamRole::Both {
            w.push(format!(
                "net latency: none of the {} packets sent came back: check the {} ({})",
                self.sent,
                if self.config.round_trip {
                    "reflector"
                } else {
                    "receiver's address and namespace"
                },
                self.destination()
            ));
        }
        w
    }
}

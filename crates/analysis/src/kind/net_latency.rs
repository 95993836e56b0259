//! The packet-latency probe's result (`rtgauge net latency`) as [`KindData`]: the latency of each packet
//! and its two stages, the sender's own lateness, and the exact counts (lost, reordered, duplicated, late).

use super::*;
use crate::monitor::{Family, WindowPeaks};
use rtgauge_model::net_latency::{NetLatencyResult, StreamCounts, StreamRole};
use rtgauge_model::units::secs;

impl KindData for NetLatencyResult {
    fields!(load, why, elapsed, settings);

    /// `net.latency.*` (send → receiving thread), `net.latency.path.*` (send → kernel receive),
    /// `net.latency.wakeup.*` (kernel → thread), `net.latency.stack.*` (send → the driver's transmit
    /// timestamp: the sender's own stack, part of the path), `net.latency.send.*` (the sender's lateness
    /// against its schedule), and the counts `net.latency.lost`, `.reordered`, `.duplicates`, `.late`.
    fn measures(&self) -> Vec<Measure> {
        let p = "net.latency";
        let dir = self.direction();
        // The latency and its path start on the sender's clock: within its bound a figure is unresolved.
        let bound = self.clock_bound_ns().map(|b| b as f64);
        let on_peer_clock = |ms: Vec<Measure>| ms.into_iter().map(move |m| m.resolved_by(bound));
        let mut out: Vec<Measure> = on_peer_clock(latency_measures(
            p,
            &format!("packet latency ({dir})"),
            std::iter::once(&*self.latency),
        ))
        .collect();
        if let Some(path) = &self.path {
            out.extend(on_peer_clock(latency_measures(
                &format!("{p}.path"),
                "send to kernel receive",
                std::iter::once(&**path),
            )));
        }
        if let Some(w) = &self.wakeup {
            out.extend(latency_measures(
                &format!("{p}.wakeup"),
                "kernel receive to thread",
                std::iter::once(&**w),
            ));
        }
        if let Some(st) = &self.send_stack {
            out.extend(latency_measures(
                &format!("{p}.stack"),
                "send to the driver (the sender's stack)",
                std::iter::once(&**st),
            ));
        }
        out.extend(latency_measures(
            &format!("{p}.send"),
            "sender lateness",
            std::iter::once(&*self.send_lateness),
        ));
        if self.config.role == StreamRole::Send {
            // The receiving run has the rest.
            return out;
        }
        let count = |key: &str, what: &str, v: u64| {
            Measure::new(
                format!("{p}.{key}"),
                what,
                MeasureUnit::Count,
                v as f64,
                Better::Lower,
            )
        };
        out.push(count("lost", "packets lost", self.lost));
        out.push(count("reordered", "packets reordered", self.reordered));
        out.push(count("duplicates", "packets duplicated", self.duplicates));
        if self.config.deadline_ns.is_some() {
            out.push(count("late", "packets past the deadline", self.late));
        }
        out
    }

    fn stop_reason(&self) -> Option<StopReason> {
        Some(self.stop_reason)
    }

    fn process_conditions(&self) -> Option<&ProcessConditions> {
        Some(&self.process)
    }

    fn thread_conditions(&self) -> Vec<&ThreadConditions> {
        // A split stream's other thread is the other run's.
        match self.config.role {
            StreamRole::Both => vec![&self.sender, &self.receiver],
            StreamRole::Send => vec![&self.sender],
            StreamRole::Receive => vec![&self.receiver],
        }
    }

    fn peer_clock_sync(&self) -> Option<&rtgauge_model::vm::ClockSync> {
        self.clock.as_ref()?.sync.as_ref()
    }

    fn settings_line(&self) -> Option<String> {
        let c = &self.config;
        let cpu = |c: Option<u32>| c.map_or("any".to_string(), |c| c.to_string());
        let sender = format!("sender CPU {}", cpu(c.tx_cpu));
        let receiver = format!("receiver CPU {} ({})", cpu(c.rx_cpu), c.rx_mode.as_str());
        // A split stream's other end is the other run's.
        let ends = match c.role {
            StreamRole::Both => format!("{sender}, {receiver}"),
            StreamRole::Send => format!("send only, {sender}"),
            StreamRole::Receive => format!("receive only, {receiver}"),
        };
        Some(format!(
            "{} to {}, {}/s × {} B, {ends}, {}",
            self.direction(),
            c.target,
            c.rate_per_s,
            c.size,
            c.rtprio
                .map_or("SCHED_OTHER".to_string(), |p| format!("FIFO {p}")),
        ))
    }

    fn export_rows(&self, _facts: &RunFacts) -> Vec<ExportRow<'_>> {
        // One row: the packets' latency, lost packets as "missed", late ones as "over".
        vec![ExportRow {
            probe: "net.latency".into(),
            index: 0,
            cpu: self.config.rx_cpu,
            stats: &self.latency,
            missed: (self.config.role != StreamRole::Send).then_some(self.lost),
            over: self.config.deadline_ns.map(|_| self.late),
        }]
    }
}

impl super::KindTables for NetLatencyResult {
    const GATES: &'static [KindGate<Self>] = &[
        KindGate {
            def: GateDef {
                key: "max",
                stored: "max_ns",
                label: "net latency max",
                unit: GateUnit::Nanos,
                aggregate: Aggregate::Max,
                threshold: false,
                episode_bound: EpisodeBound::Max,
            },
            values: |r, _| {
                if r.latency.count > 0 {
                    vec![r.latency.max_ns]
                } else {
                    Vec::new()
                }
            },
        },
        KindGate {
            def: GateDef {
                key: "lost",
                stored: "lost",
                label: "net latency lost packets",
                unit: GateUnit::Count,
                aggregate: Aggregate::Sum,
                threshold: false,
                episode_bound: EpisodeBound::None,
            },
            // Nothing sent, nothing lost: no data rather than a pass.
            values: |r, _| {
                if r.sent > 0 && r.config.role != StreamRole::Send {
                    vec![r.lost]
                } else {
                    Vec::new()
                }
            },
        },
        KindGate {
            def: GateDef {
                key: "late",
                stored: "late",
                label: "net latency packets past the deadline",
                unit: GateUnit::Count,
                aggregate: Aggregate::Sum,
                threshold: false,
                episode_bound: EpisodeBound::None,
            },
            values: |r, _| {
                if r.config.deadline_ns.is_some() && r.config.role != StreamRole::Send {
                    vec![r.late]
                } else {
                    Vec::new()
                }
            },
        },
    ];
}

/// A watched packet stream (`--net-bind`, `--net-dev`): its counts since the monitor started and the
/// largest latency over the window.
#[derive(Debug, Clone, Default)]
pub struct NetSeries {
    /// The stream id.
    pub stream: u32,
    /// Where it is received (`IP:PORT`, or the interface).
    pub at: String,
    /// Packets at or above it are counted, ns.
    pub gate_ns: u64,
    /// Its counts since the monitor started.
    pub counts: StreamCounts,
    /// Its largest latency per tick over the window.
    pub peaks: WindowPeaks,
}

impl NetSeries {
    /// The stream's series, `rtgauge_net_*`: `net_stream_info{stream,at}`, `net_latency_seconds{stream,
    /// stage}` (total, path, wakeup), `net_latency_window_max_seconds`, `net_packets_{received,lost,stale,
    /// reordered,duplicate,foreign,above_gate}_total`, `net_sender_restarts_total`,
    /// `net_receive_errors_total`, `net_last_packet_timestamp_seconds`, `net_gate_seconds`.
    pub fn families(&self) -> Vec<Family> {
        let c = &self.counts;
        let stream = || vec![("stream", self.stream.to_string())];
        let stage = |name: &str| {
            let mut l = stream();
            l.push(("stage", name.to_string()));
            l
        };
        let mut out = vec![
            Family::gauges(
                "rtgauge_net_stream_info",
                "The watched packet stream: its id and where it is received.",
                [(
                    vec![("stream", self.stream.to_string()), ("at", self.at.clone())],
                    1,
                )],
            ),
            Family::histograms(
                "rtgauge_net_latency_seconds",
                "Packet latency of the watched stream, per stage: total (send to the receiving thread), path (send to the kernel's receive timestamp), wakeup (kernel to thread). Sent on the sender's CLOCK_REALTIME, taken as this host's.",
                [
                    (stage("total"), c.latency),
                    (stage("path"), c.path),
                    (stage("wakeup"), c.wakeup),
                ],
            ),
            Family::gauges_f(
                "rtgauge_net_latency_window_max_seconds",
                "Largest packet latency of the watched stream in the last window (--window).",
                [(stream(), secs(self.peaks.max_ns()))],
            ),
        ];
        for (name, help, value) in [
            ("rtgauge_net_packets_received", "Packets of the watched stream received (duplicates not counted).", c.received),
            ("rtgauge_net_packets_lost", "Packets of the watched stream never received: counted once 8,192 later ones arrived, or after 1 s without a packet.", c.lost),
            ("rtgauge_net_packets_stale", "Packets that arrived after they were counted lost.", c.stale),
            ("rtgauge_net_packets_reordered", "Packets received after a higher-numbered one.", c.reordered),
            ("rtgauge_net_packets_duplicate", "Packets received again.", c.duplicates),
            ("rtgauge_net_packets_foreign", "Datagrams or frames at the watched address that are not of the stream, or not of its sender's current run.", c.foreign),
            ("rtgauge_net_packets_above_gate", "Packets received with a latency at or above the gate (rtgauge_net_gate_seconds).", c.above_gate),
            ("rtgauge_net_sender_restarts", "Times the stream's sender started again (its numbers begin anew).", c.restarts),
            ("rtgauge_net_receive_errors", "Receive calls on the watched socket that failed.", c.receive_errors),
        ] {
            out.push(Family::counters(name, help, [(stream(), value)]));
        }
        out.push(Family::gauges_f(
            "rtgauge_net_last_packet_timestamp_seconds",
            "When the watched stream's last packet was received, Unix time (0 before the first): a silent stream stops moving it.",
            [(stream(), secs(c.last_unix_ns))],
        ));
        out.push(Family::gauges_f(
            "rtgauge_net_gate_seconds",
            "The packet latency bound packets are counted against (--net-gate).",
            [(vec![], secs(self.gate_ns))],
        ));
        out
    }
}

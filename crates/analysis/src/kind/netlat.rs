//! The packet-latency probe's result (`rtgauge net latency`) as [`KindData`]: the latency of each packet
//! and its two stages, the sender's own lateness, and the exact counts (lost, reordered, duplicated, late).

use super::*;
use rtgauge_model::netlat::{NetLatencyResult, StreamRole};

impl KindData for NetLatencyResult {
    fields!(load, why, elapsed, settings);

    /// `net.latency.*` (send → receiving thread), `net.latency.path.*` (send → kernel receive),
    /// `net.latency.wakeup.*` (kernel → thread), `net.latency.stack.*` (send → the driver's transmit
    /// timestamp: the sender's own stack, part of the path), `net.latency.send.*` (the sender's lateness
    /// against its schedule), and the counts `net.latency.lost`, `.reordered`, `.duplicates`, `.late`.
    fn measures(&self) -> Vec<Measure> {
        let p = "net.latency";
        let dir = self.direction();
        let mut out = latency_measures(
            p,
            &format!("packet latency ({dir})"),
            std::iter::once(&self.latency),
        );
        if let Some(path) = &self.path {
            out.extend(latency_measures(
                &format!("{p}.path"),
                "send to kernel receive",
                std::iter::once(&**path),
            ));
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

impl super::KindGates for NetLatencyResult {
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

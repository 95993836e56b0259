//! Packet latency in the session: a sender and a receiver thread, each on its CPU (one of them for a split
//! stream), with the counters and the trace of both CPUs; the slowest packets broken down at the end, each
//! on the CPU of its longest stage.

use crate::why::{explain, rule_of, Scope, WhyRun};
use crate::{KindProbe, Probe, SessionError, SessionObserver, Tick};
use rtgauge_analysis::episodes::{EpisodeTracker, Late};
use rtgauge_model::attribution::EpisodeThreshold;
use rtgauge_model::netlat::{NetLatencyResult, StreamRole};
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::netlat::NetLatencyPlan;
use rtgauge_probe::stop::StopFlag;

/// Packet latency, one-way or round trip.
pub struct NetLatency<'a>(pub &'a NetLatencyPlan);

impl KindProbe for NetLatency<'_> {
    type Result = NetLatencyResult;
}

impl Probe for NetLatency<'_> {
    fn measured(&self) -> CpuSet {
        let c = &self.0.config;
        match c.role {
            StreamRole::Both => CpuSet::new(c.tx_cpu.into_iter().chain(c.rx_cpu)),
            StreamRole::Send => CpuSet::new(c.tx_cpu),
            StreamRole::Receive => CpuSet::new(c.rx_cpu),
        }
    }

    /// The counters and the trace of both CPUs: a packet's path is carried through the stack on the
    /// sender's (a local one: loopback, a veth), its wake-up happens on the receiver's.
    fn why_scope(&self) -> Option<Scope> {
        let c = &self.0.config;
        let (tx, rx) = match c.role {
            StreamRole::Both => (c.tx_cpu, c.rx_cpu),
            StreamRole::Send => (c.tx_cpu, None),
            StreamRole::Receive => (None, c.rx_cpu),
        };
        Some(Scope {
            cpus: crate::why::observed_cpus(&[tx, rx]),
            interval_ns: c.timeline_interval_ns,
            live_episodes: false,
            finish: |w, r, thr| {
                if let Some(r) = r.downcast_mut::<NetLatencyResult>() {
                    finish(w, r, thr);
                }
            },
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        observer.start(None);
        let mut tick = |elapsed| {
            let t = Tick {
                elapsed,
                threads: &[],
                cpus: &[],
            };
            observer.tick(&t, None);
        };
        let r = rtgauge_probe::netlat::run(self.0, stop, &mut tick).map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

/// Attach counters and the breakdowns of the slowest packets to a packet-latency result: those at or above
/// the threshold (the profile's bound, else `--deadline`, else the rule), each on the CPU of its longest
/// stage (the receiver's for the wake-up, the sender's for the path); the packets held up by one stall are
/// one episode.
fn finish(w: WhyRun, r: &mut NetLatencyResult, threshold: Option<&EpisodeThreshold>) {
    let mut e = w.end(r.elapsed_ns);
    if let Some(d) = &e.trace {
        let thr = threshold
            .cloned()
            .or_else(|| {
                r.config.deadline_ns.map(|ns| EpisodeThreshold {
                    ns,
                    rule: "--deadline".into(),
                })
            })
            .unwrap_or_else(|| rule_of(std::iter::once(&r.latency), 0));
        let mut packets: Vec<_> = r
            .worst
            .iter()
            .chain(&r.late_packets)
            .filter(|p| p.latency_ns >= thr.ns)
            .copied()
            .collect();
        packets.sort_by_key(|p| p.seq);
        packets.dedup_by_key(|p| p.seq);
        // Each packet's longest stage, on its CPU; the packets that waited through one stall overlap and
        // make one episode (the tracker merges them, as it merges a timer thread's late samples). A
        // receive-only run's path is charged to the receiver's CPU: the sender is another machine (a
        // guest's host: `vm join` then names what held the packet there).
        let remote_sender = r.config.role == StreamRole::Receive;
        let mut windows: Vec<Late> = packets
            .iter()
            .filter_map(|p| {
                let (wakeup, start_ns, end_ns) = p.longest_stage(!r.config.round_trip);
                let (thread, cpu) = if wakeup || remote_sender {
                    (1, r.receiver.cpu.achieved)
                } else {
                    (0, r.sender.cpu.achieved)
                };
                Some(Late {
                    thread,
                    cpu: cpu?,
                    start_ns,
                    end_ns,
                    worst_ns: p.latency_ns,
                })
            })
            .collect();
        windows.sort_by_key(|l| l.start_ns);
        let (mut tracker, mut retain) = (EpisodeTracker::default(), Vec::new());
        for l in windows {
            tracker.feed(l, &mut retain);
        }
        tracker.finish(&mut retain);
        let (candidates, total) = tracker.above(thr.ns);
        explain(&mut e.why, d, (candidates, total), thr);
    }
    r.why = Some(e.why());
}

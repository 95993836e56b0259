//! Packet latency in the session: a sender and a receiver thread, each on its CPU (one of them for a split
//! stream), with the counters and the trace of both CPUs; the slowest packets broken down at the end, each
//! on the CPU of its longest stage. And a stream watched without end by `rtgauge monitor`
//! ([`StreamWatch`]).

use crate::why::{explain, rule_of, Scope, WhyRun};
use crate::{KindProbe, Probe, SessionError, SessionObserver, Tick};
use rtgauge_analysis::episodes::{EpisodeTracker, Late};
use rtgauge_analysis::kind::net_latency::NetSeries;
use rtgauge_analysis::monitor::MonitorState;
use rtgauge_model::attribution::EpisodeThreshold;
use rtgauge_model::net_latency::{NetLatencyResult, StreamRole};
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::net_latency::NetLatencyPlan;
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
            finish: crate::why::finish_as::<NetLatencyResult>,
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
        let r = rtgauge_probe::net_latency::run(self.0, stop, &mut tick)
            .map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

impl crate::why::Explained for NetLatencyResult {
    /// Attach counters and the breakdowns of the slowest packets to a packet-latency result: those at or above
    /// the threshold (the profile's bound, else `--deadline`, else the rule), each on the CPU of its longest
    /// stage (the receiver's for the wake-up, the sender's for the path); the packets held up by one stall are
    /// one episode.
    fn explain(w: WhyRun, r: &mut NetLatencyResult, threshold: Option<&EpisodeThreshold>) {
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
                .unwrap_or_else(|| rule_of(std::iter::once(&*r.latency), 0));
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
}

/// The Prometheus rules a watched packet stream brings (its recording rules and alerts, by name), as
/// deploy/prometheus/rtgauge-rules.yml defines them (a test checks).
pub const RULES: &[&str] = &[
    "rtgauge:net_latency_seconds:p99_5m",
    "rtgauge:net_packets_lost:increase_1h",
    "RtgaugePacketLatencyAboveGate",
    "RtgaugePacketsLost",
    "RtgaugePacketStreamSilent",
];

/// A packet stream sent by `rtgauge net latency --send-only` elsewhere, received for as long as the monitor
/// runs (a receive-only plan): each tick copies its counts and its peak into the `rtgauge_net_*` series.
pub struct StreamWatch {
    /// The receiver's plan.
    pub plan: NetLatencyPlan,
    /// The monitor's name of a flag of the probe's that an error names (`--bind` is `--net-bind`).
    pub flag: fn(&'static str) -> &'static str,
    receiver: Option<rtgauge_probe::net_latency::NetWatch>,
    series: NetSeries,
    slot: usize,
    say: fn(&str),
    said_error: bool,
    said_gone: bool,
}

impl StreamWatch {
    /// A watch of `plan`'s stream, not started; `flag` gives the monitor's name of a flag of the probe's.
    pub fn new(plan: NetLatencyPlan, flag: fn(&'static str) -> &'static str) -> StreamWatch {
        StreamWatch {
            plan,
            flag,
            receiver: None,
            series: NetSeries::default(),
            slot: 0,
            say: |_| {},
            said_error: false,
            said_gone: false,
        }
    }
}

impl crate::watch::Watch for StreamWatch {
    fn start(&mut self, cx: &crate::watch::WatchContext) -> Result<(), SessionError> {
        let plan = &self.plan;
        // The receiver's errors name the probe's flags; these are the monitor's.
        let (watch, start) = rtgauge_probe::net_latency::NetWatch::start(plan).map_err(|e| {
            use rtgauge_probe::net_latency::StreamError;
            SessionError::probe(match e {
                StreamError::Flag { flag, value, cause } => StreamError::Flag {
                    flag: (self.flag)(flag),
                    value,
                    cause,
                },
                e => e,
            })
        })?;
        let say = cx.say;
        let c = &start.conditions;
        for (what, error) in [
            (
                "SCHED_FIFO",
                c.policy.error.as_ref().or(c.priority.error.as_ref()),
            ),
            ("its CPU", c.cpu.error.as_ref()),
        ] {
            if let Some(e) = error {
                say(&format!(
                    "NOT MET: the packet receiver did not get {what}: {e}"
                ));
            }
        }
        if let Some(e) = &start.timestamps_error {
            say(&format!(
                "no kernel receive timestamps, so no path/wakeup split: {e}"
            ));
        }
        let at = match (&start.bound, &plan.config.ethernet) {
            (Some(b), _) => b.to_string(),
            (None, Some(e)) => e.rx_dev.clone(),
            (None, None) => plan.config.target.clone(),
        };
        let stream = plan.config.stream.unwrap_or_default();
        say(&format!(
            "watching packet stream {stream} at {at}{}; its latency is on the sender's CLOCK_REALTIME taken \
             as this host's (both clocks must agree: PTP)",
            c.cpu
                .achieved
                .map_or(String::new(), |cpu| format!(" on CPU {cpu}")),
        ));
        self.series = NetSeries {
            stream,
            at,
            gate_ns: plan.config.deadline_ns.unwrap_or_default(),
            ..NetSeries::default()
        };
        self.slot = crate::watch::add_series(&cx.state, self.series.families());
        self.receiver = Some(watch);
        self.say = say;
        Ok(())
    }

    fn tick(&mut self, state: &mut MonitorState, now_ns: u64, window_ns: u64) {
        let Some(w) = self.receiver.as_ref() else {
            return;
        };
        self.series.counts = w.counts();
        self.series.peaks.add(now_ns, w.take_peak(), window_ns);
        crate::watch::set_series(state, self.slot, self.series.families());
    }

    /// That its receive calls fail, and that it has stopped, once each.
    fn segment(&mut self) {
        let Some(w) = self.receiver.as_ref() else {
            return;
        };
        if let Some(e) = w.first_error().filter(|_| !self.said_error) {
            (self.say)(&format!("the packet receiver's receive calls fail ({e}): counted in rtgauge_net_receive_errors_total"));
            self.said_error = true;
        }
        if !w.alive() && !self.said_gone {
            (self.say)(
                "the packet receiver stopped (a panic): the rtgauge_net_ series no longer move",
            );
            self.said_gone = true;
        }
    }
}

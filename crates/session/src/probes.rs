//! The probes a session runs: each a [`Probe`] over the probe crate's plan, turning its own observer calls
//! and results into the session's ([`SessionObserver`], [`ProbeResult`]).

use crate::{why, Probe, SessionError, SessionObserver, Tick};
use rtgauge_model::cyclic::{CyclicResult, Spike};
use rtgauge_model::netlat::StreamRole;
use rtgauge_model::oslat::OslatResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::cyclic::{CyclicPlan, LiveThread};
use rtgauge_probe::hwnoise::HwnoisePlan;
use rtgauge_probe::mem::MemPlan;
use rtgauge_probe::net::plan::NetPlan;
use rtgauge_probe::ops::OpsPlan;
use rtgauge_probe::oslat::OslatPlan;
use rtgauge_probe::stop::StopFlag;
use std::collections::BTreeMap;
use std::time::Duration;

/// The session's observers as a probe's, for the probes whose ticks carry no live threads (oslat,
/// hwnoise): phases passed on, each checkpoint as a [`ProbeResult`].
struct Threadless<'o>(&'o mut dyn SessionObserver);

impl<R: Into<ProbeResult>> rtgauge_probe::observe::ProbeObserver<R> for Threadless<'_> {
    fn preheat(&mut self) {
        self.0.preheat();
    }
    fn start(&mut self, bias_ns: Option<u64>) {
        self.0.start(bias_ns);
    }
    fn tick(&mut self, elapsed: Duration, _: &(), checkpoint: &mut dyn FnMut() -> R) {
        let tick = Tick {
            elapsed,
            threads: &[],
            cpus: &[],
        };
        self.0.tick(&tick, Some(&mut || checkpoint().into()));
    }
}

/// The timer wake-up latency probe.
pub struct Cyclic<'a>(pub &'a CyclicPlan);

impl Probe for Cyclic<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.config.cpus.iter().flatten().copied())
    }

    fn why_scope(&self) -> Option<why::Scope> {
        Some(why::Scope {
            cpus: why::observed_cpus(&self.0.config.cpus),
            interval_ns: self.0.config.timeline_interval_ns,
            live_episodes: true,
            finish: |w, r, thr| {
                if let Some(r) = r.downcast_mut::<CyclicResult>() {
                    w.finish_cyclic(r, thr);
                }
            },
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        struct Adapter<'o> {
            inner: &'o mut dyn SessionObserver,
            cpus: &'o [Option<u32>],
        }
        impl rtgauge_probe::observe::ProbeObserver<CyclicResult, [LiveThread]> for Adapter<'_> {
            fn tick(
                &mut self,
                elapsed: Duration,
                threads: &[LiveThread],
                checkpoint: &mut dyn FnMut() -> CyclicResult,
            ) {
                let tick = Tick {
                    elapsed,
                    threads,
                    cpus: self.cpus,
                };
                self.inner.tick(&tick, Some(&mut || checkpoint().into()));
            }
            fn late(&mut self, late: &[Spike]) {
                self.inner.late(late);
            }
        }
        // The timer probe measures from its first period: the observers start with it.
        observer.start(None);
        let mut a = Adapter {
            inner: observer,
            cpus: &self.0.config.cpus,
        };
        let r = rtgauge_probe::cyclic::run(self.0, stop, &mut a)?;
        Ok(vec![r.into()])
    }
}

/// The busy-loop OS-noise probe.
pub struct Oslat<'a>(pub &'a OslatPlan);

impl Probe for Oslat<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.config.cpus.iter().copied())
    }

    fn why_scope(&self) -> Option<why::Scope> {
        Some(why::Scope {
            cpus: self.measured(),
            interval_ns: self.0.config.timeline_interval_ns,
            live_episodes: false,
            finish: |w, r, thr| {
                if let Some(r) = r.downcast_mut::<OslatResult>() {
                    w.finish_oslat(r, thr);
                }
            },
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::oslat::run(self.0, stop, &mut Threadless(observer))?;
        Ok(vec![r.into()])
    }
}

/// The OS-primitive costs (lmbench's manner).
pub struct Ops<'a>(pub &'a OpsPlan);

impl Probe for Ops<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.cpu)
    }

    fn run(
        &self,
        stop: &StopFlag,
        _: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        Ok(vec![ProbeResult::from(rtgauge_probe::ops::run(
            self.0, stop,
        )?)])
    }
}

/// The memory latency curve, bandwidth and NUMA matrix.
pub struct Mem<'a>(pub &'a MemPlan);

impl Probe for Mem<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.config.cpu)
    }

    fn run(
        &self,
        _: &StopFlag,
        _: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        Ok(vec![rtgauge_probe::mem::run(self.0)?.into()])
    }
}

/// Network-function capacity: every point of the plan in order, with the host's network sysctls recorded
/// with each result.
pub struct Net<'a> {
    /// The points to measure.
    pub plan: &'a NetPlan,
    /// The network sysctls of the host, recorded with each point.
    pub sysctls: BTreeMap<String, String>,
}

impl Probe for Net<'_> {
    /// The CPUs the measurement uses (client and server loops): the "measured" ones for `--load`.
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.plan.points.iter().flat_map(|p| {
            p.client_cpus
                .iter()
                .chain(p.server_cpus.iter().flatten())
                .copied()
        }))
    }

    fn run(
        &self,
        stop: &StopFlag,
        _: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        use rtgauge_probe::net::NetError;
        let results =
            rtgauge_probe::net::measure(self.plan, stop, &self.sysctls).map_err(|e| match e {
                NetError::Server(e) => SessionError::Server(e),
                NetError::NoTarget => SessionError::NoTarget,
                NetError::Client(e) => SessionError::Probe(e),
            })?;
        Ok(results.into_iter().map(ProbeResult::from).collect())
    }
}

/// Packet latency: a sender and a receiver thread, each on its CPU (one of them for a split stream).
pub struct NetLatency<'a>(pub &'a rtgauge_probe::netlat::NetLatencyPlan);

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
    fn why_scope(&self) -> Option<why::Scope> {
        let c = &self.0.config;
        let (tx, rx) = match c.role {
            StreamRole::Both => (c.tx_cpu, c.rx_cpu),
            StreamRole::Send => (c.tx_cpu, None),
            StreamRole::Receive => (None, c.rx_cpu),
        };
        Some(why::Scope {
            cpus: why::observed_cpus(&[tx, rx]),
            interval_ns: c.timeline_interval_ns,
            live_episodes: false,
            finish: |w, r, thr| {
                if let Some(r) = r.downcast_mut::<rtgauge_model::netlat::NetLatencyResult>() {
                    w.finish_netlat(r, thr);
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
        Ok(vec![
            rtgauge_probe::netlat::run(self.0, stop, &mut tick)?.into()
        ])
    }
}

/// NUMA locality of what runs (these processes, all when empty): read, with the allocation counters over
/// the interval. It measures no CPU of its own.
pub struct Numa<'a> {
    /// The host it reads.
    pub root: rtgauge_host::HostRoot,
    /// The processes.
    pub pids: &'a [u32],
    /// The counters' interval, ns.
    pub interval_ns: u64,
}

impl Probe for Numa<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new([])
    }

    fn run(
        &self,
        _: &StopFlag,
        _: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let pids = (!self.pids.is_empty()).then_some(self.pids);
        Ok(vec![rtgauge_host::numa::read_numa(
            &self.root,
            pids,
            self.interval_ns,
        )
        .into()])
    }
}

/// Hardware and firmware noise: the kernel's hwlat tracer on the chosen CPUs, with their interval counters
/// (the SMIs each CPU took) beside it.
pub struct Hwnoise<'a>(pub &'a HwnoisePlan);

impl Probe for Hwnoise<'_> {
    fn measured(&self) -> CpuSet {
        self.0.config.cpus.clone()
    }

    fn why_scope(&self) -> Option<why::Scope> {
        Some(why::Scope {
            cpus: self.measured(),
            interval_ns: 1_000_000_000,
            live_episodes: false,
            finish: |w, r, _| {
                if let Some(r) = r.downcast_mut::<rtgauge_model::hwnoise::HwnoiseResult>() {
                    w.finish_hwnoise(r);
                }
            },
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::hwnoise::run(self.0, stop, &mut Threadless(observer))?;
        Ok(vec![r.into()])
    }
}

/// How well the clock is kept: every source polled at the plan's rate. It measures no CPU of its own and
/// runs at a normal policy.
pub struct ClockSources<'a>(pub &'a rtgauge_probe::timesync::ClockPlan);

impl Probe for ClockSources<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new([])
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::timesync::run(self.0, stop, &mut Threadless(observer))?;
        Ok(vec![r.into()])
    }
}

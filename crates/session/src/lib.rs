//! The measurement session: everything that runs around a probe, in one place.
//!
//! Every verb that measures runs its probe through [`Session::measure`], which does, in order:
//!
//! 1. start the load beside the probe ([`load`]: generators and an external command), placed around the
//!    CPUs the probe measures;
//! 2. read the system's accounting (CPU time, context switches, per-CPU times);
//! 3. run the probe ([`Probe`]), its main thread calling every [`SessionObserver`] — the interval counters
//!    and the trace of [`why`] (when asked), and the caller's own (progress, checkpoints into the store, a
//!    live screen, a monitor's series);
//! 4. stop the load and take what it achieved;
//! 5. let each observer add what it collected to the result, and record the load and the accounting's
//!    deltas with it.
//!
//! Cleanup is part of each piece (the load generators die with their [`load::RunningLoad`], the trace with
//! its session, both also after a kill -9 through the next start), so an error at any step leaves nothing
//! on.
//!
//! Adding a probe is one [`Probe`] implementation in its kind's module ([`kind`]), with its "why" there
//! when it has one; adding something that watches a probe is one [`SessionObserver`]. Nothing here names a
//! kind. The host side of a VM is one such observer, with a probe that measures nothing
//! itself to run it: both live in `rtgauge-vmhost`, which drives them through [`Session::measure`] like any
//! verb. (The probe crate's own [`rtgauge_probe::observe::ProbeObserver`] is what a probe's loop calls;
//! each kind's module adapts it to this one.)

pub mod kind;
pub mod load;
pub mod record;
pub mod watch;
pub mod why;

use rtgauge_analysis::kind::ProbeData;
use rtgauge_host::HostRoot;
use rtgauge_model::kind::{Kind, ProbeKind};
use rtgauge_model::latency::LiveThread;
use rtgauge_model::latency::Spike;
use rtgauge_model::load::LoadResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::stop::StopFlag;
use std::time::Duration;

/// Why a measurement could not run.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The load beside the probe could not start.
    #[error(transparent)]
    Load(#[from] load::LoadError),
    /// The probe could not run: its kind's own error (a tracer the kernel lacks, a source that cannot be
    /// read, a thread that could not start), as the kind's probe said it.
    #[error(transparent)]
    Probe(Box<dyn std::error::Error + Send + Sync>),
    /// A probe whose results are of one kind ([`KindProbe`]) gave a result of another.
    #[error("the {} probe returned a result of another kind", .0.as_str())]
    OtherKind(ProbeKind),
    /// A probe of one result ended without it.
    #[error("the {} probe returned no result", .0.as_str())]
    NoResult(ProbeKind),
}

impl SessionError {
    /// The probe's own error.
    pub fn probe(e: impl std::error::Error + Send + Sync + 'static) -> SessionError {
        SessionError::Probe(Box::new(e))
    }
}

/// One tick of a running probe, as observers see it.
pub struct Tick<'a> {
    /// Time since the measurement started.
    pub elapsed: Duration,
    /// The timer probe's threads, live (empty for the other probes).
    pub threads: &'a [LiveThread],
    /// The CPU each of those threads is pinned to, in thread order (`None`: not pinned).
    pub cpus: &'a [Option<u32>],
}

/// Watches a probe while the session runs it, from the probe's main thread (never a measuring one).
/// Every method has a default that ignores it.
pub trait SessionObserver {
    /// The probe warms up before it measures (oslat's "Pre-heat…").
    fn preheat(&mut self) {}

    /// Measuring starts now; `bias_ns` is the bias subtracted from every sample, if any (oslat's).
    fn start(&mut self, _bias_ns: Option<u64>) {}

    /// Once per probe tick while measuring. `checkpoint` builds the result of what was measured so far (it
    /// merges histograms: call it only when one is due, every few seconds); `None` for a probe that
    /// measures nothing itself (a VM watch).
    fn tick(&mut self, _tick: &Tick<'_>, _checkpoint: Option<&mut dyn FnMut() -> ProbeResult>) {}

    /// The timer probe's late samples since the last call (with a late floor in its plan), just before a
    /// tick.
    fn late(&mut self, _late: &[Spike]) {}

    /// The probe has ended: add what was collected to its result.
    fn finish(&mut self, _result: &mut ProbeResult) {}
}

/// A probe the session can run.
pub trait Probe {
    /// The CPUs it measures: load is placed around them.
    fn measured(&self) -> CpuSet;

    /// What the interval counters and the trace watch, if this probe has a "why" (the latency probes).
    fn why_scope(&self) -> Option<why::Scope> {
        None
    }

    /// Run it to its end or `stop`, calling `observer` from the main thread; its results (one per
    /// measured point for the network probe, else one).
    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError>;
}

/// A probe whose results are all of one kind: [`Session::measure_kind`] gives them back as that kind's
/// result type, so that no caller casts them back.
pub trait KindProbe: Probe {
    /// The kind's result type.
    type Result: Kind;
}

/// What runs around a probe.
#[derive(Debug, Clone, Default)]
pub struct Around {
    /// Load beside it.
    pub load: load::LoadRequest,
    /// Interval counters and trace (latency probes only).
    pub why: Option<why::WhyOpts>,
    /// Whether the system's accounting is recorded with the result.
    pub accounting: bool,
}

/// The results of one measurement, with the load that ran beside it (also recorded in each result): each
/// a [`ProbeResult`], or the kind's own result type from [`Session::measure_kind`].
pub struct Measurement<R = ProbeResult> {
    /// The probe's results.
    pub results: Vec<R>,
    /// What the load achieved, when there was one.
    pub load: Option<LoadResult>,
    /// What killed runs had left switched on (tracing instances, tracefs, load processes) and was undone
    /// before measuring.
    pub cleaned: Vec<String>,
}

/// Calls the "why" observer and the caller's, in that order.
struct Fanout<'a, 'b> {
    why: Option<why::WhyObserver>,
    others: &'a mut [&'b mut dyn SessionObserver],
}

impl Fanout<'_, '_> {
    fn each(&mut self, mut f: impl FnMut(&mut dyn SessionObserver)) {
        if let Some(w) = self.why.as_mut() {
            f(w);
        }
        for o in self.others.iter_mut() {
            f(&mut **o);
        }
    }
}

impl SessionObserver for Fanout<'_, '_> {
    fn preheat(&mut self) {
        self.each(|o| o.preheat());
    }
    fn start(&mut self, bias_ns: Option<u64>) {
        self.each(|o| o.start(bias_ns));
    }
    fn tick(&mut self, tick: &Tick<'_>, mut checkpoint: Option<&mut dyn FnMut() -> ProbeResult>) {
        // Each observer may take the one checkpoint: it is lent to them in turn.
        if let Some(w) = self.why.as_mut() {
            w.tick(tick, checkpoint.as_mut().map(|c| &mut **c as _));
        }
        for o in self.others.iter_mut() {
            o.tick(tick, checkpoint.as_mut().map(|c| &mut **c as _));
        }
    }
    fn late(&mut self, late: &[Spike]) {
        self.each(|o| o.late(late));
    }
    fn finish(&mut self, result: &mut ProbeResult) {
        self.each(|o| o.finish(result));
    }
}

/// Where a session measures: the host it reads, and the flag that stops it (SIGINT/SIGTERM).
pub struct Session<'a> {
    /// The host the load is placed on and the accounting is read from.
    pub root: &'a HostRoot,
    /// Set to stop the probe early.
    pub stop: &'a StopFlag,
}

impl Session<'_> {
    /// Run `probe` with what `around` asks for beside it, `observers` watching (see the module
    /// documentation for the order).
    pub fn measure(
        &self,
        probe: &dyn Probe,
        around: &Around,
        observers: &mut [&mut dyn SessionObserver],
    ) -> Result<Measurement, SessionError> {
        // A run killed with -9 left its tracing recording or its load running: whatever this run measures,
        // not only a traced or loaded one, they would disturb it.
        let cleaned = rtgauge_probe::clean_killed_runs(&std::env::temp_dir());
        let running = load::start(&around.load, &probe.measured(), self.root)?;
        let before = around
            .accounting
            .then(|| rtgauge_host::accounting::read_sample(self.root));
        let mut all = Fanout {
            why: around
                .why
                .clone()
                .zip(probe.why_scope())
                .map(|(o, s)| why::WhyObserver::new(o, s)),
            others: observers,
        };
        let results = probe.run(self.stop, &mut all);
        let load = running.map(load::stop);
        let mut results = results?;
        let accounting = before.map(|b| {
            rtgauge_host::accounting::delta(&b, &rtgauge_host::accounting::read_sample(self.root))
        });
        for r in &mut results {
            all.finish(r);
            r.data_mut().set_load(load.clone());
            if let Some(a) = &accounting {
                r.data_mut().set_accounting(a.clone());
            }
        }
        Ok(Measurement {
            results,
            load,
            cleaned,
        })
    }

    /// [`Session::measure`] for a probe of one kind, its results as the kind's own type.
    pub fn measure_kind<P: KindProbe>(
        &self,
        probe: &P,
        around: &Around,
        observers: &mut [&mut dyn SessionObserver],
    ) -> Result<Measurement<P::Result>, SessionError> {
        let m = self.measure(probe, around, observers)?;
        Ok(Measurement {
            results: of_kind(m.results)?,
            load: m.load,
            cleaned: m.cleaned,
        })
    }
}

/// The results of a probe of kind `R` as `R` (a [`KindProbe`]'s, measured through [`Session::measure`]).
pub fn of_kind<R: Kind>(results: Vec<ProbeResult>) -> Result<Vec<R>, SessionError> {
    results
        .into_iter()
        .map(ProbeResult::downcast::<R>)
        .collect::<Option<Vec<_>>>()
        .ok_or(SessionError::OtherKind(R::KIND))
}

/// The one result of a probe of kind `R` that gives one (its first).
pub fn first<R: Kind, T>(results: impl IntoIterator<Item = T>) -> Result<T, SessionError> {
    results
        .into_iter()
        .next()
        .ok_or(SessionError::NoResult(R::KIND))
}

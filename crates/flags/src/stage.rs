//! A profile probe as `run` measures it: each kind's resolved plan, whatever its verb, through one trait
//! ([`StagePlan`]), implemented in the kind's own flags module.

use rtgauge_host::HostRoot;
use rtgauge_model::kind::ProbeKind;
use rtgauge_model::{CpuSet, Nanos};

/// A profile probe resolved by its verb's flags, as `run` measures it: each kind implements it in its verb's
/// flags module, and `run` reaches a stage only through it.
pub trait StagePlan {
    /// Which kind of probe it is.
    fn kind(&self) -> ProbeKind;

    /// Settings adjusted while resolving its flags: said before it measures and kept with the run.
    fn notes(&self) -> &[String] {
        &[]
    }

    /// The line said on stderr before it measures (`None`: its progress says what it does).
    fn announce(&self, _duration: Nanos, _cpus: &CpuSet) -> Option<String> {
        None
    }

    /// Interval counters and the trace beside it (the latency kinds).
    fn why(&self) -> Option<rtgauge_session::why::WhyOpts> {
        None
    }

    /// How long it measures, ns, where its plan holds one duration (the latency kinds; net's is per point).
    fn duration_ns(&self) -> Option<u64> {
        None
    }

    /// The real-time priority its measuring threads ask for (SCHED_FIFO/RR), for the audit to check before
    /// it measures; `None` when they run at a normal policy.
    fn rt_priority(&self) -> Option<i32> {
        None
    }

    /// Why this platform cannot run it at all (a kernel without the tracer it drives), said and recorded
    /// instead of measuring; `None` for a stage that can run (the default).
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// Whether `run --load` puts its load beside it (the NUMA locality probe watches other processes and
    /// is never loaded).
    fn loadable(&self) -> bool {
        true
    }

    /// Its probe for the session engine, reading the host through `root`.
    fn probe<'a>(&'a self, root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a>;
}

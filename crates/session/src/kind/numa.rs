//! NUMA locality in the session: what runs (these processes, all when empty) read, with the allocation
//! counters over the interval. It measures no CPU of its own.

use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_model::numa::NumaResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::stop::StopFlag;

/// NUMA locality of what runs.
pub struct Numa<'a> {
    /// The host it reads.
    pub root: rtgauge_host::HostRoot,
    /// The processes.
    pub pids: &'a [u32],
    /// The counters' interval, ns.
    pub interval_ns: u64,
}

impl KindProbe for Numa<'_> {
    type Result = NumaResult;
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

//! The memory latency curve, bandwidth and NUMA matrix in the session: measured on one CPU, the curve's
//! steps named from the caches when it ends.

use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_analysis::kind::mem::{find_steps, STEP_MEMBER, STEP_RISE};
use rtgauge_model::mem::MemResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::mem::MemPlan;
use rtgauge_probe::stop::StopFlag;

/// The memory latency curve, bandwidth and NUMA matrix.
pub struct Mem<'a>(pub &'a MemPlan);

impl KindProbe for Mem<'_> {
    type Result = MemResult;
}

impl Probe for Mem<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.config.cpu)
    }

    fn run(
        &self,
        _: &StopFlag,
        _: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let mut r = rtgauge_probe::mem::run(self.0).map_err(SessionError::probe)?;
        r.steps = find_steps(&r.latency, &r.caches, STEP_MEMBER, STEP_RISE);
        Ok(vec![r.into()])
    }
}

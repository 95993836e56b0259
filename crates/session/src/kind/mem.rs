//! The memory latency curve, bandwidth and NUMA matrix in the session: measured on one CPU.

use crate::{KindProbe, Probe, SessionError, SessionObserver};
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
        Ok(vec![rtgauge_probe::mem::run(self.0)
            .map_err(SessionError::probe)?
            .into()])
    }
}

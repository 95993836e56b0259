//! The OS-primitive costs (lmbench's manner) in the session: measured on one CPU, for their repetitions.

use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_model::ops::OpsResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::ops::OpsPlan;
use rtgauge_probe::stop::StopFlag;

/// The OS-primitive costs.
pub struct Ops<'a>(pub &'a OpsPlan);

impl KindProbe for Ops<'_> {
    type Result = OpsResult;
}

impl Probe for Ops<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.cpu)
    }

    fn run(
        &self,
        stop: &StopFlag,
        _: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::ops::run(self.0, stop).map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

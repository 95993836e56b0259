//! How well the clock is kept, in the session: every source polled at the plan's rate. It measures no CPU
//! of its own and runs at a normal policy.

use super::Threadless;
use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_model::clock::ClockResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::timesync::ClockPlan;

/// The time sources of the plan.
pub struct ClockSources<'a>(pub &'a ClockPlan);

impl KindProbe for ClockSources<'_> {
    type Result = ClockResult;
}

impl Probe for ClockSources<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new([])
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::timesync::run(self.0, stop, &mut Threadless(observer))
            .map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

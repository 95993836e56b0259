//! The hardware and firmware noise probe in the session: the kernel's hwlat tracer (or osnoise with
//! interrupts off) on the chosen CPUs, with their interval counters (the SMIs each CPU took) beside it.

use super::Threadless;
use crate::why::Scope;
use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_model::attribution::EpisodeThreshold;
use rtgauge_model::hwnoise::HwnoiseResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::hwnoise::HwnoisePlan;
use rtgauge_probe::stop::StopFlag;

/// Hardware and firmware noise on the plan's CPUs.
pub struct Hwnoise<'a>(pub &'a HwnoisePlan);

impl KindProbe for Hwnoise<'_> {
    type Result = HwnoiseResult;
}

impl Probe for Hwnoise<'_> {
    fn measured(&self) -> CpuSet {
        self.0.config.cpus.clone()
    }

    /// The counters only: its gaps are the tracer's, and nothing in the kernel runs on a CPU whose
    /// interrupts the tracer holds off.
    fn why_scope(&self) -> Option<Scope> {
        Some(Scope {
            cpus: self.measured(),
            // The tracer samples for seconds to minutes: a counter interval a second, as the timeline's.
            interval_ns: 1_000_000_000,
            live_episodes: false,
            finish: crate::why::finish_as::<HwnoiseResult>,
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::hwnoise::run(self.0, stop, &mut Threadless(observer))
            .map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

impl crate::why::Explained for HwnoiseResult {
    /// The counters only, no steal or SMIs per episode: a hwnoise run has no episodes of its own.
    fn explain(w: crate::why::WhyRun, r: &mut HwnoiseResult, _: Option<&EpisodeThreshold>) {
        r.why = Some(w.end(r.elapsed_ns).why);
    }
}

//! Network-function capacity in the session: every point of the plan in order, with the host's network
//! sysctls recorded with each result.

use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_model::net::NetResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::net::plan::NetPlan;
use rtgauge_probe::stop::StopFlag;
use std::collections::BTreeMap;

/// Network-function capacity: one result per point.
pub struct Net<'a> {
    /// The points to measure.
    pub plan: &'a NetPlan,
    /// The network sysctls of the host, recorded with each point.
    pub sysctls: BTreeMap<String, String>,
}

impl KindProbe for Net<'_> {
    type Result = NetResult;
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
        let results = rtgauge_probe::net::measure(self.plan, stop, &self.sysctls)
            .map_err(SessionError::probe)?;
        Ok(results.into_iter().map(ProbeResult::from).collect())
    }
}

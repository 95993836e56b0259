//! The OS-primitive probe's result (`rtgauge ops`) as [`KindData`]: per operation its median, p99 and max.

use super::*;
use rtgauge_model::ops::*;

impl KindData for OpsResult {
    fields!(load, settings);

    /// `ops.<op>.p50` (median, with every sample as a replicate), `ops.<op>.p99`, `ops.<op>.max`.
    fn measures(&self) -> Vec<Measure> {
        let mut out = Vec::new();
        for o in &self.ops {
            out.push(
                Measure::new(
                    format!("ops.{}.p50", o.op),
                    format!("{} median", o.label),
                    MeasureUnit::Nanos,
                    o.median_ns,
                    Better::Lower,
                )
                .with_replicates(o.samples_ns.clone()),
            );
            let p99 = o.p99_ns();
            out.push(Measure::new(
                format!("ops.{}.p99", o.op),
                format!("{} p99", o.label),
                MeasureUnit::Nanos,
                p99 as f64,
                Better::Lower,
            ));
            out.push(Measure::new(
                format!("ops.{}.max", o.op),
                format!("{} max", o.label),
                MeasureUnit::Nanos,
                o.latency.max_ns as f64,
                Better::Lower,
            ));
        }
        out
    }

    /// It runs for its repetitions, not a duration.
    fn elapsed_ns(&self) -> u64 {
        0
    }
}

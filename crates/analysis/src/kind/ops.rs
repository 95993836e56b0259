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

impl super::KindTables for OpsResult {
    /// The one-run floors (`crate::compare::one_run`) per statistic of every OS primitive: the largest ratio
    /// (either way) of any primitive between two idle runs of one platform, rounded up to two significant
    /// digits — `bench/compare_aa_probes floors 12` of 2026-11-28 on this project's 2-vCPU VM: two sessions of
    /// 12 idle runs of the built-in `quick` profile (`--cpu 1 -r 31 --sample-time 500us`), 20 primitives × 66
    /// pairs each, the larger of the two. Medians moved at most 1.73× (a context switch, 2.1 vs 3.6 µs: the
    /// whole VM ran slower in some runs, every primitive together); p99 and max 40× (a sleep of 1 ms overshot by
    /// 3.2 ms once: a host stall).
    const ONE_RUN_FLOORS: &'static [(&'static str, f64)] =
        &[("ops.*.p50", 1.8), ("ops.*.p99", 40.0), ("ops.*.max", 40.0)];
}

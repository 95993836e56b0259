//! How well the clock was kept (`rtgauge clock`) as [`KindData`]: the worst |offset| since each source
//! locked, the steps, and per source its settle time, unlocks and holdovers; its gates `clock.offset.max`
//! and `clock.steps`.

use super::*;
use rtgauge_model::clock::*;

impl KindData for ClockResult {
    fields!(elapsed, settings);

    /// `clock.offset.max` (the largest |offset| of any source since it locked), `clock.steps`, and per
    /// source `clock.<kind>.offset.{p50,p99,max}`, `.settle`, `.unlocks` and `.holdover.drift` (the
    /// largest drift over an outage); `<kind>` is numbered (`phc1`, `phc2`) where several share a kind.
    fn measures(&self) -> Vec<Measure> {
        let mut out = Vec::new();
        if let Some(max) = self.offset_max_ns() {
            out.push(Measure::new(
                "clock.offset.max",
                "clock |offset| max since locked",
                MeasureUnit::Nanos,
                max as f64,
                Better::Lower,
            ));
        }
        out.push(Measure::new(
            "clock.steps",
            "steps of the system clock",
            MeasureUnit::Count,
            self.kernel.step_count() as f64,
            Better::Lower,
        ));
        for (i, s) in self.sources.iter().enumerate() {
            // `clock.ptp4l`, or `clock.phc2` for the second of two of a kind (keys must not collide).
            let kind = s.kind.as_str();
            let nth = self.sources[..=i]
                .iter()
                .filter(|x| x.kind == s.kind)
                .count();
            let several = self.sources.iter().filter(|x| x.kind == s.kind).count() > 1;
            let key = if several {
                format!("clock.{kind}{nth}")
            } else {
                format!("clock.{kind}")
            };
            let name = s.name();
            if let Some(o) = s.offset.as_ref() {
                for (p, label) in [(50.0, "p50"), (99.0, "p99")] {
                    if let Some(v) = o.percentile(p) {
                        out.push(Measure::new(
                            format!("{key}.offset.{label}"),
                            format!("{name} |offset| {label}"),
                            MeasureUnit::Nanos,
                            v as f64,
                            Better::Lower,
                        ));
                    }
                }
                out.push(Measure::new(
                    format!("{key}.offset.max"),
                    format!("{name} |offset| max"),
                    MeasureUnit::Nanos,
                    o.max_ns as f64,
                    Better::Lower,
                ));
            }
            if let Some(settle) = s.settle_ns {
                out.push(Measure::new(
                    format!("{key}.settle"),
                    format!("{name} time to lock"),
                    MeasureUnit::Nanos,
                    settle as f64,
                    Better::Lower,
                ));
            }
            out.push(Measure::new(
                format!("{key}.unlocks"),
                format!("{name} lock lost"),
                MeasureUnit::Count,
                s.unlocks as f64,
                Better::Lower,
            ));
            if let Some(d) = s
                .holdovers
                .iter()
                .filter_map(|h| h.drift_ns)
                .map(i64::unsigned_abs)
                .max()
            {
                out.push(Measure::new(
                    format!("{key}.holdover.drift"),
                    format!("{name} drift over an outage"),
                    MeasureUnit::Nanos,
                    d as f64,
                    Better::Lower,
                ));
            }
        }
        out
    }

    /// It reads the daemons' state and loads nothing.
    fn load(&self) -> Option<&rtgauge_model::load::LoadResult> {
        None
    }

    fn set_load(&mut self, _load: Option<rtgauge_model::load::LoadResult>) {}

    fn stop_reason(&self) -> Option<StopReason> {
        Some(self.stop_reason)
    }

    fn settings_line(&self) -> Option<String> {
        Some(format!(
            "{} Hz, locked within {}, sources: {}",
            self.config.rate_hz,
            self.config.lock_ns.map_or(
                "each kind's bound (PTP 1 µs, chrony 1 ms)".to_string(),
                |l| format!("±{l} ns")
            ),
            if self.config.sources.is_empty() {
                "the kernel only".to_string()
            } else {
                self.config.sources.join(", ")
            }
        ))
    }
}

impl super::KindGates for ClockResult {
    const GATES: &'static [KindGate<Self>] = &[
        KindGate {
            def: GateDef {
                key: "offset.max",
                stored: "offset_max_ns",
                label: "clock offset max",
                unit: GateUnit::Nanos,
                aggregate: Aggregate::Max,
                threshold: false,
                episode_bound: EpisodeBound::None,
            },
            values: |r, _| r.offset_max_ns().into_iter().collect(),
        },
        KindGate {
            def: GateDef {
                key: "steps",
                stored: "steps",
                label: "clock steps",
                unit: GateUnit::Count,
                aggregate: Aggregate::Sum,
                threshold: false,
                episode_bound: EpisodeBound::None,
            },
            values: |r, _| vec![r.kernel.step_count()],
        },
    ];
}

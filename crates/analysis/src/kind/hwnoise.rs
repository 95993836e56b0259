//! The hardware/firmware noise probe's result (`rtgauge hwnoise`) as [`KindData`]: the largest gap, the
//! reported windows and NMIs, overall and per CPU; its gate `hwnoise.max`.

use super::*;
use rtgauge_model::hwnoise::*;
use rtgauge_model::units::us_trunc;

impl KindData for HwnoiseResult {
    fields!(why, elapsed, settings);

    /// `hwnoise.max` (the largest gap, 0 when no window reached the threshold), `hwnoise.gaps` (windows at
    /// or above it), `hwnoise.nmi`, and `hwnoise.cpuN.max` per CPU.
    fn measures(&self) -> Vec<Measure> {
        let mut out = vec![
            Measure::new(
                "hwnoise.max",
                "hardware/firmware gap max",
                MeasureUnit::Nanos,
                self.max_ns() as f64,
                Better::Lower,
            ),
            Measure::new(
                "hwnoise.gaps",
                format!(
                    "windows with a gap ≥ {} µs",
                    us_trunc(self.config.threshold_ns)
                ),
                MeasureUnit::Count,
                self.gaps_total as f64,
                Better::Lower,
            ),
            Measure::new(
                "hwnoise.nmi",
                "NMIs in those windows",
                MeasureUnit::Count,
                self.cpus.iter().map(|c| c.nmi_count).sum::<u64>() as f64,
                Better::Lower,
            ),
        ];
        for c in &self.cpus {
            out.push(Measure::new(
                format!("hwnoise.cpu{}.max", c.cpu),
                format!("CPU {} hardware/firmware gap max", c.cpu),
                MeasureUnit::Nanos,
                c.gaps.max_ns as f64,
                Better::Lower,
            ));
        }
        out
    }

    fn load(&self) -> Option<&rtgauge_model::load::LoadResult> {
        None
    }

    /// It measures alone: a load would only add the OS's noise, which the tracer does not see.
    fn set_load(&mut self, _load: Option<rtgauge_model::load::LoadResult>) {}

    fn stop_reason(&self) -> Option<StopReason> {
        Some(self.stop_reason)
    }

    fn settings_line(&self) -> Option<String> {
        Some(format!(
            "CPUs {}, {} tracer, {} mode, width {} µs per window {} µs, threshold {} µs",
            self.config.cpus,
            self.config.tracer.as_str(),
            self.config.mode,
            us_trunc(self.config.width_ns),
            us_trunc(self.config.window_ns),
            us_trunc(self.config.threshold_ns)
        ))
    }
}

impl super::KindTables for HwnoiseResult {
    const GATES: &'static [KindGate<Self>] = &[KindGate {
        def: GateDef {
            key: "max",
            stored: "max_ns",
            label: "hwnoise max gap",
            unit: GateUnit::Nanos,
            aggregate: Aggregate::Max,
            threshold: false,
            episode_bound: EpisodeBound::None,
        },
        // None when the kernel dropped entries before they were read: the largest gap may be among them.
        values: |r, _| {
            if r.lost == 0 {
                vec![r.max_ns()]
            } else {
                Vec::new()
            }
        },
    }];
}

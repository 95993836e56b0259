//! How well the clock was kept (`rtgauge clock`) as [`KindData`]: the worst |offset| since each source
//! locked, the steps, and per source its settle time, unlocks and holdovers; its gates `clock.offset.max`
//! and `clock.steps`.

use super::*;
use crate::monitor::Family;
use rtgauge_model::clock::*;
use rtgauge_model::units::secs;

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
            let bound = s.read_bound_ns().map(|b| b as f64);
            if let Some(o) = s.offset.as_ref() {
                for (p, label) in [(50.0, "p50"), (99.0, "p99")] {
                    if let Some(v) = o.percentile(p) {
                        out.push(
                            Measure::new(
                                format!("{key}.offset.{label}"),
                                format!("{name} |offset| {label}"),
                                MeasureUnit::Nanos,
                                v as f64,
                                Better::Lower,
                            )
                            .resolved_by(bound),
                        );
                    }
                }
                out.push(
                    Measure::new(
                        format!("{key}.offset.max"),
                        format!("{name} |offset| max"),
                        MeasureUnit::Nanos,
                        o.max_ns as f64,
                        Better::Lower,
                    )
                    .resolved_by(bound),
                );
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

impl super::KindTables for ClockResult {
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

/// A per-source series: its name, its help, and its value of a source (none: the series has no sample for
/// that source).
type SourceSeries<T> = (&'static str, &'static str, fn(&SourceResult) -> T);

/// The series of the time sources followed (`rtgauge monitor --clock`), as last polled: per source
/// (`source` = `kind:path`) `clock_offset_seconds` (the last offset measured), `clock_offset_max_seconds`
/// (the largest |offset| since it first locked), `clock_locked` (0/1, within `clock_lock_bound_seconds`),
/// `clock_settled`, `clock_following`, `clock_serving`, `clock_up`, `clock_holdover`,
/// `clock_path_delay_seconds`, `clock_unlocks_total`, `clock_holdovers_total`,
/// `clock_reference_changes_total`, `clock_poll_errors_total`, `clock_state_info{source,state}`,
/// `clock_reference_info{source,reference,class}`; the kernel's `clock_steps_total`,
/// `clock_last_step_seconds` and `clock_synchronised`.
pub fn monitor_families(c: &ClockResult) -> Vec<Family> {
    /// Offsets, delays and steps are signed: seconds either way.
    fn secs_i(ns: i64) -> f64 {
        ns as f64 / 1e9
    }
    let source = |x: &SourceResult| vec![("source", x.name())];
    let gauges: [SourceSeries<Option<f64>>; 9] = [
            ("rtgauge_clock_offset_seconds", "The last offset the source measured (ptp4l: from its master; chrony: its last; phc: PHC − system clock); none while it cannot be read.", |x| x.last.as_ref()?.offset_ns.filter(|_| x.readable).map(secs_i)),
            ("rtgauge_clock_offset_max_seconds", "The largest |offset| since the source first locked (every offset while it never did).", |x| x.offset_max_ns().map(secs)),
            ("rtgauge_clock_locked", "1 while the source's |offset| stays within the lock bound (rtgauge_clock_lock_bound_seconds).", |x| Some(f64::from(u8::from(x.locked_now)))),
            ("rtgauge_clock_holdover", "1 while the source has lost its reference (a PTP port left UNCALIBRATED/SLAVE; chrony unsynchronised).", |x| Some(f64::from(u8::from(x.in_holdover)))),
            ("rtgauge_clock_settled", "1 once the source has locked since the monitor started (its |offset| distribution counts from then).", |x| Some(f64::from(u8::from(x.locked)))),
            ("rtgauge_clock_following", "1 while the source follows a reference (a PTP port UNCALIBRATED or SLAVE; chrony synchronised): 0 on a grandmaster.", |x| Some(f64::from(u8::from(x.following)))),
            ("rtgauge_clock_serving", "1 while the source is a reference itself, following none (a PTP grandmaster: a port MASTER).", |x| Some(f64::from(u8::from(x.serving)))),
            ("rtgauge_clock_up", "1 while the source answers its polls.", |x| Some(f64::from(u8::from(x.readable)))),
            ("rtgauge_clock_path_delay_seconds", "The source's path delay (PTP mean path delay, chrony root delay, a PHC read's bound).", |x| x.last.as_ref()?.delay_ns.map(secs_i)),
        ];
    let mut out = Vec::new();
    for (name, help, value) in gauges {
        out.push(Family::gauges_f(
            name,
            help,
            c.sources
                .iter()
                .filter_map(|x| Some((source(x), value(x)?))),
        ));
    }
    let counters: [SourceSeries<u64>; 4] = [
            ("rtgauge_clock_unlocks", "Times the source's |offset| went beyond the lock bound while locked.", |x| x.unlocks),
            ("rtgauge_clock_holdovers", "Times the source lost its reference.", |x| x.holdover_count()),
            ("rtgauge_clock_reference_changes", "Times the source came to follow another reference (a new grandmaster, chrony's new source; not the same one back).", |x| x.reference_changes),
            ("rtgauge_clock_poll_errors", "Polls of the source that failed.", |x| x.errors),
        ];
    for (name, help, value) in counters {
        out.push(Family::counters(
            name,
            help,
            c.sources.iter().map(|x| (source(x), value(x))),
        ));
    }
    out.push(Family::gauges(
        "rtgauge_clock_state_info",
        "The source's state: a ptp4l port state, chrony's leap status, a PHC readable.",
        c.sources.iter().filter_map(|x| {
            let mut l = source(x);
            l.push(("state", x.last.as_ref()?.state.clone()));
            Some((l, 1))
        }),
    ));
    out.push(Family::gauges(
            "rtgauge_clock_reference_info",
            "The source's reference: a PTP grandmaster's identity and clockClass, chrony's source and stratum.",
            c.sources.iter().filter_map(|x| {
                let r = x.last.as_ref()?.reference.as_ref()?;
                let mut l = source(x);
                l.push(("reference", r.id.clone()));
                l.push(("class", r.class.map_or(String::new(), |c| c.to_string())));
                Some((l, 1))
            }),
        ));
    out.push(Family::gauges_f(
            "rtgauge_clock_lock_bound_seconds",
            "A source is locked while its |offset| stays within this (--clock-lock; by default 1 µs for PTP, 1 ms for chrony).",
            c.sources.iter().map(|x| (source(x), secs(x.lock_ns))),
        ));
    let k = &c.kernel;
    out.push(Family::counters(
            "rtgauge_clock_steps",
            "Steps of CLOCK_REALTIME (its difference to CLOCK_MONOTONIC moved) since the monitor started.",
            [(vec![], k.step_count())],
        ));
    out.push(Family::gauges_f(
        "rtgauge_clock_last_step_seconds",
        "The size of the last step of CLOCK_REALTIME (positive: forward), 0 before the first.",
        [(vec![], secs_i(k.last_step.map_or(0, |x| x.by_ns)))],
    ));
    out.push(Family::gauges(
            "rtgauge_clock_synchronised",
            "1 while the kernel counts the system clock synchronised (adjtimex: no STA_UNSYNC, not TIME_ERROR).",
            [(vec![], i64::from(k.last.is_some_and(|a| a.synchronised())))],
        ));
    out
}

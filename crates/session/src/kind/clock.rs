//! How well the clock is kept, in the session: every source polled at the plan's rate. It measures no CPU
//! of its own and runs at a normal policy. And the sources followed without end by `rtgauge monitor`
//! ([`SourcesWatch`]).

use super::Threadless;
use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_analysis::kind::clock::ClockSeries;
use rtgauge_analysis::monitor::MonitorState;
use rtgauge_model::clock::ClockResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::clock::ClockPlan;
use rtgauge_probe::stop::StopFlag;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
        let r = rtgauge_probe::clock::run(self.0, stop, &mut Threadless(observer))
            .map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

/// The alerts of the time sources followed (`rtgauge monitor --clock`), as deploy/prometheus/rtgauge-rules.yml
/// holds them (a test checks).
pub const ALERTS: &str = r#"      - alert: RtgaugeClockStepped
        # A step moves the stamps of everything after it (events, trips, SV frames): no `for`.
        expr: increase(rtgauge_clock_steps_total[10m]) > 0
        labels:
          severity: critical
        annotations:
          summary: "The system clock of {{ $labels.instance }} stepped"
          description: "{{ printf \"%.0f\" $value }} steps of CLOCK_REALTIME in the last 10 minutes; the last by rtgauge_clock_last_step_seconds."
      - alert: RtgaugeClockUnlocked
        # Only a source that follows a reference (a grandmaster follows none, a holdover has its own alert)
        # and has locked once: chrony measures once per clock update, its first lock can take an hour.
        expr: >
          rtgauge_clock_locked == 0
          and on (job, instance, source) rtgauge_clock_following == 1
          and on (job, instance, source) rtgauge_clock_settled == 1
        for: 1m
        labels:
          severity: warning
        annotations:
          summary: "{{ $labels.source }} on {{ $labels.instance }} is not locked"
          description: "Its |offset| is beyond rtgauge_clock_lock_bound_seconds (last offset in rtgauge_clock_offset_seconds)."
      - alert: RtgaugeClockHoldover
        expr: rtgauge_clock_holdover == 1
        for: 30s
        labels:
          severity: critical
        annotations:
          summary: "{{ $labels.source }} on {{ $labels.instance }} lost its reference"
          description: "The clock is free-running (holdover): its master or server is gone."
      - alert: RtgaugeClockNoReference
        # A client that never found its master or server (a grandmaster serves, a holdover has its own alert).
        expr: >
          rtgauge_clock_following == 0
          and on (job, instance, source) rtgauge_clock_holdover == 0
          and on (job, instance, source) rtgauge_clock_serving == 0
          and on (job, instance, source) rtgauge_clock_up == 1
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "{{ $labels.source }} on {{ $labels.instance }} follows no reference"
          description: "It has not found a master or server (rtgauge_clock_state_info says its state)."
      - alert: RtgaugeClockUnsynchronised
        expr: rtgauge_clock_synchronised == 0
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "The kernel of {{ $labels.instance }} counts its clock unsynchronised"
          description: "No daemon has disciplined CLOCK_REALTIME (adjtimex STA_UNSYNC or TIME_ERROR)."
      - alert: RtgaugeClockSourceDown
        expr: rtgauge_clock_up == 0
        for: 1m
        labels:
          severity: warning
        annotations:
          summary: "{{ $labels.source }} on {{ $labels.instance }} does not answer"
          description: "Its daemon is gone or refuses the monitor's polls: nothing is known of how the clock is kept."
      - alert: RtgaugeClockReferenceChanged
        expr: increase(rtgauge_clock_reference_changes_total[10m]) > 0 and rtgauge_clock_holdover == 0
        labels:
          severity: info
        annotations:
          summary: "{{ $labels.source }} on {{ $labels.instance }} follows another reference"
          description: "A new grandmaster or server (rtgauge_clock_reference_info)."
"#;

/// The time sources followed by `rtgauge monitor --clock`, polled as `rtgauge clock` polls them on a thread
/// of their own (on the housekeeping CPUs): each poll's result goes into the `rtgauge_clock_*` series, at
/// most once a second. A source named but unreadable is refused when the watch starts; one found but
/// unreadable is said and left out. The thread is stopped and joined when the watch is dropped, however the
/// monitor ends (its sockets beside the daemons' are removed as it ends).
pub struct SourcesWatch {
    /// The sources' plan.
    pub plan: ClockPlan,
    thread: Option<(StopFlag, std::thread::JoinHandle<()>)>,
    /// Set by the thread when its poller panicked; said once at the next segment.
    panicked: Arc<AtomicBool>,
    said_panic: bool,
}

impl SourcesWatch {
    /// A watch of `plan`'s sources, not started.
    pub fn new(plan: ClockPlan) -> SourcesWatch {
        SourcesWatch {
            plan,
            thread: None,
            panicked: Arc::new(AtomicBool::new(false)),
            said_panic: false,
        }
    }
}

impl crate::watch::Watch for SourcesWatch {
    fn start(&mut self, cx: &crate::watch::WatchContext) -> Result<Vec<String>, SessionError> {
        let poller = rtgauge_probe::clock::Poller::open(&self.plan)
            .map_err(|e| SessionError::Probe(format!("--clock-source {e}").into()))?;
        let mut said: Vec<String> = poller
            .left_out
            .iter()
            .map(|l| format!("time source found and left out, unreadable: {l}"))
            .collect();
        said.push(format!(
            "following time at {} Hz: the kernel{}",
            self.plan.config.rate_hz,
            poller
                .sources()
                .iter()
                .map(|s| format!(", {}", s.name()))
                .collect::<String>()
        ));
        let slot = crate::watch::add_series(&cx.state, Box::new(ClockSeries(None)));
        let mut feed = Feed {
            state: Arc::clone(&cx.state),
            slot,
            published: None,
        };
        let stop = cx.stop.clone();
        let panicked = Arc::clone(&self.panicked);
        let thread = std::thread::Builder::new()
            .name("rtg-clock".into())
            .spawn({
                let stop = stop.clone();
                move || {
                    let st = Arc::clone(&feed.state);
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        poller.run(&stop, &mut feed)
                    }));
                    let mut g = crate::watch::lock(&st);
                    let Some(series) = crate::watch::series_mut::<ClockSeries>(&mut g, slot) else {
                        return;
                    };
                    match run {
                        Ok(last) => series.0 = Some(last),
                        // Its series must not stay frozen at their last values: every source reads as
                        // down.
                        Err(_) => {
                            panicked.store(true, Ordering::Release);
                            if let Some(c) = series.0.as_mut() {
                                for x in &mut c.sources {
                                    (
                                        x.readable,
                                        x.locked_now,
                                        x.following,
                                        x.serving,
                                        x.in_holdover,
                                    ) = (false, false, false, false, false);
                                }
                            }
                        }
                    }
                }
            })
            .map_err(|e| SessionError::Probe(format!("starting the clock thread: {e}").into()))?;
        self.thread = Some((stop, thread));
        Ok(said)
    }

    fn segment(&mut self) -> Vec<String> {
        if self.said_panic || !self.panicked.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.said_panic = true;
        vec![
            "the clock thread panicked: every time source now reads as down (rtgauge_clock_up 0)"
                .into(),
        ]
    }
}

impl Drop for SourcesWatch {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.thread.take() {
            stop.set();
            // Its panic is caught and said in the thread.
            let _ = thread.join();
        }
    }
}

/// Puts the time sources' result into the series, at most once a second (a checkpoint copies the
/// timelines).
struct Feed {
    state: Arc<Mutex<MonitorState>>,
    slot: usize,
    published: Option<Duration>,
}

impl rtgauge_probe::observe::ProbeObserver<ClockResult> for Feed {
    fn tick(&mut self, elapsed: Duration, _: &(), checkpoint: &mut dyn FnMut() -> ClockResult) {
        if self
            .published
            .is_none_or(|p| elapsed >= p + Duration::from_secs(1))
        {
            let r = checkpoint();
            let mut g = crate::watch::lock(&self.state);
            if let Some(series) = crate::watch::series_mut::<ClockSeries>(&mut g, self.slot) {
                series.0 = Some(r);
            }
            self.published = Some(elapsed);
        }
    }
}

//! How well the clock is kept, in the session: every source polled at the plan's rate. It measures no CPU
//! of its own and runs at a normal policy. And the sources followed without end by `rtgauge monitor`
//! ([`SourcesWatch`]).

use super::Threadless;
use crate::watch::WatchError;
use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_analysis::kind::clock::monitor_families;
use rtgauge_analysis::monitor::MonitorState;
use rtgauge_model::clock::ClockResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::clock::ClockPlan;
use rtgauge_probe::stop::StopFlag;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The time sources of the plan.
pub struct Clock<'a>(pub &'a ClockPlan);

impl KindProbe for Clock<'_> {
    type Result = ClockResult;
}

impl Probe for Clock<'_> {
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

/// The Prometheus rules the time sources followed bring (alerts, by name), as
/// deploy/prometheus/rtgauge-rules.yml defines them (a test checks).
pub const RULES: &[&str] = &[
    "RtgaugeClockStepped",
    "RtgaugeClockUnlocked",
    "RtgaugeClockHoldover",
    "RtgaugeClockNoReference",
    "RtgaugeClockUnsynchronised",
    "RtgaugeClockSourceDown",
    "RtgaugeClockReferenceChanged",
];

/// The time sources followed by `rtgauge monitor --clock`, polled as `rtgauge clock` polls them on a thread
/// of their own (on the housekeeping CPUs): each poll's result goes into the `rtgauge_clock_*` series, at
/// most once a second. A source named but unreadable is refused when the watch starts; one found but
/// unreadable is said and left out. The thread is stopped and joined when the watch is dropped, however the
/// monitor ends (its sockets beside the daemons' are removed as it ends).
pub struct SourcesWatch {
    /// The sources' plan.
    pub plan: ClockPlan,
    /// The monitor's flag that names a source, for a source that cannot be read.
    pub flag: &'static str,
    thread: Option<(StopFlag, std::thread::JoinHandle<()>)>,
}

impl SourcesWatch {
    /// A watch of `plan`'s sources, not started; `flag` names a source on the command line.
    pub fn new(plan: ClockPlan, flag: &'static str) -> SourcesWatch {
        SourcesWatch {
            plan,
            flag,
            thread: None,
        }
    }
}

impl crate::watch::Watch for SourcesWatch {
    fn start(&mut self, cx: &crate::watch::WatchContext) -> Result<(), SessionError> {
        let poller = rtgauge_probe::clock::Poller::open(&self.plan).map_err(|e| {
            SessionError::probe(WatchError::Open {
                flag: self.flag,
                error: Box::new(e),
            })
        })?;
        for l in &poller.left_out {
            (cx.say)(&format!("time source found and left out, unreadable: {l}"));
        }
        (cx.say)(&format!(
            "following time at {} Hz: the kernel{}",
            self.plan.config.rate_hz,
            poller
                .sources()
                .iter()
                .map(|s| format!(", {}", s.name()))
                .collect::<String>()
        ));
        // No series before the first poll.
        let slot = crate::watch::add_series(&cx.state, Vec::new());
        let mut feed = Feed {
            state: Arc::clone(&cx.state),
            slot,
            published: None,
            last: None,
        };
        let (stop, say) = (cx.stop.clone(), cx.say);
        let thread = std::thread::Builder::new()
            .name("rtg-clock".into())
            .spawn({
                let stop = stop.clone();
                move || {
                    let st = Arc::clone(&feed.state);
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        poller.run(&stop, &mut feed)
                    }));
                    if run.is_err() {
                        say("the clock thread panicked: every time source now reads as down (rtgauge_clock_up 0)");
                    }
                    let last = match run {
                        Ok(last) => Some(last),
                        // Its series must not stay frozen at their last values: every source reads as
                        // down.
                        Err(_) => feed.last.take().map(|mut c| {
                            for x in &mut c.sources {
                                (x.readable, x.locked_now, x.following, x.serving, x.in_holdover) =
                                    (false, false, false, false, false);
                            }
                            c
                        }),
                    };
                    if let Some(c) = last {
                        crate::watch::set_series(&mut crate::watch::lock(&st), slot, monitor_families(&c));
                    }
                }
            })
            .map_err(|error| SessionError::probe(WatchError::Thread { what: "clock", error }))?;
        self.thread = Some((stop, thread));
        Ok(())
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
/// timelines), and keeps the last it put.
struct Feed {
    state: Arc<Mutex<MonitorState>>,
    slot: usize,
    published: Option<Duration>,
    last: Option<ClockResult>,
}

impl rtgauge_probe::observe::ProbeObserver<ClockResult> for Feed {
    fn tick(&mut self, elapsed: Duration, _: &(), checkpoint: &mut dyn FnMut() -> ClockResult) {
        if self
            .published
            .is_none_or(|p| elapsed >= p + Duration::from_secs(1))
        {
            let r = checkpoint();
            crate::watch::set_series(
                &mut crate::watch::lock(&self.state),
                self.slot,
                monitor_families(&r),
            );
            self.last = Some(r);
            self.published = Some(elapsed);
        }
    }
}

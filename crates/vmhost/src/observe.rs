//! Observing a VM's host while its guest measures: a [`SessionObserver`] ([`HostObserver`]) that gathers
//! the host record from a [`HostSource`] and measures the guest's clock over its channel, run by a [`Probe`]
//! that measures nothing itself ([`VmWatch`]) through [`rtgauge_session::Session::measure`] — the session's
//! stop flag, ticks and cleanup, unchanged.

use rtgauge_model::run::ProbeResult;
use rtgauge_model::vm::{HostRecord, ObserverCost};
use rtgauge_model::CpuSet;
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::time::{now_ns, ClockId};
use rtgauge_session::{Probe, SessionError, SessionObserver, Tick};
use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::channel::{Channel, ClockClient};
use crate::{HostSource, VmError};

/// How to observe, whatever the source.
#[derive(Debug, Clone)]
pub struct ObserveOpts {
    /// The clock channel to the guest, if any.
    pub clock: Option<Channel>,
    /// How often the clock is measured.
    pub sync_every: Duration,
}

/// Set this process's nice value to `n`: the observer shares host CPUs with the vCPU threads it watches
/// unless pinned elsewhere. Called before the source starts, so that whatever it starts runs at it too.
pub fn renice(n: i32) -> Result<(), VmError> {
    // SAFETY: setpriority on the calling thread (who 0), plain integers.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) } != 0 {
        return Err(VmError::Input(format!(
            "--nice {n}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The host observer: a host source gathering on every tick, and the clock exchanges, as a
/// [`SessionObserver`].
pub struct HostObserver {
    source: Box<dyn HostSource>,
    clock: Option<ClockClient>,
    sync_every_ns: u64,
    next_sync_ns: u64,
    started_ns: u64,
    wall: Instant,
}

impl HostObserver {
    /// Observe through `source` (started already) and connect the clock channel, measuring it once.
    pub fn start(source: Box<dyn HostSource>, opts: &ObserveOpts) -> HostObserver {
        let mut clock = opts.clock.clone().map(ClockClient::new);
        if let Some(c) = clock.as_mut() {
            c.burst();
        }
        let now = now_ns(ClockId::Monotonic);
        HostObserver {
            source,
            clock,
            sync_every_ns: opts.sync_every.as_nanos() as u64,
            next_sync_ns: now + opts.sync_every.as_nanos() as u64,
            started_ns: now,
            wall: Instant::now(),
        }
    }

    /// Measure the clock a last time, stop the source and hand the record over: the source's, with the
    /// clock, the lines every source shares in `missing` (after the source's own: a clock that never
    /// answered, the intervals the bound dropped) and what observing cost.
    pub fn into_record(mut self) -> HostRecord {
        if let Some(c) = self.clock.as_mut() {
            c.burst();
        }
        let ended = now_ns(ClockId::Monotonic);
        let mut record = self.source.into_record(self.started_ns, ended);
        if let Some(c) = &self.clock {
            if c.sync.samples.is_empty() {
                record.missing.push(match &c.error {
                    Some(e) => format!("{e}: no clock"),
                    None => format!(
                        "--clock {}: no exchange answered (is `rtgauge vm clock-serve` running in the guest?)",
                        c.sync.channel
                    ),
                });
            }
        }
        if record.trace.lost > 0 {
            record.missing.push(format!(
                "{} of {} trace events lost (the kernel's buffer overflowed while the observer was kept from reading it): what the host did in those stretches is missing — run it on a CPU the vCPUs do not use, or at a lower --nice",
                record.trace.lost,
                record.trace.events + record.trace.lost
            ));
        }
        if record.dropped > 0 {
            record.missing.push(format!(
                "{} intervals dropped (the bound of {}): the record covers the end only",
                record.dropped,
                record.intervals.len()
            ));
        }
        record.clock = self.clock.map(|c| c.sync);
        record.observer = own_cost(self.wall.elapsed());
        record
    }
}

/// This process's CPU time and peak memory. The peak is `VmHWM` of /proc/self/status, this program's own
/// address space: getrusage's `ru_maxrss` keeps the high-water mark of whatever ran before the exec (a
/// Python parent's fork, in the bench).
fn own_cost(wall: Duration) -> ObserverCost {
    // SAFETY: rusage is plain data filled by getrusage.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(r.ru_maxrss as u64);
    ObserverCost {
        cpu_ns: tv(r.ru_utime) + tv(r.ru_stime),
        max_rss_kib: hwm,
        wall_ns: wall.as_nanos() as u64,
    }
}

impl SessionObserver for HostObserver {
    fn tick(&mut self, _tick: &Tick<'_>, _checkpoint: Option<&mut dyn FnMut() -> ProbeResult>) {
        self.source.gather();
        let now = now_ns(ClockId::Monotonic);
        if now >= self.next_sync_ns {
            if let Some(c) = self.clock.as_mut() {
                c.burst();
            }
            self.next_sync_ns = now + self.sync_every_ns;
        }
    }
}

/// Watching a VM as a probe: it measures nothing itself; it ticks its observers until the duration, a
/// stop (SIGINT/SIGTERM) or the VM's end.
pub struct VmWatch {
    /// The VM's process on this host (QEMU's): the watch ends when it does.
    pub pid: u32,
    /// How long (`None`: until stopped or the VM ends).
    pub duration: Option<Duration>,
    /// The host CPUs its vCPU threads may use (where load would be kept away from).
    pub cpus: CpuSet,
    /// Tick period.
    pub tick: Duration,
    /// Why it ended.
    pub ended: Cell<&'static str>,
}

impl Probe for VmWatch {
    fn measured(&self) -> CpuSet {
        self.cpus.clone()
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        observer.start(None);
        let t0 = Instant::now();
        let alive = || {
            std::path::Path::new("/proc")
                .join(self.pid.to_string())
                .exists()
        };
        loop {
            let left = self.duration.map(|d| d.saturating_sub(t0.elapsed()));
            std::thread::sleep(left.map_or(self.tick, |l| l.min(self.tick)));
            let tick = Tick {
                elapsed: t0.elapsed(),
                threads: &[],
                cpus: &[],
            };
            // Nothing is measured here: no checkpoint.
            observer.tick(&tick, None);
            if stop.is_set() {
                self.ended.set("stopped (SIGINT/SIGTERM)");
                break;
            }
            if self.duration.is_some_and(|d| t0.elapsed() >= d) {
                self.ended.set("duration reached");
                break;
            }
            if !alive() {
                self.ended.set("the VM ended");
                break;
            }
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::vm::{HostInterval, HostKind};
    use std::rc::Rc;

    /// A source that hands over the record it was given, counting the ticks it gathered on.
    struct Given {
        record: HostRecord,
        gathered: Rc<Cell<u32>>,
    }

    impl HostSource for Given {
        fn gather(&mut self) {
            self.gathered.set(self.gathered.get() + 1);
        }
        fn into_record(self: Box<Self>, started_ns: u64, ended_ns: u64) -> HostRecord {
            HostRecord {
                started_ns,
                ended_ns,
                ..self.record
            }
        }
    }

    #[test]
    fn the_observer_adds_the_clock_and_the_shared_missing_lines_after_the_sources_own() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("none.sock");
        let interval = HostInterval {
            vcpu: 0,
            cpu: 1,
            start_ns: 10,
            end_ns: 20,
            kind: HostKind::Waiting,
            name: 0,
        };
        let gathered = Rc::new(Cell::new(0));
        let source = Given {
            record: HostRecord {
                dropped: 3,
                intervals: vec![interval; 2],
                missing: vec!["the source's own".into()],
                ..HostRecord::default()
            },
            gathered: gathered.clone(),
        };
        let opts = ObserveOpts {
            clock: Some(Channel::Unix(sock.clone())),
            sync_every: Duration::from_secs(3600),
        };
        let mut o = HostObserver::start(Box::new(source), &opts);
        let tick = Tick {
            elapsed: Duration::ZERO,
            threads: &[],
            cpus: &[],
        };
        for _ in 0..2 {
            o.tick(&tick, None);
        }
        assert_eq!(gathered.get(), 2, "the source gathers on every tick");
        let r = o.into_record();
        assert_eq!(
            r.missing,
            vec![
                "the source's own".to_string(),
                format!(
                    "--clock unix:{}: No such file or directory (os error 2): no clock",
                    sock.display()
                ),
                "3 intervals dropped (the bound of 2): the record covers the end only".to_string(),
            ]
        );
        let clock = r.clock.clone().unwrap();
        assert_eq!(clock.channel, format!("unix:{}", sock.display()));
        assert!(clock.samples.is_empty());
        assert!(0 < r.started_ns && r.started_ns <= r.ended_ns, "{r:?}");
        assert!(
            r.observer.wall_ns > 0 && r.observer.max_rss_kib > 0,
            "{r:?}"
        );
    }

    #[test]
    fn without_a_clock_nothing_is_said_of_one() {
        let source = Given {
            record: HostRecord::default(),
            gathered: Rc::new(Cell::new(0)),
        };
        let opts = ObserveOpts {
            clock: None,
            sync_every: Duration::from_secs(1),
        };
        let r = HostObserver::start(Box::new(source), &opts).into_record();
        assert_eq!((r.clock, r.missing), (None, Vec::<String>::new()));
    }
}

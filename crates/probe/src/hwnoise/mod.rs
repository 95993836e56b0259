//! The hardware/firmware noise probe: drives one of the kernel's detectors on the chosen CPUs and reads
//! what it reports — the `hwlat` tracer (hwlatdetect's method, [`hwlat`]) or `osnoise` with
//! `OSNOISE_IRQ_DISABLE` (rtla hwnoise's, Linux 6.3 and later, [`osnoise`]). Both spin with interrupts off
//! for `width` of every `window` and count what still stops the CPU.
//!
//! Both change tracefs settings that are global (`tracing_thresh`; hwlat's tracer and its
//! `hwlat_detector/` files live in the top level only; osnoise's `osnoise/` files are shared by every
//! instance), so what the probe changes is saved first and restored on every exit path. The saved values are
//! also written to [`SAVED`] with this process's pid (and the instance, for osnoise): a run killed with
//! SIGKILL leaves a tracer spinning with interrupts off on its CPUs, and the next rtgauge that measures
//! ([`clean_killed_run`], from the session) puts them back.
//!
//! Reading: `trace_pipe`, non-blocking, once per tick, so a long run never fills the ring buffer.

pub mod hwlat;
pub mod osnoise;

use crate::observe::ProbeObserver;
use crate::stop::StopFlag;
use crate::trace::{mount_tracefs, read_whole_lines, unmount_tracefs, TRACEFS};
use rtgauge_model::hwnoise::{HwGap, HwTracer, HwnoiseConfig, HwnoiseCpu, HwnoiseResult, MAX_GAPS};
use rtgauge_model::kind::StopReason;
use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a run that switched a tracer on keeps its pid, its instance (osnoise) and the settings it found.
const SAVED: &str = "/run/rtgauge/hwlat-saved";

/// Held by the run that has a tracer on: a second run is refused, and a leftover [`SAVED`] whose lock can
/// be taken is a killed run's (no pid to be reused).
const LOCK: &str = "/run/rtgauge/hwlat.lock";

/// Why the probe could not measure.
#[derive(Debug, thiserror::Error)]
pub enum HwnoiseError {
    /// No tracefs.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// The kernel has neither detector (or not the one asked for).
    #[error("this kernel ({release}) {lacks} (available_tracers: {available}): {fix}")]
    NoTracer {
        /// `uname -r`.
        release: String,
        /// What it lacks.
        lacks: String,
        /// What it offers.
        available: String,
        /// What to boot.
        fix: &'static str,
    },
    /// A tracer is already running (someone else's, or a leftover of rtgauge's own): the sentence says which.
    #[error("{0}")]
    Busy(String),
    /// What was asked cannot be done by the tracer chosen.
    #[error("{0}")]
    Unsupported(String),
    /// Setting the tracer up (or opening its pipe) failed; the drop of what was armed has put it back.
    #[error("setting up the tracer: {path}: {err} (what the setup had changed was put back)")]
    Io {
        /// The tracefs file.
        path: String,
        /// What the OS said.
        err: std::io::Error,
    },
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct HwnoisePlan {
    /// The settings (cpus, mode, threshold, width, window, duration); `tracer` is set to the one used.
    pub config: HwnoiseConfig,
    /// The tracer asked for; `None`: hwlat where the kernel has it, else osnoise with interrupts off.
    pub tracer: Option<HwTracer>,
    /// How often the observer ticks (and `trace_pipe` is read).
    pub tick: Duration,
}

fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The detector to use: the one asked for if the kernel has it; without a wish hwlat, else osnoise with
/// interrupts off; or the error that says what to boot.
fn choose(root: &Path, wanted: Option<HwTracer>) -> Result<HwTracer, HwnoiseError> {
    let available = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    let hwlat = available.split_whitespace().any(|t| t == "hwlat");
    let osnoise = osnoise::offered(root);
    let none = |lacks: &str, fix| HwnoiseError::NoTracer {
        release: release(),
        lacks: lacks.into(),
        available: available.trim().to_string(),
        fix,
    };
    const HWLAT_FIX: &str = "boot a kernel built with CONFIG_HWLAT_TRACER — Debian's \
                             linux-image-rt-amd64 and most distribution kernels have it";
    match wanted {
        Some(HwTracer::Hwlat) if hwlat => Ok(HwTracer::Hwlat),
        Some(HwTracer::Hwlat) => Err(none("has no hwlat tracer", HWLAT_FIX)),
        Some(HwTracer::Osnoise) if osnoise => Ok(HwTracer::Osnoise),
        Some(HwTracer::Osnoise) => Err(none(
            osnoise::lacking(root),
            "boot Linux 6.3 or later built with CONFIG_OSNOISE_TRACER (Debian 12's bookworm-backports \
             linux-image-rt-amd64 6.12 has it), or use --tracer hwlat",
        )),
        None if hwlat => Ok(HwTracer::Hwlat),
        None if osnoise => Ok(HwTracer::Osnoise),
        None => Err(none(
            "has no hwlat tracer and no osnoise tracer with OSNOISE_IRQ_DISABLE",
            "boot a kernel built with CONFIG_HWLAT_TRACER — Debian's linux-image-rt-amd64 and most \
             distribution kernels have it (or Linux 6.3+ with CONFIG_OSNOISE_TRACER)",
        )),
    }
}

/// Why this kernel cannot run the probe (no detector, or not the one asked for), or `None`; tracefs left
/// as found. Not being allowed to (no root, no tracefs) is not a property of the platform: that is the
/// run's error.
pub fn unavailable(wanted: Option<HwTracer>) -> Option<String> {
    let Ok(owns) = mount_tracefs() else {
        return None;
    };
    let r = choose(Path::new(TRACEFS), wanted);
    if owns {
        unmount_tracefs();
    }
    r.err().map(|e| e.to_string())
}

/// [`LOCK`], taken without waiting; `None` when another run holds it.
fn lock() -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    let _ = std::fs::create_dir_all("/run/rtgauge");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .ok()?;
    // SAFETY: flock on a descriptor this File owns.
    let ok = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    ok.then_some(f)
}

fn write(root: &Path, file: &str, value: &str) -> Result<(), HwnoiseError> {
    let p = root.join(file);
    std::fs::write(&p, value).map_err(|err| HwnoiseError::Io {
        path: p.display().to_string(),
        err,
    })
}

/// Write a width (µs) no longer than a window (µs) into `width_file` and `window_file`: the kernel keeps
/// width ≤ window at every write, so the window goes first unless it shrinks below the width in force.
fn write_width_window(
    r: &Path,
    (width_file, width): (&str, u64),
    (window_file, window): (&str, u64),
) -> Result<(), HwnoiseError> {
    let (width, window) = (width.to_string(), window.to_string());
    if write(r, window_file, &window).is_err() {
        write(r, width_file, &width)?;
    }
    write(r, window_file, &window)?;
    write(r, width_file, &width)
}

/// The value a file is restored with: what was read, or the part of it the tracer's module says.
fn restorable(file: &str, text: &str) -> String {
    hwlat::restorable(file, text)
        .or_else(|| osnoise::restorable(file, text))
        .unwrap_or_else(|| text.trim().to_string())
}

/// Write the saved values back, twice: width and window are refused in an order that would make the width
/// exceed the window, and the second pass writes what the first could not. A value of several words
/// (osnoise's options) is written a word at a time.
fn restore(root: &Path, saved: &[(impl AsRef<str>, String)]) {
    for _ in 0..2 {
        for (f, v) in saved {
            let p = root.join(f.as_ref());
            if f.as_ref() == "osnoise/options" {
                for w in v.split_whitespace() {
                    let _ = std::fs::write(&p, w);
                }
            } else if f.as_ref() == "osnoise/cpus" {
                let _ = std::fs::write(&p, osnoise::cpus_value(v));
            } else {
                let _ = std::fs::write(&p, v);
            }
        }
    }
}

/// A tracer switched on, and put back as it was when dropped.
struct Armed {
    tracer: HwTracer,
    root: PathBuf,
    /// Where the tracer's `trace_pipe` and `per_cpu/` are: tracefs's top level (hwlat) or the probe's
    /// instance (osnoise), which is removed when dropped.
    dir: PathBuf,
    saved: Vec<(&'static str, String)>,
    owns_mount: bool,
    /// [`LOCK`], held while the tracer is ours (released by the kernel if this process is killed).
    _lock: std::fs::File,
}

impl Armed {
    /// Choose the tracer ([`choose`]), refuse a busy one, save what it will change (memory and [`SAVED`]),
    /// then let the tracer's module set it up. Every error after the save is undone by the drop.
    fn arm(wanted: Option<HwTracer>, config: &HwnoiseConfig) -> Result<Armed, HwnoiseError> {
        let owns_mount = mount_tracefs()?;
        let root = PathBuf::from(TRACEFS);
        let unmount = || {
            if owns_mount {
                unmount_tracefs();
            }
        };
        let tracer = match choose(&root, wanted) {
            Ok(HwTracer::Osnoise) if config.mode == "round-robin" => {
                Err(HwnoiseError::Unsupported(format!(
                    "--mode round-robin is the hwlat tracer's{}; osnoise samples every chosen CPU at \
                     once (per-cpu)",
                    if wanted.is_none() {
                        ", which this kernel lacks"
                    } else {
                        ""
                    }
                )))
            }
            t => t,
        };
        let tracer = match tracer {
            Ok(t) => t,
            Err(e) => {
                unmount();
                return Err(e);
            }
        };
        let busy = match lock() {
            None => Err(in_use("another rtgauge hwnoise run")),
            Some(lock) => busy(&root, tracer).map_or(Ok(lock), Err),
        };
        let lock = match busy {
            Ok(l) => l,
            Err(who) => {
                unmount();
                return Err(HwnoiseError::Busy(who));
            }
        };
        let files = match tracer {
            HwTracer::Hwlat => hwlat::FILES,
            HwTracer::Osnoise => osnoise::FILES,
        };
        let saved: Vec<(&'static str, String)> = files
            .iter()
            .filter_map(|f| {
                Some((
                    *f,
                    restorable(f, &std::fs::read_to_string(root.join(f)).ok()?),
                ))
            })
            .collect();
        let instance = tracer == HwTracer::Osnoise;
        let dir = if instance {
            root.join("instances").join(osnoise::INSTANCE)
        } else {
            root.clone()
        };
        let _ = std::fs::create_dir_all("/run/rtgauge");
        let mut marker = format!("{}\n", std::process::id());
        if instance {
            marker.push_str(&format!("instance={}\n", osnoise::INSTANCE));
        }
        for (f, v) in &saved {
            marker.push_str(&format!("{f}={v}\n"));
        }
        let _ = std::fs::write(SAVED, marker);
        let armed = Armed {
            tracer,
            root,
            dir,
            saved,
            owns_mount,
            _lock: lock,
        };
        match tracer {
            HwTracer::Hwlat => hwlat::arm(&armed.root, config)?,
            HwTracer::Osnoise => osnoise::arm(&armed.root, &armed.dir, config)?,
        }
        Ok(armed)
    }
}

fn in_use(who: &str) -> String {
    format!("the kernel's tracer is in use ({who}): rtgauge does not take it from another user")
}

/// Why `tracer` cannot start now, or `None`: any tracer that spins with interrupts off (hwlat, osnoise,
/// timerlat) at the top level or in an instance — rtla's, another tool's — fights it for the CPUs and the
/// global `tracing_thresh`; hwlat also needs the top level's one tracer; and the probe's own instance left
/// by a run whose record is gone is said as such, with how to remove it.
fn busy(root: &Path, tracer: HwTracer) -> Option<String> {
    let spins = |t: &str| matches!(t, "hwlat" | "osnoise" | "timerlat");
    let read = |p: &Path| {
        std::fs::read_to_string(p.join("current_tracer"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let top = read(root);
    if spins(&top) || (tracer == HwTracer::Hwlat && top != "nop" && !top.is_empty()) {
        return Some(in_use(&format!("current_tracer is {top}")));
    }
    for e in std::fs::read_dir(root.join("instances")).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == osnoise::INSTANCE {
            return Some(format!(
                "a tracing instance {name} is left from an rtgauge run whose record of the settings it \
                 changed is gone: remove it (rmdir {}) and check the osnoise settings",
                e.path().display()
            ));
        }
        let t = read(&e.path());
        if spins(&t) {
            return Some(in_use(&format!(
                "tracing instance {name} runs the {t} tracer"
            )));
        }
    }
    None
}

/// Switch the tracer off (the instance's, or the top level's), restore `saved`, then remove the instance:
/// in that order, so that a run killed half-way still leaves the instance for the next run to find.
/// Whether the tracer is off and the instance gone.
fn put_back(root: &Path, instance: Option<&str>, saved: &[(impl AsRef<str>, String)]) -> bool {
    let dir = instance.map(|n| root.join("instances").join(n));
    let tracer = dir.as_deref().unwrap_or(root).join("current_tracer");
    let off = !tracer.exists() || std::fs::write(&tracer, "nop").is_ok();
    restore(root, saved);
    let removed = dir.is_none_or(|d| std::fs::remove_dir(&d).is_ok() || !d.exists());
    off && removed
}

impl Drop for Armed {
    /// The marker is kept when the tracer could not be switched off (a reader holding the top level's
    /// `trace_pipe` makes the kernel refuse, EBUSY): the next run tries again.
    fn drop(&mut self) {
        let instance = (self.tracer == HwTracer::Osnoise).then_some(osnoise::INSTANCE);
        if put_back(&self.root, instance, &self.saved) {
            let _ = std::fs::remove_file(SAVED);
        }
        if self.owns_mount {
            unmount_tracefs();
        }
    }
}

/// Put back what a killed run left (its pid in [`SAVED`] gone): the tracer off (its instance removed) and
/// the settings as that run found them. What was done, for the run to say.
pub fn clean_killed_run() -> Option<String> {
    let text = std::fs::read_to_string(SAVED).ok()?;
    let mut lines = text.lines().peekable();
    let pid: u32 = lines.next()?.trim().parse().ok()?;
    let instance = lines
        .next_if(|l| l.starts_with("instance="))
        .map(|l| l.trim_start_matches("instance=").to_string());
    // A run that is alive holds the lock.
    let _lock = lock()?;
    let owns = mount_tracefs().unwrap_or(false);
    let root = Path::new(TRACEFS);
    let known = |f: &str| hwlat::FILES.contains(&f) || osnoise::FILES.contains(&f);
    let saved: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once('=')
                .map(|(f, v)| (f.to_string(), v.to_string()))
        })
        .filter(|(f, _)| known(f))
        .collect();
    // Only what that run left: its instance still there, or the hwlat tracer on (or already off: killed
    // between switching it off and restoring). Someone else's tracer since then is not touched.
    let current = std::fs::read_to_string(root.join("current_tracer")).unwrap_or_default();
    let (on, what) = match &instance {
        Some(name) => (
            name == osnoise::INSTANCE && root.join("instances").join(name).exists(),
            "switched off the osnoise tracer (its instance removed)",
        ),
        None => match current.trim() {
            "hwlat" => (true, "switched off the hwlat tracer"),
            "nop" => (
                true,
                "found the hwlat tracer off but its settings not restored",
            ),
            _ => (false, ""),
        },
    };
    let done = on && put_back(root, instance.as_deref(), &saved);
    if done || !on {
        let _ = std::fs::remove_file(SAVED);
    }
    if owns {
        unmount_tracefs();
    }
    done.then(|| {
        format!("{what} a killed rtgauge run (pid {pid}) had left, and restored its settings")
    })
}

/// A trace stamp `5.790581` (seconds, up to 9 decimals) in ns.
pub(crate) fn stamp_ns(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if secs.is_empty()
        || frac.is_empty()
        || frac.len() > 9
        || !(secs.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let ns = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    secs.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(ns)
}

/// A trace line's header, `comm-pid [cpu] flags stamp: payload`: (CPU, stamp in ns, payload). The stamp is
/// the first `digits.digits: ` with a `[cpu]` before it (a comm may hold spaces, brackets and colons); the
/// payload is what the event printed, so a `trace_marker` line (`tracing_mark_write: …`) never reads as a
/// tracer's own.
pub(crate) fn header(line: &str) -> Option<(u32, u64, &str)> {
    let mut from = 0;
    while let Some(i) = line.get(from..)?.find(": ") {
        let end = from + i;
        from = end + 2;
        let word = line[..end].rsplit(' ').next().unwrap_or_default();
        let Some(ns) = stamp_ns(word) else {
            continue;
        };
        let before = &line[..end - word.len()];
        let cpu = before.rfind('[').and_then(|open| {
            let close = open + before[open..].find(']')?;
            before[open + 1..close].trim().parse::<u32>().ok()
        });
        if let Some(cpu) = cpu {
            return Some((cpu, ns, &line[end + 2..]));
        }
    }
    None
}

/// What a tracer's lines become: one entry per reported window with its stamp (ns, in the clock the
/// tracer stamps with), and per CPU the time sampled and the noise in it where the tracer says.
#[derive(Debug, Default)]
pub struct Entries {
    /// (window, stamp).
    pub windows: Vec<(HwGap, u64)>,
    /// CPU → (sampled ns, noise ns).
    pub totals: BTreeMap<u32, (u64, u64)>,
}

/// Reads `trace_pipe` without blocking and keeps what it reports.
struct Reader {
    pipe: std::fs::File,
    buf: Vec<u8>,
    partial: Vec<u8>,
    entries: Entries,
    /// osnoise's noises are gathered into their period's window.
    periods: Option<osnoise::Periods>,
}

impl Reader {
    fn open(dir: &Path, tracer: HwTracer) -> Result<Reader, HwnoiseError> {
        let p = dir.join("trace_pipe");
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .map_err(|err| HwnoiseError::Io {
                path: p.display().to_string(),
                err,
            })?;
        Ok(Reader {
            pipe,
            buf: vec![0; 16384],
            partial: Vec::new(),
            entries: Entries::default(),
            periods: (tracer == HwTracer::Osnoise).then(osnoise::Periods::default),
        })
    }

    fn drain(&mut self) {
        let (entries, periods) = (&mut self.entries, &mut self.periods);
        read_whole_lines(
            &mut self.pipe,
            &mut self.buf,
            &mut self.partial,
            &mut |whole| {
                for l in String::from_utf8_lossy(whole).lines() {
                    match periods {
                        Some(p) => p.take(l, entries),
                        None => entries.windows.extend(hwlat::parse_entry(l)),
                    }
                }
            },
        );
    }
}

/// Measure until the duration, a stop or an error; the tracer put back on every path.
pub fn run(
    plan: &HwnoisePlan,
    stop: &StopFlag,
    observer: &mut dyn ProbeObserver<HwnoiseResult>,
) -> Result<HwnoiseResult, HwnoiseError> {
    // The observers first: their first reads of the sampled CPUs (SMI counts) must not wait behind the
    // tracer's interrupts-off width.
    observer.start(None);
    // The probe's start in both clocks a tracer stamps with (hwlat: the wall clock; the osnoise instance
    // traces with CLOCK_MONOTONIC), taken before the tracer is on so that its first windows are not
    // clamped to 0.
    let (wall0, mono0) = (now_ns(libc::CLOCK_REALTIME), now_ns(libc::CLOCK_MONOTONIC));
    let armed = Armed::arm(plan.tracer, &plan.config)?;
    let tracer = armed.tracer;
    let plan = &HwnoisePlan {
        config: HwnoiseConfig {
            tracer,
            ..plan.config.clone()
        },
        ..plan.clone()
    };
    let mut reader = Reader::open(&armed.dir, tracer)?;
    let start = match tracer {
        HwTracer::Hwlat => wall0,
        HwTracer::Osnoise => mono0,
    };
    let t0 = Instant::now();
    let stop_reason = loop {
        std::thread::sleep(plan.tick);
        reader.drain();
        let elapsed = t0.elapsed();
        observer.tick(elapsed, &(), &mut || {
            summarise(
                plan,
                &reader.entries,
                start,
                elapsed,
                StopReason::Duration,
                0,
            )
        });
        if stop.is_set() {
            break StopReason::Signal;
        }
        if plan
            .config
            .duration
            .is_some_and(|d| elapsed.as_nanos() as u64 >= d.as_ns())
        {
            break StopReason::Duration;
        }
    };
    reader.drain();
    if let Some(p) = reader.periods.take() {
        p.finish(&mut reader.entries);
    }
    let lost = plan
        .config
        .cpus
        .iter()
        .map(|c| {
            let stats = armed.dir.join(format!("per_cpu/cpu{c}/stats"));
            crate::trace::parse_overrun(&std::fs::read_to_string(stats).unwrap_or_default())
        })
        .sum();
    let elapsed = t0.elapsed();
    let mut r = summarise(plan, &reader.entries, start, elapsed, stop_reason, lost);
    match tracer {
        HwTracer::Hwlat => {
            let mode = std::fs::read_to_string(armed.root.join("hwlat_detector/mode"))
                .ok()
                .and_then(|m| hwlat::restorable("hwlat_detector/mode", &m))
                .unwrap_or_else(|| "none (this kernel has no hwlat_detector/mode)".into());
            r.method = format!("the kernel's hwlat tracer, mode {mode}");
            r.config.mode = mode;
        }
        HwTracer::Osnoise => {
            r.method =
                "the kernel's osnoise tracer with OSNOISE_IRQ_DISABLE (rtla hwnoise's method), \
                        a sampling thread per CPU"
                    .into();
            r.config.mode = "per-cpu".into();
        }
    }
    // trace_pipe closed first: the kernel refuses to change the tracer while a reader holds it (EBUSY).
    drop(reader);
    drop(armed);
    Ok(r)
}

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The result from the entries read so far; `start` is the probe's start in the entries' clock.
pub fn summarise(
    plan: &HwnoisePlan,
    entries: &Entries,
    start: u64,
    elapsed: Duration,
    stop_reason: StopReason,
    lost: u64,
) -> HwnoiseResult {
    let mut gaps: Vec<HwGap> = entries
        .windows
        .iter()
        .map(|(g, stamp)| HwGap {
            at_ns: stamp.saturating_sub(start),
            ..g.clone()
        })
        .collect();
    let cpus = plan
        .config
        .cpus
        .iter()
        .map(|cpu| {
            let mut rec = crate::recorder::LatencyRecorder::new();
            let mut nmi = 0;
            for g in gaps.iter().filter(|g| g.cpu == cpu) {
                rec.record(g.gap_ns().max(1));
                nmi = u64::saturating_add(nmi, g.nmi_count);
            }
            let totals = (plan.config.tracer == HwTracer::Osnoise)
                .then(|| entries.totals.get(&cpu).copied().unwrap_or_default());
            HwnoiseCpu {
                cpu,
                gaps: rec.stats(),
                nmi_count: nmi,
                sampled_ns: totals.map(|t| t.0),
                noise_ns: totals.map(|t| t.1),
            }
        })
        .collect();
    let total = gaps.len() as u64;
    gaps.sort_by_key(|g| (std::cmp::Reverse(g.gap_ns()), g.at_ns));
    gaps.truncate(MAX_GAPS);
    HwnoiseResult {
        config: plan.config.clone(),
        method: format!("the kernel's {} tracer", plan.config.tracer.as_str()),
        cpus,
        gaps,
        gaps_total: total,
        lost,
        stop_reason,
        elapsed_ns: elapsed.as_nanos() as u64,
        why: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_restored_by_its_own_words() {
        assert_eq!(
            restorable("hwlat_detector/mode", "none [round-robin] per-cpu\n"),
            "round-robin"
        );
        assert_eq!(restorable("tracing_thresh", "10\n"), "10");
        assert_eq!(
            restorable(
                "osnoise/options",
                "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP NO_OSNOISE_PREEMPT_DISABLE NO_OSNOISE_IRQ_DISABLE \n"
            ),
            "OSNOISE_WORKLOAD NO_OSNOISE_IRQ_DISABLE"
        );
    }

    #[test]
    fn the_osnoise_totals_are_kept_only_for_osnoise() {
        let mut config = HwnoiseConfig {
            tracer: HwTracer::Osnoise,
            cpus: rtgauge_model::CpuSet::parse("0-1").unwrap(),
            mode: "per-cpu".into(),
            threshold_ns: 10_000,
            width_ns: 900_000_000,
            window_ns: 1_000_000_000,
            duration: None,
        };
        let mut e = Entries::default();
        e.totals.insert(1, (900_000_000, 9_000_000));
        let plan = |config: &HwnoiseConfig| HwnoisePlan {
            config: config.clone(),
            tracer: None,
            tick: Duration::from_millis(100),
        };
        let r = summarise(
            &plan(&config),
            &e,
            0,
            Duration::ZERO,
            StopReason::Duration,
            0,
        );
        assert_eq!(r.cpus[0].sampled_ns, Some(0), "sampled nothing: 0, said");
        assert_eq!(r.cpus[1].available_pct(), Some(99.0));
        config.tracer = HwTracer::Hwlat;
        let r = summarise(
            &plan(&config),
            &e,
            0,
            Duration::ZERO,
            StopReason::Duration,
            0,
        );
        assert_eq!(
            (r.cpus[1].sampled_ns, r.cpus[1].available_pct()),
            (None, None)
        );
    }
}

//! The hardware/firmware noise probe: drives the kernel's `hwlat` tracer (`kernel/trace/trace_hwlat.c`,
//! hwlatdetect's method) on the chosen CPUs and reads what it reports.
//!
//! The tracer lives in tracefs's top level only (it has no instances), so the settings it needs are saved
//! first and restored on every exit path: `current_tracer`, `tracing_thresh`, `tracing_cpumask`,
//! `tracing_on`, `hwlat_detector/{width,window,mode}`. The saved values are also written to [`SAVED`] with
//! this process's pid: a run killed with SIGKILL leaves the tracer spinning with interrupts off on its CPUs,
//! and the next rtgauge that measures ([`clean_killed_run`], from the session) puts them back.
//!
//! Reading: `trace_pipe`, non-blocking, once per tick, so a long run never fills the ring buffer (one entry
//! per window at most per CPU). Each entry is one window whose largest gap reached `tracing_thresh`.

use crate::observe::ProbeObserver;
use crate::stop::StopFlag;
use crate::trace::{mount_tracefs, read_whole_lines, unmount_tracefs, TRACEFS};
use rtgauge_model::hwnoise::{HwGap, HwnoiseConfig, HwnoiseCpu, HwnoiseResult, MAX_GAPS};
use rtgauge_model::kind::StopReason;
use rtgauge_model::CpuSet;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a run that switched the hwlat tracer on keeps its pid and the settings it found.
const SAVED: &str = "/run/rtgauge/hwlat-saved";

/// The files the probe changes, relative to tracefs, in the order they are restored (the tracer first, so
/// that nothing spins while the rest is put back).
const FILES: &[&str] = &[
    "current_tracer",
    "tracing_thresh",
    "tracing_cpumask",
    "hwlat_detector/width",
    "hwlat_detector/window",
    "hwlat_detector/mode",
    "tracing_on",
];

/// Why the probe could not measure.
#[derive(Debug, thiserror::Error)]
pub enum HwnoiseError {
    /// No tracefs.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// The kernel has no hwlat tracer.
    #[error(
        "this kernel ({release}) has no hwlat tracer (available_tracers: {available}): boot a kernel built \
         with CONFIG_HWLAT_TRACER — Debian's linux-image-rt-amd64 and most distribution kernels have it"
    )]
    NoTracer {
        /// `uname -r`.
        release: String,
        /// What it offers.
        available: String,
    },
    /// The tracer is already running for someone else.
    #[error("the kernel's tracer is in use ({0}): tracefs has one current tracer, and rtgauge does not take it from another user")]
    Busy(String),
    /// Setting the tracer up failed.
    #[error("{path}: {source}")]
    Io {
        /// The tracefs file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct HwnoisePlan {
    /// The settings (cpus, mode, threshold, width, window, duration).
    pub config: HwnoiseConfig,
    /// How often the observer ticks (and `trace_pipe` is read).
    pub tick: Duration,
}

/// One tracer entry: (CPU, the window's gap record, its wall-clock stamp in ns since the epoch).
pub fn parse_entry(line: &str) -> Option<(HwGap, u64)> {
    let (head, rest) = line.split_once("inner/outer(us):")?;
    // The hwlat form only: "#<seq>" right before (other top-level events never forge a gap).
    let seq = head.trim_end().rsplit(char::is_whitespace).next()?;
    let seq_ok = seq
        .strip_prefix('#')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if !seq_ok {
        return None;
    }
    let cpu = head
        .split_once('[')?
        .1
        .split_once(']')?
        .0
        .trim()
        .parse()
        .ok()?;
    let (inner, rest) = rest.trim_start().split_once('/')?;
    let outer: u64 = rest.split_whitespace().next()?.parse().ok()?;
    let field = |name: &str| rest.split_whitespace().find_map(|w| w.strip_prefix(name));
    let ts = field("ts:")?;
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = frac.get(..9).unwrap_or(frac);
    let ns = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    let wall = secs
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(ns)?;
    let num = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let us = |v: u64| v.checked_mul(1000);
    Some((
        HwGap {
            cpu,
            at_ns: 0,
            inner_ns: us(inner.trim().parse().ok()?)?,
            outer_ns: us(outer)?,
            count: num("count:").max(1),
            nmi_count: num("nmi-count:"),
            nmi_ns: us(num("nmi-total:"))?,
        },
        wall,
    ))
}

/// The lowercase hex `tracing_cpumask` of `cpus` (32-bit groups joined by commas, as the kernel prints it).
pub fn cpumask(cpus: &CpuSet) -> String {
    let top = cpus.iter().max().unwrap_or(0);
    let groups = top / 32 + 1;
    (0..groups)
        .rev()
        .map(|g| {
            let bits = cpus
                .iter()
                .filter(|c| c / 32 == g)
                .fold(0u32, |a, c| a | 1 << (c % 32));
            format!("{bits:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The hwlat tracer among the kernel's tracers, or the error that says what to boot.
fn has_tracer(root: &Path) -> Result<(), HwnoiseError> {
    let available = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    if available.split_whitespace().any(|t| t == "hwlat") {
        return Ok(());
    }
    Err(HwnoiseError::NoTracer {
        release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        available: available.trim().to_string(),
    })
}

/// Why this kernel cannot run the probe (it has no hwlat tracer), or `None`; tracefs left as found. Not
/// being allowed to (no root, no tracefs) is not a property of the platform: that is the run's error.
pub fn unavailable() -> Option<String> {
    let Ok(owns) = mount_tracefs() else {
        return None;
    };
    let r = has_tracer(Path::new(TRACEFS));
    if owns {
        unmount_tracefs();
    }
    r.err().map(|e| e.to_string())
}

/// The tracer switched on, and put back as it was when dropped.
struct Armed {
    root: PathBuf,
    saved: Vec<(&'static str, String)>,
    owns_mount: bool,
    /// [`LOCK`], held while the tracer is ours (released by the kernel if this process is killed).
    _lock: std::fs::File,
}

/// Held by the run that has the tracer on: a second run is refused, and a leftover [`SAVED`] whose lock
/// can be taken is a killed run's (no pid to be reused).
const LOCK: &str = "/run/rtgauge/hwlat.lock";

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
    std::fs::write(&p, value).map_err(|source| HwnoiseError::Io {
        path: p.display().to_string(),
        source,
    })
}

/// The value a file is restored with: `current_tracer`'s name, the mode's bracketed choice
/// (`none [round-robin] per-cpu`), the others as read.
fn restorable(file: &str, text: &str) -> String {
    let t = text.trim();
    if file == "hwlat_detector/mode" {
        if let Some(m) = t
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        {
            return m.to_string();
        }
    }
    t.to_string()
}

/// Write the saved values back, twice: width and window are refused in an order that would make the width
/// exceed the window, and the second pass writes what the first could not.
fn restore(root: &Path, saved: &[(impl AsRef<str>, String)]) {
    for _ in 0..2 {
        for (f, v) in saved {
            let _ = std::fs::write(root.join(f.as_ref()), v);
        }
    }
}

impl Armed {
    fn arm(config: &HwnoiseConfig) -> Result<Armed, HwnoiseError> {
        let owns_mount = mount_tracefs()?;
        let root = PathBuf::from(TRACEFS);
        if let Err(e) = has_tracer(&root) {
            if owns_mount {
                unmount_tracefs();
            }
            return Err(e);
        }
        let busy = |who: String| {
            if owns_mount {
                unmount_tracefs();
            }
            Err(HwnoiseError::Busy(who))
        };
        let Some(lock) = lock() else {
            return busy("another rtgauge hwnoise run".into());
        };
        let current = std::fs::read_to_string(root.join("current_tracer")).unwrap_or_default();
        if current.trim() != "nop" {
            return busy(format!("current_tracer is {}", current.trim()));
        }
        let saved: Vec<(&'static str, String)> = FILES
            .iter()
            .filter_map(|f| {
                Some((
                    *f,
                    restorable(f, &std::fs::read_to_string(root.join(f)).ok()?),
                ))
            })
            .collect();
        let _ = std::fs::create_dir_all("/run/rtgauge");
        let mut marker = format!("{}\n", std::process::id());
        for (f, v) in &saved {
            marker.push_str(&format!("{f}={v}\n"));
        }
        let _ = std::fs::write(SAVED, marker);
        let armed = Armed {
            root,
            saved,
            owns_mount,
            _lock: lock,
        };
        let r = &armed.root;
        write(r, "current_tracer", "nop")?;
        write(r, "trace", "")?;
        write(r, "tracing_cpumask", &cpumask(&config.cpus))?;
        write(
            r,
            "tracing_thresh",
            &(config.threshold_ns / 1000).max(1).to_string(),
        )?;
        // The kernel keeps width ≤ window at every write: the window first unless it shrinks below the
        // width in force.
        let (width, window) = (
            (config.width_ns / 1000).to_string(),
            (config.window_ns / 1000).to_string(),
        );
        if write(r, "hwlat_detector/window", &window).is_err() {
            write(r, "hwlat_detector/width", &width)?;
        }
        write(r, "hwlat_detector/window", &window)?;
        write(r, "hwlat_detector/width", &width)?;
        if r.join("hwlat_detector/mode").exists() {
            write(r, "hwlat_detector/mode", &config.mode)?;
        }
        write(r, "tracing_on", "1")?;
        write(r, "current_tracer", "hwlat")?;
        Ok(armed)
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let _ = std::fs::write(self.root.join("current_tracer"), "nop");
        restore(&self.root, &self.saved);
        let _ = std::fs::remove_file(SAVED);
        if self.owns_mount {
            unmount_tracefs();
        }
    }
}

/// Put back what a killed run left (its pid in [`SAVED`] gone): the tracer off and its settings as that run
/// found them. What was done, for the run to say.
pub fn clean_killed_run() -> Option<String> {
    let text = std::fs::read_to_string(SAVED).ok()?;
    let mut lines = text.lines();
    let pid: u32 = lines.next()?.trim().parse().ok()?;
    // A run that is alive holds the lock.
    let _lock = lock()?;
    let owns = mount_tracefs().unwrap_or(false);
    let root = Path::new(TRACEFS);
    let saved: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once('=')
                .map(|(f, v)| (f.to_string(), v.to_string()))
        })
        .filter(|(f, _)| FILES.contains(&f.as_str()))
        .collect();
    // Only what that run left: the tracer still on. Someone else's since then is not touched.
    let on =
        std::fs::read_to_string(root.join("current_tracer")).is_ok_and(|t| t.trim() == "hwlat");
    let done = on && std::fs::write(root.join("current_tracer"), "nop").is_ok();
    if done {
        restore(root, &saved);
    }
    if done || !on {
        let _ = std::fs::remove_file(SAVED);
    }
    if owns {
        unmount_tracefs();
    }
    done.then(|| {
        format!("switched off the hwlat tracer a killed rtgauge run (pid {pid}) had left on, and restored its settings")
    })
}

/// Reads `trace_pipe` without blocking and keeps what it reports.
struct Reader {
    pipe: std::fs::File,
    buf: Vec<u8>,
    partial: Vec<u8>,
    gaps: Vec<(HwGap, u64)>,
}

impl Reader {
    fn open(root: &Path) -> Result<Reader, HwnoiseError> {
        let p = root.join("trace_pipe");
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .map_err(|source| HwnoiseError::Io {
                path: p.display().to_string(),
                source,
            })?;
        Ok(Reader {
            pipe,
            buf: vec![0; 16384],
            partial: Vec::new(),
            gaps: Vec::new(),
        })
    }

    fn drain(&mut self) {
        let gaps = &mut self.gaps;
        read_whole_lines(
            &mut self.pipe,
            &mut self.buf,
            &mut self.partial,
            &mut |whole| {
                gaps.extend(
                    String::from_utf8_lossy(whole)
                        .lines()
                        .filter_map(parse_entry),
                );
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
    let armed = Armed::arm(&plan.config)?;
    let mut reader = Reader::open(&armed.root)?;
    let start_wall = wall_ns();
    let t0 = Instant::now();
    let stop_reason = loop {
        std::thread::sleep(plan.tick);
        reader.drain();
        let elapsed = t0.elapsed();
        observer.tick(elapsed, &(), &mut || {
            summarise(
                plan,
                &reader.gaps,
                start_wall,
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
            .duration_ns
            .is_some_and(|d| elapsed.as_nanos() as u64 >= d)
        {
            break StopReason::Duration;
        }
    };
    reader.drain();
    let lost = plan
        .config
        .cpus
        .iter()
        .map(|c| {
            let stats = armed.root.join(format!("per_cpu/cpu{c}/stats"));
            crate::trace::parse_overrun(&std::fs::read_to_string(stats).unwrap_or_default())
        })
        .sum();
    let elapsed = t0.elapsed();
    let mut r = summarise(plan, &reader.gaps, start_wall, elapsed, stop_reason, lost);
    let mode = std::fs::read_to_string(armed.root.join("hwlat_detector/mode"))
        .map(|m| restorable("hwlat_detector/mode", &m))
        .unwrap_or_else(|_| "none (this kernel has no hwlat_detector/mode)".into());
    r.method = format!("the kernel's hwlat tracer, mode {mode}");
    r.config.mode = mode;
    // trace_pipe closed first: the kernel refuses to change the tracer while a reader holds it (EBUSY).
    drop(reader);
    drop(armed);
    Ok(r)
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The result from the entries read so far.
pub fn summarise(
    plan: &HwnoisePlan,
    entries: &[(HwGap, u64)],
    start_wall_ns: u64,
    elapsed: Duration,
    stop_reason: StopReason,
    lost: u64,
) -> HwnoiseResult {
    let mut gaps: Vec<HwGap> = entries
        .iter()
        .map(|(g, wall)| HwGap {
            at_ns: wall.saturating_sub(start_wall_ns),
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
            HwnoiseCpu {
                cpu,
                gaps: rec.stats(),
                nmi_count: nmi,
            }
        })
        .collect();
    let total = gaps.len() as u64;
    gaps.sort_by_key(|g| (std::cmp::Reverse(g.gap_ns()), g.at_ns));
    gaps.truncate(MAX_GAPS);
    HwnoiseResult {
        config: plan.config.clone(),
        method: "the kernel's hwlat tracer".into(),
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
    fn an_entry_is_read_with_its_cpu_gaps_and_nmis() {
        let l = "          <...>-1366    [001] d....  1034.565617: #1     inner/outer(us):   12/14    ts:1700000000.123456789 count:3";
        let (g, wall) = parse_entry(l).unwrap();
        assert_eq!(
            (g.cpu, g.inner_ns, g.outer_ns, g.count),
            (1, 12_000, 14_000, 3)
        );
        assert_eq!(g.gap_ns(), 14_000);
        assert_eq!(wall, 1_700_000_000_123_456_789);
        let l = " hwlatd-77 [012] dn... 99.000001: #42    inner/outer(us): 20012/0     ts:1700000001.5 count:1 nmi-total:7 nmi-count:2";
        let (g, wall) = parse_entry(l).unwrap();
        assert_eq!(
            (g.cpu, g.inner_ns, g.nmi_count, g.nmi_ns),
            (12, 20_012_000, 2, 7_000)
        );
        assert_eq!(wall, 1_700_000_001_500_000_000);
        // Kernels before 5.14 print no count.
        let (g, _) =
            parse_entry("x-1 [000] .... 1.0: #1 inner/outer(us): 5/11 ts:10.000000001").unwrap();
        assert_eq!(g.count, 1);
        for bad in [
            "",
            "# tracer: hwlat",
            "x [001] inner/outer(us): a/b ts:1.0",
            "sh-1 [001] .... 5.0: tracing_mark_write: inner/outer(us): 9999/9999 ts:1.0",
            "x-1 [001] .... 1.0: #1 inner/outer(us): 1/2 ts:1.12345678é",
            "x-1 [001] .... 1.0: #1 inner/outer(us): 99999999999999999/2 ts:1.0",
            "[x] inner/outer(us): 1/2 ts:1.0",
        ] {
            assert!(parse_entry(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_cpumask_is_hex_in_32_bit_groups() {
        assert_eq!(cpumask(&CpuSet::parse("0-1").unwrap()), "00000003");
        assert_eq!(
            cpumask(&CpuSet::parse("1,33").unwrap()),
            "00000002,00000002"
        );
        assert_eq!(cpumask(&CpuSet::parse("31").unwrap()), "80000000");
    }

    #[test]
    fn the_mode_is_restored_by_its_chosen_word() {
        assert_eq!(
            restorable("hwlat_detector/mode", "none [round-robin] per-cpu\n"),
            "round-robin"
        );
        assert_eq!(restorable("tracing_thresh", "10\n"), "10");
    }
}

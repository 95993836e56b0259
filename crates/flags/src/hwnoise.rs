//! `rtgauge hwnoise`'s flags (hwlatdetect's where they make sense), resolved into the hardware-noise
//! probe's plan.

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::hwnoise::{HwTracer, HwnoiseConfig};
use rtgauge_model::units::us_trunc;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::hwnoise::HwnoisePlan;
use std::time::Duration;

/// Hardware and firmware noise: a kernel detector (the hwlat tracer, or osnoise with interrupts off) spins
/// with interrupts off for `--width` of every `--window` on each CPU and reports every window whose largest
/// gap reached `--threshold` (what is left when the OS cannot run: SMIs, NMIs, the hypervisor, the
/// hardware). Needs root and a kernel with either tracer; each sampled CPU is busy with interrupts off for
/// width/window of the time.
#[derive(Debug, Clone, Args)]
pub struct HwnoiseArgs {
    /// How long (hwlatdetect's --duration: 90, 30s, 15m, 24h; default 30s). In a profile: at most this,
    /// and no longer than the run's duration.
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,

    /// Report windows whose largest gap is at least this (µs without a unit; hwlatdetect's default 10).
    #[arg(long = "threshold", value_name = "TIME", default_value = "10", value_parser = parse_us)]
    pub threshold: Nanos,

    /// The sampling window (µs without a unit).
    #[arg(long = "window", value_name = "TIME", default_value = "1000000", value_parser = parse_us)]
    pub window: Nanos,

    /// Time sampled with interrupts off in each window (µs without a unit; at most the window).
    #[arg(long = "width", value_name = "TIME", default_value = "500000", value_parser = parse_us)]
    pub width: Nanos,

    /// CPUs to sample, kernel list syntax (default: every online CPU).
    #[arg(short = 'c', long = "cpu-list", value_name = "LIST")]
    pub cpu_list: Option<String>,

    /// `per-cpu`: a sampling thread on every chosen CPU at once (rtla hwnoise's coverage); `round-robin`:
    /// one thread moved to the next CPU each window (hwlatdetect's kernel default); kernels before 5.14
    /// have neither and sample with one thread.
    #[arg(long = "mode", value_name = "MODE", default_value = "per-cpu", value_parser = ["per-cpu", "round-robin"])]
    pub mode: String,

    /// The detector: `hwlat` (hwlatdetect's: inner/outer gaps per window), `osnoise` (rtla hwnoise's:
    /// osnoise with OSNOISE_IRQ_DISABLE, Linux 6.3+: every noise, and the share of each CPU's sampled time
    /// it took), or `auto`: hwlat where the kernel has it, else osnoise.
    #[arg(long = "tracer", value_name = "TRACER", default_value = "auto", value_parser = ["auto", "hwlat", "osnoise"])]
    pub tracer: String,

    /// Write the results as JSON to FILE ('-' = stdout) in rt-tests' `--json` layout (the envelope of
    /// cyclictest's and oslat's): per CPU the windows that reached the threshold, their smallest, mean and
    /// largest gap in µs, NMIs, and a histogram of gaps by whole µs; then the largest such windows, as
    /// hwlatdetect's report lists them (`ts`, `inner`, `outer`, `cpu`). The run document is `--output`.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub output: super::OutputArg,
}

/// How long the verb samples without `-D`.
pub const DEFAULT_DURATION_NS: u64 = 30_000_000_000;

/// A time in µs as hwlatdetect takes it (`10`), or with a unit (`10us`, `1ms`, `1s`).
fn parse_us(s: &str) -> Result<Nanos, String> {
    match s.trim().parse::<u64>() {
        Ok(us) => Ok(Nanos(us.saturating_mul(1000))),
        Err(_) => parse_duration_arg(s),
    }
}

/// Check the CPUs, width and window and build the plan.
pub fn resolve(a: &HwnoiseArgs, root: &HostRoot) -> anyhow::Result<HwnoisePlan> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let cpus = match &a.cpu_list {
        Some(l) => {
            let c = CpuSet::parse(l).map_err(|e| anyhow::anyhow!("-c/--cpu-list {l}: {e}"))?;
            if let Some(off) = c.iter().find(|x| !online.contains(*x)) {
                bail!("-c/--cpu-list {l}: CPU {off} is not online (online: {online})");
            }
            c
        }
        None => online,
    };
    if cpus.is_empty() {
        bail!("-c/--cpu-list: no CPU");
    }
    let (width, window, thr) = (a.width.as_ns(), a.window.as_ns(), a.threshold.as_ns());
    if thr < 1000 {
        bail!(
            "--threshold {}: at least 1 µs (the tracer counts whole µs)",
            a.threshold
        );
    }
    if window < 1000 || width < 1000 {
        bail!("--width/--window: at least 1 µs each");
    }
    if width > window {
        bail!(
            "--width {} is longer than --window {}: the tracer samples width out of every window",
            a.width,
            a.window
        );
    }
    let duration = a.duration.unwrap_or(Nanos(DEFAULT_DURATION_NS));
    if duration.as_ns() == 0 {
        bail!("-D/--duration: must be longer than 0");
    }
    let tracer = match a.tracer.as_str() {
        "hwlat" => Some(HwTracer::Hwlat),
        "osnoise" => Some(HwTracer::Osnoise),
        _ => None,
    };
    if tracer == Some(HwTracer::Osnoise) && a.mode == "round-robin" {
        bail!("--mode round-robin is the hwlat tracer's: osnoise samples every chosen CPU at once");
    }
    Ok(HwnoisePlan {
        tracer,
        config: HwnoiseConfig {
            tracer: tracer.unwrap_or_default(),
            cpus,
            mode: a.mode.clone(),
            threshold_ns: thr,
            width_ns: width,
            window_ns: window,
            duration: Some(duration),
        },
        tick: Duration::from_millis(100),
    })
}

/// A profile's hwnoise stage: the profile's duration, capped by the flags' `-D` (the tracer spins with
/// interrupts off: a profile of hours samples for minutes).
pub fn from_profile(
    argv: &[String],
    cx: &super::stage::StageContext<'_>,
) -> anyhow::Result<super::stage::Stage> {
    let mut args: HwnoiseArgs = cx.parse(argv)?;
    args.duration = Some(args.duration.map_or(cx.duration, |d| d.min(cx.duration)));
    Ok(super::stage::Stage::unloaded(
        cx.named(resolve(&args, cx.root))?,
    ))
}

impl super::stage::StagePlan for HwnoisePlan {
    fn kind(&self) -> rtgauge_model::kind::ProbeKind {
        rtgauge_model::kind::ProbeKind::Hwnoise
    }

    fn announce(&self, duration: Nanos, cpus: &CpuSet) -> Option<String> {
        Some(format!(
            "hwnoise on CPUs {cpus} for {duration} ({}, width {} of every {} µs, interrupts off)…",
            self.tracer.map_or(
                "hwlat tracer, or osnoise where the kernel lacks it",
                |t| match t {
                    HwTracer::Hwlat => "hwlat tracer",
                    HwTracer::Osnoise => "osnoise tracer",
                }
            ),
            us_trunc(self.config.width_ns),
            us_trunc(self.config.window_ns)
        ))
    }

    fn why(&self) -> Option<rtgauge_session::why::WhyOpts> {
        Some(rtgauge_session::why::WhyOpts {
            counters: true,
            ..Default::default()
        })
    }

    fn duration(&self) -> Option<Nanos> {
        self.config.duration
    }

    fn loadable(&self) -> bool {
        false
    }

    fn unavailable(&self) -> Option<String> {
        rtgauge_probe::hwnoise::unavailable(self.tracer)
    }

    fn probe<'a>(&'a self, _root: &HostRoot) -> Box<dyn rtgauge_session::Probe + 'a> {
        Box::new(rtgauge_session::kind::hwnoise::Hwnoise(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_microseconds_unless_a_unit_is_given() {
        assert_eq!(parse_us("10").unwrap().as_ns(), 10_000);
        assert_eq!(parse_us("1ms").unwrap().as_ns(), 1_000_000);
        assert!(parse_us("ten").is_err());
    }
}

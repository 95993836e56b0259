//! `rtgauge run`'s flags and the profile they name, resolved into the run's stages: every probe of the
//! profile parsed and resolved by its own verb's flags (so a profile's `flags` mean what they mean on the
//! command line), with the profile's duration, `--trace`, `--load` and the episode threshold its gates set.

use super::kinds::from_profile;
use super::parse_positive_duration;
use super::stage::{Stage, StageContext};
use anyhow::{bail, Context as _};
use clap::Args;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_profile::{self as profile, Profile};
use std::path::PathBuf;

/// Run a profile of probes, judge the results against its gates and store the run.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("html", |a| a.help("Where to write the HTML report (default: reports/run-ID.html beside the database; '-' = standard output)")))]
pub struct RunArgs {
    /// Profile: quick (default: timer latency and OS noise, 5 s each), ran (VMware RAN white paper, 1 h
    /// each, max 20 µs), vpr (VMware protection-relay guide, 24 h, max 120 µs and no sample ≥ 120 µs),
    /// ran-loaded and vpr-loaded (the same under load on the housekeeping CPUs, docs/load.md), or the path of
    /// a TOML profile (a probe's flags may hold --load MIX). The documents are listed in docs/references.md.
    #[arg(long, default_value = "quick")]
    pub profile: String,

    /// Duration of each probe, overriding the profile's (e.g. 30s, 15m, 24h).
    #[arg(long, value_parser = parse_positive_duration)]
    pub duration: Option<Nanos>,

    /// CPUs to measure (default: the isolated CPUs, or every online CPU).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Name of the platform, for comparisons (e.g. bare-metal, esxi-guest).
    #[arg(long, value_parser = super::parse_name)]
    pub label: Option<String>,

    #[command(flatten)]
    pub store: super::StoreArgs,

    /// How often a long probe is checkpointed into the database.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_positive_duration)]
    pub checkpoint: Nanos,

    /// Skip the audit's sampled rules (IRQs on isolated CPUs, steal, C-state use), saving their interval.
    #[arg(long = "no-sample")]
    pub no_sample: bool,

    #[command(flatten)]
    pub html: super::HtmlArg,

    #[command(flatten)]
    pub output: super::OutputArg,

    #[command(flatten)]
    pub verbose: super::VerboseArg,

    /// Trace the measured CPUs during the timer and noise probes and break their spikes down (adds
    /// `--trace` to the profile's cyclic and oslat flags). Needs root and tracefs.
    #[arg(long)]
    pub trace: bool,

    /// Put load on the system while every probe of the profile measures:
    /// KIND[,KIND…][:LEVEL][@housekeeping|measured|all|CPUS] (kinds cpu, memory, io, fork, timer, msg,
    /// ipi; docs/load.md). It replaces the load a profile's probes give themselves; the achieved load is
    /// recorded with each probe's result, as a profile's load is. The NUMA locality probe, which observes
    /// other processes, runs without it.
    #[arg(long = "load", value_name = "MIX", value_parser = super::load::parse_load)]
    pub load: Option<rtgauge_model::load::LoadSpec>,

    /// After storing the run, push it to this central store (postgresql:// URL), as `rtgauge push` does.
    /// The run stays in the local database whether or not the push succeeds.
    #[arg(long, value_name = "URL", value_parser = parse_push)]
    pub push: Option<PathBuf>,

    /// Store the run under this host name instead of the kernel's (a fleet's inventory name; `rtgauge fleet`
    /// groups by it).
    #[arg(long, value_name = "NAME", value_parser = super::parse_name)]
    pub host_name: Option<String>,

    /// Measure the profile N times back to back (default: the profile's `repeat`, else 1). Each run is
    /// stored with the same label and marked as a repeat of the others, and `compare --label` takes them all:
    /// a verdict needs to know how much runs of one platform differ, which one run cannot show.
    #[arg(long, value_name = "N", value_parser = parse_repeat)]
    pub repeat: Option<u32>,

    /// Judge the gates even when the run's conditions fall short of what was asked (SCHED_FIFO refused,
    /// CPUs not pinned, memory not locked, cpu_dma_latency not held); the verdict says so. Without it (or
    /// the profile's allow_degraded = true) such a run is "not judged" (exit code 3). A run measured but not
    /// stored (the store refused it at the end: its document is written to a file the error names) exits 4.
    #[arg(long = "allow-degraded")]
    pub allow_degraded: bool,
}

/// `--push`: a store rtgauge knows, checked before anything is measured (a day-long run must not end on a
/// typo in the URL).
fn parse_push(s: &str) -> Result<PathBuf, String> {
    match s.split_once("://") {
        Some((scheme, _)) if !rtgauge_store::is_postgres_url(s) => Err(format!(
            "'{scheme}://' is not a store rtgauge knows (postgresql:// or a SQLite file path)"
        )),
        _ if s.is_empty() => Err("an empty store".into()),
        _ => Ok(PathBuf::from(s)),
    }
}

fn parse_repeat(s: &str) -> Result<u32, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of runs"))?;
    rtgauge_profile::check_repeat(n)
}

/// A built-in profile name or a TOML file.
pub fn load_profile(name: &str) -> anyhow::Result<Profile> {
    if let Some(p) = profile::builtin(name) {
        return Ok(p);
    }
    let path = std::path::Path::new(name);
    if !path.exists() {
        let names: Vec<&str> = profile::BUILTIN.iter().map(|(n, _)| *n).collect();
        bail!(
            "--profile {name}: neither a built-in profile ({}) nor a file",
            names.join(", ")
        );
    }
    let bytes = super::read_user_file(path, "--profile", super::MAX_DEFINITION_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "--profile {name}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let profile =
        profile::parse_profile(&text).map_err(|e| anyhow::anyhow!("--profile {name}: {e}"))?;
    check_flags(&profile).map_err(|e| anyhow::anyhow!("--profile {name}: {e}"))?;
    Ok(profile)
}

/// A profile's flags hold no duration: the profile's (or `--duration`'s) is handed to the probes as a
/// duration, so a `-D` in the flags would be silently overridden.
fn check_flags(profile: &Profile) -> Result<(), String> {
    let has_duration = |p: &profile::ProbeSpec| {
        p.flags
            .split_whitespace()
            .any(|f| f == "-D" || f.starts_with("--duration"))
    };
    match profile.probes.iter().any(has_duration) {
        true => {
            Err("probe.flags: no -D/--duration in flags: the profile's duration applies".into())
        }
        false => Ok(()),
    }
}

/// The measured CPUs and a housekeeping CPU for the main threads.
pub struct RunCpus {
    /// The CPUs measured (`--cpus`, else the isolated CPUs, else every online CPU).
    pub cpus: CpuSet,
    /// A CPU not measured (the first online one when every CPU is measured).
    pub housekeeping: u32,
}

/// Where a run measures, from `--cpus` or the host's isolated CPUs.
pub fn placement(root: &HostRoot, cpus: Option<&str>) -> anyhow::Result<RunCpus> {
    let online = read_cpu_mask(root, CpuMask::Online).context("reading the online CPUs")?;
    let measured = match cpus {
        Some(t) => {
            let set = CpuSet::parse(t).map_err(|e| anyhow::anyhow!("--cpus {t}: {e}"))?;
            let missing = set.difference(&online);
            if set.is_empty() || !missing.is_empty() {
                bail!("--cpus {t}: not a set of online CPUs (online: {online})");
            }
            set
        }
        None => {
            let iso = read_cpu_mask(root, CpuMask::Isolated)
                .unwrap_or_default()
                .intersection(&online);
            if iso.is_empty() {
                online.clone()
            } else {
                iso
            }
        }
    };
    let housekeeping = online
        .difference(&measured)
        .iter()
        .next()
        .or_else(|| online.iter().next())
        .unwrap_or(0);
    Ok(RunCpus {
        cpus: measured,
        housekeeping,
    })
}

/// A profile probe's flags with `{cpus}`, `{cpu}` (the last measured CPU) and `{housekeeping}` filled in.
fn expand_flags(flags: &str, p: &RunCpus) -> Vec<String> {
    let last = p.cpus.iter().last().unwrap_or(p.housekeeping);
    flags
        .replace("{cpus}", &p.cpus.to_string())
        .replace("{cpu}", &last.to_string())
        .replace("{housekeeping}", &p.housekeeping.to_string())
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Resolve every probe of the profile with its verb's own flag parser (each kind's `from_profile`, which
/// says how the profile's duration applies to it).
pub fn plan(
    profile: &Profile,
    duration: Nanos,
    trace: bool,
    load: Option<&rtgauge_model::load::LoadSpec>,
    place: &RunCpus,
    root: &HostRoot,
) -> anyhow::Result<Vec<Stage>> {
    profile
        .probes
        .iter()
        .map(|spec| {
            let argv = expand_flags(&spec.flags, place);
            let what = format!(
                "profile {} {:?} flags '{}'",
                profile.name,
                spec.kind,
                argv.join(" ")
            );
            // Spike episodes matter from the profile's own bound on the probe's samples.
            let bound = profile.latency_bound(spec.kind).map(|(ns, metric)| {
                rtgauge_model::attribution::EpisodeThreshold {
                    ns,
                    rule: format!(
                        "profile {} gate: {} ≤ {}",
                        profile.name,
                        rtgauge_analysis::judge::metric_label(&metric),
                        Nanos(ns)
                    ),
                }
            });
            let cx = StageContext {
                what: &what,
                duration,
                trace,
                bound,
                root,
            };
            let mut stage = from_profile(spec.kind)(&argv, &cx)?;
            if let Some(l) = load {
                stage.replace_load(l);
            }
            Ok(stage)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_profile::ProbeKind;

    fn profile(flags: &str) -> Profile {
        let text =
            format!("name = 'x'\nduration = '2s'\n[[probe]]\nkind = 'oslat'\nflags = '{flags}'\n");
        profile::parse_profile(&text).unwrap()
    }

    #[test]
    fn a_duration_in_a_profiles_flags_is_refused() {
        for flags in ["-c 0 -D 5", "-c 0 --duration=5", "--duration 5"] {
            let e = check_flags(&profile(flags)).unwrap_err();
            assert!(
                e.starts_with("probe.flags: no -D/--duration"),
                "{flags}: {e}"
            );
        }
        assert_eq!(check_flags(&profile("-c 0 -q")), Ok(()));
    }

    #[test]
    fn the_profiles_duration_reaches_the_probe_as_a_duration() {
        let root = HostRoot::live();
        let place = placement(&root, None).unwrap();
        let p = profile("-c {cpu} -q");
        let stages = plan(&p, Nanos::from_secs(7), true, None, &place, &root).unwrap();
        let stage = &stages[0].plan;
        assert_eq!(stage.kind(), ProbeKind::Oslat);
        assert_eq!(stage.duration(), Some(Nanos::from_secs(7)));
        assert!(
            stage.why().is_some_and(|w| w.trace),
            "run --trace reaches the probe"
        );
    }
}

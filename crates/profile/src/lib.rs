//! Requirement profiles: which probes a run executes, with which parameters, for how long, and which gates
//! its results must pass. Probe parameters are written in the flags users know (cyclictest's and oslat's),
//! so a profile reads like the command line a white paper prints. Three are built in; users write their own
//! in TOML with the same fields:
//!
//! ```toml
//! name = "relay"
//! description = "protection relay, 120 µs"
//! duration = "24h"
//! min_duration = "24h"          # shorter runs get a warning
//! repeat = 3                    # measured 3 times back to back (optional; `run --repeat` overrides)
//! allow_degraded = false        # true: judge a run whose conditions fell short (SCHED_FIFO refused, …)
//! [[probe]]
//! kind = "cyclic"
//! flags = "-m -p 99 -i 100 -t 1 -a {cpu} -h 120 --mainaffinity={housekeeping} -q"
//! [[gate]]
//! metric = "cyclic.max"
//! max = "120us"
//! [[gate]]
//! metric = "cyclic.samples_at_or_above"
//! threshold = "120us"
//! max = "0"
//! ```
//!
//! Placeholders in flags: `{cpus}` the measured CPUs (the isolated set, or every online CPU), `{cpu}` one
//! measured CPU (the last), `{housekeeping}` a CPU outside the measured set (or the first online CPU).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use rtgauge_analysis::judge::is_duration;
use rtgauge_analysis::kind::{gate_def, gate_names, parse_metric, EpisodeBound, MetricError};
pub use rtgauge_model::kind::ProbeKind;
use rtgauge_model::units::parse_duration;
use rtgauge_model::verdict::{Gate, Metric};
use rtgauge_model::Nanos;
use serde::{Deserialize, Serialize};

/// A probe of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// A kind of probe (`ProbeKind`: `cyclic`, `oslat`, …). How the profile's duration applies to it is its
    /// flags' (`rtgauge_flags`' `from_profile` of the kind): a timed probe measures for it, ops and mem
    /// run for their repetitions, numa for its `--interval`, hwnoise for it capped by its `-D`.
    pub kind: ProbeKind,
    /// The probe's flags, as its verb reads them. The duration is not among them: the run hands the
    /// profile's (or `--duration`'s) to the probe as a duration.
    pub flags: String,
}

/// A gate as written in a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// A gate of a kind's table (`rtgauge_analysis::kind::gate_names`): `cyclic.max`, `oslat.max`,
    /// `net.latency.lost`, …; the kind's probe must be in the profile.
    pub metric: String,
    /// Bound: a duration (`20us`) for latencies, a count for counts.
    pub max: String,
    /// For a gate that counts samples at or above a threshold (`cyclic.samples_at_or_above`).
    #[serde(default)]
    pub threshold: Option<String>,
}

/// A profile as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// Profile name, as `run --profile` names it.
    pub name: String,
    /// One or two sentences on what the profile qualifies for; empty when not given.
    #[serde(default)]
    pub description: String,
    /// Duration of each probe (rt-tests syntax: `90`, `15m`, `24h`).
    pub duration: String,
    /// Runs shorter than this are warned about (the requirement asks for a longer qualification).
    #[serde(default)]
    pub min_duration: Option<String>,
    /// How many times `rtgauge run` measures the profile, back to back (`run --repeat` overrides); 1 when
    /// not given.
    #[serde(default)]
    pub repeat: Option<u64>,
    /// Judge the gates even when the run's conditions fell short (a real-time policy refused, memory not
    /// locked, …); the verdict then says so. False when not given: such a run is "not judged".
    #[serde(default)]
    pub allow_degraded: bool,
    /// The probes to run, in order (`[[probe]]` tables).
    #[serde(rename = "probe")]
    pub probes: Vec<ProbeSpec>,
    /// The requirements to judge the run against (`[[gate]]` tables); empty = no gates.
    #[serde(rename = "gate", default)]
    pub gates: Vec<GateSpec>,
}

/// A validated profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// What the profile qualifies for; may be empty.
    pub description: String,
    /// Duration of each probe.
    pub duration: Nanos,
    /// Runs shorter than this are warned about; `None` = no minimum.
    pub min_duration: Option<Nanos>,
    /// How many runs `rtgauge run` makes of the profile, back to back, as repeats of one another (1..=
    /// [`MAX_REPEAT`]).
    pub repeat: u32,
    /// Whether a run whose conditions fell short is judged all the same.
    pub allow_degraded: bool,
    /// The probes to run, in order.
    pub probes: Vec<ProbeSpec>,
    /// The requirements, parsed; empty = no gates.
    pub gates: Vec<Gate>,
}

impl Profile {
    /// The lowest latency bound the gates put on the samples of a `kind` probe (each gate's table says
    /// which of its bounds: `cyclic.max`'s maximum, `cyclic.samples_at_or_above`'s threshold), with the
    /// gate's metric: where a spike episode starts to matter for this profile.
    pub fn latency_bound(&self, kind: ProbeKind) -> Option<(u64, Metric)> {
        self.gates
            .iter()
            .filter(|g| g.metric.kind == kind)
            .filter_map(|g| match gate_def(&g.metric)?.episode_bound {
                EpisodeBound::Max => Some((g.max, g.metric.clone())),
                EpisodeBound::Threshold => Some((g.metric.threshold_ns?, g.metric.clone())),
                EpisodeBound::None => None,
            })
            .min_by_key(|b| b.0)
    }
}

/// One line for a TOML error: its message and position. (toml's own display quotes the offending source
/// line, which for a hostile one-line file is the whole file.)
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_string(),
    }
}

/// Why a profile was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The file is not valid TOML, or does not have a profile's shape. The message is the parser's, on one
    /// line with its line and column (the binary shows this error with `{}`, never as a chain); the
    /// parser's error is the source.
    #[error("invalid TOML: {message}")]
    Toml {
        /// The parser's message, `line L, column C: …`.
        message: String,
        /// The parser's error.
        #[source]
        cause: toml::de::Error,
    },
    /// A field's value was refused: which field, and why.
    #[error("{field}: {reason}")]
    Field {
        /// The field, as written in the profile (`duration`, `gate.threshold`).
        field: String,
        /// What was wrong with its value.
        reason: String,
    },
}

fn field(field: &str, reason: impl ToString) -> ProfileError {
    ProfileError::Field {
        field: field.to_string(),
        reason: reason.to_string(),
    }
}

/// Most runs one `rtgauge run` repeats a profile: far beyond any set `compare` needs (the t interval of 30
/// runs per platform is within 4 % of the normal one), so that a slip of the keyboard (`--repeat 30000`) is
/// refused rather than measured for days.
pub const MAX_REPEAT: u32 = 1000;

/// A repeat count as `repeat = N` or `run --repeat N` gives it: 1..=[`MAX_REPEAT`].
pub fn check_repeat(n: u64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_REPEAT).contains(&n) => Ok(n),
        _ => Err(format!(
            "{n} is not a number of runs from 1 to {MAX_REPEAT}"
        )),
    }
}

fn duration(name: &str, s: &str) -> Result<Nanos, ProfileError> {
    parse_duration(s).map_err(|e| field(name, e))
}

impl ProfileSpec {
    /// Check every field and parse durations, probe flags and gates into a [`Profile`].
    pub fn validate(&self) -> Result<Profile, ProfileError> {
        if self.probes.is_empty() {
            return Err(field("probe", "a profile needs at least one [[probe]]"));
        }
        let d = duration("duration", &self.duration)?;
        if d.as_ns() == 0 {
            return Err(field("duration", "must be longer than 0"));
        }
        let gates = self
            .gates
            .iter()
            .map(|g| {
                // The metric and whether it takes a threshold first, then the threshold's value.
                let named = |threshold| parse_metric(&g.metric, threshold);
                named(g.threshold.as_ref().map(|_| 0)).map_err(|e| match e {
                    MetricError::Unknown => field(
                        "gate.metric",
                        format!(
                            "unknown metric '{}' ({})",
                            g.metric,
                            gate_names().join(", ")
                        ),
                    ),
                    MetricError::ThresholdRequired => field("gate.threshold", e),
                    MetricError::ThresholdUnused => {
                        field("gate.threshold", format!("not used by {}", g.metric))
                    }
                })?;
                let threshold = g
                    .threshold
                    .as_deref()
                    .map(|t| duration("gate.threshold", t).map(|d| d.as_ns()))
                    .transpose()?;
                let metric = named(threshold).map_err(|e| field("gate.metric", e))?;
                if !self.probes.iter().any(|p| p.kind == metric.kind) {
                    return Err(field(
                        "gate.metric",
                        format!(
                            "{} needs a {:?} probe in the profile",
                            g.metric, metric.kind
                        ),
                    ));
                }
                let max = if is_duration(&metric) {
                    duration("gate.max", &g.max)?.as_ns()
                } else {
                    g.max
                        .trim()
                        .parse()
                        .map_err(|_| field("gate.max", format!("'{}' is not a count", g.max)))?
                };
                Ok(Gate { metric, max })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Profile {
            name: self.name.clone(),
            description: self.description.clone(),
            duration: d,
            min_duration: self
                .min_duration
                .as_deref()
                .map(|m| duration("min_duration", m))
                .transpose()?,
            repeat: self
                .repeat
                .map_or(Ok(1), check_repeat)
                .map_err(|e| field("repeat", e))?,
            allow_degraded: self.allow_degraded,
            probes: self.probes.clone(),
            gates,
        })
    }
}

/// Parse and validate a TOML profile.
pub fn parse_profile(text: &str) -> Result<Profile, ProfileError> {
    let spec: ProfileSpec = toml::from_str(text).map_err(|cause| ProfileError::Toml {
        message: toml_error(text, &cause),
        cause,
    })?;
    spec.validate()
}

/// The gates of the `ran` profiles: max 20 µs for timer latency and OS noise. One text for the quiet and
/// the loaded profile, which judge by the same requirement.
macro_rules! ran_gates {
    () => {
        r#"[[gate]]
metric = "cyclic.max"
max = "20us"
[[gate]]
metric = "oslat.max"
max = "20us"
[[gate]]
metric = "hwnoise.max"
max = "10us"
"#
    };
}

/// The gates of the `vpr` profiles: max 120 µs and no sample at or above 120 µs, for the quiet and the
/// loaded profile alike.
macro_rules! vpr_gates {
    () => {
        r#"[[gate]]
metric = "cyclic.max"
max = "120us"
[[gate]]
metric = "cyclic.samples_at_or_above"
threshold = "120us"
max = "0"
[[gate]]
metric = "hwnoise.max"
max = "10us"
"#
    };
}

/// The built-in profiles, as TOML (so that `rtgauge` can show them and users can copy one as a start).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "quick",
        r#"name = "quick"
description = "A first look: timer latency and OS noise on the measured CPUs, 5 s each; OS-primitive costs, memory latency/bandwidth and NUMA locality (short)"
duration = "5s"
[[probe]]
kind = "cyclic"
flags = "-m -p95 -i 200 -h 400 -a {cpus} -t --mainaffinity={housekeeping} -q"
[[probe]]
kind = "oslat"
flags = "-c {cpus} -C {housekeeping} -q"
[[probe]]
kind = "ops"
flags = "--cpu {cpu} -r 31 --sample-time 500us"
[[probe]]
kind = "mem"
flags = "--cpu {cpu} --max-size 64M -r 3 --loads 300000 --bw-size 64M --numa-size 64M"
[[probe]]
kind = "numa"
flags = "--all --interval 0"
"#,
    ),
    (
        "ran",
        concat!(
            r#"name = "ran"
description = "5G RAN (VMware RAN white paper): cyclictest and oslat as published, max 20 µs; hardware/firmware noise (hwlat or osnoise with interrupts off, as OpenShift's latency suite runs hwlatdetect) max 10 µs, skipped where the kernel has neither the hwlat tracer nor osnoise with OSNOISE_IRQ_DISABLE"
duration = "1h"
[[probe]]
kind = "cyclic"
flags = "-m -p99 -i 100 -h 100 -a {cpus} -t --mainaffinity={housekeeping} -q"
[[probe]]
kind = "oslat"
flags = "-c {cpus} -f 99 -C {housekeeping} -q"
[[probe]]
kind = "hwnoise"
flags = "-c {cpus} -D 5m --threshold 10"
"#,
            ran_gates!()
        ),
    ),
    (
        "vpr",
        concat!(
            r#"name = "vpr"
description = "Virtual protection relay (VMware protection-relay guide): max 120 µs, no sample at or above 120 µs, 24 h or more; hardware/firmware noise max 10 µs, skipped where the kernel has neither the hwlat tracer nor osnoise with OSNOISE_IRQ_DISABLE"
duration = "24h"
min_duration = "24h"
[[probe]]
kind = "cyclic"
flags = "-m -p 99 -i 100 -t 1 -a {cpu} -h 120 --mainaffinity={housekeeping} -q"
[[probe]]
kind = "hwnoise"
flags = "-c {cpu} -D 10m --threshold 10"
"#,
            vpr_gates!()
        ),
    ),
    // The loaded variants: the source documents measure on otherwise quiet systems and state no load, so
    // the load is rteval's practice (a busy rest of the machine: compute, memory traffic, disk syncs,
    // process churn, timer interrupts) on the housekeeping CPUs while the measured CPUs stay isolated
    // (docs/load.md).
    (
        "ran-loaded",
        concat!(
            r#"name = "ran-loaded"
description = "5G RAN as 'ran', with cpu, memory, io, fork and timer load on the housekeeping CPUs (rteval practice); max 20 µs"
duration = "1h"
[[probe]]
kind = "cyclic"
flags = "-m -p99 -i 100 -h 100 -a {cpus} -t --mainaffinity={housekeeping} -q --load cpu,memory,io,fork,timer@housekeeping"
[[probe]]
kind = "oslat"
flags = "-c {cpus} -f 99 -C {housekeeping} -q --load cpu,memory,io,fork,timer@housekeeping"
[[probe]]
kind = "hwnoise"
flags = "-c {cpus} -D 5m --threshold 10"
"#,
            ran_gates!()
        ),
    ),
    (
        "vpr-loaded",
        concat!(
            r#"name = "vpr-loaded"
description = "Virtual protection relay as 'vpr', with cpu, memory, io, fork and timer load on the housekeeping CPUs (rteval practice): max 120 µs, none ≥ 120 µs, 24 h or more"
duration = "24h"
min_duration = "24h"
[[probe]]
kind = "cyclic"
flags = "-m -p 99 -i 100 -t 1 -a {cpu} -h 120 --mainaffinity={housekeeping} -q --load cpu,memory,io,fork,timer@housekeeping"
[[probe]]
kind = "hwnoise"
flags = "-c {cpu} -D 10m --threshold 10"
"#,
            vpr_gates!()
        ),
    ),
];

/// A built-in profile by name.
pub fn builtin(name: &str) -> Option<Profile> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, t)| parse_profile(t).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid() {
        for (name, text) in BUILTIN {
            let p = parse_profile(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&p.name, name);
        }
        let vpr = builtin("vpr").unwrap();
        assert_eq!(
            vpr.latency_bound(ProbeKind::Cyclic).map(|b| b.0),
            Some(120_000),
            "vpr's 120 µs gates"
        );
        assert_eq!(
            builtin("quick").unwrap().latency_bound(ProbeKind::Cyclic),
            None
        );
        assert_eq!(
            vpr.gates[1],
            Gate {
                metric: parse_metric("cyclic.samples_at_or_above", Some(120_000)).unwrap(),
                max: 0
            }
        );
        assert_eq!(vpr.min_duration, Some(Nanos::from_secs(86_400)));
        // cyclic.max, oslat.max and hwnoise.max (skipped where the kernel has no hwlat tracer).
        assert_eq!(builtin("ran").unwrap().gates.len(), 3);
        // A built-in profile measures once; `run --repeat N` repeats it.
        assert!(BUILTIN
            .iter()
            .all(|(n, _)| builtin(n).is_some_and(|p| p.repeat == 1)));
    }

    /// docs/run.md lists the gates as the kinds' tables declare them, no more and no fewer.
    #[test]
    fn the_docs_list_every_gate_of_the_tables() {
        use rtgauge_analysis::kind::{gate_prefix, gates, Aggregate, GateUnit};
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/run.md"))
                .unwrap();
        let listed: Vec<&str> = docs
            .lines()
            .skip_while(|l| !l.starts_with("<!-- gates:"))
            .skip(3)
            .take_while(|l| *l != "<!-- /gates -->")
            .collect();
        let tables: Vec<String> = gates()
            .into_iter()
            .map(|(k, d)| {
                format!(
                    "| `{}.{}` | {}{} | {} | {} |",
                    gate_prefix(k),
                    d.key,
                    d.label,
                    if d.threshold { " threshold" } else { "" },
                    match d.unit {
                        GateUnit::Nanos => "duration",
                        GateUnit::Count => "count",
                    },
                    match d.aggregate {
                        Aggregate::Max => "largest",
                        Aggregate::Sum => "sum",
                    }
                )
            })
            .collect();
        assert_eq!(listed, tables);
        assert!(tables.len() >= 10, "{tables:?}");
    }

    #[test]
    fn repeat_is_read_and_bounded() {
        let text = |r: &str| {
            format!("name = 'x'\nduration = '1s'\n{r}[[probe]]\nkind = 'cyclic'\nflags = ''\n")
        };
        assert_eq!(parse_profile(&text("repeat = 3\n")).unwrap().repeat, 3);
        assert_eq!(parse_profile(&text("")).unwrap().repeat, 1);
        assert_eq!(check_repeat(1000), Ok(1000));
        assert!(check_repeat(0).is_err() && check_repeat(u64::MAX).is_err());
    }

    #[test]
    fn bad_profiles_name_the_field() {
        let cases = [
            ("name = 'x'\nduration = '1s'\n", "probe"),
            ("name = 'x'\nduration = 'soon'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n", "duration"),
            ("name = 'x'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n[[gate]]\nmetric = 'oslat.max'\nmax = '1us'\n", "gate.metric"),
            ("name = 'x'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n[[gate]]\nmetric = 'cyclic.max'\nmax = 'big'\n", "gate.max"),
            ("name = 'x'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n[[gate]]\nmetric = 'cyclic.samples_at_or_above'\nmax = '0'\n", "gate.threshold"),
            ("name = 'x'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n[[gate]]\nmetric = 'cyclic.max'\nmax = '1us'\nthreshold = 'abc'\n", "gate.threshold: not used by cyclic.max"),
            ("name = 'x'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n[[gate]]\nmetric = 'cyclic.p99'\nmax = '1us'\nthreshold = 'abc'\n", "gate.metric: unknown metric 'cyclic.p99'"),
            ("name = 'x'\nduration = '1s'\nbogus = 1\n[[probe]]\nkind = 'cyclic'\nflags = ''\n", "bogus"),
            ("name = 'x'\nduration = '1s'\n[[probe]]\nkind = 'fio'\nflags = ''\n", "fio"),
            ("name = 'x'\nduration = '1s'\nrepeat = 0\n[[probe]]\nkind = 'cyclic'\nflags = ''\n", "repeat: 0 is not a number of runs from 1 to 1000"),
            ("name = 'x'\nduration = '1s'\nrepeat = 1001\n[[probe]]\nkind = 'cyclic'\nflags = ''\n", "repeat: 1001 is not"),
            ("name = 'x'\nduration = '1s'\nrepeat = -3\n[[probe]]\nkind = 'cyclic'\nflags = ''\n", "line 3"),
            ("name = 'x'\nduration = '1s'\nrepeat = 'three'\n[[probe]]\nkind = 'cyclic'\nflags = ''\n", "line 3"),
        ];
        for (text, what) in cases {
            let e = parse_profile(text).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = parse_profile(&s);
        }
    }
}

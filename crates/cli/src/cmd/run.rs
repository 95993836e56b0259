//! `rtgauge run`: the main job. profile → host facts (fingerprint, audit) → probes → run document → store →
//! summary and verdicts. [`run`] reads as that pipeline, a function per stage: load → plan → measure →
//! judge → store → report.
//!
//! The run is stored as `running` before the first probe starts and checkpointed (histograms of completed
//! intervals, timeline) every `--checkpoint` while the timer probe runs, so a run killed with SIGKILL or by a
//! reboot keeps its data up to the last checkpoint and shows as `interrupted`. SIGINT/SIGTERM end the run
//! through the normal path: the probe stops, the result is stored and reported.

use super::parse_duration_arg;
use super::{cyclic, mem, net, numa, ops, oslat};
use anyhow::{bail, Context as _};
use clap::{Args, Parser};
use rtgauge_host::audit::AuditOptions;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::oslat::OslatResult;
use rtgauge_model::profile::{self, ProbeKind, Profile};
use rtgauge_model::run::{ProbeResult, RepeatOf, RunDocument, RunStatus};
use rtgauge_model::verdict::Outcome;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::cyclic::LiveThread;
use rtgauge_probe::stop::StopFlag;
use rtgauge_store::RunStore;
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Run a profile of probes, judge the results against its gates and store the run.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Profile: quick (default: timer latency and OS noise, 10 s each), ran (VMware RAN white paper, 1 h
    /// each, max 20 µs), vpr (VMware protection-relay guide, 24 h, max 120 µs and no sample ≥ 120 µs),
    /// ran-loaded and vpr-loaded (the same under load on the housekeeping CPUs, docs/load.md), or the path of
    /// a TOML profile (a probe's flags may hold --load MIX). The documents are listed in docs/references.md.
    #[arg(long, default_value = "quick")]
    pub profile: String,

    /// Duration of each probe, overriding the profile's (e.g. 30s, 15m, 24h).
    #[arg(long, value_parser = parse_duration_arg)]
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
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_duration_arg)]
    pub checkpoint: Nanos,

    /// Skip the audit's sampled rules (IRQs on isolated CPUs, steal, C-state use), saving their interval.
    #[arg(long = "no-sample")]
    pub no_sample: bool,

    /// Where to write the HTML report (default: reports/run-ID.html beside the database).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Also write the run document as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

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
    #[arg(long, value_name = "URL")]
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
}

fn parse_repeat(s: &str) -> Result<u32, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of runs"))?;
    profile::check_repeat(n)
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
struct Placement {
    cpus: CpuSet,
    housekeeping: u32,
}

fn placement(root: &HostRoot, cpus: Option<&str>) -> anyhow::Result<Placement> {
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
    Ok(Placement {
        cpus: measured,
        housekeeping,
    })
}

fn expand(flags: &str, p: &Placement) -> Vec<String> {
    let last = p.cpus.iter().last().unwrap_or(p.housekeeping);
    flags
        .replace("{cpus}", &p.cpus.to_string())
        .replace("{cpu}", &last.to_string())
        .replace("{housekeeping}", &p.housekeeping.to_string())
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A verb's flags as a profile writes them (no program name).
#[derive(Parser)]
#[command(no_binary_name = true)]
struct Flags<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

/// Parse a profile probe's flags with the verb's own parser; errors name the probe.
fn flags<T: clap::Args>(argv: &[String], what: &str) -> anyhow::Result<T> {
    Flags::<T>::try_parse_from(argv)
        .map(|f| f.args)
        .map_err(|e| anyhow::anyhow!("{what}: {}", first_line(&e)))
}

/// Stores the document now and then, and shows progress; store errors are warned about once, never fatal
/// to the measurement.
struct Recorder<'a> {
    store: &'a mut dyn RunStore,
    id: i64,
    every: Duration,
    last: Instant,
    warned: bool,
}

impl<'a> Recorder<'a> {
    /// Checkpoints of run `id` every `every` (at least 1 s).
    fn new(store: &'a mut dyn RunStore, id: i64, every: Nanos) -> Recorder<'a> {
        Recorder {
            store,
            id,
            every: Duration::from_nanos(every.as_ns().max(1_000_000_000)),
            last: Instant::now(),
            warned: false,
        }
    }

    /// Whether the checkpoint interval has passed since the last save.
    fn due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Save `base` plus the running probe's result so far.
    fn checkpoint(&mut self, base: &RunDocument, probe: ProbeResult) {
        let mut d = base.clone();
        d.probes.push(probe);
        d.ended_at = crate::output::now_rfc3339();
        self.save(&d);
    }

    fn save(&mut self, doc: &RunDocument) {
        self.last = Instant::now();
        if let Err(e) = self.store.update(self.id, doc) {
            if !self.warned {
                eprintln!("rtgauge: warning: checkpoint not stored: {e}");
                self.warned = true;
            }
        }
    }
}

/// One line every 10 s (or a bar on a terminal) of progress for a probe.
struct Progress {
    what: String,
    bar: Option<indicatif::ProgressBar>,
    total: Duration,
    last_line: Instant,
}

impl Progress {
    fn new(what: &str, total: Duration) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(total.as_secs().max(1));
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {elapsed_precise}/{duration_precise} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(what.to_string());
            b
        });
        Progress {
            what: what.to_string(),
            bar,
            total,
            last_line: Instant::now(),
        }
    }

    /// Timer-probe progress from the threads' live figures.
    fn cyclic(&mut self, elapsed: Duration, live: &[LiveThread]) {
        let min = live
            .iter()
            .filter(|t| t.cycles > 0)
            .map(|t| t.min_ns)
            .min()
            .unwrap_or(0);
        let max = live.iter().map(|t| t.max_ns).max().unwrap_or(0);
        let (sum, n) = live
            .iter()
            .fold((0u64, 0u64), |(s, n), t| (s + t.sum_ns, n + t.cycles));
        let missed: u64 = live.iter().map(|t| t.missed).sum();
        let msg = format!(
            "min {:.1} avg {:.1} max {:.1} µs, missed {missed}",
            min as f64 / 1e3,
            sum.checked_div(n).unwrap_or(0) as f64 / 1e3,
            max as f64 / 1e3
        );
        self.update(elapsed, msg);
    }

    fn update(&mut self, elapsed: Duration, msg: String) {
        match &self.bar {
            Some(b) => {
                b.set_position(elapsed.as_secs());
                b.set_message(msg);
            }
            None if self.last_line.elapsed() >= Duration::from_secs(10) => {
                self.last_line = Instant::now();
                eprintln!(
                    "{} {:>6.0}/{:.0} s: {msg}",
                    self.what,
                    elapsed.as_secs_f64(),
                    self.total.as_secs_f64()
                );
            }
            None => {}
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let profile = load_profile(&a.profile)?;
    let count = a.repeat.unwrap_or(profile.repeat);
    if count > 1 {
        for (flag, path) in [("--html", &a.html), ("--output", &a.output)] {
            if let Some(p) = path {
                bail!(
                    "{flag} {}: one file cannot hold {count} repeated runs (leave it out; each run is stored, \
                     its report in reports/run-ID.html, and `rtgauge export ID` writes its document)",
                    p.display()
                );
            }
        }
    }
    let stop = StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;
    // The runs of one --repeat share a group id, so that `compare` finds them as one platform's repeats.
    let group = (count > 1).then(rtgauge_model::run::new_uuid);
    let (mut code, mut ids) = (ExitCode::SUCCESS, Vec::new());
    for index in 1..=count {
        if stop.is_set() {
            break;
        }
        let repeat = group.clone().map(|group| RepeatOf {
            group,
            index,
            count,
        });
        let (id, c) = run_once(a, &profile, repeat, &stop)?;
        ids.push(id.to_string());
        if c != ExitCode::SUCCESS {
            code = c;
        }
    }
    if count > 1 {
        let label = a.label.as_deref().unwrap_or("LABEL");
        println!(
            "repeats: runs {} ({} of {count}); `rtgauge compare --label {label} --label OTHER` judges them by \
             the variation between them",
            ids.join(", "),
            ids.len()
        );
    }
    Ok(code)
}

/// One run of the profile (`repeat`: its place among the runs of one `--repeat`): its id and exit code.
fn run_once(
    a: &RunArgs,
    profile: &Profile,
    repeat: Option<RepeatOf>,
    stop: &StopFlag,
) -> anyhow::Result<(i64, ExitCode)> {
    // Load: where to measure, the store.
    let duration = a.duration.unwrap_or(profile.duration);
    let root = HostRoot::live();
    let place = placement(&root, a.cpus.as_deref())?;
    let (mut store, db) = super::open_store(a.store.db.as_deref())?;
    // Plan: every probe resolved before anything is measured, so that bad flags fail fast.
    let stages = plan(profile, duration, a.trace, a.load.as_ref(), &place, &root)?;
    let cx = Context {
        root,
        place,
        duration,
        stop: stop.clone(),
    };
    // Host facts, then measure, checkpointing into the stored run.
    let mut doc = begin(a, profile, &cx);
    doc.repeat = repeat;
    let id = store
        .insert(&doc)
        .with_context(|| format!("storing the run in {db}"))?;
    announce(id, profile, &doc, &cx);
    doc.audit = Some(audit(&cx.root, a.no_sample));
    let mut rec = Recorder::new(store.as_mut(), id, a.checkpoint);
    rec.save(&doc);
    measure(stages, &mut doc, &mut rec, &cx)?;
    // Judge, store, report.
    judge(&mut doc, profile, &cx.stop);
    for w in &doc.warnings {
        eprintln!("rtgauge: warning: {w}");
    }
    rec.store
        .update(id, &doc)
        .with_context(|| format!("storing run {id} in {db}"))?;
    if let Some(path) = &a.output {
        crate::output::write_json(path, &doc)
            .with_context(|| format!("--output {}", path.display()))?;
    }
    let code = report(a, id, &db, &doc)?;
    if let Some(to) = &a.push {
        // A failed push is a runtime error (exit 2) even when the gates passed: the fleet's store lacks
        // the run. It stays stored here, and `rtgauge push` sends it later.
        let p = super::push::push(store.as_mut(), Some(&[id]), to)?;
        if p.stored == 0 && p.already == 1 {
            println!(
                "push: run {id} was in {} already",
                rtgauge_store::display_spec(to)
            );
        }
    }
    Ok((id, code))
}

/// What every stage of a run reads: the host, where and how long to measure, and the stop flag.
struct Context {
    root: HostRoot,
    place: Placement,
    duration: Nanos,
    stop: StopFlag,
}

/// `--load MIX` and `--load-cmd` of one profile probe: they run beside that probe only (docs/load.md).
type LoadFlags = (Option<rtgauge_model::load::LoadSpec>, Option<String>);

/// A profile probe, resolved, and the load beside it.
struct Stage {
    probe: Planned,
    load: LoadFlags,
}

impl Stage {
    /// `run --load`: this load instead of the probe's own (the NUMA locality probe is not loaded).
    fn replace_load(&mut self, l: &rtgauge_model::load::LoadSpec) {
        if !matches!(self.probe, Planned::Numa(..)) {
            self.load = (Some(l.clone()), None);
        }
    }
}

/// Resolve every probe of the profile with its verb's own flag parser. The profile's duration is handed to
/// the timed probes (cyclic, oslat, net) as a duration: ops and mem have their own repetition flags and
/// numa its --interval.
fn plan(
    profile: &Profile,
    duration: Nanos,
    trace: bool,
    load: Option<&rtgauge_model::load::LoadSpec>,
    place: &Placement,
    root: &HostRoot,
) -> anyhow::Result<Vec<Stage>> {
    profile
        .probes
        .iter()
        .map(|spec| {
            let argv = expand(&spec.flags, place);
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
                    rule: format!("profile {} gate: {metric} ≤ {}", profile.name, Nanos(ns)),
                }
            });
            let mut stage = plan_probe(spec.kind, &argv, &what, duration, trace, bound, root)?;
            if let Some(l) = load {
                stage.replace_load(l);
            }
            Ok(stage)
        })
        .collect()
}

/// One profile probe: its flags parsed and resolved as its verb does, `duration` and `--trace` set, and
/// the profile's bound as the spike-episode threshold unless the flags give one (`--spike`).
fn plan_probe(
    kind: ProbeKind,
    argv: &[String],
    what: &str,
    duration: Nanos,
    trace: bool,
    bound: Option<rtgauge_model::attribution::EpisodeThreshold>,
    root: &HostRoot,
) -> anyhow::Result<Stage> {
    let mut load = (None, None);
    let probe = match kind {
        ProbeKind::Cyclic => {
            let mut args: cyclic::CyclicArgs = flags(argv, what)?;
            args.duration = Some(duration);
            args.trace |= trace;
            load = (args.load.clone(), args.load_cmd.clone());
            let mut r = cyclic::resolve(&args, root).with_context(|| what.to_string())?;
            if r.why.threshold.is_none() {
                r.why.threshold = bound;
                r.plan.late_floor_ns = r.why.late_floor_ns();
            }
            Planned::Cyclic(Box::new(r))
        }
        ProbeKind::Oslat => {
            let mut args: oslat::OslatArgs = flags(argv, what)?;
            args.duration = duration;
            args.trace |= trace;
            load = (args.load.clone(), args.load_cmd.clone());
            let p = oslat::resolve(&args, root).with_context(|| what.to_string())?;
            let why = super::why::WhyOpts {
                counters: true,
                trace: args.trace,
                threshold: bound,
            };
            Planned::Oslat(Box::new(p), why)
        }
        ProbeKind::Net => {
            let mut args: net::NetArgs = flags(argv, what)?;
            match &mut args.command {
                net::NetCommand::Cps(c) => c.load.duration = duration,
                net::NetCommand::Throughput(t) => t.load.duration = duration,
                net::NetCommand::Serve(s) => s.duration = Some(duration),
            }
            if let net::NetCommand::Cps(net::CpsArgs { load: l, .. })
            | net::NetCommand::Throughput(net::ThroughputArgs { load: l, .. }) = &args.command
            {
                load = (l.bg_load.clone(), l.load_cmd.clone());
            }
            let plan = args.command.plan(root).with_context(|| what.to_string())?;
            Planned::Net(Box::new(plan))
        }
        ProbeKind::Ops => {
            let args: ops::OpsArgs = flags(argv, what)?;
            Planned::Ops(Box::new(
                ops::resolve(&args, root).with_context(|| what.to_string())?,
            ))
        }
        ProbeKind::Mem => {
            let args: mem::MemArgs = flags(argv, what)?;
            Planned::Mem(Box::new(
                mem::resolve(&args, root).with_context(|| what.to_string())?,
            ))
        }
        ProbeKind::Numa => {
            let args: numa::NumaArgs = flags(argv, what)?;
            Planned::Numa(args.pids, args.interval)
        }
    };
    Ok(Stage { probe, load })
}

/// The run document before the first probe: system facts, profile, label, tags, fingerprint, and a warning
/// when the run is shorter than the profile's qualification asks.
fn begin(a: &RunArgs, profile: &Profile, cx: &Context) -> RunDocument {
    let mut system = rtgauge_host::system::read_system_info(&cx.root);
    if let Some(name) = &a.host_name {
        system.nodename = name.clone();
    }
    let mut doc = crate::output::document(
        crate::output::now_rfc3339(),
        system,
        Vec::new(),
        RunStatus::Running,
        Vec::new(),
    );
    doc.profile = Some(profile.name.clone());
    doc.label = a.label.clone();
    doc.tags = a.store.tags.iter().cloned().collect();
    let duration = cx.duration;
    if let Some(min) = profile.min_duration.filter(|m| duration < *m) {
        let w = format!("profile {} asks for at least {min} per probe; this run measures {duration}: not a qualification", profile.name);
        eprintln!("rtgauge: warning: {w}");
        doc.warnings.push(w);
    }
    doc.fingerprint = Some(rtgauge_host::fingerprint::read_fingerprint(&cx.root));
    doc
}

/// The run's first line: what is measured where.
fn announce(id: i64, profile: &Profile, doc: &RunDocument, cx: &Context) {
    let repeat = doc.repeat.as_ref().map_or(String::new(), |r| {
        format!(" (repeat {} of {})", r.index, r.count)
    });
    println!(
        "rtgauge run {id}{repeat}: profile {} ({}), {} {} {}, measuring CPUs {} (housekeeping CPU {}), {} per probe",
        profile.name,
        profile.description,
        doc.system.nodename,
        doc.system.release,
        if doc.system.realtime { "PREEMPT_RT" } else { "not PREEMPT_RT" },
        cx.place.cpus,
        cx.place.housekeeping,
        cx.duration
    );
}

/// The tuning audit, its summary printed.
fn audit(root: &HostRoot, no_sample: bool) -> rtgauge_model::audit::AuditReport {
    let audit = rtgauge_host::audit::run_audit(
        root,
        &AuditOptions {
            target: None,
            isolated: None,
            sample: (!no_sample).then(|| Duration::from_secs(1)),
        },
    );
    let s = &audit.summary;
    println!(
        "audit: {} pass, {} warn, {} fail, {} n/a, {} unavailable",
        s.pass, s.warn, s.fail, s.not_applicable, s.unavailable
    );
    audit
}

/// Run the stages in order until one is stopped, storing the document after each.
fn measure(
    stages: Vec<Stage>,
    doc: &mut RunDocument,
    rec: &mut Recorder<'_>,
    cx: &Context,
) -> anyhow::Result<()> {
    for stage in stages {
        if cx.stop.is_set() {
            break;
        }
        let before = rtgauge_host::accounting::read_snapshot(&cx.root);
        let account = || {
            Some(rtgauge_host::accounting::delta(
                &before,
                &rtgauge_host::accounting::read_snapshot(&cx.root),
            ))
        };
        match stage.probe {
            Planned::Cyclic(r) => {
                let mut result = measure_cyclic(&r, &stage.load, doc, rec, cx)?;
                result.accounting = account();
                doc.warnings.extend(cyclic::shortfalls(&result));
                doc.probes.push(ProbeResult::Cyclic(result));
            }
            Planned::Oslat(p, why) => {
                let mut result = measure_oslat(&p, why, &stage.load, doc, rec, cx)?;
                result.accounting = account();
                doc.warnings.extend(oslat::shortfalls(&result));
                doc.probes.push(ProbeResult::Oslat(result));
            }
            Planned::Net(p) => {
                eprintln!("net for {} per measurement…", cx.duration);
                let running = super::load::start(
                    stage.load.0.as_ref(),
                    stage.load.1.as_deref(),
                    &net::busy_cpus(&p),
                    &cx.root,
                )?;
                let results = net::measure(&p, &cx.stop, &cx.root);
                let achieved = super::load::finish(running);
                for mut r in results? {
                    r.load = achieved.clone();
                    doc.probes.push(ProbeResult::Net(r));
                }
            }
            Planned::Ops(p) => {
                eprintln!("ops: {} operations…", p.config.ops.len());
                let measured = CpuSet::new(p.cpu);
                let running = super::load::start(
                    stage.load.0.as_ref(),
                    stage.load.1.as_deref(),
                    &measured,
                    &cx.root,
                )?;
                let result = rtgauge_probe::ops::run(&p, &cx.stop);
                let achieved = super::load::finish(running);
                let mut result = result?;
                result.load = achieved;
                doc.warnings.extend(ops::shortfalls(&result));
                doc.probes.push(ProbeResult::Ops(result));
            }
            Planned::Mem(p) => {
                eprintln!(
                    "mem: latency curve over {} working sets, bandwidth, NUMA…",
                    p.config.sizes_bytes.len()
                );
                let measured = CpuSet::new(p.config.cpu);
                let running = super::load::start(
                    stage.load.0.as_ref(),
                    stage.load.1.as_deref(),
                    &measured,
                    &cx.root,
                )?;
                let result = rtgauge_probe::mem::run(&p);
                let achieved = super::load::finish(running);
                let mut result = result?;
                result.load = achieved;
                doc.warnings.extend(mem::shortfalls(&result));
                doc.probes.push(ProbeResult::Mem(result));
            }
            Planned::Numa(pids, interval) => {
                doc.probes
                    .push(ProbeResult::Numa(numa::measure(&cx.root, &pids, interval)));
            }
        }
        doc.ended_at = crate::output::now_rfc3339();
        rec.save(doc);
    }
    Ok(())
}

/// The timer probe with its load beside it, progress on stderr and checkpoints into the stored run.
fn measure_cyclic(
    r: &cyclic::Resolved,
    load: &LoadFlags,
    doc: &mut RunDocument,
    rec: &mut Recorder<'_>,
    cx: &Context,
) -> anyhow::Result<CyclicResult> {
    for n in &r.notes {
        eprintln!("rtgauge: warning: {n}");
        doc.warnings.push(n.clone());
    }
    let mut progress = Progress::new("cyclic", Duration::from_nanos(cx.duration.as_ns()));
    let measured = CpuSet::new(r.plan.config.cpus.iter().flatten().copied());
    let running = super::load::start(load.0.as_ref(), load.1.as_deref(), &measured, &cx.root)?;
    let result = {
        let base = &*doc;
        let progress = &mut progress;
        let mut hook = |e: Duration, live: &[LiveThread], ck: &mut dyn FnMut() -> CyclicResult| {
            progress.cyclic(e, live);
            if rec.due() {
                rec.checkpoint(base, ProbeResult::Cyclic(ck()));
            }
        };
        cyclic::measure(&r.plan, &r.why, true, &cx.stop, &mut hook)
    };
    let achieved = super::load::finish(running);
    let mut result = result?;
    result.load = achieved;
    progress.finish();
    Ok(result)
}

/// The OS-noise probe with its load beside it, progress on stderr and checkpoints into the stored run.
fn measure_oslat(
    p: &rtgauge_probe::oslat::OslatPlan,
    why: super::why::WhyOpts,
    load: &LoadFlags,
    doc: &RunDocument,
    rec: &mut Recorder<'_>,
    cx: &Context,
) -> anyhow::Result<OslatResult> {
    eprintln!(
        "oslat on CPUs {} for {} (after a {} preheat)…",
        cx.place.cpus,
        cx.duration,
        Nanos(p.config.preheat_ns)
    );
    let mut hook = OslatHook {
        base: doc,
        rec,
        progress: Progress::new("oslat", Duration::from_nanos(cx.duration.as_ns())),
        last: String::new(),
    };
    let measured = CpuSet::new(p.config.cpus.iter().copied());
    let running = super::load::start(load.0.as_ref(), load.1.as_deref(), &measured, &cx.root)?;
    let mut why = super::why::OslatWhy::new(&mut hook, p, why);
    let result = rtgauge_probe::oslat::run(p, &cx.stop, &mut why);
    let achieved = super::load::finish(running);
    let mut result = result?;
    why.finish(&mut result);
    result.load = achieved;
    hook.progress.finish();
    Ok(result)
}

/// The run's status (every probe ran, none stopped by a signal) and the profile's verdicts.
fn judge(doc: &mut RunDocument, profile: &Profile, stop: &StopFlag) {
    let all_ran = !stop.is_set() && doc.probes.len() >= profile.probes.len();
    doc.status = RunStatus::of_probes(&doc.probes, all_ran);
    doc.verdicts = profile.gates.iter().map(|g| g.judge(doc)).collect();
    doc.ended_at = crate::output::now_rfc3339();
}

/// The HTML report beside the database, the terminal summary, and the exit code: 1 when a gate failed.
fn report(a: &RunArgs, id: i64, db: &str, doc: &RunDocument) -> anyhow::Result<ExitCode> {
    let html = a.html.clone().unwrap_or_else(|| {
        super::store_dir(a.store.db.as_deref())
            .join("reports")
            .join(format!("run-{id}.html"))
    });
    let report = html
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(anyhow::Error::from)
        .and_then(|_| {
            crate::output::write_atomic(
                &html,
                rtgauge_report::html::render_report(id, doc).as_bytes(),
            )
        });

    let mut out = std::io::stdout().lock();
    super::print_text(&rtgauge_report::terminal::render_summary(doc))?;
    writeln!(out, "stored: run {id} ({}) in {db}", doc.status.as_str())?;
    match report {
        Ok(()) => writeln!(out, "report: {}", html.display())?,
        // The run is stored; a report that cannot be written is worth a warning, not a failed run.
        Err(e) => eprintln!(
            "rtgauge: warning: report not written to {}: {e:#}",
            html.display()
        ),
    }
    let failed = doc.verdicts.iter().any(|v| v.outcome != Outcome::Pass);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Progress and checkpoints of the OS-noise probe: the checkpoint (merged histograms of the completed
/// intervals) is built only when one is due, and its figures feed the progress line until the next.
struct OslatHook<'a, 'b> {
    base: &'a RunDocument,
    rec: &'a mut Recorder<'b>,
    progress: Progress,
    last: String,
}

impl rtgauge_probe::observe::Observer<OslatResult> for OslatHook<'_, '_> {
    fn tick(&mut self, elapsed: Duration, _: &(), checkpoint: &mut dyn FnMut() -> OslatResult) {
        if self.rec.due() {
            let r = checkpoint();
            let max = r.threads.iter().map(|t| t.gaps.max_ns).max().unwrap_or(0);
            let iters: u64 = r.threads.iter().map(|t| t.iterations).sum();
            self.last = format!("max gap {:.1} µs, {iters} iterations", max as f64 / 1e3);
            self.rec.checkpoint(self.base, ProbeResult::Oslat(r));
        }
        self.progress.update(elapsed, self.last.clone());
    }
}

enum Planned {
    Cyclic(Box<cyclic::Resolved>),
    /// The plan and what to collect besides its samples.
    Oslat(Box<rtgauge_probe::oslat::OslatPlan>, super::why::WhyOpts),
    Net(Box<net::NetPlan>),
    Ops(Box<rtgauge_probe::ops::OpsPlan>),
    Mem(Box<rtgauge_probe::mem::MemPlan>),
    Numa(Vec<u32>, Nanos),
}

fn first_line(e: &clap::Error) -> String {
    let r = e.render().to_string();
    r.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid flags")
        .trim_start_matches("error: ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        match &stages[0].probe {
            Planned::Oslat(plan, why) => {
                assert_eq!(plan.config.duration_ns, 7_000_000_000);
                assert!(why.trace, "run --trace reaches the probe");
            }
            _ => panic!("expected an oslat stage"),
        }
    }
}

//! `rtgauge run`: the main job. profile → host facts (fingerprint, audit) → probes → run document → store →
//! summary and verdicts.
//!
//! The run is stored as `running` before the first probe starts and checkpointed (histograms of completed
//! intervals, timeline) every `--checkpoint` while the timer probe runs, so a run killed with SIGKILL or by a
//! reboot keeps its data up to the last checkpoint and shows as `interrupted`. SIGINT/SIGTERM end the run
//! through the normal path: the probe stops, the result is stored and reported.

use super::{cyclic, mem, net, numa, ops, oslat};
use super::{parse_duration_arg, parse_tag};
use anyhow::{bail, Context as _};
use clap::{Args, Parser};
use rtgauge_host::audit::AuditOptions;
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::{CyclicResult, StopReason};
use rtgauge_model::oslat::OslatResult;
use rtgauge_model::profile::{self, ProbeKind, Profile};
use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus};
use rtgauge_model::verdict::Outcome;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::cyclic::LiveThread;
use rtgauge_probe::stop::StopFlag;
use rtgauge_store::{RunStore, SqliteStore};
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
    #[arg(long)]
    pub label: Option<String>,

    /// KEY=VALUE to store with the run (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,

    /// Results database (default: $XDG_DATA_HOME/rtgauge/rtgauge.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,

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
    profile::parse_profile(&text).map_err(|e| anyhow::anyhow!("--profile {name}: {e}"))
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
    store: &'a mut SqliteStore,
    id: i64,
    every: Duration,
    last: Instant,
    warned: bool,
}

impl Recorder<'_> {
    /// Whether the checkpoint interval has passed since the last save.
    fn due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Save `base` plus the running probe's result so far.
    fn checkpoint(&mut self, base: &RunDocument, probe: ProbeResult) {
        let mut d = base.clone();
        d.probes.push(probe);
        d.ended_at = crate::doc::now_rfc3339();
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
    let duration = a.duration.unwrap_or(profile.duration);
    let root = HostRoot::live();
    let place = placement(&root, a.cpus.as_deref())?;
    let db = a.db.clone().unwrap_or_else(SqliteStore::default_path);
    let mut store = SqliteStore::open(&db).with_context(|| format!("--db {}", db.display()))?;

    // Resolve every probe before measuring anything, so that bad flags fail fast.
    let mut plans = Vec::new();
    let mut loads = Vec::new();
    for spec in &profile.probes {
        let mut argv = expand(&spec.flags, &place);
        // ops and mem have their own repetition flags and numa its --interval: the duration is not theirs.
        if matches!(
            spec.kind,
            ProbeKind::Cyclic | ProbeKind::Oslat | ProbeKind::Net
        ) {
            argv.push("-D".into());
            argv.push(format!("{}ms", (duration.as_ns() / 1_000_000).max(1)));
        }
        if a.trace
            && matches!(spec.kind, ProbeKind::Cyclic | ProbeKind::Oslat)
            && !argv.iter().any(|f| f == "--trace")
        {
            argv.push("--trace".into());
        }
        let what = format!(
            "profile {} {:?} flags '{}'",
            profile.name,
            spec.kind,
            argv.join(" ")
        );
        // A profile probe's `--load MIX` and `--load-cmd` run beside that probe only (see docs/load.md).
        let mut load_spec = (None, None);
        plans.push(match spec.kind {
            ProbeKind::Cyclic => {
                let args: cyclic::CyclicArgs = flags(&argv, &what)?;
                load_spec = (args.load.clone(), args.load_cmd.clone());
                let r = cyclic::resolve(&args, &root).with_context(|| what.clone())?;
                Planned::Cyclic(Box::new(r))
            }
            ProbeKind::Oslat => {
                let args: oslat::OslatArgs = flags(&argv, &what)?;
                load_spec = (args.load.clone(), args.load_cmd.clone());
                Planned::Oslat(
                    Box::new(oslat::resolve(&args, &root).with_context(|| what.clone())?),
                    args.trace,
                )
            }
            ProbeKind::Net => {
                let args: net::NetArgs = flags(&argv, &what)?;
                let plan = args.command.plan(&root).with_context(|| what.clone())?;
                Planned::Net(Box::new(plan))
            }
            ProbeKind::Ops => {
                let args: ops::OpsArgs = flags(&argv, &what)?;
                Planned::Ops(Box::new(
                    ops::resolve(&args, &root).with_context(|| what.clone())?,
                ))
            }
            ProbeKind::Mem => {
                let args: mem::MemArgs = flags(&argv, &what)?;
                Planned::Mem(Box::new(
                    mem::resolve(&args, &root).with_context(|| what.clone())?,
                ))
            }
            ProbeKind::Numa => {
                let args: numa::NumaArgs = flags(&argv, &what)?;
                Planned::Numa(args.pids, args.interval)
            }
        });
        loads.push(load_spec);
    }

    let stop = StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;
    let system = rtgauge_host::system::read_system_info(&root);
    let mut doc = crate::doc::document(
        crate::doc::now_rfc3339(),
        system,
        Vec::new(),
        RunStatus::Running,
        Vec::new(),
    );
    doc.profile = Some(profile.name.clone());
    doc.label = a.label.clone();
    doc.tags = a.tags.iter().cloned().collect();
    if let Some(min) = profile.min_duration.filter(|m| duration < *m) {
        let w = format!("profile {} asks for at least {min} per probe; this run measures {duration}: not a qualification", profile.name);
        eprintln!("rtgauge: warning: {w}");
        doc.warnings.push(w);
    }
    doc.fingerprint = Some(rtgauge_host::fingerprint::read_fingerprint(&root));
    let id = store
        .insert(&doc)
        .with_context(|| format!("storing the run in {}", db.display()))?;

    println!(
        "rtgauge run {id}: profile {} ({}), {} {} {}, measuring CPUs {} (housekeeping CPU {}), {} per probe",
        profile.name,
        profile.description,
        doc.system.nodename,
        doc.system.release,
        if doc.system.realtime { "PREEMPT_RT" } else { "not PREEMPT_RT" },
        place.cpus,
        place.housekeeping,
        duration
    );
    let audit = rtgauge_host::audit::run_audit(
        &root,
        &AuditOptions {
            target: None,
            isolated: None,
            sample: (!a.no_sample).then(|| Duration::from_secs(1)),
        },
    );
    let s = &audit.summary;
    println!(
        "audit: {} pass, {} warn, {} fail, {} n/a, {} unavailable",
        s.pass, s.warn, s.fail, s.not_applicable, s.unavailable
    );
    doc.audit = Some(audit);
    let mut rec = Recorder {
        store: &mut store,
        id,
        every: Duration::from_nanos(a.checkpoint.as_ns().max(1_000_000_000)),
        last: Instant::now(),
        warned: false,
    };
    rec.save(&doc);

    for (plan, load_spec) in plans.into_iter().zip(loads) {
        if stop.is_set() {
            break;
        }
        let before = rtgauge_host::accounting::read_snapshot(&root);
        let account = || {
            Some(rtgauge_host::accounting::delta(
                &before,
                &rtgauge_host::accounting::read_snapshot(&root),
            ))
        };
        match plan {
            Planned::Cyclic(r) => {
                for n in &r.notes {
                    eprintln!("rtgauge: warning: {n}");
                    doc.warnings.push(n.clone());
                }
                let mut progress = Progress::new("cyclic", Duration::from_nanos(duration.as_ns()));
                let measured = CpuSet::new(r.plan.config.cpus.iter().flatten().copied());
                let load = super::load::start(
                    load_spec.0.as_ref(),
                    load_spec.1.as_deref(),
                    &measured,
                    &root,
                )?;
                let result = {
                    let base = &doc;
                    let rec = &mut rec;
                    let progress = &mut progress;
                    let mut hook =
                        |e: Duration, live: &[LiveThread], ck: &mut dyn FnMut() -> CyclicResult| {
                            progress.cyclic(e, live);
                            if rec.due() {
                                rec.checkpoint(base, ProbeResult::Cyclic(ck()));
                            }
                        };
                    cyclic::measure(&r.plan, r.why, true, &stop, &mut hook)
                };
                let load = super::load::finish(load);
                let mut result = result?;
                result.load = load;
                result.accounting = account();
                progress.finish();
                doc.warnings.extend(cyclic::shortfalls(&result));
                doc.probes.push(ProbeResult::Cyclic(result));
            }
            Planned::Oslat(p, trace) => {
                eprintln!(
                    "oslat on CPUs {} for {duration} (after a {} preheat)…",
                    place.cpus,
                    Nanos(p.config.preheat_ns)
                );
                let mut hook = OslatHook {
                    base: &doc,
                    rec: &mut rec,
                    progress: Progress::new("oslat", Duration::from_nanos(duration.as_ns())),
                    last: String::new(),
                };
                let measured = CpuSet::new(p.config.cpus.iter().copied());
                let load = super::load::start(
                    load_spec.0.as_ref(),
                    load_spec.1.as_deref(),
                    &measured,
                    &root,
                )?;
                let mut why = super::why::OslatWhy::new(&mut hook, &p, trace);
                let result = rtgauge_probe::oslat::run(&p, &stop, &mut why);
                let load = super::load::finish(load);
                let mut result = result?;
                why.finish(&mut result);
                result.load = load;
                hook.progress.finish();
                result.accounting = account();
                doc.warnings.extend(oslat::shortfalls(&result));
                doc.probes.push(ProbeResult::Oslat(result));
            }
            Planned::Net(p) => {
                eprintln!("net for {duration} per measurement…");
                for r in net::measure(&p, &stop, &root)? {
                    doc.probes.push(ProbeResult::Net(r));
                }
            }
            Planned::Ops(p) => {
                eprintln!("ops: {} operations…", p.config.ops.len());
                let result = rtgauge_probe::ops::run(&p, &stop)?;
                doc.warnings.extend(ops::shortfalls(&result));
                doc.probes.push(ProbeResult::Ops(result));
            }
            Planned::Mem(p) => {
                eprintln!(
                    "mem: latency curve over {} working sets, bandwidth, NUMA…",
                    p.config.sizes_bytes.len()
                );
                let result = rtgauge_probe::mem::run(&p)?;
                doc.warnings.extend(mem::shortfalls(&result));
                doc.probes.push(ProbeResult::Mem(result));
            }
            Planned::Numa(pids, interval) => {
                doc.probes
                    .push(ProbeResult::Numa(numa::measure(&root, &pids, interval)));
            }
        }
        doc.ended_at = crate::doc::now_rfc3339();
        rec.save(&doc);
    }

    let interrupted = stop.is_set()
        || doc.probes.len() < profile.probes.len()
        || doc
            .probes
            .iter()
            .any(|p| matches!(p, ProbeResult::Cyclic(c) if c.stop_reason == StopReason::Signal));
    doc.status = if interrupted {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    };
    doc.verdicts = profile.gates.iter().map(|g| g.judge(&doc)).collect();
    doc.ended_at = crate::doc::now_rfc3339();
    for w in &doc.warnings {
        eprintln!("rtgauge: warning: {w}");
    }
    rec.store
        .update(id, &doc)
        .with_context(|| format!("storing run {id} in {}", db.display()))?;
    if let Some(path) = &a.output {
        crate::doc::write_json(path, &doc)
            .with_context(|| format!("--output {}", path.display()))?;
    }

    let html = a.html.clone().unwrap_or_else(|| {
        db.parent()
            .unwrap_or(std::path::Path::new("."))
            .join("reports")
            .join(format!("run-{id}.html"))
    });
    let report = html
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(anyhow::Error::from)
        .and_then(|_| {
            crate::doc::write_atomic(
                &html,
                rtgauge_report::html::render_report(id, &doc).as_bytes(),
            )
        });

    let mut out = std::io::stdout().lock();
    super::print_text(&rtgauge_report::terminal::render_summary(&doc))?;
    writeln!(
        out,
        "stored: run {id} ({}) in {}",
        doc.status.as_str(),
        db.display()
    )?;
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
    /// The plan and `--trace`.
    Oslat(Box<rtgauge_probe::oslat::OslatPlan>, bool),
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

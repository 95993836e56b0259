//! `rtgauge run`: the main job. profile → host facts (fingerprint, audit) → probes → run document → store →
//! summary and verdicts. [`run`] reads as that pipeline, a function per stage: load → plan → measure →
//! judge → store → report. The profile and the stages it resolves into are `rtgauge_flags::run`'s; each
//! stage is measured by the session engine.
//!
//! The run is stored as `running` before the first probe starts and checkpointed (histograms of completed
//! intervals, timeline) every `--checkpoint` while the timer and noise probes run, so a run killed with
//! SIGKILL or by a reboot keeps its data up to the last checkpoint and shows as `interrupted`. SIGINT/SIGTERM
//! end the run through the normal path: the probe stops, the result is stored and reported.

use super::progress::Progress;
use anyhow::Context as _;
use rtgauge_audit::AuditOptions;
use rtgauge_flags::run::{load_profile, placement, plan, Placement, ProbePlan, RunArgs, Stage};
use rtgauge_host::HostRoot;
use rtgauge_model::profile::Profile;
use rtgauge_model::run::{ProbeResult, RunDocument, RunStatus};
use rtgauge_model::verdict::Outcome;
use rtgauge_model::Nanos;
use rtgauge_probe::stop::StopFlag;
use rtgauge_session::record::{Checkpoints, Recorder};
use rtgauge_session::{probes, Around, Probe, Tick};
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

/// `rtgauge run`: load → plan → measure → judge → store → report.
pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    // Load: the profile, where to measure, the store.
    let profile = load_profile(&a.profile)?;
    let duration = a.duration.unwrap_or(profile.duration);
    let root = HostRoot::live();
    let place = placement(&root, a.cpus.as_deref())?;
    let (mut store, db) = a.store.db.open()?;
    // Plan: every probe resolved before anything is measured, so that bad flags fail fast.
    let stages = plan(&profile, duration, a.trace, a.load.as_ref(), &place, &root)?;
    let stop = super::stop_on_signals()?;
    let cx = Context {
        root,
        place,
        duration,
        stop,
    };
    // Host facts, then measure, checkpointing into the stored run.
    let mut doc = begin(a, &profile, &cx);
    let id = store
        .insert(&doc)
        .with_context(|| format!("storing the run in {db}"))?;
    announce(id, &profile, &doc, &cx);
    doc.audit = Some(audit(&cx.root, a.no_sample));
    let every = std::time::Duration::from_nanos(a.checkpoint.as_ns());
    let mut rec = Recorder::new(store.as_mut(), id, every);
    rec.save(&doc);
    measure(stages, &mut doc, &mut rec, &cx)?;
    if let Some(e) = &rec.failed {
        eprintln!("rtgauge: warning: checkpoint not stored: {e}");
    }
    // Judge, store, report.
    judge(&mut doc, &profile, &cx.stop);
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
    Ok(code)
}

/// What every stage of a run reads: the host, where and how long to measure, and the stop flag.
struct Context {
    root: HostRoot,
    place: Placement,
    duration: Nanos,
    stop: StopFlag,
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
    println!(
        "rtgauge run {id}: profile {} ({}), {} {} {}, measuring CPUs {} (housekeeping CPU {}), {} per probe",
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
    let audit = rtgauge_audit::run_audit(
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
        let results = match &stage.probe {
            ProbePlan::Numa(pids, interval) => {
                vec![ProbeResult::Numa(rtgauge_host::numa::read_numa(
                    &cx.root,
                    (!pids.is_empty()).then_some(pids.as_slice()),
                    interval.as_ns(),
                ))]
            }
            _ => measure_stage(&stage, doc, rec, cx)?,
        };
        doc.probes.extend(results);
        doc.ended_at = crate::output::now_rfc3339();
        rec.save(doc);
    }
    Ok(())
}

/// One stage through the session engine, with progress on stderr and checkpoints into the stored run.
fn measure_stage(
    stage: &Stage,
    doc: &mut RunDocument,
    rec: &mut Recorder<'_>,
    cx: &Context,
) -> anyhow::Result<Vec<ProbeResult>> {
    let total = Duration::from_nanos(cx.duration.as_ns());
    let (probe, why, what): (Box<dyn Probe + '_>, _, &str) = match &stage.probe {
        ProbePlan::Cyclic(r) => {
            super::warn_all(&r.notes);
            doc.warnings.extend(r.notes.iter().cloned());
            (
                Box::new(probes::Cyclic(&r.plan)),
                Some(r.why.clone()),
                "cyclic",
            )
        }
        ProbePlan::Oslat(r) => {
            eprintln!(
                "oslat on CPUs {} for {} (after a {} preheat)…",
                cx.place.cpus,
                cx.duration,
                Nanos(r.plan.config.preheat_ns)
            );
            (
                Box::new(probes::Oslat(&r.plan)),
                Some(r.why.clone()),
                "oslat",
            )
        }
        ProbePlan::Net(p) => {
            eprintln!("net for {} per measurement…", cx.duration);
            let net = probes::Net {
                plan: p,
                sysctls: rtgauge_host::system::read_net_sysctls(&cx.root),
            };
            (Box::new(net), None, "net")
        }
        ProbePlan::Ops(p) => {
            eprintln!("ops: {} operations…", p.config.ops.len());
            (Box::new(probes::Ops(p)), None, "ops")
        }
        ProbePlan::Mem(p) => {
            eprintln!(
                "mem: latency curve over {} working sets, bandwidth, NUMA…",
                p.config.sizes_bytes.len()
            );
            (Box::new(probes::Mem(p)), None, "mem")
        }
        ProbePlan::Numa(..) => return Ok(Vec::new()),
    };
    let around = Around {
        load: stage.load.clone(),
        accounting: why.is_some(),
        why,
    };
    let mut progress = Progress::new(what, total);
    let base = doc.clone();
    let mut show =
        |tick: &Tick<'_>, checkpoint: Option<&ProbeResult>| progress.tick(tick, checkpoint);
    let mut ck = Checkpoints {
        base: &base,
        recorder: rec,
        now: crate::output::now_rfc3339,
        progress: &mut show,
    };
    let (results, warnings) =
        super::measure(&cx.root, &cx.stop, probe.as_ref(), &around, &mut [&mut ck])?;
    progress.finish();
    doc.warnings.extend(warnings);
    Ok(results)
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
        rtgauge_flags::store_dir(a.store.db.db.as_deref())
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

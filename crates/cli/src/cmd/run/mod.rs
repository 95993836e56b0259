//! `rtgauge run`: the main job. profile → host facts (fingerprint, audit) → probes → run document → store →
//! summary and verdicts. [`run`] reads as that pipeline, a function per stage: load → plan → measure →
//! judge → store → report. The profile and the stages it resolves into are `rtgauge_flags::run`'s; each
//! stage is measured by the session engine.
//!
//! The run is stored as `running` before the first probe starts and checkpointed (histograms of completed
//! intervals, timeline) every `--checkpoint` while the timer and noise probes run, so a run killed with
//! SIGKILL or by a reboot keeps its data up to the last checkpoint and shows as `interrupted`. SIGINT/SIGTERM
//! end the run through the normal path: the probe stops, the result is stored and reported.

mod stages;

use anyhow::Context as _;
use rtgauge_audit::AuditOptions;
use rtgauge_flags::run::{load_profile, placement, plan, RunArgs, RunCpus};
use rtgauge_host::HostRoot;
use rtgauge_model::run::{RepeatOf, RunDocument, RunStatus};
use rtgauge_model::verdict::Outcome;
use rtgauge_model::Nanos;
use rtgauge_probe::stop::StopFlag;
use rtgauge_profile::Profile;
use rtgauge_session::record::CheckpointWriter;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

/// The exit code of a run whose gates were not judged: its conditions fell short of what was asked and
/// nothing accepted a degraded run (0 = passed, 1 = a gate failed, 2 = usage or runtime error).
pub const NOT_JUDGED: u8 = 3;

/// The exit code of a run that measured to its end but could not be stored (a full disk, a read-only or
/// locked store): its summary was printed and its document written to a file the error names.
pub const NOT_STORED: u8 = 4;

/// `rtgauge run`: the profile measured once, or `--repeat N` times back to back as one platform's repeats.
pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    // A push this binary cannot make is refused before anything is measured (named without its password).
    if let Some(to) = a.push.as_deref() {
        if to.to_str().is_some_and(rtgauge_store::is_postgres_url) && !rtgauge_store::POSTGRES {
            anyhow::bail!(
                "--push {}: {}",
                rtgauge_store::display_spec(to),
                rtgauge_store::NO_POSTGRES
            );
        }
    }
    let profile = load_profile(&a.profile)?;
    let count = a.repeat.unwrap_or(profile.repeat);
    if count > 1 {
        for (flag, path) in [("--html", &a.html.html), ("--output", &a.output.output)] {
            if let Some(p) = path {
                let asked = match a.repeat {
                    Some(_) => format!("--repeat {count}"),
                    None => format!(
                        "profile {} (repeat = {count}; --repeat 1 measures once)",
                        profile.name
                    ),
                };
                anyhow::bail!(
                    "{flag} {}: one file cannot hold the {count} runs of {asked} (leave it out; each run is \
                     stored, its report in reports/run-ID.html, and `rtgauge export ID` writes its document)",
                    p.display()
                );
            }
        }
    }
    let stop = super::stop_on_signals()?;
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
        match run_once(a, &profile, repeat, &stop) {
            Ok((id, c)) => {
                ids.extend(id);
                // A run not stored outranks a failed gate, which outranks a run not judged, which
                // outranks a pass.
                let not_stored = ExitCode::from(NOT_STORED);
                if code != not_stored
                    && (c == not_stored || c == ExitCode::from(1) || code == ExitCode::SUCCESS)
                {
                    code = c;
                }
            }
            Err(e) if count > 1 => {
                repeats_line(a, &ids, count);
                return Err(e.context(format!("repeat {index} of {count}")));
            }
            Err(e) => return Err(e),
        }
    }
    repeats_line(a, &ids, count);
    Ok(code)
}

/// After a `--repeat`: the runs stored and how to compare them.
fn repeats_line(a: &RunArgs, ids: &[i64], count: u32) {
    if count <= 1 {
        return;
    }
    let list = |sep: &str| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(sep);
    let how = match &a.label {
        Some(l) => format!("`rtgauge compare --label {l} --label OTHER`"),
        None => format!(
            "`rtgauge compare {} OTHER` (no --label: by their ids)",
            list(",")
        ),
    };
    println!(
        "repeats: runs {} ({} of {count} stored); {how} judges them by the variation between them",
        list(", "),
        ids.len()
    );
}

/// One run of the profile (`repeat`: its place among the runs of one `--repeat`): load → plan → measure →
/// judge → store → report; its id (none when the store refused the finished run) and exit code.
fn run_once(
    a: &RunArgs,
    profile: &Profile,
    repeat: Option<RepeatOf>,
    stop: &StopFlag,
) -> anyhow::Result<(Option<i64>, ExitCode)> {
    // Load: where to measure, the store.
    let duration = a.duration.unwrap_or(profile.duration);
    let root = HostRoot::live();
    let place = placement(&root, a.cpus.as_deref())?;
    let (mut store, db) = a.store.db.open()?;
    // Plan: every probe resolved before anything is measured, so that bad flags fail fast.
    let stages = plan(profile, duration, a.trace, a.load.as_ref(), &place, &root)?;
    // A load with no CPU to run on is the run's own flags' fault: refused before anything is stored.
    for s in &stages {
        if let Some(spec) = &s.load.spec {
            let measured = s.plan.probe(&root).measured();
            rtgauge_session::load::plan(spec, &measured, &root)?;
        }
    }
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
    // The highest real-time priority a probe asks for; 0 (the audit's rule n/a) when none asks for one.
    let rt_priority = stages
        .iter()
        .filter_map(|s| s.plan.rt_priority())
        .max()
        .unwrap_or(0);
    doc.audit = Some(audit(&cx, a.no_sample, rt_priority));
    let every = std::time::Duration::from_nanos(a.checkpoint.as_ns());
    let mut rec = CheckpointWriter::new(store.as_mut(), id, every, |e| {
        eprintln!(
            "rtgauge: warning: checkpoint not stored: {e}; the run goes on, kept in memory (later \
             refusals are counted, not repeated)"
        )
    });
    rec.save(&doc);
    stages::measure(stages, &mut doc, &mut rec, &cx)?;
    if let Some(e) = &rec.failed {
        doc.warnings.push(format!(
            "{} of {} checkpoints not stored (the first: {e}); a run killed before its end would have \
             lost what was measured since the last one stored",
            rec.refused, rec.tried
        ));
    }
    // Judge, store, report.
    let allowed_by = if a.allow_degraded {
        Some("--allow-degraded".to_string())
    } else {
        profile
            .allow_degraded
            .then(|| format!("profile {} (allow_degraded = true)", profile.name))
    };
    judge(&mut doc, profile, &cx.stop, allowed_by);
    for w in &doc.warnings {
        eprintln!("rtgauge: warning: {w}");
    }
    if let Err(e) = rec.store.update(id, &doc) {
        let checkpoints = (rec.tried, rec.refused);
        return Ok((None, not_stored(a, id, &doc, e, checkpoints)));
    }
    // A failed `--output` is an error of its own, returned after the report (summary, verdict, HTML
    // page): it must not cost the user the report of a stored run. A file is written first, so that a
    // closed stdout (`| head`), which ends the report quietly, does not cost the file; `-` follows the
    // report on stdout.
    let output = crate::output::write_output_file(a.output.output.as_deref(), &doc);
    let code = report(a, id, &db, &doc);
    output?;
    let code = code?;
    crate::output::write_output_to_stdout(a.output.output.as_deref(), &doc)?;
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
    Ok((Some(id), code))
}

/// The end of a run the store refused when it finished: the measurement is not lost. Its document goes to
/// `--output` (where given and writable) or to a fallback file, the summary is printed as for a stored run,
/// and the error names the cause, the file and how to store it later; the exit code is [`NOT_STORED`].
/// `checkpoints`: (tried, refused).
fn not_stored(
    a: &RunArgs,
    id: i64,
    doc: &RunDocument,
    cause: rtgauge_store::StoreError,
    checkpoints: (u64, u64),
) -> ExitCode {
    let gone = matches!(cause, rtgauge_store::StoreError::NotFound(_));
    // With its chain: "database …: database or disk is full".
    let cause = anyhow::Error::from(cause);
    let output = a.output.output.as_deref();
    let to_stdout = output.is_some_and(crate::output::is_stdout);
    let (kept, output_failed) = match output.filter(|p| !crate::output::is_stdout(p)) {
        Some(p) => match crate::output::write_output_file(Some(p), doc) {
            Ok(()) => (Ok(p.to_path_buf()), None),
            Err(e) => (
                crate::output::fallback_file(a.store.db.db.as_deref(), doc),
                Some(format!("{e:#}")),
            ),
        },
        None => (
            crate::output::fallback_file(a.store.db.db.as_deref(), doc),
            None,
        ),
    };
    let opts = rtgauge_report::text::TextOptions::for_stdout(a.verbose.verbose);
    let summary = super::print_text(&format!(
        "{}{}",
        rtgauge_report::terminal::render_summary(doc, opts),
        rtgauge_report::terminal::render_verdict(doc, opts)
    ));
    if summary.is_ok() {
        let (tried, refused) = checkpoints;
        let kept_there = if gone {
            format!("run {id} is no longer in the store")
        } else if refused == tried {
            format!("it holds only the run's start ({refused} of {tried} checkpoints refused)")
        } else {
            format!(
                "it keeps its last stored checkpoint ({refused} of {tried} checkpoints refused)"
            )
        };
        println!(
            "not stored: run {id} ({}) — the store refused it at the end; {kept_there}",
            doc.status.as_str()
        );
    }
    if let Some(e) = &output_failed {
        eprintln!("rtgauge: error: {e}");
    }
    let later = if gone {
        "stores it as a new run".to_string()
    } else {
        format!("completes stored run {id}")
    };
    let pushed = a.push.as_ref().map_or(String::new(), |to| {
        format!(
            "; it was not pushed to {} either (push it after the import)",
            rtgauge_store::display_spec(to)
        )
    });
    match kept {
        Ok(path) => eprintln!(
            "rtgauge: error: the run was measured but not stored: {cause:#}. Its document is in {p}: \
             `rtgauge import {p}` {later} once the store can be written{pushed}",
            p = path.display()
        ),
        Err(e) if to_stdout => eprintln!(
            "rtgauge: error: the run was measured but not stored: {cause:#}; its document follows on \
             standard output (--output -), no file could take a copy ({e:#}){pushed}"
        ),
        Err(e) => eprintln!(
            "rtgauge: error: the run was measured but not stored: {cause:#}; nor could its document be \
             written anywhere ({e:#}): the summary above is all that is left{pushed}"
        ),
    }
    let _ = crate::output::write_output_to_stdout(output, doc);
    ExitCode::from(NOT_STORED)
}

/// What every stage of a run reads: the host, where and how long to measure, and the stop flag.
struct Context {
    root: HostRoot,
    place: RunCpus,
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
    // Its own id from the start, so that a document the store refused at the end (kept in a file) completes
    // this stored run when imported later.
    doc.uuid = Some(rtgauge_model::run::new_uuid());
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

/// The tuning audit, its summary printed, then what it found this process will not get (SCHED_FIFO at
/// the probes' highest priority `rt_priority`, memory locking, the measured CPUs): said before anything is
/// measured, with its cause and fix.
fn audit(cx: &Context, no_sample: bool, rt_priority: i32) -> rtgauge_model::audit::AuditReport {
    let mut measured = cx.place.cpus.clone();
    if !measured.contains(cx.place.housekeeping) {
        measured = rtgauge_model::CpuSet::new(measured.iter().chain([cx.place.housekeeping]));
    }
    // The SMI rule reads /dev/cpu/N/msr: loaded for the audit where missing (and unloaded after it).
    let msr = (cx.root.is_live() && !no_sample).then(rtgauge_probe::smi::MsrDriver::ensure);
    let audit = rtgauge_audit::run_audit(
        &cx.root,
        &AuditOptions {
            sample: (!no_sample).then(|| Duration::from_secs(1)),
            rt_priority: Some(rt_priority),
            measured: Some(measured),
            ..AuditOptions::default()
        },
    );
    drop(msr);
    let s = &audit.summary;
    println!(
        "audit: {} pass, {} warn, {} fail, {} n/a, {} unavailable",
        s.pass, s.warn, s.fail, s.not_applicable, s.unavailable
    );
    let process_rules = [
        "rt-priority-allowed",
        "mlockall-allowed",
        "measured-cpus-allowed",
    ];
    for f in audit.findings.iter().filter(|f| {
        matches!(
            f.status,
            rtgauge_model::audit::Status::Fail | rtgauge_model::audit::Status::Warn
        ) && process_rules.contains(&f.id.as_str())
    }) {
        let word = match f.status {
            rtgauge_model::audit::Status::Fail => "NOT MET",
            _ => "may not be met",
        };
        eprintln!(
            "rtgauge: {word} (found before measuring, audit {}): {}",
            f.id, f.summary
        );
    }
    audit
}

/// The run's status (every probe ran, none stopped by a signal), its unmet conditions and the profile's
/// verdicts: not judged when a condition that bears on the figures was not met, unless `allowed_by` (the
/// flag or the profile) accepts the degraded run.
fn judge(doc: &mut RunDocument, profile: &Profile, stop: &StopFlag, allowed_by: Option<String>) {
    // A probe the platform cannot run was not left out by a stop: it counts as run.
    let all_ran = !stop.is_set() && doc.probes.len() + doc.skipped.len() >= profile.probes.len();
    doc.status = rtgauge_analysis::judge::run_status(&doc.probes, all_ran);
    doc.unmet = crate::output::unmet(&doc.probes);
    let degraded = rtgauge_model::conditions::degrades(&doc.unmet);
    doc.degraded_allowed_by = allowed_by.filter(|_| degraded);
    let judged = !degraded || doc.degraded_allowed_by.is_some();
    doc.verdicts = profile
        .gates
        .iter()
        .map(|g| rtgauge_analysis::judge::judge(g, doc, judged))
        .collect();
    doc.ended_at = crate::output::now_rfc3339();
}

/// The HTML report beside the database, the terminal summary, and the exit code: 3 when the gates were not
/// judged (the run's conditions fell short), else 1 when a gate failed.
fn report(a: &RunArgs, id: i64, db: &str, doc: &RunDocument) -> anyhow::Result<ExitCode> {
    let html = a.html.html.clone().unwrap_or_else(|| {
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

    let opts = rtgauge_report::text::TextOptions::for_stdout(a.verbose.verbose);
    let mut out = std::io::stdout().lock();
    super::print_text(&rtgauge_report::terminal::render_summary(doc, opts))?;
    writeln!(out, "stored: run {id} ({}) in {db}", doc.status.as_str())?;
    match report {
        Ok(()) => writeln!(out, "report: {}", html.display())?,
        // The run is stored; a report that cannot be written is worth a warning, not a failed run.
        Err(e) => eprintln!(
            "rtgauge: warning: report not written to {}: {e:#}",
            html.display()
        ),
    }
    drop(out);
    super::print_text(&rtgauge_report::terminal::render_verdict(doc, opts))?;
    Ok(verdict_code(doc))
}

/// The exit code of a judged run: [`NOT_JUDGED`] when its gates were not judged, 1 when one did not pass
/// (a gate skipped because the platform cannot run its probe is neither).
pub fn verdict_code(doc: &RunDocument) -> ExitCode {
    if doc.verdicts.iter().any(|v| v.outcome == Outcome::NotJudged) {
        ExitCode::from(NOT_JUDGED)
    } else if rtgauge_model::verdict::all_skipped(&doc.verdicts)
        || doc
            .verdicts
            .iter()
            .any(|v| !matches!(v.outcome, Outcome::Pass | Outcome::Skipped))
    {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

//! A run's stages, each measured by the session engine: progress on stderr, checkpoints into the stored run.

use super::Context;
use crate::cmd::progress::Progress;
use rtgauge_flags::stage::Stage;
use rtgauge_model::run::{ProbeResult, RunDocument, SkippedProbe};
use rtgauge_session::record::{CheckpointWriter, Checkpoints};
use rtgauge_session::{Around, Tick};
use std::time::Duration;

/// Run the stages in order until one is stopped, storing the document after each.
pub(super) fn measure(
    stages: Vec<Stage>,
    doc: &mut RunDocument,
    rec: &mut CheckpointWriter<'_>,
    cx: &Context,
) -> anyhow::Result<()> {
    for stage in stages {
        if cx.stop.is_set() {
            break;
        }
        let kind = stage.plan.kind();
        if let Some(why) = stage.plan.unavailable() {
            // Not a failure of the platform under test: said, recorded, and its gates skipped.
            let line = format!("{} skipped: {why}", kind.as_str());
            eprintln!("rtgauge: {line}");
            doc.warnings.push(line);
            doc.skipped.push(SkippedProbe { kind, why });
            rec.save(doc);
            continue;
        }
        let results = measure_stage(&stage, doc, rec, cx)?;
        doc.probes.extend(results);
        // A run killed later keeps what its conditions were so far.
        doc.unmet = crate::output::unmet(&doc.probes);
        doc.ended_at = crate::output::now_rfc3339();
        rec.save(doc);
    }
    Ok(())
}

/// One stage through the session engine, with progress on stderr and checkpoints into the stored run.
fn measure_stage(
    stage: &Stage,
    doc: &mut RunDocument,
    rec: &mut CheckpointWriter<'_>,
    cx: &Context,
) -> anyhow::Result<Vec<ProbeResult>> {
    let total = Duration::from_nanos(cx.duration.as_ns());
    let plan = stage.plan.as_ref();
    crate::cmd::warn_all(plan.notes());
    doc.warnings.extend(plan.notes().iter().cloned());
    if let Some(line) = plan.announce(cx.duration, &cx.place.cpus) {
        eprintln!("{line}");
    }
    let probe = plan.probe(&cx.root);
    let why = plan.why();
    let around = Around {
        load: stage.load.clone(),
        accounting: why.is_some(),
        why,
    };
    let mut progress = Progress::new(plan.kind().as_str(), total);
    let base = doc.clone();
    let mut show =
        |tick: &Tick<'_>, checkpoint: Option<&ProbeResult>| progress.tick(tick, checkpoint);
    let mut ck = Checkpoints {
        base: &base,
        writer: rec,
        now: crate::output::now_rfc3339,
        progress: &mut show,
    };
    let (results, warnings) =
        crate::cmd::measure(&cx.root, &cx.stop, probe.as_ref(), &around, &mut [&mut ck])?;
    progress.finish();
    doc.warnings.extend(warnings);
    Ok(results)
}

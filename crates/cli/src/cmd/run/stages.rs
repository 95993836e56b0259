//! A run's stages, each measured by the session engine: progress on stderr, checkpoints into the stored run.

use super::Context;
use crate::cmd::progress::Progress;
use rtgauge_flags::run::{ProbePlan, Stage};
use rtgauge_model::run::{ProbeResult, RunDocument};
use rtgauge_model::Nanos;
use rtgauge_session::record::{CheckpointWriter, Checkpoints};
use rtgauge_session::{probes, Around, Probe, Tick};
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
        let results = match &stage.probe {
            ProbePlan::Numa(pids, interval) => {
                vec![rtgauge_host::numa::read_numa(
                    &cx.root,
                    (!pids.is_empty()).then_some(pids.as_slice()),
                    interval.as_ns(),
                )
                .into()]
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
    rec: &mut CheckpointWriter<'_>,
    cx: &Context,
) -> anyhow::Result<Vec<ProbeResult>> {
    let total = Duration::from_nanos(cx.duration.as_ns());
    let (probe, why, what): (Box<dyn Probe + '_>, _, &str) = match &stage.probe {
        ProbePlan::Cyclic(r) => {
            crate::cmd::warn_all(&r.notes);
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

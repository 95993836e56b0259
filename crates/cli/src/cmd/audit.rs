//! `rtgauge audit`: the real-time readiness audit of this host or guest (or of a captured tree via `--root`),
//! `--capture DIR` to save every file it read, and the linters of VM and pod definitions
//! (`--vmx`, `--libvirt`, `--k8s`). Exit code: 0 nothing failed, 1 a rule failed, 2 usage or runtime error.

use anyhow::Context as _;
use rtgauge_audit::{run_audit, AuditOptions};
use rtgauge_flags::audit::*;
use rtgauge_flags::PrintFormat;
use rtgauge_lint::{k8s, libvirt, vmx};
use rtgauge_model::audit::{AuditReport, Target};
use rtgauge_report::audit::render_text as render_audit_text;
use std::process::ExitCode;

fn read_definition(path: &std::path::Path) -> anyhow::Result<(String, String)> {
    let bytes =
        rtgauge_flags::read_user_file(path, "cannot read", rtgauge_flags::MAX_DEFINITION_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok((path.display().to_string(), text))
}

pub fn run(a: &AuditArgs) -> anyhow::Result<ExitCode> {
    let report: AuditReport = if let Some(p) = &a.vmx {
        let (name, text) = read_definition(p)?;
        vmx::lint_vmx(&name, &text)?
    } else if let Some(p) = &a.libvirt {
        let (name, text) = read_definition(p)?;
        libvirt::lint_libvirt_on_host(&name, &text, a.isolated.as_ref())?
    } else if let Some(p) = &a.k8s {
        let (name, text) = read_definition(p)?;
        k8s::lint_k8s(&name, &text)?
    } else {
        let base = a.root.open()?;
        let root = if a.capture.is_some() {
            base.recording()
        } else {
            base
        };
        let target = match a.target.as_str() {
            "auto" => None,
            t => Some(Target::parse(t).with_context(|| format!("--target {t}: unknown target"))?),
        };
        let opts = AuditOptions {
            target,
            isolated: a.isolated.clone(),
            sample: (!a.no_sample).then(|| std::time::Duration::from_nanos(a.interval.as_ns())),
            ..Default::default()
        };
        // The SMI rule reads /dev/cpu/N/msr: the driver is loaded for the audit where missing, and unloaded.
        let msr =
            (root.is_live() && opts.sample.is_some()).then(rtgauge_probe::smi::MsrDriver::ensure);
        let report = run_audit(&root, &opts);
        drop(msr);
        super::warn_refused(&root);
        super::warn_topology(&root);
        if let Some(dir) = &a.capture {
            // The fingerprint's reads belong to a capture too, so `fingerprint --root DIR` works on it.
            let _ = rtgauge_host::fingerprint::read_fingerprint(&root);
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let n = root
                .write_capture(dir)
                .with_context(|| format!("cannot write the capture into {}", dir.display()))?;
            eprintln!("rtgauge: captured {n} files into {}", dir.display());
        }
        report
    };
    let out = match a.format.format {
        PrintFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
        PrintFormat::Text => render_audit_text(&report, a.verbose),
    };
    super::print_text(&out)?;
    Ok(if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

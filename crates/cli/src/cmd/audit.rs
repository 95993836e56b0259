//! `rtgauge audit`: the real-time readiness audit of this host or guest (or of a captured tree via `--root`),
//! `--capture DIR` to save every file it read, and the linters of VM and pod definitions
//! (`--vmx`, `--libvirt`, `--k8s`). Exit code: 0 nothing failed, 1 a rule failed, 2 usage or runtime error.

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use rtgauge_host::audit::{render_audit_text, run_audit, AuditOptions};
use rtgauge_host::lint::{k8s, libvirt, vmx};
use rtgauge_model::audit::{AuditReport, Target};
use rtgauge_model::units::parse_duration;
use rtgauge_model::{CpuSet, Nanos};
use std::path::PathBuf;
use std::process::ExitCode;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

const AFTER_HELP: &str = "Statuses: pass, warn, fail, n/a, unavailable; rule ids are the catalogue's \
(docs/audit.md).\nExit status: 0 no rule failed, 1 a rule failed, 2 usage or runtime error (a malformed \
definition names its file and line).";

/// Audit this host/guest for real-time readiness, or lint a VM/pod definition.
#[derive(Debug, Clone, Args)]
#[command(after_help = AFTER_HELP)]
pub struct AuditArgs {
    #[command(flatten)]
    pub root: super::RootArg,

    /// What the system is meant to be; several verdicts depend on it.
    #[arg(long, default_value = "auto", value_parser = ["auto", "bare-metal-rt-host", "kvm-rt-host", "rt-guest", "k8s-rt-node"])]
    pub target: String,

    /// The RT CPU set (kernel list syntax, e.g. 2-29); default: tuned isolated_cores, then nohz_full/isolcpus/rcu_nocbs.
    /// With --libvirt: the host's RT set, which vCPU pins must stay in and the emulator out of.
    #[arg(long, value_name = "LIST", value_parser = |s: &str| CpuSet::parse(s).map_err(|e| e.to_string()))]
    pub isolated: Option<CpuSet>,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,

    /// Skip the sampled rules (IRQ activity, steal time, C-state usage growth).
    #[arg(long)]
    pub no_sample: bool,

    /// Interval between the two samples of sampled rules (e.g. 2s, 500ms).
    #[arg(long, value_name = "D", default_value = "2s", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    pub interval: Nanos,

    /// Write every file the audit read into DIR, so that `--root DIR` later yields the same findings.
    #[arg(long, value_name = "DIR")]
    pub capture: Option<PathBuf>,

    /// Lint a VMware .vmx file instead of auditing the host.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["libvirt", "k8s", "root", "capture"])]
    pub vmx: Option<PathBuf>,

    /// Lint a libvirt domain XML file instead of auditing the host.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["vmx", "k8s", "root", "capture"])]
    pub libvirt: Option<PathBuf>,

    /// Lint a Kubernetes YAML file (pod, Deployment, KubeletConfiguration, PerformanceProfile).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["vmx", "libvirt", "root", "capture"])]
    pub k8s: Option<PathBuf>,

    /// Show evidence for passing findings too.
    #[arg(long, short)]
    pub verbose: bool,
}

fn read_definition(path: &std::path::Path) -> anyhow::Result<(String, String)> {
    let bytes = super::read_user_file(path, "cannot read", super::MAX_DEFINITION_BYTES)?;
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
        };
        let report = run_audit(&root, &opts);
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
    let out = match a.format {
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
        Format::Text => render_audit_text(&report, a.verbose),
    };
    super::print_text(&out)?;
    Ok(if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

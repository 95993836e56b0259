//! `rtgauge audit`'s flags: the audit of a host or captured tree, its capture, and the linters' inputs.

use clap::Args;
use rtgauge_model::units::parse_duration;
use rtgauge_model::{CpuSet, Nanos};
use std::path::PathBuf;

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

    #[command(flatten)]
    pub format: super::FormatArg,

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

//! `rtgauge plan`'s flags: the need the partition is planned for, and where its files go.

use clap::{Args, ValueEnum};
use rtgauge_plan::{parse_vm, VmNeed};
use std::path::PathBuf;

/// What to do with SMT siblings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SmtArg {
    Keep,
    Off,
}

const AFTER_HELP: &str = "Files written into --config-dir DIR: cmdline.txt, tuned/<profile>-variables.conf, \
tuned/bootcmdline, irqbalance, systemd/system.conf.d/50-rtgauge-cpuaffinity.conf, irq-affinity.sh, plan.txt, \
plan.json; with --for kvm-host libvirt/<vm>.xml, vmware-guest vmx/*.vmx, k8s k8s/performanceprofile.yaml and \
k8s/kubelet-config.yaml.\nExit status: 0 planned, 2 impossible request or bad input.";

/// Compute the real-time CPU partition and write its configuration (kernel, tuned, irqbalance, systemd,
/// libvirt, .vmx, Kubernetes).
#[derive(Debug, Clone, Args)]
#[command(after_help = AFTER_HELP)]
pub struct PlanArgs {
    /// Read a captured tree (DIR/proc, DIR/sys, DIR/etc) instead of this system.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// RT CPUs in total (rounded up to whole cores); default: every core not kept for housekeeping.
    #[arg(long, value_name = "N", conflicts_with = "rt_per_node", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub rt_cpus: Option<u32>,

    /// RT CPUs on each NUMA node (not with --nic, which puts them on the NIC's node first).
    #[arg(long, value_name = "N", conflicts_with = "nic", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub rt_per_node: Option<u32>,

    /// At least N housekeeping CPUs (default: one core per socket and per NUMA node, CPU 0's core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub housekeeping: Option<u32>,

    /// Keep the RT CPUs and their memory on this NIC's NUMA node.
    #[arg(long, value_name = "NAME")]
    pub nic: Option<String>,

    /// SMT: keep (RT CPUs are whole cores) or off (nosmt).
    #[arg(long, value_enum, default_value = "keep")]
    pub smt: SmtArg,

    /// What the machine is for.
    #[arg(long = "for", value_name = "TARGET", default_value = "host", value_parser = ["host", "kvm-host", "vmware-guest", "kvm-guest", "k8s"])]
    pub target: String,

    /// A VM to place (hypervisor targets): NAME:VCPUS[:MEM_GIB] (default memory 2 GiB per vCPU, at least 4).
    #[arg(long = "vm", value_name = "NAME:VCPUS[:GIB]", value_parser = parse_vm)]
    pub vms: Vec<VmNeed>,

    /// Huge-page memory for the RT workload (host, k8s), GiB in total, spread over the RT nodes.
    #[arg(long, value_name = "GIB", value_parser = clap::value_parser!(u32).range(1..=1048576))]
    pub mem: Option<u32>,

    /// Write every configuration file (and plan.txt, plan.json) into DIR.
    #[arg(long, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,

    /// Write the plan into a copy of the --root tree at DIR (new, parents created as needed, or empty), for
    /// `rtgauge audit --root DIR`.
    #[arg(long, value_name = "DIR", requires = "root")]
    pub apply_to_tree: Option<PathBuf>,

    /// Instead of a partition: processes and cgroups whose memory is not local, their binding, the gain.
    #[arg(long, conflicts_with_all = ["rt_cpus", "rt_per_node", "housekeeping", "nic", "vms", "mem", "apply_to_tree"])]
    pub numa: bool,

    /// With --numa: a run document of `rtgauge mem --output` holding the NUMA matrix.
    #[arg(long, value_name = "FILE", requires = "numa")]
    pub matrix: Option<PathBuf>,

    /// With --numa: advise on what has less than PCT % of its memory local.
    #[arg(long, value_name = "PCT", default_value_t = 90.0, requires = "numa", value_parser = parse_pct)]
    pub below: f64,

    #[command(flatten)]
    pub format: super::FormatArg,
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err("a percentage 0-100".into()),
    }
}

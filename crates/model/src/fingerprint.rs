//! The platform fingerprint: what machine, kernel, virtualization layer and tuning state a result was taken on.
//!
//! Plain data, filled by `rtgauge-host` from `/proc`, `/sys`, `/etc` (and CPUID when live). Every field that could
//! not be read is `None` or empty rather than a guess, so two fingerprints compare honestly.

use crate::CpuSet;
use serde::{Deserialize, Serialize};

/// Everything the fingerprint knows about a host or guest.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Fingerprint {
    pub cpu: CpuInfo,
    pub numa: Vec<NumaNode>,
    pub kernel: KernelInfo,
    pub clock: ClockInfo,
    pub virt: VirtInfo,
    pub container: ContainerInfo,
    pub tuned: TunedInfo,
    pub isolation: IsolationInfo,
    pub memory: MemoryInfo,
}

/// Processor identity and topology.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuInfo {
    /// `vendor_id` of `/proc/cpuinfo` (`GenuineIntel`, `AuthenticAMD`, …) or the arm64 implementer.
    pub vendor: Option<String>,
    pub model_name: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    pub microcode: Option<String>,
    /// Distinct `physical_package_id` values of online CPUs.
    pub sockets: u32,
    /// Distinct (package, core) pairs of online CPUs.
    pub cores: u32,
    /// Online logical CPUs.
    pub threads: u32,
    pub threads_per_core: u32,
    pub online: CpuSet,
    /// `/sys/devices/system/cpu/smt/control` (`on`, `off`, `forceoff`, `notsupported`, `notimplemented`).
    pub smt_control: Option<String>,
    /// `/sys/devices/system/cpu/smt/active`; when absent, derived from `threads_per_core > 1`.
    pub smt_active: Option<bool>,
    /// Flags from `/proc/cpuinfo` that matter for timing and virtualization (tsc, constant_tsc, nonstop_tsc,
    /// tsc_reliable, tsc_known_freq, tsc_deadline_timer, hypervisor, ht).
    pub timing_flags: Vec<String>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuSet,
    pub mem_total_kib: Option<u64>,
    pub mem_free_kib: Option<u64>,
}

/// Kernel identity and preemption model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelInfo {
    pub release: String,
    pub version: String,
    pub preempt: PreemptInfo,
    pub cmdline: String,
}

/// Preemption model of the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptModel {
    /// PREEMPT_RT (fully preemptible, threaded interrupts, sleeping spinlocks).
    Rt,
    Full,
    Lazy,
    Voluntary,
    None,
    #[default]
    Unknown,
}

/// How the preemption model was determined.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PreemptInfo {
    pub model: PreemptModel,
    /// Kernel built with PREEMPT_DYNAMIC (mode selectable at boot with `preempt=`).
    pub dynamic: bool,
    /// Active PREEMPT_DYNAMIC mode from `/sys/kernel/debug/sched/preempt` (the word in parentheses).
    pub dynamic_mode: Option<String>,
    /// `/sys/kernel/realtime` read `1` (out-of-tree RT patch set only).
    pub sys_kernel_realtime: bool,
    /// Which file decided: e.g. `/proc/sys/kernel/version`.
    pub source: String,
}

/// Clocksource and TSC.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClockInfo {
    pub current: Option<String>,
    pub available: Vec<String>,
}

/// Virtualization platform, systemd-detect-virt style names (`none`, `kvm`, `qemu`, `vmware`, `microsoft`, `xen`,
/// `amazon`, `oracle`, `parallels`, `bhyve`, `acrn`, `firecracker`, …).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VirtInfo {
    pub platform: String,
    /// `hypervisor` flag in `/proc/cpuinfo` (CPUID.1:ECX[31]).
    pub hypervisor_flag: bool,
    /// CPUID leaf 0x40000000 vendor string, when read live on x86_64.
    pub cpuid_vendor: Option<String>,
    pub dmi: DmiInfo,
    /// `/sys/hypervisor/type`.
    pub sys_hypervisor: Option<String>,
    /// Which evidence decided the platform.
    pub decided_by: String,
}

/// SMBIOS strings from `/sys/class/dmi/id`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DmiInfo {
    pub sys_vendor: Option<String>,
    pub product_name: Option<String>,
    pub product_version: Option<String>,
    pub board_vendor: Option<String>,
    pub bios_vendor: Option<String>,
}

/// Whether we run inside a container.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ContainerInfo {
    /// `none`, `docker`, `podman`, `lxc`, `systemd-nspawn`, `wsl`, `openvz`, `container-other`.
    pub kind: String,
    /// Files that decided it, `path: value`.
    pub evidence: Vec<String>,
    /// CPUs this process's cgroup may use (`/sys/fs/cgroup/cpuset.cpus.effective`, cgroup v2): inside a
    /// container the only CPU fact that describes the container rather than the host.
    #[serde(default)]
    pub cpus_effective: Option<CpuSet>,
}

/// tuned daemon state as left in `/etc/tuned`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TunedInfo {
    pub active_profile: Option<String>,
    pub profile_mode: Option<String>,
    /// `isolated_cores=` from the active profile's variables file, verbatim.
    pub isolated_cores: Option<String>,
    /// `TUNED_BOOT_CMDLINE` of `/etc/tuned/bootcmdline`.
    pub boot_cmdline: Option<String>,
}

/// CPU isolation in force (runtime files) and requested (cmdline).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IsolationInfo {
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: Option<CpuSet>,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: Option<CpuSet>,
    pub cmdline_isolcpus: Option<String>,
    pub cmdline_nohz_full: Option<String>,
    pub cmdline_rcu_nocbs: Option<String>,
    pub cmdline_irqaffinity: Option<String>,
}

/// Memory totals and huge page pools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryInfo {
    pub total_kib: Option<u64>,
    pub available_kib: Option<u64>,
    pub swap_total_kib: Option<u64>,
    pub default_hugepage_kib: Option<u64>,
    pub hugepages: Vec<HugePagePool>,
    /// Active transparent huge page mode (the bracketed word).
    pub thp: Option<String>,
}

/// One huge page size's pool (`/sys/kernel/mm/hugepages/hugepages-<size>kB`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HugePagePool {
    pub size_kib: u64,
    pub total: u64,
    pub free: u64,
}

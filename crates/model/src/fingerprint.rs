//! The platform fingerprint: what machine, kernel, virtualization layer and tuning state a result was taken on.
//!
//! Plain data, filled by `rtgauge-host` from `/proc`, `/sys`, `/etc` (and CPUID when live). Every field that could
//! not be read is `None` or empty rather than a guess, so two fingerprints compare honestly.

use crate::CpuSet;
use serde::{Deserialize, Serialize};

/// Everything the fingerprint knows about a host or guest.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Processor identity and topology.
    pub cpu: CpuInfo,
    /// NUMA nodes, by id; empty where the kernel has no NUMA.
    pub numa: Vec<NumaNode>,
    /// Kernel identity and preemption model.
    pub kernel: KernelInfo,
    /// Clocksources.
    pub clock: ClockInfo,
    /// Virtualization platform.
    pub virt: VirtInfo,
    /// Container, if any.
    pub container: ContainerInfo,
    /// tuned daemon state.
    pub tuned: TunedInfo,
    /// CPU isolation in force and requested.
    pub isolation: IsolationInfo,
    /// Memory totals and huge page pools.
    pub memory: MemoryInfo,
}

/// Processor identity and topology.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuInfo {
    /// `vendor_id` of `/proc/cpuinfo` (`GenuineIntel`, `AuthenticAMD`, …) or the arm64 implementer.
    pub vendor: Option<String>,
    /// `model name` of `/proc/cpuinfo`; `None` where absent (some arm64 kernels).
    pub model_name: Option<String>,
    /// `cpu family` of `/proc/cpuinfo`; `None` where absent.
    pub family: Option<u32>,
    /// `model` of `/proc/cpuinfo`; `None` where absent.
    pub model: Option<u32>,
    /// `stepping` of `/proc/cpuinfo`; `None` where absent.
    pub stepping: Option<u32>,
    /// `microcode` revision of `/proc/cpuinfo`, verbatim; `None` where absent (in most guests).
    pub microcode: Option<String>,
    /// Distinct `physical_package_id` values of online CPUs.
    pub sockets: u32,
    /// Distinct (package, core) pairs of online CPUs.
    pub cores: u32,
    /// Online logical CPUs.
    pub threads: u32,
    /// Logical CPUs per core (2 with SMT on, 1 without).
    pub threads_per_core: u32,
    /// Online logical CPUs (`/sys/devices/system/cpu/online`).
    pub online: CpuSet,
    /// `/sys/devices/system/cpu/smt/control` (`on`, `off`, `forceoff`, `notsupported`, `notimplemented`).
    pub smt_control: Option<String>,
    /// `/sys/devices/system/cpu/smt/active`; when absent, derived from `threads_per_core > 1`.
    pub smt_active: Option<bool>,
    /// Flags from `/proc/cpuinfo` that matter for timing and virtualization (tsc, constant_tsc, nonstop_tsc,
    /// tsc_reliable, tsc_known_freq, tsc_deadline_timer, hypervisor, ht).
    pub timing_flags: Vec<String>,
    /// What SMI counts cover on this CPU (`rtgauge_host::smi`): every SMI (Intel, bare metal), only a
    /// guest's virtual firmware's (Intel, in a guest), or "SMIs not counted" and why (AMD, others). Empty in
    /// documents written before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smi: String,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NumaNode {
    /// Node number (`/sys/devices/system/node/node<id>`).
    pub id: u32,
    /// CPUs of the node.
    pub cpus: CpuSet,
    /// Memory of the node (`MemTotal` of its meminfo), KiB; `None` if unreadable.
    pub mem_total_kib: Option<u64>,
    /// Free memory of the node when read (`MemFree` of its meminfo), KiB; `None` if unreadable.
    pub mem_free_kib: Option<u64>,
}

/// Kernel identity and preemption model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelInfo {
    /// `uname -r` (`/proc/sys/kernel/osrelease`).
    pub release: String,
    /// `uname -v` (`/proc/sys/kernel/version`): build number, flags such as `PREEMPT_RT`, build date.
    pub version: String,
    /// Preemption model and how it was determined.
    pub preempt: PreemptInfo,
    /// Kernel command line (`/proc/cmdline`), verbatim.
    pub cmdline: String,
}

/// Preemption model of the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptModel {
    /// PREEMPT_RT (fully preemptible, threaded interrupts, sleeping spinlocks).
    Rt,
    /// CONFIG_PREEMPT: fully preemptible kernel code, no threaded interrupts by default.
    Full,
    /// CONFIG_PREEMPT_LAZY: full preemption, with preemption of normal tasks deferred to the tick.
    Lazy,
    /// CONFIG_PREEMPT_VOLUNTARY: preemption only at explicit points.
    Voluntary,
    /// CONFIG_PREEMPT_NONE: no kernel preemption (server kernels).
    None,
    /// Not determined from what could be read.
    #[default]
    Unknown,
}

/// How the preemption model was determined.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PreemptInfo {
    /// The model found.
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
    /// Clocksource in use (`current_clocksource`); `None` if unreadable.
    pub current: Option<String>,
    /// Clocksources the kernel offers (`available_clocksource`).
    pub available: Vec<String>,
}

/// Virtualization platform, systemd-detect-virt style names (`none`, `kvm`, `qemu`, `vmware`, `microsoft`, `xen`,
/// `amazon`, `oracle`, `parallels`, `bhyve`, `acrn`, `firecracker`, …).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VirtInfo {
    /// Platform name, systemd-detect-virt style (`none` on bare metal).
    pub platform: String,
    /// `hypervisor` flag in `/proc/cpuinfo` (`CPUID.1:ECX[31]`).
    pub hypervisor_flag: bool,
    /// CPUID leaf 0x40000000 vendor string, when read live on x86_64.
    pub cpuid_vendor: Option<String>,
    /// SMBIOS strings, which often name the hypervisor.
    pub dmi: DmiInfo,
    /// `/sys/hypervisor/type`.
    pub sys_hypervisor: Option<String>,
    /// Which evidence decided the platform.
    pub decided_by: String,
}

/// SMBIOS strings from `/sys/class/dmi/id`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DmiInfo {
    /// `sys_vendor`; `None` if absent or unreadable.
    pub sys_vendor: Option<String>,
    /// `product_name`; `None` if absent or unreadable.
    pub product_name: Option<String>,
    /// `product_version`; `None` if absent or unreadable.
    pub product_version: Option<String>,
    /// `board_vendor`; `None` if absent or unreadable.
    pub board_vendor: Option<String>,
    /// `bios_vendor`; `None` if absent or unreadable.
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
    /// Active profile name (`/etc/tuned/active_profile`); `None` when tuned never ran.
    pub active_profile: Option<String>,
    /// `/etc/tuned/profile_mode` (`auto` or `manual`); `None` when absent.
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
    /// `isolcpus=` of the kernel command line, verbatim; `None` when not given.
    pub cmdline_isolcpus: Option<String>,
    /// `nohz_full=` of the kernel command line, verbatim; `None` when not given.
    pub cmdline_nohz_full: Option<String>,
    /// `rcu_nocbs=` of the kernel command line, verbatim; `None` when not given.
    pub cmdline_rcu_nocbs: Option<String>,
    /// `irqaffinity=` of the kernel command line, verbatim; `None` when not given.
    pub cmdline_irqaffinity: Option<String>,
}

/// Memory totals and huge page pools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryInfo {
    /// `MemTotal` of `/proc/meminfo`, KiB; `None` if unreadable.
    pub total_kib: Option<u64>,
    /// `MemAvailable` of `/proc/meminfo`, KiB; `None` if unreadable.
    pub available_kib: Option<u64>,
    /// `SwapTotal` of `/proc/meminfo`, KiB; `None` if unreadable.
    pub swap_total_kib: Option<u64>,
    /// `Hugepagesize` of `/proc/meminfo`, KiB; `None` if unreadable.
    pub default_hugepage_kib: Option<u64>,
    /// One pool per huge page size the kernel supports.
    pub hugepages: Vec<HugePagePool>,
    /// Active transparent huge page mode (the bracketed word).
    pub thp: Option<String>,
}

/// One huge page size's pool (`/sys/kernel/mm/hugepages/hugepages-<size>kB`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HugePagePool {
    /// Page size, KiB.
    pub size_kib: u64,
    /// Pages in the pool (`nr_hugepages`).
    pub total: u64,
    /// Pages not in use (`free_hugepages`).
    pub free: u64,
}

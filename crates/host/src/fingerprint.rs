//! The platform fingerprint (`rtgauge fingerprint`): CPU, topology, NUMA, kernel and preemption model,
//! clocksource, virtualization platform, container, tuned state, isolation and memory.
//!
//! Invariants: every read goes through the [`HostRoot`]; the CPUID hypervisor vendor is read only on a live root
//! and is recorded under the pseudo path [`CPUID_PATH`] so a captured tree replays it; nothing here fails — a
//! missing file leaves its field empty.

use crate::cpu::{parse_cpu_mask, read_cpu_mask, CpuMask};
use crate::parse::{
    key_value, parse_bracketed_choice, parse_cmdline, parse_cpuinfo, parse_key_values,
    parse_meminfo, parse_preempt_dynamic, parse_uts_preempt, Cmdline,
};
use crate::root::HostRoot;
use rtgauge_model::fingerprint::*;
use rtgauge_model::CpuSet;
use std::collections::{BTreeMap, BTreeSet};

/// Where a live CPUID hypervisor vendor string is recorded in a capture (not a kernel file).
pub const CPUID_PATH: &str = "/.rtgauge/cpuid-hypervisor-vendor";

/// Topology of one CPU (Documentation/ABI/stable/sysfs-devices-system-cpu, `topology/*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuTopo {
    /// Physical package (socket) id, `topology/physical_package_id`; `None` when the file is absent.
    pub package: Option<u32>,
    /// Core id within the package, `topology/core_id`; `None` when the file is absent.
    pub core: Option<u32>,
    /// The SMT threads sharing this CPU's core (itself included), `topology/thread_siblings_list`.
    pub siblings: CpuSet,
}

/// Topology of every CPU in `cpus`.
pub fn read_topology(root: &HostRoot, cpus: &CpuSet) -> BTreeMap<u32, CpuTopo> {
    cpus.iter()
        .map(|c| {
            let base = format!("/sys/devices/system/cpu/cpu{c}/topology");
            let num = |f: &str| {
                root.read_optional(&format!("{base}/{f}"))
                    .and_then(|s| s.trim().parse().ok())
            };
            let siblings = root
                .read_optional(&format!("{base}/thread_siblings_list"))
                .and_then(|s| parse_cpu_mask(&s).ok())
                .unwrap_or_else(|| CpuSet::new([c]));
            (
                c,
                CpuTopo {
                    package: num("physical_package_id"),
                    core: num("core_id"),
                    siblings,
                },
            )
        })
        .collect()
}

/// Check the topology files strictly. [`read_topology`] and [`read_numa`] read them leniently (a malformed
/// file reads as absent: a malformed file must not stop a fingerprint or an audit, which warn with this
/// check's answer); `plan` refuses on it, as a partition built on them would be silently wrong (a sibling
/// planned RT next to its housekeeping twin, a node that vanishes, CPUs that do not exist). Returns one
/// line naming the file and what is wrong with it.
///
/// Checked: `cpu/online`; for each online CPU its directory (when the tree has CPU directories at all:
/// small captures hold only the masks) and its `topology/{thread_siblings_list,physical_package_id,core_id}`;
/// every `node/nodeN/cpulist`; with `nic`, that NIC's `device/numa_node` (-1 or a node of the machine).
pub fn check_topology_files(root: &HostRoot, nic: Option<&str>) -> Result<(), String> {
    let online = crate::cpu::read_cpu_mask(root, crate::cpu::CpuMask::Online)
        .map_err(|e| rtgauge_model::error::one_line(&e))?;
    let cpu_dir = "/sys/devices/system/cpu";
    let has_cpu_dirs = root.list_dir(cpu_dir).iter().any(|n| {
        n.strip_prefix("cpu")
            .is_some_and(|x| x.parse::<u32>().is_ok())
    });
    let missing: Vec<u32> = online
        .iter()
        .filter(|c| !root.exists(&format!("{cpu_dir}/cpu{c}")))
        .collect();
    if has_cpu_dirs && !missing.is_empty() {
        return Err(format!(
            "{cpu_dir}/online: lists CPU(s) {} that have no {cpu_dir}/cpuN directory",
            CpuSet::new(missing)
        ));
    }
    for c in online.iter() {
        let base = format!("{cpu_dir}/cpu{c}/topology");
        let path = format!("{base}/thread_siblings_list");
        if let Some(t) = root.read_optional(&path) {
            crate::cpu::parse_cpu_mask(&t).map_err(|e| format!("{path}: {e}"))?;
        }
        for f in ["physical_package_id", "core_id"] {
            let path = format!("{base}/{f}");
            if let Some(t) = root.read_optional(&path) {
                t.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{path}: '{}' is not a number", t.trim()))?;
            }
        }
    }
    let node_dir = "/sys/devices/system/node";
    let mut nodes = BTreeSet::new();
    for name in root.list_dir(node_dir) {
        let Some(node) = name
            .strip_prefix("node")
            .and_then(|x| x.parse::<u32>().ok())
        else {
            continue;
        };
        nodes.insert(node);
        let path = format!("{node_dir}/{name}/cpulist");
        if let Some(t) = root.read_optional(&path) {
            crate::cpu::parse_cpu_mask(&t).map_err(|e| format!("{path}: {e}"))?;
        }
    }
    if let Some(nic) = nic {
        let path = format!("/sys/class/net/{nic}/device/numa_node");
        if let Some(t) = root.read_optional(&path) {
            match t.trim().parse::<i64>() {
                Ok(-1) => {}
                Ok(n)
                    if u32::try_from(n)
                        .is_ok_and(|n| nodes.contains(&n) || nodes.is_empty() && n == 0) => {}
                Ok(n) => {
                    return Err(format!(
                        "{path}: node {n} is not a NUMA node of this machine (nodes: {})",
                        if nodes.is_empty() {
                            "none listed".to_string()
                        } else {
                            nodes
                                .iter()
                                .map(|n| n.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ))
                }
                Err(_) => return Err(format!("{path}: '{}' is not a node number", t.trim())),
            }
        }
    }
    Ok(())
}

/// NUMA nodes (Documentation/ABI/stable/sysfs-devices-node): `nodeN/cpulist` and `nodeN/meminfo`.
pub fn read_numa(root: &HostRoot) -> Vec<NumaNode> {
    crate::numa::read_nodes(root)
        .into_iter()
        .map(|n| {
            let (id, cpus) = (n.node, n.cpus);
            let base = format!("/sys/devices/system/node/node{id}");
            // Lines read "Node 0 MemTotal:  123 kB": drop the "Node N" prefix before the generic parser.
            let mem: BTreeMap<String, u64> = root
                .read_optional(&format!("{base}/meminfo"))
                .map(|t| {
                    let stripped: String = t
                        .lines()
                        .map(|l| {
                            let mut w = l.split_whitespace();
                            w.next();
                            w.next();
                            w.collect::<Vec<_>>().join(" ") + "\n"
                        })
                        .collect();
                    parse_meminfo(&stripped)
                })
                .unwrap_or_default();
            NumaNode {
                id,
                cpus,
                mem_total_kib: mem.get("MemTotal").copied(),
                mem_free_kib: mem.get("MemFree").copied(),
            }
        })
        .collect()
}

/// The kernel command line.
pub fn read_cmdline(root: &HostRoot) -> Cmdline {
    parse_cmdline(&root.read_optional("/proc/cmdline").unwrap_or_default())
}

/// The whole fingerprint.
pub fn read_fingerprint(root: &HostRoot) -> Fingerprint {
    let cpuinfo = parse_cpuinfo(&root.read_optional("/proc/cpuinfo").unwrap_or_default());
    let online = read_cpu_mask(root, CpuMask::Online).unwrap_or_default();
    let topo = read_topology(root, &online);
    let sockets: BTreeSet<u32> = topo.values().filter_map(|t| t.package).collect();
    let cores: BTreeSet<(u32, u32)> = topo
        .values()
        .filter_map(|t| Some((t.package?, t.core?)))
        .collect();
    let threads = online.len() as u32;
    let ncores = if cores.is_empty() {
        threads
    } else {
        cores.len() as u32
    };
    let threads_per_core = topo
        .values()
        .map(|t| t.siblings.intersection(&online).len() as u32)
        .max()
        .unwrap_or(1)
        .max(1);
    let smt_control = root
        .read_optional("/sys/devices/system/cpu/smt/control")
        .map(|s| s.trim().to_string());
    let smt_active = root
        .read_optional("/sys/devices/system/cpu/smt/active")
        .map(|s| s.trim() == "1")
        .or(Some(threads_per_core > 1).filter(|_| !topo.is_empty()));
    const TIMING: [&str; 8] = [
        "tsc",
        "constant_tsc",
        "nonstop_tsc",
        "tsc_reliable",
        "tsc_known_freq",
        "tsc_deadline_timer",
        "hypervisor",
        "ht",
    ];
    let timing_flags = TIMING
        .iter()
        .filter(|f| cpuinfo.flags.iter().any(|x| x == *f))
        .map(|f| f.to_string())
        .collect();
    let cpu = CpuInfo {
        sockets: sockets.len().max(usize::from(!online.is_empty())) as u32,
        cores: ncores,
        threads,
        threads_per_core,
        online: online.clone(),
        smt_control,
        smt_active,
        timing_flags,
        smi: crate::smi::read_platform(root).describe(),
        ..cpuinfo.identity.clone()
    };
    let cmdline = read_cmdline(root);
    let kernel = KernelInfo {
        release: read_kernel_file(root, "osrelease"),
        version: read_kernel_file(root, "version"),
        preempt: read_preempt(root),
        cmdline: cmdline.raw.clone(),
    };
    let clock = ClockInfo {
        current: root
            .read_optional("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .map(|s| s.trim().to_string()),
        available: root
            .read_optional("/sys/devices/system/clocksource/clocksource0/available_clocksource")
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    };
    let virt = read_virt(root, cpuinfo.flags.iter().any(|f| f == "hypervisor"));
    let container = read_container(root);
    let tuned = read_tuned(root);
    let isolation = IsolationInfo {
        isolated: read_cpu_mask(root, CpuMask::Isolated).ok(),
        nohz_full: read_cpu_mask(root, CpuMask::NohzFull).ok(),
        cmdline_isolcpus: cmdline.get("isolcpus").map(str::to_string),
        cmdline_nohz_full: cmdline.get("nohz_full").map(str::to_string),
        cmdline_rcu_nocbs: cmdline.get("rcu_nocbs").map(str::to_string),
        cmdline_irqaffinity: cmdline.get("irqaffinity").map(str::to_string),
    };
    let memory = read_memory(root);
    Fingerprint {
        cpu,
        numa: read_numa(root),
        kernel,
        clock,
        virt,
        container,
        tuned,
        isolation,
        memory,
    }
}

/// `/proc/sys/kernel/{osrelease,version}`: the same strings as uname(2), readable from a captured tree.
fn read_kernel_file(root: &HostRoot, name: &str) -> String {
    root.read_optional(&format!("/proc/sys/kernel/{name}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The running kernel's build configuration from `/boot/config-<release>` (empty when absent; `/proc/config.gz`
/// is compressed and not read).
pub fn read_kconfig(root: &HostRoot) -> BTreeMap<String, String> {
    let release = read_kernel_file(root, "osrelease");
    if release.is_empty() || release.contains('/') {
        return BTreeMap::new();
    }
    root.read_optional(&format!("/boot/config-{release}"))
        .map(|t| crate::parse::parse_kconfig(&t))
        .unwrap_or_default()
}

/// Preemption model: `/sys/kernel/realtime` (RT patch set), UTS version words, debugfs PREEMPT_DYNAMIC mode.
pub fn read_preempt(root: &HostRoot) -> PreemptInfo {
    let version = read_kernel_file(root, "version");
    let sys_rt = root
        .read_optional("/sys/kernel/realtime")
        .is_some_and(|s| s.trim() == "1");
    let dyn_mode = root
        .read_optional("/sys/kernel/debug/sched/preempt")
        .and_then(|t| parse_preempt_dynamic(&t));
    let (uts, dynamic) = parse_uts_preempt(&version);
    // Without debugfs, a PREEMPT_DYNAMIC kernel's mode is still known when the command line chose it.
    let cmdline_mode = if dynamic && dyn_mode.is_none() {
        read_cmdline(root)
            .get("preempt")
            .filter(|m| matches!(*m, "none" | "voluntary" | "full" | "lazy"))
            .map(str::to_string)
    } else {
        None
    };
    let kconfig = read_kconfig(root);
    let (model, source) = if sys_rt {
        (PreemptModel::Rt, "/sys/kernel/realtime")
    } else if uts == Some("rt") {
        (PreemptModel::Rt, "/proc/sys/kernel/version")
    } else if kconfig.get("CONFIG_PREEMPT_RT").map(String::as_str) == Some("y") {
        (PreemptModel::Rt, "/boot/config-<release> CONFIG_PREEMPT_RT")
    } else if let Some(m) = dyn_mode.as_deref() {
        let model = match m {
            "full" => PreemptModel::Full,
            "lazy" => PreemptModel::Lazy,
            "voluntary" => PreemptModel::Voluntary,
            "none" => PreemptModel::None,
            _ => PreemptModel::Unknown,
        };
        (model, "/sys/kernel/debug/sched/preempt")
    } else if let Some(m) = cmdline_mode.as_deref() {
        let model = match m {
            "full" => PreemptModel::Full,
            "lazy" => PreemptModel::Lazy,
            "voluntary" => PreemptModel::Voluntary,
            _ => PreemptModel::None,
        };
        (model, "/proc/cmdline preempt=")
    } else {
        match uts {
            Some("lazy") => (PreemptModel::Lazy, "/proc/sys/kernel/version"),
            Some("full") if !dynamic => (PreemptModel::Full, "/proc/sys/kernel/version"),
            // A PREEMPT_DYNAMIC build without readable debugfs: the boot-time default is not knowable here.
            _ if dynamic => (PreemptModel::Unknown, "/proc/sys/kernel/version"),
            _ if version.is_empty() => (PreemptModel::Unknown, ""),
            _ => (PreemptModel::Voluntary, "/proc/sys/kernel/version"),
        }
    };
    PreemptInfo {
        model,
        dynamic: dynamic || dyn_mode.is_some(),
        dynamic_mode: dyn_mode.or(cmdline_mode),
        sys_kernel_realtime: sys_rt,
        source: source.to_string(),
    }
}

/// CPUID leaf 0x40000000 vendor → platform (systemd `src/basic/virt.c` table order).
pub fn classify_cpuid_vendor(vendor: &str) -> Option<&'static str> {
    const TABLE: [(&str, &str); 9] = [
        ("XenVMMXenVMM", "xen"),
        ("KVMKVMKVM", "kvm"),
        ("Linux KVM Hv", "kvm"),
        ("TCGTCGTCGTCG", "qemu"),
        ("VMwareVMware", "vmware"),
        ("Microsoft Hv", "microsoft"),
        ("bhyve bhyve ", "bhyve"),
        ("QNXQVMBSQG", "qnx"),
        ("ACRNACRNACRN", "acrn"),
    ];
    let v = vendor.trim_end_matches('\0');
    TABLE
        .iter()
        .find(|(k, _)| v == *k || v.trim() == k.trim())
        .map(|(_, p)| *p)
}

/// DMI strings → platform, by prefix (systemd `detect_vm_dmi` table). `priority` limits to the vendors systemd
/// trusts over CPUID (Oracle, Xen, Amazon, Parallels, Google).
pub fn classify_dmi(dmi: &DmiInfo, priority: bool) -> Option<&'static str> {
    const TABLE: [(&str, &str, bool); 20] = [
        ("KVM", "kvm", false),
        ("OpenStack", "kvm", false),
        ("KubeVirt", "kvm", false),
        ("Amazon EC2", "amazon", true),
        ("QEMU", "qemu", false),
        ("VMware", "vmware", false),
        ("VMW", "vmware", false),
        ("innotek GmbH", "oracle", true),
        ("VirtualBox", "oracle", true),
        ("Oracle Corporation", "oracle", true),
        ("Xen", "xen", true),
        ("Bochs", "bochs", false),
        ("Parallels", "parallels", true),
        ("BHYVE", "bhyve", false),
        ("Hyper-V", "microsoft", false),
        ("Apple Virtualization", "apple", false),
        ("Google Compute Engine", "google", true),
        ("Google", "google", true),
        ("Firecracker", "firecracker", false),
        ("Microsoft Corporation Virtual Machine", "microsoft", false),
    ];
    let fields = [
        &dmi.product_name,
        &dmi.sys_vendor,
        &dmi.board_vendor,
        &dmi.bios_vendor,
        &dmi.product_version,
    ];
    for f in fields.iter().filter_map(|f| f.as_deref()) {
        for (prefix, p, prio) in TABLE {
            if (!priority || prio) && f.starts_with(prefix) {
                return Some(p);
            }
        }
    }
    None
}

/// Decide the platform from the evidence, in systemd's order. Pure.
pub fn classify_virt(
    dmi: &DmiInfo,
    cpuid_vendor: Option<&str>,
    hypervisor_flag: bool,
    sys_hypervisor: Option<&str>,
) -> (String, String) {
    // DMI "Amazon EC2" without any hypervisor evidence is a .metal bare-metal instance: ignore DMI then.
    let metal =
        classify_dmi(dmi, true) == Some("amazon") && !hypervisor_flag && cpuid_vendor.is_none();
    if let Some(p) = classify_dmi(dmi, true).filter(|_| !metal) {
        return (p.into(), "dmi".into());
    }
    if let Some(p) = cpuid_vendor.and_then(classify_cpuid_vendor) {
        return (p.into(), "cpuid".into());
    }
    if let Some(p) = classify_dmi(dmi, false).filter(|_| !metal) {
        return (p.into(), "dmi".into());
    }
    if let Some(t) = sys_hypervisor.map(str::trim).filter(|t| !t.is_empty()) {
        return (t.to_string(), "/sys/hypervisor/type".into());
    }
    if hypervisor_flag {
        return ("other".into(), "cpuinfo hypervisor flag".into());
    }
    ("none".into(), "no hypervisor evidence".into())
}

/// `/proc/device-tree/hypervisor/compatible` (NUL-separated strings) → platform.
pub fn classify_device_tree(compat: &[u8]) -> Option<&'static str> {
    compat.split(|b| *b == 0).find_map(|c| match c {
        b"linux,kvm" => Some("kvm"),
        b"xen,xen" => Some("xen"),
        b"vmware" => Some("vmware"),
        _ => None,
    })
}

/// SMBIOS type 0 (BIOS information) raw entry: byte 0x13, BIOS characteristics extension byte 2, bit 4 says
/// "this is a virtual machine" (DMTF DSP0134, table "BIOS Characteristics Extension Byte 2").
pub fn parse_smbios_vm_bit(raw: &[u8]) -> bool {
    raw.first() == Some(&0)
        && raw.get(1).is_some_and(|len| *len >= 0x14)
        && raw.get(0x13).is_some_and(|b| b & (1 << 4) != 0)
}

/// CPUID hypervisor vendor: executed on a live x86_64 root (and recorded), read from [`CPUID_PATH`] otherwise.
pub fn read_cpuid_vendor(root: &HostRoot) -> Option<String> {
    if root.is_live() {
        let v = live_cpuid_vendor();
        if let Some(v) = &v {
            root.record(CPUID_PATH, v.as_bytes());
        }
        v
    } else {
        root.read_optional(CPUID_PATH)
            .map(|s| s.trim_end_matches('\n').to_string())
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn live_cpuid_vendor() -> Option<String> {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID is available on every x86_64 CPU and only reads identification registers.
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    // SAFETY: as above; leaf 0x40000000 is reserved for hypervisors and reads zeros on bare metal.
    let r = unsafe { __cpuid(0x4000_0000) };
    let mut bytes = Vec::with_capacity(12);
    for w in [r.ebx, r.ecx, r.edx] {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    let s: String = String::from_utf8_lossy(&bytes)
        .trim_end_matches('\0')
        .to_string();
    (!s.is_empty()).then_some(s)
}

#[cfg(not(target_arch = "x86_64"))]
fn live_cpuid_vendor() -> Option<String> {
    None
}

fn read_trimmed(root: &HostRoot, path: &str) -> Option<String> {
    root.read_optional(path)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Virtualization platform from DMI, CPUID and `/sys/hypervisor`.
pub fn read_virt(root: &HostRoot, hypervisor_flag: bool) -> VirtInfo {
    let d = |f: &str| read_trimmed(root, &format!("/sys/class/dmi/id/{f}"));
    let dmi = DmiInfo {
        sys_vendor: d("sys_vendor"),
        product_name: d("product_name"),
        product_version: d("product_version"),
        board_vendor: d("board_vendor"),
        bios_vendor: d("bios_vendor"),
    };
    let cpuid_vendor = read_cpuid_vendor(root);
    let sys_hypervisor = read_trimmed(root, "/sys/hypervisor/type");
    let (mut platform, mut decided_by) = classify_virt(
        &dmi,
        cpuid_vendor.as_deref(),
        hypervisor_flag,
        sys_hypervisor.as_deref(),
    );
    if platform == "none" {
        // Weaker evidence, in systemd's order: the arm device tree, /proc/xen, the SMBIOS "VM" bit.
        let dt = root
            .read_bytes("/proc/device-tree/hypervisor/compatible")
            .ok()
            .and_then(|b| classify_device_tree(&b));
        if let Some(p) = dt {
            (platform, decided_by) = (p.into(), "/proc/device-tree/hypervisor/compatible".into());
        } else if root.exists("/proc/xen") {
            (platform, decided_by) = ("xen".into(), "/proc/xen".into());
        } else if root
            .read_bytes("/sys/firmware/dmi/entries/0-0/raw")
            .is_ok_and(|b| parse_smbios_vm_bit(&b))
        {
            (platform, decided_by) = ("other".into(), "SMBIOS BIOS characteristics VM bit".into());
        }
    }
    VirtInfo {
        platform,
        hypervisor_flag,
        cpuid_vendor,
        dmi,
        sys_hypervisor,
        decided_by,
    }
}

/// Container detection (systemd `detect_container` order).
pub fn read_container(root: &HostRoot) -> ContainerInfo {
    let mut evidence = Vec::new();
    let mut kind: Option<String> = None;
    for p in ["/run/host/container-manager", "/run/systemd/container"] {
        if let Some(v) = read_trimmed(root, p) {
            evidence.push(format!("{p}: {v}"));
            kind.get_or_insert(v);
        }
    }
    if kind.is_none() {
        if let Ok(env) = root.read_bytes("/proc/1/environ") {
            let mut kept: Vec<u8> = Vec::new();
            for var in env.split(|b| *b == 0) {
                if let Some(v) = var.strip_prefix(b"container=") {
                    kept.extend_from_slice(var);
                    kept.push(0);
                    let v = String::from_utf8_lossy(v).into_owned();
                    evidence.push(format!("/proc/1/environ: container={v}"));
                    kind = Some(v);
                }
            }
            // A capture keeps only the variable that was looked at, never the rest of PID 1's environment.
            root.record("/proc/1/environ", &kept);
        }
    }
    if kind.is_none() && root.exists("/run/.containerenv") {
        evidence.push("/run/.containerenv exists".into());
        kind = Some("podman".into());
    }
    if kind.is_none() && root.exists("/.dockerenv") {
        evidence.push("/.dockerenv exists".into());
        kind = Some("docker".into());
    }
    if kind.is_none() && root.exists("/proc/vz") && !root.exists("/proc/bc") {
        evidence.push("/proc/vz without /proc/bc".into());
        kind = Some("openvz".into());
    }
    if kind.is_none() {
        if let Some(r) = read_trimmed(root, "/proc/sys/kernel/osrelease") {
            if r.contains("Microsoft") || r.contains("WSL") {
                evidence.push(format!("/proc/sys/kernel/osrelease: {r}"));
                kind = Some("wsl".into());
            }
        }
    }
    ContainerInfo {
        kind: kind.unwrap_or_else(|| "none".into()),
        evidence,
        cpus_effective: root
            .read_optional("/sys/fs/cgroup/cpuset.cpus.effective")
            .and_then(|t| parse_cpu_mask(&t).ok()),
    }
}

/// tuned's persistent state in `/etc/tuned` (tuned/consts.py).
pub fn read_tuned(root: &HostRoot) -> TunedInfo {
    let active = read_trimmed(root, "/etc/tuned/active_profile");
    let isolated_cores = active.as_deref().and_then(|a| {
        a.split_whitespace().find_map(|p| {
            let t = root.read_optional(&format!("/etc/tuned/{p}-variables.conf"))?;
            key_value(&parse_key_values(&t), "isolated_cores").map(str::to_string)
        })
    });
    let boot_cmdline = root
        .read_optional("/etc/tuned/bootcmdline")
        .and_then(|t| key_value(&parse_key_values(&t), "TUNED_BOOT_CMDLINE").map(str::to_string));
    TunedInfo {
        active_profile: active,
        profile_mode: read_trimmed(root, "/etc/tuned/profile_mode"),
        isolated_cores,
        boot_cmdline,
    }
}

/// `/proc/meminfo`, huge page pools and THP mode.
pub fn read_memory(root: &HostRoot) -> MemoryInfo {
    let m = parse_meminfo(&root.read_optional("/proc/meminfo").unwrap_or_default());
    let hugepages = root
        .list_dir("/sys/kernel/mm/hugepages")
        .iter()
        .filter_map(|d| {
            let size_kib = d
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let n = |f: &str| {
                root.read_optional(&format!("/sys/kernel/mm/hugepages/{d}/{f}"))
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0)
            };
            Some(HugePagePool {
                size_kib,
                total: n("nr_hugepages"),
                free: n("free_hugepages"),
            })
        })
        .collect();
    MemoryInfo {
        total_kib: m.get("MemTotal").copied(),
        available_kib: m.get("MemAvailable").copied(),
        swap_total_kib: m.get("SwapTotal").copied(),
        default_hugepage_kib: m.get("Hugepagesize").copied(),
        hugepages,
        thp: root
            .read_optional("/sys/kernel/mm/transparent_hugepage/enabled")
            .and_then(|t| parse_bracketed_choice(&t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virt_classification_follows_systemd_order() {
        let dmi = |v: &str| DmiInfo {
            sys_vendor: Some(v.into()),
            ..Default::default()
        };
        assert_eq!(
            classify_virt(&dmi("VMware, Inc."), None, true, None).0,
            "vmware"
        );
        assert_eq!(
            classify_virt(&dmi("QEMU"), Some("KVMKVMKVM"), true, None),
            ("kvm".to_string(), "cpuid".to_string())
        );
        assert_eq!(
            classify_virt(&dmi("Amazon EC2"), Some("KVMKVMKVM"), true, None).0,
            "amazon"
        );
        assert_eq!(
            classify_virt(&dmi("Amazon EC2"), None, false, None).0,
            "none"
        );
        assert_eq!(
            classify_virt(&dmi("Dell Inc."), None, false, None).0,
            "none"
        );
        assert_eq!(
            classify_virt(&dmi("Dell Inc."), None, false, Some("xen\n")).0,
            "xen"
        );
        assert_eq!(
            classify_virt(&DmiInfo::default(), None, true, None).0,
            "other"
        );
        assert_eq!(classify_cpuid_vendor("Microsoft Hv"), Some("microsoft"));
        assert_eq!(classify_cpuid_vendor("nothing"), None);
        assert_eq!(classify_device_tree(b"linux,kvm\0"), Some("kvm"));
        assert_eq!(classify_device_tree(b"foo\0xen,xen\0"), Some("xen"));
        assert_eq!(classify_device_tree(b""), None);
        let mut raw = vec![0u8; 0x18];
        raw[1] = 0x18;
        assert!(!parse_smbios_vm_bit(&raw));
        raw[0x13] = 1 << 4;
        assert!(parse_smbios_vm_bit(&raw));
        assert!(!parse_smbios_vm_bit(&raw[..0x10]));
        raw[0] = 1;
        assert!(!parse_smbios_vm_bit(&raw));
    }

    #[test]
    fn preempt_dynamic_mode_from_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, t: &str| {
            let p = dir.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Thu\n");
        w("proc/cmdline", "ro preempt=full\n");
        let p = read_preempt(&HostRoot::at(dir.path()));
        assert_eq!(p.model, PreemptModel::Full);
        assert_eq!(p.source, "/proc/cmdline preempt=");
        w(
            "sys/kernel/debug/sched/preempt",
            "none (voluntary) full lazy\n",
        );
        assert_eq!(
            read_preempt(&HostRoot::at(dir.path())).model,
            PreemptModel::Voluntary
        );
    }

    #[test]
    fn live_fingerprint_has_cpus_and_kernel() {
        let f = read_fingerprint(&HostRoot::live());
        assert!(f.cpu.threads >= 1);
        assert!(!f.kernel.release.is_empty());
    }
}

//! `rtgauge plan`: from the machine's real topology and the operator's need, the real-time partition (which
//! CPUs are isolated, which keep housekeeping work, where each RT consumer's memory lives) and, in
//! [`emit`], every configuration file that realises it; [`apply`] writes the plan into a copy of a captured
//! tree so that the audit can judge the result (the closed loop); [`numa`] advises bindings for running work.
//!
//! Invariants of [`partition()`] (property-tested in `tests/plan_props.rs`):
//! - RT CPUs are whole cores: no RT CPU shares a core with a housekeeping CPU;
//! - every socket and every NUMA node keeps at least one housekeeping core (the audit's
//!   `housekeeping-capacity`), and CPU 0's core is always housekeeping (the boot CPU cannot be nohz_full);
//! - with `--nic`, RT CPUs go to the NIC's node first and leave it only when it is full;
//! - a request that cannot be met is a [`PlanError`], never a silently smaller plan.
//!
//! The partition is pure: its input is a [`HostTopology`] built from the fingerprint model plus the per-CPU
//! topology files ([`read_topology_input`] does that I/O).

pub mod apply;
pub mod emit;
pub mod numa;
mod partition;

pub use partition::partition;

pub use rtgauge_host::fingerprint::check_topology_files;
use rtgauge_host::fingerprint::{read_fingerprint, read_topology, CpuTopo};
use rtgauge_host::HostRoot;
use rtgauge_model::fingerprint::Fingerprint;
use rtgauge_model::CpuSet;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What the planned machine is for; decides the tuned profile, the files emitted and whether sockets count
/// (a guest's sockets are virtual).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanTarget {
    /// A bare-metal real-time host.
    Host,
    /// A KVM host running real-time VMs.
    KvmHost,
    /// A real-time guest on VMware ESXi.
    VmwareGuest,
    /// A real-time guest on KVM.
    KvmGuest,
    /// A Kubernetes node running real-time pods.
    K8s,
}

impl PlanTarget {
    /// The name `--target` takes and reports print.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanTarget::Host => "host",
            PlanTarget::KvmHost => "kvm-host",
            PlanTarget::VmwareGuest => "vmware-guest",
            PlanTarget::KvmGuest => "kvm-guest",
            PlanTarget::K8s => "k8s",
        }
    }
    /// The target named `name` (as [`PlanTarget::as_str`] writes it); `None` for an unknown name.
    pub fn parse(name: &str) -> Option<PlanTarget> {
        [
            PlanTarget::Host,
            PlanTarget::KvmHost,
            PlanTarget::VmwareGuest,
            PlanTarget::KvmGuest,
            PlanTarget::K8s,
        ]
        .into_iter()
        .find(|t| t.as_str() == name)
    }
    /// Whether the target is a virtual machine (its sockets are virtual and do not count).
    pub fn is_guest(self) -> bool {
        matches!(self, PlanTarget::VmwareGuest | PlanTarget::KvmGuest)
    }
    /// The tuned profile that applies the plan's variables on this target.
    pub fn tuned_profile(self) -> &'static str {
        match self {
            PlanTarget::Host | PlanTarget::K8s => "realtime",
            PlanTarget::KvmHost => "realtime-virtual-host",
            PlanTarget::VmwareGuest | PlanTarget::KvmGuest => "realtime-virtual-guest",
        }
    }
    /// The audit target that judges a tree the plan was applied to.
    pub fn audit_target(self) -> &'static str {
        match self {
            PlanTarget::Host => "bare-metal-rt-host",
            PlanTarget::KvmHost => "kvm-rt-host",
            PlanTarget::VmwareGuest | PlanTarget::KvmGuest => "rt-guest",
            PlanTarget::K8s => "k8s-rt-node",
        }
    }
}

/// What to do with SMT siblings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Smt {
    /// Keep SMT; RT CPUs are whole cores (both threads isolated, given to the same consumer).
    Keep,
    /// Boot with `nosmt`: one thread per core stays online.
    Off,
}

/// CPU vendor, for the C-state and frequency parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Vendor {
    /// `GenuineIntel`: intel_pstate and intel_idle parameters.
    Intel,
    /// `AuthenticAMD`: amd_pstate parameters.
    Amd,
    /// Any other vendor, or none known: vendor-neutral parameters only.
    Other,
}

/// One physical core: its online threads, socket and NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Core {
    /// The core's online threads.
    pub cpus: CpuSet,
    /// Its socket (physical package id).
    pub package: u32,
    /// Its NUMA node.
    pub node: u32,
}

/// One network interface and the NUMA node of its device (`None`: no device or `numa_node` = -1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nic {
    /// Interface name (`eth0`).
    pub name: String,
    /// NUMA node of its device.
    pub node: Option<u32>,
}

/// One NUMA node's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeMem {
    /// Node number.
    pub id: u32,
    /// `MemTotal` of the node, KiB; `None` when unknown.
    pub mem_total_kib: Option<u64>,
}

/// One device IRQ as it is routed now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Irq {
    /// IRQ number.
    pub irq: u32,
    /// The device column of `/proc/interrupts` (`PCI-MSI 524288-edge eth0-TxRx-0`).
    pub desc: String,
    /// `effective_affinity_list` (else `smp_affinity_list`).
    pub effective: CpuSet,
}

/// The partition's input: the machine's cores (with siblings, sockets, nodes), nodes, NICs and vendor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostTopology {
    /// Cores in ascending order of their lowest CPU.
    pub cores: Vec<Core>,
    /// NUMA nodes and their memory (one node 0 when the machine shows none).
    pub nodes: Vec<NodeMem>,
    /// Network interfaces with a device.
    pub nics: Vec<Nic>,
    /// CPU vendor.
    pub vendor: Vendor,
    /// The TSC is invariant: `constant_tsc` and `nonstop_tsc` in /proc/cpuinfo (only then may the kernel be
    /// told to trust it without the clocksource watchdog).
    pub invariant_tsc: bool,
    /// Threads per core (1 without SMT).
    pub threads_per_core: u32,
    /// Device IRQs and where they fire today (for the reasoning: which move off the RT CPUs).
    pub irqs: Vec<Irq>,
}

impl HostTopology {
    /// Build from the fingerprint model and the per-CPU topology files. CPUs without topology files (a
    /// container, an old kernel) are one core each; CPUs outside every node are on node 0.
    pub fn from_fingerprint(
        fingerprint: &Fingerprint,
        topology: &BTreeMap<u32, CpuTopo>,
        nics: Vec<Nic>,
    ) -> HostTopology {
        let online = &fingerprint.cpu.online;
        let node_of = |cpu: u32| {
            fingerprint
                .numa
                .iter()
                .find(|n| n.cpus.contains(cpu))
                .map(|n| n.id)
                .unwrap_or(0)
        };
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        let mut cores = Vec::new();
        for cpu in online.iter() {
            if seen.contains(&cpu) {
                continue;
            }
            let t = topology.get(&cpu);
            let mut sibs = t
                .map(|t| t.siblings.intersection(online))
                .unwrap_or_default();
            if !sibs.contains(cpu) {
                sibs = CpuSet::new([cpu]);
            }
            // A sibling list naming a CPU already placed (inconsistent files) must not put it in two cores.
            let sibs = CpuSet::new(sibs.iter().filter(|c| !seen.contains(c)));
            seen.extend(sibs.iter());
            cores.push(Core {
                cpus: sibs,
                package: t.and_then(|t| t.package).unwrap_or(0),
                node: node_of(cpu),
            });
        }
        let mut nodes: Vec<NodeMem> = fingerprint
            .numa
            .iter()
            .map(|n| NodeMem {
                id: n.id,
                mem_total_kib: n.mem_total_kib,
            })
            .collect();
        if nodes.is_empty() {
            nodes.push(NodeMem {
                id: 0,
                mem_total_kib: fingerprint.memory.total_kib,
            });
        }
        let vendor = match fingerprint.cpu.vendor.as_deref() {
            Some("GenuineIntel") => Vendor::Intel,
            Some("AuthenticAMD") => Vendor::Amd,
            _ => Vendor::Other,
        };
        let threads_per_core = cores
            .iter()
            .map(|c| c.cpus.len() as u32)
            .max()
            .unwrap_or(1)
            .max(1);
        let flag = |f: &str| fingerprint.cpu.timing_flags.iter().any(|t| t == f);
        HostTopology {
            cores,
            nodes,
            nics,
            vendor,
            invariant_tsc: flag("constant_tsc") && flag("nonstop_tsc"),
            threads_per_core,
            irqs: Vec::new(),
        }
    }

    /// Every online CPU of every core.
    pub fn online(&self) -> CpuSet {
        CpuSet::new(
            self.cores
                .iter()
                .flat_map(|c| c.cpus.iter().collect::<Vec<_>>()),
        )
    }
}

/// The NICs under `/sys/class/net` with a device, and the device's `numa_node`.
pub fn read_nics(root: &HostRoot) -> Vec<Nic> {
    let mut nics: Vec<Nic> = root
        .list_dir("/sys/class/net")
        .into_iter()
        .filter(|n| n != "lo")
        .map(|name| {
            let node = root
                .read_optional(&format!("/sys/class/net/{name}/device/numa_node"))
                .and_then(|t| t.trim().parse::<i64>().ok())
                .and_then(|n| u32::try_from(n).ok());
            Nic { name, node }
        })
        .collect();
    nics.sort_by(|a, b| a.name.cmp(&b.name));
    nics
}

/// Device IRQs: `/proc/irq/<n>/effective_affinity_list` (else `smp_affinity_list`) and their names from
/// `/proc/interrupts`.
pub fn read_irqs(root: &HostRoot) -> Vec<Irq> {
    let names: BTreeMap<String, String> = root
        .read_optional("/proc/interrupts")
        .map(|t| {
            rtgauge_host::parse::parse_counter_table(&t)
                .into_iter()
                .map(|r| (r.name, r.desc))
                .collect()
        })
        .unwrap_or_default();
    let mut irqs: Vec<Irq> = root
        .list_dir("/proc/irq")
        .into_iter()
        .filter_map(|n| {
            let irq = n.parse::<u32>().ok()?;
            let eff = root
                .read_optional(&format!("/proc/irq/{irq}/effective_affinity_list"))
                .or_else(|| root.read_optional(&format!("/proc/irq/{irq}/smp_affinity_list")))?;
            Some(Irq {
                irq,
                desc: names.get(&n).cloned().unwrap_or_default(),
                effective: CpuSet::parse(eff.trim()).ok()?,
            })
        })
        .collect();
    irqs.sort_by_key(|i| i.irq);
    irqs
}

/// Read everything the partition needs through the root.
pub fn read_topology_input(root: &HostRoot) -> (Fingerprint, HostTopology) {
    let fp = read_fingerprint(root);
    let topo = read_topology(root, &fp.cpu.online);
    let mut t = HostTopology::from_fingerprint(&fp, &topo, read_nics(root));
    t.irqs = read_irqs(root);
    (fp, t)
}

/// One VM (hypervisor targets): name, vCPUs, memory in GiB (backed by 1 GiB huge pages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmNeed {
    /// The VM's name (1-64 characters of A-Z a-z 0-9 - _ .).
    pub name: String,
    /// Its vCPUs, each pinned to one host CPU.
    pub vcpus: u32,
    /// Its memory, GiB.
    pub mem_gib: u32,
}

/// Default memory of a VM given as `name:vcpus`: 2 GiB per vCPU, at least 4 GiB.
pub fn default_vm_mem_gib(vcpus: u32) -> u32 {
    vcpus.saturating_mul(2).max(4)
}

/// Parse `name:vcpus[:mem_gib]`.
pub fn parse_vm(spec: &str) -> Result<VmNeed, String> {
    let mut it = spec.split(':');
    let name = it.next().unwrap_or_default().trim();
    // The name becomes a file name (libvirt/NAME.xml, vmx/NAME.vmx): a plain, visible file-name component,
    // so not `.`, `..` or a hidden name.
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !valid {
        return Err(format!(
            "'{spec}': the VM name must be 1-64 characters of A-Z a-z 0-9 - _ . not starting with '.' (it names a file)"
        ));
    }
    let vcpus = it
        .next()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|v| (1..=4096).contains(v))
        .ok_or_else(|| format!("'{spec}': expected NAME:VCPUS[:MEM_GIB] with 1-4096 vCPUs"))?;
    let mem_gib = match it.next() {
        None => default_vm_mem_gib(vcpus),
        Some(m) => m
            .trim_end_matches(['G', 'g'])
            .parse::<u32>()
            .ok()
            .filter(|m| (1..=65536).contains(m))
            .ok_or_else(|| format!("'{spec}': memory must be 1-65536 GiB"))?,
    };
    if it.next().is_some() {
        return Err(format!("'{spec}': expected NAME:VCPUS[:MEM_GIB]"));
    }
    Ok(VmNeed {
        name: name.to_string(),
        vcpus,
        mem_gib,
    })
}

/// The operator's need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// What the machine is for.
    pub target: PlanTarget,
    /// Total RT CPUs (rounded up to whole cores); `None` with no `rt_per_node`: every core not kept for
    /// housekeeping.
    pub rt_cpus: Option<u32>,
    /// RT CPUs on each NUMA node (`--rt-per-node`), instead of a total.
    pub rt_per_node: Option<u32>,
    /// Minimum housekeeping CPUs (default: one core per socket and per node).
    pub housekeeping: Option<u32>,
    /// The interface whose node RT CPUs and memory go to first (`--nic`).
    pub nic: Option<String>,
    /// What to do with SMT siblings.
    pub smt: Smt,
    /// The VMs to place (hypervisor targets).
    pub vms: Vec<VmNeed>,
    /// Huge-page memory for the RT workload on host and k8s targets, GiB in total (spread over RT nodes).
    pub mem_gib: Option<u32>,
}

impl Need {
    /// The default need for `target`: every free core RT, SMT kept, no VM, no NIC, no huge pages.
    pub fn new(target: PlanTarget) -> Need {
        Need {
            target,
            rt_cpus: None,
            rt_per_node: None,
            housekeeping: None,
            nic: None,
            smt: Smt::Keep,
            vms: Vec::new(),
            mem_gib: None,
        }
    }
}

/// Why no plan could be made. Each message is one line naming the request and what the machine has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `--rt-cpus` asks for more CPUs than housekeeping leaves.
    #[error("cannot place {asked} RT CPUs on this {online}-CPU machine: at most {free} remain after housekeeping ({hk} CPU(s) kept: {why})")]
    TooManyRt {
        /// RT CPUs asked for.
        asked: u32,
        /// Online CPUs of the machine.
        online: usize,
        /// CPUs left after housekeeping.
        free: usize,
        /// CPUs kept for housekeeping.
        hk: usize,
        /// Why those housekeeping CPUs are kept.
        why: String,
    },
    /// `--rt-per-node` asks for more CPUs than one node has left after housekeeping.
    #[error("--rt-per-node {asked}: node {node} has {free} CPUs left after housekeeping")]
    NodeTooSmall {
        /// RT CPUs asked for per node.
        asked: u32,
        /// The node that is too small.
        node: u32,
        /// CPUs left on it after housekeeping.
        free: usize,
    },
    /// `--housekeeping` keeps every CPU.
    #[error(
        "--housekeeping {asked}: leaves no CPU for real-time work on this {online}-CPU machine"
    )]
    HousekeepingTooLarge {
        /// Housekeeping CPUs asked for.
        asked: u32,
        /// Online CPUs of the machine.
        online: usize,
    },
    /// A VM does not fit on any one NUMA node.
    #[error("VM {vm} needs {vcpus} vCPUs on one NUMA node; the largest free node has {free} CPUs")]
    VmTooLarge {
        /// The VM's name.
        vm: String,
        /// Its vCPUs.
        vcpus: u32,
        /// Free CPUs of the largest free node.
        free: usize,
    },
    /// `--rt-cpus` is below the VMs' vCPUs.
    #[error("--rt-cpus {asked} is fewer than the {vcpus} vCPUs of the VMs")]
    RtBelowVms {
        /// RT CPUs asked for.
        asked: u32,
        /// vCPUs of all VMs together.
        vcpus: u32,
    },
    /// `--nic` names no interface of the machine.
    #[error("--nic {nic}: no such interface under /sys/class/net (found: {found})")]
    UnknownNic {
        /// The name given.
        nic: String,
        /// The interfaces found, comma-separated, or `none`.
        found: String,
    },
    /// A node's huge pages would leave it too little memory.
    #[error("node {node} needs {need_gib} GiB of huge pages but has {have_gib} GiB of memory")]
    NodeMemory {
        /// The node.
        node: u32,
        /// Huge-page memory planned on it, GiB.
        need_gib: u64,
        /// Its total memory, GiB.
        have_gib: u64,
    },
    /// The topology lists no online CPU.
    #[error("no online CPU in the topology")]
    NoCpus,
    /// Fewer than two cores: nothing to split.
    #[error("only {online} online CPU(s): a real-time partition needs at least 2 cores")]
    TooSmall {
        /// Online CPUs of the machine.
        online: usize,
    },
}

/// The partition of one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodePlan {
    /// Node number.
    pub id: u32,
    /// The node's RT (isolated) CPUs.
    pub rt: CpuSet,
    /// The node's housekeeping CPUs.
    pub housekeeping: CpuSet,
    /// 1 GiB huge pages to reserve on this node.
    pub hugepages_1g: u32,
}

/// One VM's placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmPlan {
    /// The VM's name.
    pub name: String,
    /// The NUMA node holding its vCPUs and memory.
    pub node: u32,
    /// Host CPU of vCPU i.
    pub vcpu_pins: Vec<u32>,
    /// Housekeeping CPUs of the same node for the emulator and I/O threads.
    pub emulator: CpuSet,
    /// Its memory in 1 GiB huge pages on its node, GiB.
    pub mem_gib: u32,
}

/// The computed plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// What the machine is for.
    pub target: PlanTarget,
    /// The SMT choice.
    pub smt: Smt,
    /// CPU vendor (for the C-state and frequency parameters).
    pub vendor: Vendor,
    /// The TSC is invariant (for `tsc=reliable`).
    pub invariant_tsc: bool,
    /// Threads per core after the SMT choice.
    pub threads_per_core: u32,
    /// Online CPUs after the plan (without the siblings `nosmt` takes offline).
    pub online: CpuSet,
    /// I: isolated, for real-time work.
    pub isolated: CpuSet,
    /// H = online − I: housekeeping (OS, IRQs, services).
    pub housekeeping: CpuSet,
    /// SMT siblings taken offline by `nosmt`.
    pub offline: CpuSet,
    /// The partition of each NUMA node that has CPUs.
    pub nodes: Vec<NodePlan>,
    /// Each VM's placement, in the order of the need.
    pub vms: Vec<VmPlan>,
    /// The NIC of `--nic`, with its node.
    pub nic: Option<Nic>,
    /// Why each choice was made, in order, one sentence per line.
    pub reasoning: Vec<String>,
}

impl Plan {
    /// Nodes holding RT CPUs.
    pub fn rt_nodes(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter(|n| !n.rt.is_empty())
            .map(|n| n.id)
            .collect()
    }
    /// 1 GiB huge pages to reserve, all nodes together.
    pub fn total_hugepages_1g(&self) -> u32 {
        self.nodes.iter().map(|n| n.hugepages_1g).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sockets` × `nodes_per_socket` nodes, `cores` cores per node, `tpc` threads; Linux numbering
    /// (sibling k of core c is c + k × total cores).
    pub(crate) fn synth(sockets: u32, nodes_per_socket: u32, cores: u32, tpc: u32) -> HostTopology {
        let total = sockets * nodes_per_socket * cores;
        let mut out = Vec::new();
        for c in 0..total {
            let node = c / cores;
            out.push(Core {
                cpus: CpuSet::new((0..tpc).map(|k| c + k * total)),
                package: node / nodes_per_socket,
                node,
            });
        }
        HostTopology {
            cores: out,
            nodes: (0..sockets * nodes_per_socket)
                .map(|id| NodeMem {
                    id,
                    mem_total_kib: Some(64 << 20),
                })
                .collect(),
            nics: vec![Nic {
                name: "eno1".into(),
                node: Some(sockets * nodes_per_socket - 1),
            }],
            vendor: Vendor::Intel,
            invariant_tsc: true,
            threads_per_core: tpc,
            irqs: Vec::new(),
        }
    }

    #[test]
    fn two_socket_default_keeps_a_core_per_socket() {
        let t = synth(2, 1, 8, 2);
        let p = partition(&t, &Need::new(PlanTarget::Host)).expect("plan");
        assert_eq!(p.housekeeping.to_string(), "0,8,16,24");
        assert_eq!(p.isolated.len(), 28);
    }

    #[test]
    fn tsc_reliable_only_on_an_invariant_tsc() {
        let tokens = |t: &HostTopology| {
            let p = partition(t, &Need::new(PlanTarget::Host)).expect("plan");
            let params = emit::kernel_params(&p);
            (
                params.iter().any(|x| x.token == "tsc=reliable"),
                p.reasoning,
            )
        };
        let mut t = synth(1, 1, 4, 1);
        assert!(tokens(&t).0);
        t.invariant_tsc = false;
        let (has, why) = tokens(&t);
        assert!(!has);
        assert!(
            why.iter().any(|w| w.starts_with("TSC not invariant")),
            "{why:?}"
        );
    }

    #[test]
    fn nic_node_first_and_whole_cores() {
        let t = synth(2, 1, 8, 2);
        let mut n = Need::new(PlanTarget::Host);
        n.rt_cpus = Some(5);
        n.nic = Some("eno1".into());
        let p = partition(&t, &n).expect("plan");
        // 5 → 6 CPUs (3 cores) on node 1: cores 9,10,11 and siblings 25,26,27.
        assert_eq!(p.isolated.to_string(), "9-11,25-27");
    }

    #[test]
    fn impossible_request_is_an_error() {
        let t = synth(1, 1, 4, 2);
        let mut n = Need::new(PlanTarget::Host);
        n.rt_cpus = Some(20);
        let e = partition(&t, &n).expect_err("20 on 8");
        assert!(
            e.to_string()
                .contains("cannot place 20 RT CPUs on this 8-CPU machine"),
            "{e}"
        );
    }

    #[test]
    fn vm_parse() {
        assert_eq!(parse_vm("vdu:8").expect("ok").mem_gib, 16);
        assert_eq!(parse_vm("cu:4:6").expect("ok").mem_gib, 6);
        assert!(parse_vm("x:0").is_err());
        assert!(parse_vm("a b:2").is_err());
        assert!(parse_vm("a:2:3:4").is_err());
        // The name is a file name: not `.`, `..` or hidden; dots inside are fine.
        for bad in [".:2", "..:2", ".hidden:2"] {
            let e = parse_vm(bad).expect_err(bad);
            assert!(e.contains("not starting with '.'"), "{e}");
        }
        assert_eq!(parse_vm("vm.1:2").expect("ok").name, "vm.1");
    }
}

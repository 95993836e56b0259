//! The partition itself, in stages: the topology summary (cores after `--smt off`), the NIC's node, the
//! housekeeping cores, the RT node order, the VMs' cores, the RT cores, the VM pins, the huge pages per node,
//! and the closing reasoning (nodes, IRQs, NIC queues, siblings). Each stage pushes its sentences to the
//! reasoning in the order the operator reads them; [`partition`] runs them in that order.

use super::{
    Core, HostTopology, Need, Nic, NodePlan, Plan, PlanError, PlanTarget, Smt, Vendor, VmNeed,
    VmPlan,
};
use rtgauge_model::CpuSet;
use std::collections::{BTreeMap, BTreeSet};

fn cpus_of(cores: &[&Core]) -> CpuSet {
    CpuSet::new(cores.iter().flat_map(|c| c.cpus.iter().collect::<Vec<_>>()))
}

/// The machine as the partition sees it: the cores left online by the SMT choice and the sets derived from
/// them.
struct Shape {
    cores: Vec<Core>,
    online: CpuSet,
    /// SMT siblings that `nosmt` takes offline.
    offline: CpuSet,
    /// Threads per core after the SMT choice.
    tpc: u32,
    sockets: BTreeSet<u32>,
    node_ids: BTreeSet<u32>,
}

impl Shape {
    /// The CPUs of the cores with these indices.
    fn cpus_in(&self, idx: &BTreeSet<usize>) -> usize {
        idx.iter().map(|i| self.cores[*i].cpus.len()).sum()
    }
}

/// The housekeeping cores kept before any RT choice, and why.
struct Kept {
    idx: BTreeSet<usize>,
    reasons: Vec<String>,
    cpus: usize,
}

/// The cores not kept for housekeeping, and the order of nodes that RT work fills.
struct Free<'a> {
    cores: &'a [Core],
    idx: Vec<usize>,
    cpus: usize,
    /// The NIC's node first, then the nodes of the same socket, then the others; more free CPUs first.
    node_order: Vec<u32>,
}

impl Free<'_> {
    /// Free cores on node `node` that `taken` does not hold yet, lowest first.
    fn on(&self, node: u32, taken: &BTreeSet<usize>) -> Vec<usize> {
        self.idx
            .iter()
            .copied()
            .filter(|i| self.cores[*i].node == node && !taken.contains(i))
            .collect()
    }

    /// Take whole free cores of node `node` into `rt_idx` until `want` CPUs are taken; the CPUs taken.
    fn take(&self, rt_idx: &mut BTreeSet<usize>, node: u32, want: usize) -> usize {
        let mut got = 0;
        for i in self.on(node, rt_idx) {
            if got >= want {
                break;
            }
            rt_idx.insert(i);
            got += self.cores[i].cpus.len();
        }
        got
    }
}

/// Compute the partition. Pure; see the module invariants.
pub fn partition(topology: &HostTopology, need: &Need) -> Result<Plan, PlanError> {
    let mut why: Vec<String> = Vec::new();
    let shape = summarise_topology(topology, need, &mut why)?;
    let (nic, nic_node) = choose_nic(topology, need, &shape, &mut why)?;
    let kept = choose_housekeeping(need, &shape, nic_node)?;
    why.push(format!(
        "housekeeping kept: {} CPUs = {}",
        kept.cpus,
        kept.reasons.join("; ")
    ));
    let free = free_cores(need, &shape, &kept, nic_node)?;
    let mut rt_idx: BTreeSet<usize> = BTreeSet::new();
    let vm_cores = place_vms(need, &shape, &free, nic_node, &mut rt_idx)?;
    choose_rt(need, &shape, &kept, &free, &mut rt_idx, &mut why)?;

    let isolated = cpus_of(&rt_idx.iter().map(|i| &shape.cores[*i]).collect::<Vec<_>>());
    let housekeeping = shape.online.difference(&isolated);
    if need.target == PlanTarget::K8s && housekeeping.len() > kept.cpus {
        why.push(format!(
            "k8s: reservedSystemCPUs = H ({} CPUs): pods run only on the isolated CPUs, so the {} CPUs beyond the \
             kept housekeeping serve system daemons only (leave out --rt-cpus to give them to pods)",
            housekeeping.len(),
            housekeeping.len() - kept.cpus
        ));
    }
    let vms = pin_vms(need, &shape, &vm_cores, &housekeeping, &mut why);
    let pages = huge_pages(topology, need, &shape, &vms, &isolated, &mut why)?;
    let nodes = node_plans(&shape, &pages, &isolated, &housekeeping, &mut why);
    explain_irqs(
        topology,
        &shape,
        nic.as_ref(),
        nic_node,
        &isolated,
        &housekeeping,
        &mut why,
    );
    Ok(Plan {
        target: need.target,
        smt: need.smt,
        vendor: topology.vendor,
        invariant_tsc: topology.invariant_tsc,
        threads_per_core: shape.tpc,
        online: shape.online,
        isolated,
        housekeeping,
        offline: shape.offline,
        nodes,
        vms,
        nic,
        reasoning: why,
    })
}

/// Stage 1: the cores after the SMT choice (with `--smt off` the lowest thread of each core stays online),
/// the machine's size, and the topology sentences.
fn summarise_topology(
    topo: &HostTopology,
    need: &Need,
    why: &mut Vec<String>,
) -> Result<Shape, PlanError> {
    let mut offline = Vec::new();
    let cores: Vec<Core> = topo
        .cores
        .iter()
        .map(|c| {
            if need.smt == Smt::Off && c.cpus.len() > 1 {
                let first = c.cpus.iter().next().unwrap_or(0);
                offline.extend(c.cpus.iter().filter(|x| *x != first));
                Core {
                    cpus: CpuSet::new([first]),
                    ..c.clone()
                }
            } else {
                c.clone()
            }
        })
        .collect();
    let offline = CpuSet::new(offline);
    let online = CpuSet::new(cores.iter().flat_map(|c| c.cpus.iter().collect::<Vec<_>>()));
    if online.is_empty() {
        return Err(PlanError::NoCpus);
    }
    if cores.len() < 2 {
        return Err(PlanError::TooSmall {
            online: online.len(),
        });
    }
    let tpc = cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1).max(1) as u32;
    let sockets: BTreeSet<u32> = cores.iter().map(|c| c.package).collect();
    let node_ids: BTreeSet<u32> = cores.iter().map(|c| c.node).collect();
    why.push(format!(
        "topology: {} online CPUs, {} cores × {} thread(s), {} socket(s), {} NUMA node(s) with CPUs{}",
        online.len(),
        cores.len(),
        tpc,
        sockets.len(),
        node_ids.len(),
        if offline.is_empty() {
            String::new()
        } else {
            format!(
                "; --smt off: siblings {offline} go offline with nosmt (one thread per core)"
            )
        }
    ));
    if need.smt == Smt::Keep && topo.threads_per_core > 1 {
        why.push(format!(
            "SMT kept: RT CPUs are whole cores ({} threads each), both threads go to the same RT consumer, so no RT \
             CPU shares a core (and its L1/L2 and execution units) with housekeeping work",
            topo.threads_per_core
        ));
    }
    if matches!(topo.vendor, Vendor::Intel | Vendor::Amd) && !topo.invariant_tsc {
        why.push(
            "TSC not invariant (constant_tsc and nonstop_tsc not both in /proc/cpuinfo): no tsc=reliable, the \
             clocksource watchdog keeps checking it"
                .to_string(),
        );
    }
    Ok(Shape {
        cores,
        online,
        offline,
        tpc,
        sockets,
        node_ids,
    })
}

/// Stage 2: the NIC named by `--nic` and its node, the node RT CPUs and memory go to first.
fn choose_nic(
    topo: &HostTopology,
    need: &Need,
    shape: &Shape,
    why: &mut Vec<String>,
) -> Result<(Option<Nic>, Option<u32>), PlanError> {
    let nic = match &need.nic {
        None => None,
        Some(name) => {
            let Some(n) = topo.nics.iter().find(|n| &n.name == name) else {
                let found: Vec<&str> = topo.nics.iter().map(|n| n.name.as_str()).collect();
                return Err(PlanError::UnknownNic {
                    nic: name.clone(),
                    found: if found.is_empty() {
                        "none".into()
                    } else {
                        found.join(", ")
                    },
                });
            };
            match n.node {
                Some(node) if shape.node_ids.contains(&node) => why.push(format!(
                    "NIC {}: on NUMA node {node}; RT CPUs and their memory go there first (NUMA-local placement is worth 8-17 % \
                     in the VMware Project Pacific blog)",
                    n.name
                )),
                _ => why.push(format!(
                    "NIC {}: its NUMA node is unknown (no device/numa_node, or -1): no node preference",
                    n.name
                )),
            }
            Some(n.clone())
        }
    };
    let nic_node = nic
        .as_ref()
        .and_then(|n| n.node)
        .filter(|n| shape.node_ids.contains(n));
    Ok((nic, nic_node))
}

/// Stage 3: housekeeping: CPU 0's core always, one core per socket (hosts) and per node, then more cores
/// until `--housekeeping` is met.
fn choose_housekeeping(
    need: &Need,
    shape: &Shape,
    nic_node: Option<u32>,
) -> Result<Kept, PlanError> {
    let cores = &shape.cores;
    let mut hk_idx: BTreeSet<usize> = BTreeSet::new();
    let mut reasons = Vec::new();
    if let Some(i) = cores.iter().position(|c| c.cpus.contains(0)) {
        hk_idx.insert(i);
        reasons.push("CPU 0's core (the boot CPU keeps the tick)".to_string());
    }
    if !need.target.is_guest() {
        for s in &shape.sockets {
            if !hk_idx.iter().any(|i| cores[*i].package == *s) {
                if let Some(i) = cores.iter().position(|c| c.package == *s) {
                    hk_idx.insert(i);
                }
            }
        }
        if shape.sockets.len() > 1 {
            reasons.push("the first core of every socket".into());
        }
    }
    for n in &shape.node_ids {
        if !hk_idx.iter().any(|i| cores[*i].node == *n) {
            if let Some(i) = cores.iter().position(|c| c.node == *n) {
                hk_idx.insert(i);
            }
        }
    }
    if shape.node_ids.len() > 1 {
        reasons.push(
            "the first core of every NUMA node (IRQs, kthreads and the RT consumers' emulator threads stay \
             node-local)"
                .into(),
        );
    }
    if let Some(want) = need.housekeeping {
        add_housekeeping(shape, nic_node, want, &mut hk_idx, &mut reasons)?;
    }
    let cpus = shape.cpus_in(&hk_idx);
    Ok(Kept {
        idx: hk_idx,
        reasons,
        cpus,
    })
}

/// `--housekeeping N`: extra housekeeping cores round-robin over the nodes, the NIC's node last (it keeps RT
/// capacity), until N CPUs are kept.
fn add_housekeeping(
    shape: &Shape,
    nic_node: Option<u32>,
    want: u32,
    hk_idx: &mut BTreeSet<usize>,
    reasons: &mut Vec<String>,
) -> Result<(), PlanError> {
    let online = shape.online.len();
    if want as usize >= online {
        return Err(PlanError::HousekeepingTooLarge {
            asked: want,
            online,
        });
    }
    let mut order: Vec<u32> = shape.node_ids.iter().copied().collect();
    order.sort_by_key(|n| (Some(*n) == nic_node, *n));
    let mut added = false;
    while shape.cpus_in(hk_idx) < want as usize {
        let mut progressed = false;
        for n in &order {
            if shape.cpus_in(hk_idx) >= want as usize {
                break;
            }
            if let Some(i) =
                (0..shape.cores.len()).find(|i| shape.cores[*i].node == *n && !hk_idx.contains(i))
            {
                hk_idx.insert(i);
                progressed = true;
                added = true;
            }
        }
        if !progressed {
            break;
        }
    }
    if added {
        reasons.push(format!(
            "more cores round-robin over the nodes (NIC node last) until --housekeeping {want} is met"
        ));
    }
    if shape.cpus_in(hk_idx) >= online {
        return Err(PlanError::HousekeepingTooLarge {
            asked: want,
            online,
        });
    }
    Ok(())
}

/// Stage 4: the cores left for RT work and the order of nodes they fill: the NIC's node first, then the
/// nodes with most free CPUs; after the first node, the nodes of the same socket (one interconnect hop
/// less), then the others.
fn free_cores<'a>(
    need: &Need,
    shape: &'a Shape,
    kept: &Kept,
    nic_node: Option<u32>,
) -> Result<Free<'a>, PlanError> {
    let cores = &shape.cores;
    let idx: Vec<usize> = (0..cores.len()).filter(|i| !kept.idx.contains(i)).collect();
    let cpus: usize = idx.iter().map(|i| cores[*i].cpus.len()).sum();
    if idx.is_empty() {
        return Err(PlanError::TooManyRt {
            asked: need.rt_cpus.unwrap_or(1),
            online: shape.online.len(),
            free: 0,
            hk: kept.cpus,
            why: kept.reasons.join("; "),
        });
    }
    let mut free = Free {
        cores,
        idx,
        cpus,
        node_order: Vec::new(),
    };
    let pkg_of = |n: u32| {
        cores
            .iter()
            .find(|c| c.node == n)
            .map(|c| c.package)
            .unwrap_or(0)
    };
    let mut node_order: Vec<u32> = shape.node_ids.iter().copied().collect();
    node_order.sort_by_key(|n| {
        (
            Some(*n) != nic_node,
            std::cmp::Reverse(free.on(*n, &BTreeSet::new()).len()),
            *n,
        )
    });
    if let Some(first) = node_order.first().copied() {
        let p0 = pkg_of(first);
        node_order[1..].sort_by_key(|n| {
            (
                pkg_of(*n) != p0,
                std::cmp::Reverse(free.on(*n, &BTreeSet::new()).len()),
                *n,
            )
        });
    }
    free.node_order = node_order;
    Ok(free)
}

/// Stage 5: the VMs' cores, largest VM first, each VM on one node; the VM name → (node, core indices).
fn place_vms(
    need: &Need,
    shape: &Shape,
    free: &Free<'_>,
    nic_node: Option<u32>,
    rt_idx: &mut BTreeSet<usize>,
) -> Result<BTreeMap<String, (u32, Vec<usize>)>, PlanError> {
    let vm_vcpus: u32 = need.vms.iter().map(|v| v.vcpus).sum();
    if let Some(asked) = need.rt_cpus {
        if !need.vms.is_empty() && asked < vm_vcpus {
            return Err(PlanError::RtBelowVms {
                asked,
                vcpus: vm_vcpus,
            });
        }
    }
    let mut order: Vec<&VmNeed> = need.vms.iter().collect();
    order.sort_by_key(|v| (std::cmp::Reverse(v.vcpus), v.name.clone()));
    let mut vm_cores: BTreeMap<String, (u32, Vec<usize>)> = BTreeMap::new();
    for vm in order {
        let cores_needed = vm.vcpus.div_ceil(shape.tpc) as usize;
        // Per VM: the NIC's node first, then the node with most free cores now (VMs spread over nodes
        // rather than share a last-level cache and memory controller).
        let mut order_now = free.node_order.clone();
        order_now.sort_by_key(|n| {
            (
                Some(*n) != nic_node,
                std::cmp::Reverse(free.on(*n, rt_idx).len()),
                *n,
            )
        });
        let mut placed = false;
        for n in &order_now {
            let avail = free.on(*n, rt_idx);
            if avail.len() >= cores_needed {
                let take: Vec<usize> = avail.into_iter().take(cores_needed).collect();
                rt_idx.extend(take.iter().copied());
                vm_cores.insert(vm.name.clone(), (*n, take));
                placed = true;
                break;
            }
        }
        if !placed {
            let best = free
                .node_order
                .iter()
                .map(|n| {
                    free.on(*n, rt_idx)
                        .iter()
                        .map(|i| shape.cores[*i].cpus.len())
                        .sum::<usize>()
                })
                .max()
                .unwrap_or(0);
            return Err(PlanError::VmTooLarge {
                vm: vm.name.clone(),
                vcpus: vm.vcpus,
                free: best,
            });
        }
    }
    Ok(vm_cores)
}

/// Stage 6: the RT cores beyond the VMs': `--rt-per-node`, `--rt-cpus`, or every free core.
fn choose_rt(
    need: &Need,
    shape: &Shape,
    kept: &Kept,
    free: &Free<'_>,
    rt_idx: &mut BTreeSet<usize>,
    why: &mut Vec<String>,
) -> Result<(), PlanError> {
    let cores = &shape.cores;
    if let Some(per) = need.rt_per_node {
        for n in &shape.node_ids {
            let have: usize = free
                .on(*n, &BTreeSet::new())
                .iter()
                .map(|i| cores[*i].cpus.len())
                .sum();
            if have < per as usize {
                return Err(PlanError::NodeTooSmall {
                    asked: per,
                    node: *n,
                    free: have,
                });
            }
            let already: usize = rt_idx
                .iter()
                .filter(|i| cores[**i].node == *n)
                .map(|i| cores[*i].cpus.len())
                .sum();
            free.take(rt_idx, *n, (per as usize).saturating_sub(already));
        }
        why.push(format!(
            "RT CPUs: --rt-per-node {per} on each of the {} node(s), whole cores from the lowest free",
            shape.node_ids.len()
        ));
    } else if let Some(asked) = need.rt_cpus {
        if asked as usize > free.cpus {
            return Err(PlanError::TooManyRt {
                asked,
                online: shape.online.len(),
                free: free.cpus,
                hk: kept.cpus,
                why: kept.reasons.join("; "),
            });
        }
        choose_rt_cpus(asked, shape, free, rt_idx, why);
    } else if need.vms.is_empty() {
        rt_idx.extend(free.idx.iter().copied());
        why.push(
            "RT CPUs: every core not kept for housekeeping (no --rt-cpus/--rt-per-node)"
                .to_string(),
        );
    } else {
        let vm_vcpus: u32 = need.vms.iter().map(|v| v.vcpus).sum();
        why.push(format!(
            "RT CPUs: the cores of the {} VM(s) only, {vm_vcpus} vCPUs (give --rt-cpus to isolate more)",
            need.vms.len()
        ));
    }
    Ok(())
}

/// `--rt-cpus N`: whole cores node by node in the RT node order until N CPUs are isolated.
fn choose_rt_cpus(
    asked: u32,
    shape: &Shape,
    free: &Free<'_>,
    rt_idx: &mut BTreeSet<usize>,
    why: &mut Vec<String>,
) {
    let already = shape.cpus_in(rt_idx);
    let mut left = (asked as usize).saturating_sub(already);
    let mut used_nodes = Vec::new();
    for n in &free.node_order {
        if left == 0 {
            break;
        }
        let got = free.take(rt_idx, *n, left);
        if got > 0 {
            used_nodes.push(*n);
        }
        left = left.saturating_sub(got);
    }
    let got = shape.cpus_in(rt_idx);
    why.push(format!(
        "RT CPUs: --rt-cpus {asked} → {got} CPUs as whole cores{} on node(s) {}{}",
        if got > asked as usize {
            format!(" (rounded up from {asked} to fill the last core)")
        } else {
            String::new()
        },
        used_nodes
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(","),
        if used_nodes.len() > 1 {
            " (the first node was full: the RT work spans nodes, keep each consumer's threads and memory on one)"
        } else {
            ""
        }
    ));
}

/// Stage 7: each VM's vCPU pins (1:1 onto its cores) and emulator threads (its node's housekeeping CPUs).
fn pin_vms(
    need: &Need,
    shape: &Shape,
    vm_cores: &BTreeMap<String, (u32, Vec<usize>)>,
    housekeeping: &CpuSet,
    why: &mut Vec<String>,
) -> Vec<VmPlan> {
    let cores = &shape.cores;
    let mut vms: Vec<VmPlan> = Vec::new();
    for vm in &need.vms {
        let Some((node, idx)) = vm_cores.get(&vm.name) else {
            continue;
        };
        let cpus: Vec<u32> = idx
            .iter()
            .flat_map(|i| cores[*i].cpus.iter().collect::<Vec<_>>())
            .collect();
        let emulator = CpuSet::new(
            cores
                .iter()
                .filter(|c| c.node == *node)
                .flat_map(|c| c.cpus.iter().collect::<Vec<_>>())
                .filter(|c| housekeeping.contains(*c)),
        );
        why.push(format!(
            "VM {}: {} vCPUs pinned 1:1 to {} on node {node}, emulator and I/O threads on housekeeping {emulator}, \
             {} GiB in 1 GiB huge pages on node {node}",
            vm.name,
            vm.vcpus,
            CpuSet::new(cpus.iter().take(vm.vcpus as usize).copied()),
            vm.mem_gib
        ));
        vms.push(VmPlan {
            name: vm.name.clone(),
            node: *node,
            vcpu_pins: cpus.into_iter().take(vm.vcpus as usize).collect(),
            emulator,
            mem_gib: vm.mem_gib,
        });
    }
    vms
}

/// Stage 8: 1 GiB huge pages per node (the VMs' memory on their nodes, or `--mem` spread over the RT nodes),
/// checked against each node's memory.
fn huge_pages(
    topo: &HostTopology,
    need: &Need,
    shape: &Shape,
    vms: &[VmPlan],
    isolated: &CpuSet,
    why: &mut Vec<String>,
) -> Result<BTreeMap<u32, u32>, PlanError> {
    let cores = &shape.cores;
    let mut pages: BTreeMap<u32, u32> = BTreeMap::new();
    for v in vms {
        *pages.entry(v.node).or_default() += v.mem_gib;
    }
    let rt_nodes: Vec<u32> = shape
        .node_ids
        .iter()
        .copied()
        .filter(|n| {
            cores
                .iter()
                .any(|c| c.node == *n && !c.cpus.intersection(isolated).is_empty())
        })
        .collect();
    if let Some(m) = need.mem_gib.filter(|_| vms.is_empty()) {
        // Spread by each node's share of I: memory follows the RT threads that touch it.
        let total_rt = isolated.len().max(1) as u64;
        let mut given = 0u32;
        for (k, n) in rt_nodes.iter().enumerate() {
            let share = if k + 1 == rt_nodes.len() {
                m - given
            } else {
                let on = cores
                    .iter()
                    .filter(|c| c.node == *n)
                    .map(|c| c.cpus.intersection(isolated).len() as u64)
                    .sum::<u64>();
                // Rounded to the nearest page; the last node takes the remainder.
                ((m as u64 * on * 2 + total_rt) / (2 * total_rt)).min(u64::from(m - given)) as u32
            };
            given += share;
            *pages.entry(*n).or_default() += share;
        }
        why.push(format!(
            "memory: {m} GiB of 1 GiB huge pages for the RT workload, split over node(s) {} by their share of I",
            rt_nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",")
        ));
    } else if vms.is_empty() {
        why.push(
            "memory: no huge pages reserved (give --mem GIB for the RT workload's memory)".into(),
        );
    }
    for (n, p) in &pages {
        if let Some(kib) = topo
            .nodes
            .iter()
            .find(|x| x.id == *n)
            .and_then(|x| x.mem_total_kib)
        {
            let have = kib / (1 << 20);
            // Leave the node at least 1 GiB or an eighth for the kernel and housekeeping.
            if u64::from(*p) + (have / 8).max(1) > have {
                return Err(PlanError::NodeMemory {
                    node: *n,
                    need_gib: u64::from(*p),
                    have_gib: have,
                });
            }
        }
    }
    Ok(pages)
}

/// Stage 9: the partition of each node, with one sentence per node.
fn node_plans(
    shape: &Shape,
    pages: &BTreeMap<u32, u32>,
    isolated: &CpuSet,
    housekeeping: &CpuSet,
    why: &mut Vec<String>,
) -> Vec<NodePlan> {
    let nodes: Vec<NodePlan> = shape
        .node_ids
        .iter()
        .map(|n| {
            let cpus = CpuSet::new(
                shape
                    .cores
                    .iter()
                    .filter(|c| c.node == *n)
                    .flat_map(|c| c.cpus.iter().collect::<Vec<_>>()),
            );
            NodePlan {
                id: *n,
                rt: cpus.intersection(isolated),
                housekeeping: cpus.intersection(housekeeping),
                hugepages_1g: pages.get(n).copied().unwrap_or(0),
            }
        })
        .collect();
    for n in &nodes {
        why.push(format!(
            "node {}: RT {} | housekeeping {}{}",
            n.id,
            if n.rt.is_empty() {
                "-".to_string()
            } else {
                n.rt.to_string()
            },
            n.housekeeping,
            if n.hugepages_1g > 0 {
                format!(" | {} × 1 GiB huge pages", n.hugepages_1g)
            } else {
                String::new()
            }
        ));
    }
    nodes
}

/// Stage 10: the closing reasoning: where IRQs go, which fire on the RT CPUs today, the NIC's queues, and
/// what SMT siblings mean.
fn explain_irqs(
    topo: &HostTopology,
    shape: &Shape,
    nic: Option<&Nic>,
    nic_node: Option<u32>,
    isolated: &CpuSet,
    housekeeping: &CpuSet,
    why: &mut Vec<String>,
) {
    why.push(format!(
        "IRQs: every device IRQ and the default affinity go to housekeeping {housekeeping} (irqaffinity=, \
         isolcpus managed_irq, irqbalance banned list {isolated})"
    ));
    let moving: Vec<String> = topo
        .irqs
        .iter()
        .filter(|q| !q.effective.intersection(isolated).is_empty())
        .map(|q| {
            let name = q.desc.split_whitespace().last().unwrap_or_default();
            format!(
                "{}{} on {}",
                q.irq,
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" ({name})")
                },
                q.effective
            )
        })
        .collect();
    if !topo.irqs.is_empty() {
        why.push(if moving.is_empty() {
            format!(
                "IRQs today: none of the {} device IRQs fires on the planned RT CPUs",
                topo.irqs.len()
            )
        } else {
            format!(
                "IRQs today: {} of {} device IRQs fire on the planned RT CPUs and move: {}{}",
                moving.len(),
                topo.irqs.len(),
                moving
                    .iter()
                    .take(8)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                if moving.len() > 8 { ", …" } else { "" }
            )
        });
    }
    if let Some(n) = nic {
        let queues = topo
            .irqs
            .iter()
            .filter(|q| q.desc.contains(n.name.as_str()))
            .count();
        if queues > 0 {
            let hk_on_node = nic_node
                .map(|nn| {
                    shape
                        .cores
                        .iter()
                        .filter(|c| c.node == nn)
                        .map(|c| c.cpus.intersection(housekeeping).len())
                        .sum::<usize>()
                })
                .unwrap_or(housekeeping.len());
            why.push(format!(
                "NIC {}: {queues} queue IRQ(s); with {hk_on_node} housekeeping CPU(s) on its node, `ethtool -L {} combined {}` \
                 keeps one queue per housekeeping CPU (tuned's netdev_queue_count)",
                n.name,
                n.name,
                hk_on_node.max(1)
            ));
        }
    }
    if shape.tpc > 1 {
        why.push(
            "siblings: the sibling of each RT CPU is RT too (same consumer); housekeeping siblings carry OS work. \
             Give an RT thread a whole core by leaving its sibling idle, or boot with --smt off"
                .into(),
        );
    }
}

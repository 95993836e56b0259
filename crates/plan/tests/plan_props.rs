//! Property tests of `rtgauge plan`'s partition over random topologies: 1–8 NUMA nodes, 1 or 2 sockets (or
//! one per node), SMT on/off, 2–256 CPUs, block or interleaved CPU numbering, and random needs.

use proptest::prelude::*;
use rtgauge_model::CpuSet;
use rtgauge_plan::{partition, Core, HostTopology, Need, Nic, NodeMem, PlanTarget, Smt, Vendor};

#[derive(Debug, Clone)]
struct Shape {
    nodes: u32,
    sockets: u32,
    cores_per_node: u32,
    tpc: u32,
    interleaved: bool,
}

fn shapes() -> impl Strategy<Value = Shape> {
    (1u32..=8, 0usize..3, 1u32..=32, 1u32..=2, any::<bool>())
        .prop_map(|(nodes, s, cores_per_node, tpc, interleaved)| {
            let sockets = match s {
                0 => 1,
                1 if nodes % 2 == 0 => 2,
                _ => nodes,
            };
            Shape {
                nodes,
                sockets,
                cores_per_node,
                tpc,
                interleaved,
            }
        })
        .prop_filter("2-256 CPUs", |s| {
            let n = s.nodes * s.cores_per_node * s.tpc;
            (2..=256).contains(&n)
        })
}

/// Linux-like numbering: core k's threads are k, k + cores, ...; node of core k is k / cores_per_node
/// (block) or k % nodes (interleaved, as some firmware enumerates).
fn topology(s: &Shape, nic_node: Option<u32>) -> HostTopology {
    let cores = s.nodes * s.cores_per_node;
    let nodes_per_socket = s.nodes / s.sockets;
    let core_list = (0..cores)
        .map(|k| {
            let node = if s.interleaved {
                k % s.nodes
            } else {
                k / s.cores_per_node
            };
            Core {
                cpus: CpuSet::new((0..s.tpc).map(|t| k + t * cores)),
                package: node / nodes_per_socket,
                node,
            }
        })
        .collect();
    HostTopology {
        cores: core_list,
        nodes: (0..s.nodes)
            .map(|id| NodeMem {
                id,
                mem_total_kib: Some(256 << 20),
            })
            .collect(),
        nics: vec![Nic {
            name: "eth0".into(),
            node: nic_node,
        }],
        vendor: Vendor::Intel,
        invariant_tsc: true,
        threads_per_core: s.tpc,
        irqs: Vec::new(),
    }
}

fn node_cpus(t: &HostTopology, node: u32) -> CpuSet {
    CpuSet::new(
        t.cores
            .iter()
            .filter(|c| c.node == node)
            .flat_map(|c| c.cpus.iter().collect::<Vec<_>>()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Whole cores, H ∪ I = online, capacity on every node and socket with RT CPUs, CPU 0 housekeeping,
    /// and no panic whatever is asked.
    #[test]
    fn partition_invariants(
        s in shapes(),
        rt in proptest::option::of(1u32..300),
        per_node in proptest::option::of(1u32..40),
        hk in proptest::option::of(1u32..64),
        smt_off in any::<bool>(),
        nic in proptest::option::of(0u32..8),
        target in 0usize..3,
    ) {
        let t = topology(&s, nic.filter(|n| *n < s.nodes));
        let mut need = Need::new([PlanTarget::Host, PlanTarget::K8s, PlanTarget::KvmGuest][target]);
        need.rt_cpus = rt;
        need.rt_per_node = if rt.is_some() { None } else { per_node };
        need.housekeeping = hk;
        need.smt = if smt_off { Smt::Off } else { Smt::Keep };
        need.nic = nic.map(|_| "eth0".to_string());
        match partition(&t, &need) {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.contains('\n') && !msg.is_empty(), "one line: {msg}");
            }
            Ok(p) => {
                prop_assert!(p.isolated.intersection(&p.housekeeping).is_empty());
                let mut all: Vec<u32> = p.isolated.iter().chain(p.housekeeping.iter()).collect();
                all.sort_unstable();
                prop_assert_eq!(CpuSet::new(all), p.online.clone());
                prop_assert!(!p.isolated.is_empty());
                // No RT CPU shares a core with a housekeeping CPU.
                for c in &t.cores {
                    let on = c.cpus.intersection(&p.online);
                    let i = on.intersection(&p.isolated);
                    prop_assert!(i.is_empty() || i == on, "core {} split: I {} H {}", c.cpus, i, on.intersection(&p.housekeeping));
                }
                // Every node and socket holding RT CPUs keeps housekeeping capacity.
                for n in 0..s.nodes {
                    let cpus = node_cpus(&t, n);
                    if !cpus.intersection(&p.isolated).is_empty() {
                        prop_assert!(!cpus.intersection(&p.housekeeping).is_empty(), "node {n} without H");
                    }
                }
                if !need.target.is_guest() {
                    for sk in 0..s.sockets {
                        let cpus = CpuSet::new(t.cores.iter().filter(|c| c.package == sk).flat_map(|c| c.cpus.iter().collect::<Vec<_>>()));
                        if !cpus.intersection(&p.isolated).is_empty() {
                            prop_assert!(!cpus.intersection(&p.housekeeping).is_empty(), "socket {sk} without H");
                        }
                    }
                }
                prop_assert!(p.housekeeping.contains(0));
                if let Some(asked) = rt {
                    prop_assert!(p.isolated.len() >= asked as usize);
                    // Rounded up to whole cores at most.
                    prop_assert!(p.isolated.len() < asked as usize + p.threads_per_core as usize);
                }
                if let Some(h) = hk {
                    prop_assert!(p.housekeeping.len() >= h as usize);
                }
            }
        }
    }

    /// The NIC's node is filled first: RT CPUs leave it only when its cores (but the one kept for
    /// housekeeping) are all RT; when the request fits there, every RT CPU is there.
    #[test]
    fn nic_node_preferred(s in shapes(), rt in 1u32..256, nic in 0u32..8) {
        let nic = nic % s.nodes;
        let t = topology(&s, Some(nic));
        let mut need = Need::new(PlanTarget::Host);
        need.rt_cpus = Some(rt);
        need.nic = Some("eth0".into());
        let Ok(p) = partition(&t, &need) else { return Ok(()) };
        let on_nic = node_cpus(&t, nic);
        let nic_free = on_nic.len() - s.tpc as usize; // one core kept for housekeeping
        let rt_rounded = (rt.div_ceil(s.tpc) * s.tpc) as usize;
        if rt_rounded <= nic_free {
            prop_assert_eq!(p.isolated.difference(&on_nic).len(), 0, "fits on the NIC node but spills");
        } else {
            prop_assert_eq!(on_nic.intersection(&p.isolated).len(), nic_free, "spills before filling the NIC node");
        }
    }

    /// Completeness: a request the machine can hold is planned; one it cannot is an error.
    #[test]
    fn feasible_iff_capacity(s in shapes(), rt in 1u32..300) {
        let t = topology(&s, None);
        let mut need = Need::new(PlanTarget::Host);
        need.rt_cpus = Some(rt);
        // One core per node is kept (the first core of a socket and CPU 0's core are first cores of a node).
        let cores = s.nodes * s.cores_per_node;
        let free = ((cores - s.nodes) * s.tpc) as usize;
        let r = partition(&t, &need);
        if cores < 2 || free == 0 || rt as usize > free {
            prop_assert!(r.is_err(), "{rt} RT CPUs with {free} free must fail");
        } else {
            prop_assert!(r.is_ok(), "{rt} RT CPUs with {free} free must plan: {:?}", r.err());
        }
    }
}

/// The example: 20 RT CPUs on an 8-CPU machine is a one-line error.
#[test]
fn twenty_on_eight_is_an_error() {
    let s = Shape {
        nodes: 1,
        sockets: 1,
        cores_per_node: 4,
        tpc: 2,
        interleaved: false,
    };
    let mut need = Need::new(PlanTarget::Host);
    need.rt_cpus = Some(20);
    let e = partition(&topology(&s, None), &need).expect_err("impossible");
    assert_eq!(
        e.to_string(),
        "cannot place 20 RT CPUs on this 8-CPU machine: at most 6 remain after housekeeping (2 CPU(s) kept: CPU 0's core (the boot CPU keeps the tick))"
    );
}

proptest! {
    /// Inconsistent topology files (siblings naming CPUs that name others, offline CPUs, missing entries)
    /// still give every online CPU exactly one core, and the partition does not panic on them.
    #[test]
    fn hostile_sibling_lists(
        online in proptest::collection::btree_set(0u32..64, 1..40),
        sibs in proptest::collection::vec(proptest::collection::btree_set(0u32..70, 0..4), 0..64),
        packages in proptest::collection::vec(proptest::option::of(0u32..4), 0..64),
    ) {
        use rtgauge_host::fingerprint::CpuTopo;
        use rtgauge_model::fingerprint::{Fingerprint, NumaNode};
        let online = CpuSet::new(online);
        let mut fp = Fingerprint::default();
        fp.cpu.online = online.clone();
        fp.numa = vec![NumaNode { id: 0, cpus: CpuSet::new(online.iter().filter(|c| c % 2 == 0)), ..Default::default() },
                       NumaNode { id: 1, cpus: CpuSet::new(online.iter().filter(|c| c % 2 == 1)), ..Default::default() }];
        let topo = online
            .iter()
            .enumerate()
            .filter_map(|(k, c)| {
                let s = sibs.get(k)?;
                Some((c, CpuTopo { package: packages.get(k).copied().flatten(), core: None, siblings: CpuSet::new(s.iter().copied()) }))
            })
            .collect();
        let t = HostTopology::from_fingerprint(&fp, &topo, Vec::new());
        let mut seen: Vec<u32> = t.cores.iter().flat_map(|c| c.cpus.iter().collect::<Vec<_>>()).collect();
        let n = seen.len();
        seen.sort_unstable();
        seen.dedup();
        prop_assert_eq!(n, seen.len(), "a CPU in two cores");
        prop_assert_eq!(CpuSet::new(seen), online);
        let _ = partition(&t, &Need::new(PlanTarget::Host));
    }
}

//! A guest's CPU and NUMA topology as QEMU builds it: `-smp sockets=S,cores=C,threads=T` and one
//! `-numa node` per node with its share of memory.
//!
//! QEMU numbers the CPUs socket by socket, core by core, thread by thread (index = (socket·C + core)·T +
//! thread), and Linux enumerates them in that order (the MADT lists them so): the threads of a core are
//! adjacent CPUs, and a node is a contiguous range of whole cores inside one socket (several nodes per
//! socket, as with sub-NUMA clustering) or of whole sockets.

use crate::LabError;

/// Sockets × cores per socket × threads per core, and NUMA nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestTopology {
    /// Sockets (packages).
    pub sockets: u32,
    /// Cores per socket.
    pub cores: u32,
    /// Threads per core (2 = SMT).
    pub threads: u32,
    /// NUMA nodes (1 = no `-numa`).
    pub nodes: u32,
}

impl GuestTopology {
    /// A topology, checked: every count ≥ 1, nodes hold whole cores and never straddle a socket
    /// (nodes a multiple of sockets) or hold whole sockets (sockets a multiple of nodes).
    pub fn new(
        sockets: u32,
        cores: u32,
        threads: u32,
        nodes: u32,
    ) -> Result<GuestTopology, LabError> {
        let t = GuestTopology {
            sockets,
            cores,
            threads,
            nodes,
        };
        if sockets == 0 || cores == 0 || threads == 0 || nodes == 0 {
            return Err(LabError::Topology(format!("{t}: every count must be ≥ 1")));
        }
        let fits = if nodes >= sockets {
            nodes.is_multiple_of(sockets) && cores.is_multiple_of(nodes / sockets)
        } else {
            sockets.is_multiple_of(nodes)
        };
        if !fits {
            return Err(LabError::Topology(format!(
                "{t}: nodes must split sockets into equal sets of whole cores, or group whole sockets"
            )));
        }
        if t.cpus() > 288 {
            return Err(LabError::Topology(format!(
                "{t}: more CPUs than QEMU's pc machine takes"
            )));
        }
        Ok(t)
    }

    /// One socket of `cpus` cores, no SMT, one node.
    pub fn flat(cpus: u32) -> GuestTopology {
        GuestTopology {
            sockets: 1,
            cores: cpus.max(1),
            threads: 1,
            nodes: 1,
        }
    }

    /// Every CPU.
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores * self.threads
    }

    /// The CPUs of `node`: first and last.
    pub fn node_cpus(&self, node: u32) -> (u32, u32) {
        let per = self.cpus() / self.nodes;
        (node * per, node * per + per - 1)
    }

    /// The socket of CPU `cpu`.
    pub fn socket_of(&self, cpu: u32) -> u32 {
        cpu / (self.cores * self.threads)
    }

    /// The node of CPU `cpu`.
    pub fn node_of(&self, cpu: u32) -> u32 {
        cpu / (self.cpus() / self.nodes)
    }

    /// The SMT siblings of CPU `cpu` (itself included), as the kernel lists them.
    pub fn siblings(&self, cpu: u32) -> Vec<u32> {
        let first = cpu / self.threads * self.threads;
        (first..first + self.threads).collect()
    }

    /// QEMU's arguments for this topology with `memory_mib` of memory, split evenly over the nodes.
    pub fn qemu_args(&self, memory_mib: u32) -> Vec<String> {
        let mut a = vec![
            "-smp".to_string(),
            format!(
                "cpus={},sockets={},cores={},threads={}",
                self.cpus(),
                self.sockets,
                self.cores,
                self.threads
            ),
            "-m".to_string(),
            format!("{memory_mib}M"),
        ];
        if self.nodes > 1 {
            let per = memory_mib / self.nodes;
            for n in 0..self.nodes {
                // The last node takes what the division left.
                let size = if n + 1 == self.nodes {
                    memory_mib - per * (self.nodes - 1)
                } else {
                    per
                };
                let (first, last) = self.node_cpus(n);
                a.push("-object".into());
                a.push(format!("memory-backend-ram,id=mem{n},size={size}M"));
                a.push("-numa".into());
                a.push(format!("node,nodeid={n},cpus={first}-{last},memdev=mem{n}"));
            }
        }
        a
    }
}

impl std::fmt::Display for GuestTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} socket{} × {} core{} × {} thread{}, {} node{}",
            self.sockets,
            if self.sockets == 1 { "" } else { "s" },
            self.cores,
            if self.cores == 1 { "" } else { "s" },
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.nodes,
            if self.nodes == 1 { "" } else { "s" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sockets_smt_two_nodes() {
        let t = GuestTopology::new(2, 4, 2, 2).unwrap();
        assert_eq!(t.cpus(), 16);
        assert_eq!(t.node_cpus(1), (8, 15));
        assert_eq!(t.siblings(5), [4, 5]);
        assert_eq!(t.socket_of(8), 1);
        let a = t.qemu_args(2048).join(" ");
        assert!(
            a.contains("-smp cpus=16,sockets=2,cores=4,threads=2"),
            "{a}"
        );
        assert!(a.contains("node,nodeid=1,cpus=8-15,memdev=mem1"), "{a}");
        assert!(a.contains("memory-backend-ram,id=mem0,size=1024M"), "{a}");
    }

    #[test]
    fn four_nodes_on_two_sockets_and_refusals() {
        let t = GuestTopology::new(2, 4, 1, 4).unwrap();
        assert_eq!(t.node_cpus(3), (6, 7));
        assert_eq!(t.node_of(5), 2);
        let a = t.qemu_args(1000).join(" ");
        assert!(a.contains("id=mem3,size=250M"), "{a}");
        assert!(
            GuestTopology::new(2, 3, 1, 4).is_err(),
            "3 cores do not split in 2"
        );
        assert!(
            GuestTopology::new(3, 2, 1, 2).is_err(),
            "a node would straddle a socket"
        );
        assert!(GuestTopology::new(0, 2, 1, 1).is_err());
        assert!(GuestTopology::new(1, 300, 1, 1).is_err());
        assert_eq!(
            GuestTopology::flat(4).to_string(),
            "1 socket × 4 cores × 1 thread, 1 node"
        );
    }
}

//! CPU sets and NUMA placement of CPUs, from sysfs
//! (Documentation/ABI/testing/sysfs-devices-system-cpu, Documentation/ABI/stable/sysfs-devices-node).

use crate::root::{HostError, HostRoot};
use rtgauge_model::CpuSet;

/// Which kernel CPU mask to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMask {
    /// `/sys/devices/system/cpu/online`
    Online,
    /// `/sys/devices/system/cpu/possible`
    Possible,
    /// `/sys/devices/system/cpu/present`
    Present,
    /// `/sys/devices/system/cpu/isolated`
    Isolated,
    /// `/sys/devices/system/cpu/nohz_full`
    NohzFull,
}

impl CpuMask {
    /// The kernel file that holds this mask (an absolute path, read through a [`HostRoot`]).
    pub fn kernel_path(self) -> &'static str {
        match self {
            CpuMask::Online => "/sys/devices/system/cpu/online",
            CpuMask::Possible => "/sys/devices/system/cpu/possible",
            CpuMask::Present => "/sys/devices/system/cpu/present",
            CpuMask::Isolated => "/sys/devices/system/cpu/isolated",
            CpuMask::NohzFull => "/sys/devices/system/cpu/nohz_full",
        }
    }
}

/// Read one of the kernel CPU masks. `nohz_full` reads "(null)" when unset on some kernels: that is the empty set.
pub fn read_cpu_mask(root: &HostRoot, mask: CpuMask) -> Result<CpuSet, HostError> {
    let path = mask.kernel_path();
    let text = root.read_text(path)?;
    parse_cpu_mask(&text).map_err(|e| HostError::Parse {
        path: path.to_string(),
        reason: e.to_string(),
    })
}

/// Parse a sysfs CPU list, accepting the kernel's "(null)" for an empty mask.
pub fn parse_cpu_mask(text: &str) -> Result<CpuSet, rtgauge_model::cpuset::CpuSetError> {
    if text.trim() == "(null)" {
        return Ok(CpuSet::default());
    }
    CpuSet::parse(text)
}

/// NUMA node of a CPU: the `nodeN` link in `/sys/devices/system/cpu/cpuX/`. `None` without NUMA support.
pub fn read_cpu_node(root: &HostRoot, cpu: u32) -> Option<u32> {
    root.list_dir(&format!("/sys/devices/system/cpu/cpu{cpu}"))
        .iter()
        .find_map(|name| name.strip_prefix("node").and_then(|n| n.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn masks_and_nodes_from_a_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = dir.path().join("sys/devices/system/cpu");
        fs::create_dir_all(cpu.join("cpu3/node1")).unwrap();
        fs::write(cpu.join("online"), "0-3\n").unwrap();
        fs::write(cpu.join("nohz_full"), "(null)\n").unwrap();
        fs::write(cpu.join("isolated"), "\n").unwrap();
        let root = HostRoot::at(dir.path());
        assert_eq!(
            read_cpu_mask(&root, CpuMask::Online).unwrap().to_string(),
            "0-3"
        );
        assert!(read_cpu_mask(&root, CpuMask::NohzFull).unwrap().is_empty());
        assert!(read_cpu_mask(&root, CpuMask::Isolated).unwrap().is_empty());
        assert_eq!(read_cpu_node(&root, 3), Some(1));
        assert_eq!(read_cpu_node(&root, 2), None);
        assert!(read_cpu_mask(&root, CpuMask::Possible).is_err());
    }

    #[test]
    fn garbage_mask_is_a_parse_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = dir.path().join("sys/devices/system/cpu");
        fs::create_dir_all(&cpu).unwrap();
        fs::write(cpu.join("online"), "0-x\n").unwrap();
        let e = read_cpu_mask(&HostRoot::at(dir.path()), CpuMask::Online).unwrap_err();
        assert!(e.to_string().contains("/sys/devices/system/cpu/online"));
    }
}

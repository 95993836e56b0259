//! The minimal system facts every result carries: uname, the PREEMPT_RT flag, online CPUs, clocksource; and
//! the network sysctls a network result carries.

use crate::cpu::{read_cpu_mask, CpuMask};
use crate::root::HostRoot;
use rtgauge_model::run::SystemInfo;
use std::collections::BTreeMap;

/// uname(2) of the running kernel. For a captured root the values come from `/proc/sys/kernel/*` instead.
pub fn read_system_info(root: &HostRoot) -> SystemInfo {
    let (sysname, nodename, release, version, machine) = if root.is_live() {
        live_uname()
    } else {
        let k = |f: &str| {
            root.read_optional(&format!("/proc/sys/kernel/{f}"))
                .map(|s| s.trim().to_string())
        };
        (
            k("ostype").unwrap_or_else(|| "Linux".into()),
            k("hostname").unwrap_or_default(),
            k("osrelease").unwrap_or_default(),
            k("version").unwrap_or_default(),
            String::new(),
        )
    };
    SystemInfo {
        sysname,
        nodename,
        release,
        version,
        machine,
        realtime: read_realtime_flag(root),
        cpus_online: read_cpu_mask(root, CpuMask::Online).unwrap_or_default(),
        clocksource: root
            .read_optional("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .map(|s| s.trim().to_string()),
    }
}

/// `/sys/kernel/realtime` reads "1" on PREEMPT_RT kernels and is absent otherwise.
pub fn read_realtime_flag(root: &HostRoot) -> bool {
    root.read_optional("/sys/kernel/realtime")
        .is_some_and(|s| s.trim_start().starts_with('1'))
}

/// `/proc/loadavg` as the kernel prints it, for cyclictest's status line.
pub fn read_loadavg(root: &HostRoot) -> String {
    root.read_optional("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The kernel settings that bound a CPS measurement (see docs/net.md), as read: `net.ipv4.…` → value with
/// its white space folded to single spaces. Absent or unreadable keys are left out.
pub fn read_net_sysctls(root: &HostRoot) -> BTreeMap<String, String> {
    const KEYS: &[&str] = &[
        "net/ipv4/ip_local_port_range",
        "net/ipv4/tcp_tw_reuse",
        "net/ipv4/tcp_max_tw_buckets",
        "net/ipv4/tcp_max_syn_backlog",
        "net/ipv4/tcp_syncookies",
        "net/core/somaxconn",
    ];
    KEYS.iter()
        .filter_map(|k| {
            let v = root.read_text(&format!("/proc/sys/{k}")).ok()?;
            Some((
                k.replace('/', "."),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            ))
        })
        .collect()
}

fn live_uname() -> (String, String, String, String, String) {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let f = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A captured tree holding these files.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn captured_tree_reads_proc_sys_kernel() {
        let dir = tree(&[
            ("proc/sys/kernel/osrelease", "6.1.0-rt5\n"),
            ("sys/kernel/realtime", "1\n"),
        ]);
        let s = read_system_info(&HostRoot::at(dir.path()));
        assert_eq!(s.release, "6.1.0-rt5");
        assert!(s.realtime);
    }

    #[test]
    fn net_sysctls_are_named_with_dots_and_folded() {
        let dir = tree(&[
            ("proc/sys/net/ipv4/ip_local_port_range", "32768\t60999\n"),
            ("proc/sys/net/ipv4/tcp_tw_reuse", "2\n"),
        ]);
        let s = read_net_sysctls(&HostRoot::at(dir.path()));
        let got: Vec<(&str, &str)> = s.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("net.ipv4.ip_local_port_range", "32768 60999"),
                ("net.ipv4.tcp_tw_reuse", "2")
            ]
        );
    }

    #[test]
    fn live_system_has_a_release_and_cpus() {
        let s = read_system_info(&HostRoot::live());
        assert_eq!(s.sysname, "Linux");
        assert!(!s.release.is_empty());
        assert!(!s.cpus_online.is_empty());
    }
}

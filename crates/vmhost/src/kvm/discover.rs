//! Finding a running VM's vCPU threads on its host.
//!
//! - By QEMU process id: QEMU names each vCPU thread `CPU <n>/KVM` (or `CPU <n>/TCG` under multi-threaded
//!   TCG) when started with `-name …,debug-threads=on` — libvirt always passes it; a plain QEMU without it
//!   names its threads after the process, and is refused with that advice. Single-threaded TCG runs every
//!   vCPU in one `ALL CPUs/TCG` thread, which cannot be told apart per vCPU: refused too.
//! - By libvirt domain name: libvirt's status file `/run/libvirt/qemu/<domain>.xml` (`<domstatus pid=…>`
//!   with `<vcpus><vcpu id='0' pid='…'/>`) names QEMU's pid and each vCPU's thread id, as `virsh` reports
//!   them, without starting `virsh`; the thread names confirm them. Reading it needs root.
//!
//! The parsers are pure; the readers take the `/proc` and `/run` roots as paths so that tests can give them
//! a tree.

use rtgauge_model::vm::VcpuThread;
use std::path::Path;

use crate::VmError;

/// `CPU 1/KVM` → (1, "KVM"); anything else (the main thread, `IO mon_iothread`, `ALL CPUs/TCG`) → `None`.
pub fn parse_vcpu_comm(comm: &str) -> Option<(u32, &str)> {
    let rest = comm.trim_end_matches('\n').strip_prefix("CPU ")?;
    let (n, accel) = rest.split_once('/')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || accel.is_empty() {
        return None;
    }
    Some((n.parse().ok()?, accel))
}

/// QEMU's `-name` from its command line (NUL-separated): `guest=NAME,…` or `NAME,…`.
pub fn parse_qemu_name(cmdline: &[u8]) -> Option<String> {
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let i = args.iter().position(|a| a == "-name")?;
    let v = args.get(i + 1)?;
    // Options are comma-separated, a literal comma doubled.
    let first = v.split(',').next()?;
    let name = first.strip_prefix("guest=").unwrap_or(first);
    (!name.is_empty() && !name.contains('=')).then(|| name.to_string())
}

/// libvirt's `<domstatus pid='…'>` … `<vcpu id='0' pid='…'/>`: QEMU's pid and (vCPU id, thread id) pairs.
pub fn parse_domstatus(xml: &str) -> Result<(u32, Vec<(u32, u32)>), String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let root = doc.root_element();
    if root.tag_name().name() != "domstatus" {
        return Err(format!(
            "<{}>, not libvirt's <domstatus>",
            root.tag_name().name()
        ));
    }
    let pid = root
        .attribute("pid")
        .and_then(|p| p.parse().ok())
        .ok_or("<domstatus> has no pid (the domain is not running)")?;
    let mut vcpus = Vec::new();
    for v in root
        .descendants()
        .filter(|n| n.has_tag_name("vcpu") && n.parent().is_some_and(|p| p.has_tag_name("vcpus")))
    {
        let (Some(id), Some(tid)) = (
            v.attribute("id").and_then(|x| x.parse().ok()),
            v.attribute("pid").and_then(|x| x.parse().ok()),
        ) else {
            continue;
        };
        vcpus.push((id, tid));
    }
    vcpus.sort_unstable();
    Ok((pid, vcpus))
}

/// `Cpus_allowed_list` of a thread's status file.
fn cpus_allowed(proc: &Path, pid: u32, tid: u32) -> String {
    std::fs::read_to_string(proc.join(format!("{pid}/task/{tid}/status")))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// A thread's policy and real-time priority (`fifo 1`, `other 0`) from its stat (proc(5) fields 41 and
/// 40); `None` when unreadable.
fn sched(proc: &Path, pid: u32, tid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(proc.join(format!("{pid}/task/{tid}/stat"))).ok()?;
    // The comm (field 2) may hold spaces and parentheses: fields are counted after its closing one.
    let mut f = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .skip(40 - 3);
    let prio: u32 = f.next()?.parse().ok()?;
    let name = match f.next()?.parse::<u32>().ok()? {
        0 => "other",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        6 => "deadline",
        _ => "unknown",
    };
    Some(format!("{name} {prio}"))
}

/// A VM found on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vm {
    /// The QEMU process.
    pub pid: u32,
    /// Its name (libvirt domain or `-name`).
    pub name: Option<String>,
    /// Its vCPU threads, by index.
    pub vcpus: Vec<VcpuThread>,
    /// Its other threads (tid, name): main loop, I/O threads, workers.
    pub others: Vec<(u32, String)>,
    /// How they were found.
    pub found_by: String,
    /// The accelerator the thread names say.
    pub accel: Option<String>,
}

/// The vCPU threads of QEMU process `pid`, by their names (under `proc`, normally `/proc`).
pub fn by_pid(proc: &Path, pid: u32) -> Result<Vm, VmError> {
    let dir = proc.join(pid.to_string());
    let comm = std::fs::read_to_string(dir.join("comm"))
        .map_err(|_| VmError::Input(format!("--pid {pid}: no such process")))?;
    let mut vcpus = Vec::new();
    let mut others = Vec::new();
    let mut accel = None;
    let mut single = false;
    let tasks = std::fs::read_dir(dir.join("task"))
        .map_err(|e| VmError::Input(format!("--pid {pid}: {e}")))?;
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let c = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let c = c.trim_end_matches('\n');
        if c == "ALL CPUs/TCG" {
            single = true;
        }
        if let Some((n, a)) = parse_vcpu_comm(c) {
            accel = Some(a.to_string());
            vcpus.push(VcpuThread {
                index: n,
                tid,
                comm: c.to_string(),
                cpus_allowed: cpus_allowed(proc, pid, tid),
                sched: sched(proc, pid, tid),
            });
        } else {
            others.push((tid, c.to_string()));
        }
    }
    others.sort_unstable();
    vcpus.sort_by_key(|v| v.index);
    if vcpus.is_empty() {
        let why = if single {
            "runs every vCPU in one thread (ALL CPUs/TCG: single-threaded TCG), which cannot be told apart per vCPU; use -accel tcg,thread=multi or KVM".to_string()
        } else {
            format!(
                "({}) has no threads named 'CPU n/KVM' or 'CPU n/TCG': start QEMU with -name NAME,debug-threads=on (libvirt does), or use --domain",
                comm.trim()
            )
        };
        return Err(VmError::Input(format!("--pid {pid} {why}")));
    }
    let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    Ok(Vm {
        pid,
        name: parse_qemu_name(&cmdline),
        vcpus,
        others,
        found_by: "thread names (CPU n/…)".into(),
        accel,
    })
}

/// A libvirt domain's QEMU and vCPU threads, from its status file under `run` (normally
/// `/run/libvirt/qemu`), checked against the threads under `proc`.
pub fn by_domain(proc: &Path, run: &Path, domain: &str) -> Result<Vm, VmError> {
    if domain.is_empty()
        || domain.contains('/')
        || domain.starts_with('.')
        || domain.chars().any(char::is_control)
    {
        return Err(VmError::Input(format!(
            "--domain {}: not a libvirt domain name",
            domain.escape_debug()
        )));
    }
    let status = run.join(format!("{domain}.xml"));
    let xml = std::fs::read_to_string(&status).map_err(|e| {
        VmError::Input(format!(
            "--domain {domain}: {}: {e} (not running on this host, or not libvirt's qemu driver; needs root)",
            status.display()
        ))
    })?;
    let (pid, ids) = parse_domstatus(&xml)
        .map_err(|e| VmError::Input(format!("--domain {domain}: {}: {e}", status.display())))?;
    let named = by_pid(proc, pid).ok();
    let mut vcpus: Vec<VcpuThread> = Vec::new();
    for (id, tid) in ids {
        let comm = std::fs::read_to_string(proc.join(format!("{pid}/task/{tid}/comm")))
            .unwrap_or_default()
            .trim_end_matches('\n')
            .to_string();
        if comm.is_empty() {
            return Err(VmError::Input(format!(
                "--domain {domain}: vCPU {id}'s thread {tid} (from {}) is gone",
                status.display()
            )));
        }
        vcpus.push(VcpuThread {
            index: id,
            tid,
            cpus_allowed: cpus_allowed(proc, pid, tid),
            sched: sched(proc, pid, tid),
            comm,
        });
    }
    if vcpus.is_empty() {
        // An older libvirt without <vcpus> in its status: the thread names.
        return named
            .map(|v| Vm {
                name: Some(domain.to_string()),
                ..v
            })
            .ok_or_else(|| {
                VmError::Input(format!(
                    "--domain {domain}: no vCPU threads in {} nor named in /proc/{pid}",
                    status.display()
                ))
            });
    }
    let others = named
        .map(|n| {
            n.others
                .into_iter()
                .filter(|(t, _)| !vcpus.iter().any(|v| v.tid == *t))
                .collect()
        })
        .unwrap_or_default();
    Ok(Vm {
        pid,
        name: Some(domain.to_string()),
        others,
        accel: vcpus
            .iter()
            .find_map(|v| parse_vcpu_comm(&v.comm).map(|(_, a)| a.to_string())),
        vcpus,
        found_by: format!("libvirt status {}", status.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcpu_thread_names_as_qemu_writes_them() {
        assert_eq!(parse_vcpu_comm("CPU 0/KVM"), Some((0, "KVM")));
        assert_eq!(parse_vcpu_comm("CPU 15/TCG\n"), Some((15, "TCG")));
        for not in [
            "qemu-system-x86",
            "ALL CPUs/TCG",
            "CPU /KVM",
            "CPU 1/",
            "CPU x/KVM",
            "IO mon_iothread",
            "CPU 1",
            "",
        ] {
            assert_eq!(parse_vcpu_comm(not), None, "{not}");
        }
    }

    #[test]
    fn qemu_name_from_its_command_line() {
        let cmd = b"qemu-system-x86_64\0-name\0guest=rt-vm,debug-threads=on\0-m\x00512\0";
        assert_eq!(parse_qemu_name(cmd).as_deref(), Some("rt-vm"));
        assert_eq!(
            parse_qemu_name(b"qemu\0-name\0lab,process=x\0").as_deref(),
            Some("lab")
        );
        assert_eq!(parse_qemu_name(b"qemu\0-m\x00512\0"), None);
        assert_eq!(parse_qemu_name(b"qemu\0-name"), None);
        assert_eq!(parse_qemu_name(b"qemu\0-name\0debug-threads=on\0"), None);
    }

    #[test]
    fn libvirt_status_names_qemu_and_its_vcpu_threads() {
        // As libvirt 9 writes /run/libvirt/qemu/<domain>.xml (trimmed).
        let xml = r#"<domstatus state='running' reason='booted' pid='4242'>
  <monitor path='/var/lib/libvirt/qemu/domain-1-rt/monitor.sock' type='unix'/>
  <vcpus>
    <vcpu id='1' pid='4250'/>
    <vcpu id='0' pid='4249'/>
  </vcpus>
  <domain type='kvm'><name>rt</name><vcpu placement='static'>2</vcpu></domain>
</domstatus>"#;
        assert_eq!(parse_domstatus(xml), Ok((4242, vec![(0, 4249), (1, 4250)])));
        assert!(parse_domstatus("<domain/>")
            .unwrap_err()
            .contains("domstatus"));
        assert!(parse_domstatus("<domstatus state='shutoff'/>")
            .unwrap_err()
            .contains("no pid"));
        assert!(parse_domstatus("<domstatus").is_err());
        // A <vcpu> outside <vcpus> (the domain's own count) is not a thread.
        assert_eq!(
            parse_domstatus("<domstatus pid='1'><domain><vcpu>4</vcpu></domain></domstatus>"),
            Ok((1, vec![]))
        );
    }

    #[test]
    fn bad_pids_and_domains_are_named() {
        let proc = Path::new("/proc");
        let e = by_pid(proc, u32::MAX).unwrap_err().to_string();
        assert!(e.contains("--pid 4294967295: no such process"), "{e}");
        // This test process has no vCPU threads.
        let e = by_pid(proc, std::process::id()).unwrap_err().to_string();
        assert!(e.contains("debug-threads=on"), "{e}");
        for bad in ["", "../etc", "a/b", ".hidden", "x\ny"] {
            let e = by_domain(proc, Path::new("/run/libvirt/qemu"), bad)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--domain"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = by_domain(proc, Path::new("/nonexistent"), "rt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/rt.xml"), "{e}");
    }
}

//! The closed loop: write a [`Plan`] into a copy of a captured host tree, as the machine would look after
//! the plan's files were installed and it rebooted: the command line, the isolation files the kernel derives
//! from it, tuned's files, IRQ and workqueue affinity, irqbalance's banned list, systemd's CPU affinity
//! (PID 1 and every service restarted on housekeeping CPUs), RPS masks and the huge-page pools.
//! `rtgauge audit --root COPY` then judges the plan with the same rules as a real host.
//!
//! What is not written: measurements. The second sample of the sampled rules (`.rtgauge/sample2`) describes
//! the machine before the plan and is dropped, so the sampled rules are `n/a` until measured again. No
//! process is invented (tuned, stalld): rules about running daemons keep the source tree's truth.
//! Symbolic links are not copied: every write then lands on a plain file inside the copy.

use super::emit::{cmdline, files};
use super::{Plan, Smt};
use rtgauge_host::parse::{parse_cmdline, parse_hex_mask};
use rtgauge_model::CpuSet;
use std::path::{Path, PathBuf};

/// Why the copy could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The destination directory already holds files.
    #[error("--apply-to-tree {0}: exists and is not empty (give a new directory)")]
    NotEmpty(String),
    /// The destination, or the nearest of its parents that exists, is not a directory.
    #[error("--apply-to-tree {arg}: {path} is not a directory")]
    NotADirectory {
        /// The destination as given.
        arg: String,
        /// The path that is not a directory.
        path: String,
    },
    /// The destination, or one of its parents, is a symbolic link to a path that does not exist: creating
    /// the directory would fail ("File exists") after the plan was printed and written.
    #[error("--apply-to-tree {arg}: {path} is a symbolic link to a missing path (give a new or empty directory)")]
    DanglingLink {
        /// The destination as given.
        arg: String,
        /// The dangling link.
        path: String,
    },
    /// The destination lies inside the source tree.
    #[error("--apply-to-tree {0}: inside the --root tree it copies (give a directory outside it)")]
    InsideSource(String),
    /// A file or directory of the copy could not be read or written. The I/O error is the `source`, not
    /// part of the message: the binary prints the chain ("--apply-to-tree PATH: CAUSE").
    #[error("--apply-to-tree {path}")]
    Io {
        /// The file or directory, as on this machine.
        path: String,
        /// The I/O error.
        #[source]
        cause: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ApplyError + '_ {
    move |cause| ApplyError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// What was done, for the report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Files copied from the source tree.
    pub copied: usize,
    /// Symbolic links not copied.
    pub skipped_links: usize,
    /// Kernel paths written (or removed, marked so) after the copy, in order.
    pub written: Vec<String>,
}

fn copy_tree(src: &Path, dst: &Path, out: &mut Applied) -> Result<(), ApplyError> {
    std::fs::create_dir_all(dst).map_err(io(dst))?;
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .map_err(io(src))?
        .collect::<Result<_, _>>()
        .map_err(io(src))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let from = e.path();
        let to = dst.join(e.file_name());
        let ft = e.file_type().map_err(io(&from))?;
        if ft.is_symlink() {
            out.skipped_links += 1;
        } else if ft.is_dir() {
            copy_tree(&from, &to, out)?;
        } else if ft.is_file() {
            std::fs::copy(&from, &to).map_err(io(&from))?;
            out.copied += 1;
        }
    }
    Ok(())
}

struct Tree<'a> {
    base: &'a Path,
    out: &'a mut Applied,
}

impl Tree<'_> {
    fn path(&self, kernel_path: &str) -> PathBuf {
        self.base.join(kernel_path.trim_start_matches('/'))
    }
    fn read(&self, kernel_path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(kernel_path)).ok()
    }
    fn exists(&self, kernel_path: &str) -> bool {
        self.path(kernel_path).exists()
    }
    fn list(&self, kernel_path: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(kernel_path))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
    fn write(&mut self, kernel_path: &str, text: &str) -> Result<(), ApplyError> {
        let p = self.path(kernel_path);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        std::fs::write(&p, text).map_err(io(&p))?;
        self.out.written.push(kernel_path.to_string());
        Ok(())
    }
}

/// Kernel parameters the plan decides: an old value of any of them is dropped from the command line.
fn replaced_key(key: &str, planned: &[String]) -> bool {
    planned.iter().any(|k| k == key)
        || matches!(
            key,
            "isolcpus"
                | "nohz_full"
                | "rcu_nocbs"
                | "irqaffinity"
                | "tuned.non_isolcpus"
                | "systemd.cpu_affinity"
                | "hugepages"
                | "hugepagesz"
                | "default_hugepagesz"
        )
}

/// Rewrite the `Cpus_allowed_list` (and `Cpus_allowed`) lines of a status file.
fn rewrite_status(text: &str, allowed: &CpuSet) -> String {
    let mut s = String::new();
    for l in text.lines() {
        if l.starts_with("Cpus_allowed_list:") {
            s.push_str(&format!("Cpus_allowed_list:\t{allowed}\n"));
        } else if l.starts_with("Cpus_allowed:") {
            s.push_str(&format!("Cpus_allowed:\t{}\n", allowed.hex_mask()));
        } else {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

fn allowed_of(text: &str) -> Option<CpuSet> {
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|v| CpuSet::parse(v.trim()).ok())
}

/// Where `path` will be once created: its nearest existing ancestor made canonical (which must be a
/// directory, else `ApplyError::NotADirectory`), then the components still to be created, `..` applied
/// lexically (they are new plain directories, so no symbolic link can make `..` lead elsewhere).
fn resolve_new(path: &Path) -> Result<PathBuf, ApplyError> {
    let mut rest = Vec::new();
    let mut base = path;
    while !base.as_os_str().is_empty() && !base.exists() {
        // Not there, yet a link: it points nowhere, and `create_dir_all` would fail on it.
        if base.symlink_metadata().is_ok() {
            return Err(ApplyError::DanglingLink {
                arg: path.display().to_string(),
                path: base.display().to_string(),
            });
        }
        // The last component, `..` included (`file_name` has none for it).
        match (base.components().next_back(), base.parent()) {
            (Some(last), Some(parent)) => {
                rest.push(last.as_os_str().to_os_string());
                base = parent;
            }
            _ => break,
        }
    }
    let base = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    if base.exists() && !base.is_dir() {
        return Err(ApplyError::NotADirectory {
            arg: path.display().to_string(),
            path: base.display().to_string(),
        });
    }
    let mut abs = std::fs::canonicalize(base).map_err(io(base))?;
    for c in rest.iter().rev() {
        if c == ".." {
            abs.pop();
        } else if c != "." {
            abs.push(c);
        }
    }
    Ok(abs)
}

/// Check that `dst` can take a copy of `src` without writing anything: it is a new directory (its missing
/// parents are created, as `mkdir -p` would) or an empty one, and it lies outside `src`. `rtgauge plan` calls
/// this before it writes any file, so a refused destination leaves nothing behind.
pub fn check_destination(src: &Path, dst: &Path) -> Result<(), ApplyError> {
    if dst.exists() {
        if !dst.is_dir() {
            return Err(ApplyError::NotADirectory {
                arg: dst.display().to_string(),
                path: dst.display().to_string(),
            });
        }
        let empty = std::fs::read_dir(dst).map_err(io(dst))?.next().is_none();
        if !empty {
            return Err(ApplyError::NotEmpty(dst.display().to_string()));
        }
    }
    // A copy inside its own source would copy itself without end.
    let src_abs = std::fs::canonicalize(src).map_err(io(src))?;
    let dst_abs = resolve_new(dst)?;
    if dst_abs.starts_with(&src_abs) {
        return Err(ApplyError::InsideSource(dst.display().to_string()));
    }
    Ok(())
}

/// Copy `src` to `dst` (new, parents created as needed, or empty) and write the plan into the copy.
pub fn apply_to_tree(src: &Path, dst: &Path, plan: &Plan) -> Result<Applied, ApplyError> {
    check_destination(src, dst)?;
    let mut out = Applied::default();
    copy_tree(src, dst, &mut out)?;
    let sample2 = dst.join(".rtgauge/sample2");
    if sample2.exists() {
        std::fs::remove_dir_all(&sample2).map_err(io(&sample2))?;
    }
    let mut t = Tree {
        base: dst,
        out: &mut out,
    };
    write_cmdline(&mut t, plan)?;
    write_derived(&mut t, plan)?;
    install_files(&mut t, plan)?;
    write_irqs(&mut t, plan)?;
    write_workqueues(&mut t, plan)?;
    write_tasks(&mut t, plan)?;
    write_rps(&mut t, plan)?;
    write_sysctls(&mut t)?;
    write_freq_idle(&mut t, plan)?;
    write_module_params(&mut t, plan)?;
    write_hugepages(&mut t, plan)?;
    Ok(out)
}

/// The command line: the old one without the keys the plan decides, then the plan's parameters.
fn write_cmdline(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let old = parse_cmdline(&t.read("/proc/cmdline").unwrap_or_default());
    let line = cmdline(plan);
    let planned: Vec<String> = parse_cmdline(&line)
        .tokens
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let mut tokens: Vec<String> = old
        .tokens
        .iter()
        .filter(|(k, _)| !replaced_key(k, &planned))
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => k.clone(),
        })
        .collect();
    tokens.push(line.clone());
    t.write("/proc/cmdline", &(tokens.join(" ") + "\n"))?;
    Ok(())
}

/// What the kernel derives from the command line: isolation files, RCU, default IRQ affinity, SMT.
fn write_derived(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let i = &plan.isolated;
    let hmask = plan.housekeeping.hex_mask();
    t.write("/sys/devices/system/cpu/isolated", &format!("{i}\n"))?;
    // The boot CPU is never nohz_full (no_hz.rst); CPU 0 is housekeeping in every plan anyway.
    t.write(
        "/sys/devices/system/cpu/nohz_full",
        &format!("{}\n", i.difference(&CpuSet::new([0]))),
    )?;
    t.write("/sys/kernel/rcu_normal", "1\n")?;
    t.write("/proc/irq/default_smp_affinity", &format!("{hmask}\n"))?;
    if plan.smt == Smt::Off && !plan.offline.is_empty() {
        t.write("/sys/devices/system/cpu/smt/control", "off\n")?;
        t.write("/sys/devices/system/cpu/smt/active", "0\n")?;
        t.write(
            "/sys/devices/system/cpu/online",
            &format!("{}\n", plan.online),
        )?;
    }
    Ok(())
}

/// The plan's files where the system reads them (tuned, irqbalance, systemd, sysctl.d, kubelet).
fn install_files(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let profile = plan.target.tuned_profile();
    for f in files(plan, None) {
        let dest = match f.path.as_str() {
            "tuned/bootcmdline" => "/etc/tuned/bootcmdline".to_string(),
            p if p.starts_with("tuned/") => format!("/etc/{p}"),
            "irqbalance" => {
                if t.exists("/etc/default/irqbalance") {
                    "/etc/default/irqbalance".into()
                } else {
                    "/etc/sysconfig/irqbalance".into()
                }
            }
            p if p.starts_with("systemd/") || p.starts_with("sysctl.d/") => format!("/etc/{p}"),
            "k8s/kubelet-config.yaml" => "/var/lib/kubelet/config.yaml".into(),
            _ => continue,
        };
        t.write(&dest, &f.text)?;
    }
    t.write("/etc/tuned/active_profile", &format!("{profile}\n"))?;
    t.write("/etc/tuned/profile_mode", "manual\n")?;
    Ok(())
}

/// IRQs: requested affinity H; the effective CPU spread over H as the kernel's matrix allocator does.
fn write_irqs(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let i = &plan.isolated;
    let h = &plan.housekeeping;
    let hmask = plan.housekeeping.hex_mask();
    let hk: Vec<u32> = h.iter().collect();
    let irqs: Vec<u32> = t
        .list("/proc/irq")
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    for (k, irq) in irqs.iter().enumerate() {
        let eff = t
            .read(&format!("/proc/irq/{irq}/effective_affinity_list"))
            .and_then(|s| CpuSet::parse(s.trim()).ok());
        let new_eff = match eff {
            Some(e) if !e.is_empty() && e.intersection(i).is_empty() => e,
            _ => match hk.get(k % hk.len().max(1)) {
                Some(c) => CpuSet::new([*c]),
                None => continue,
            },
        };
        t.write(
            &format!("/proc/irq/{irq}/smp_affinity_list"),
            &format!("{h}\n"),
        )?;
        t.write(
            &format!("/proc/irq/{irq}/smp_affinity"),
            &format!("{hmask}\n"),
        )?;
        t.write(
            &format!("/proc/irq/{irq}/effective_affinity_list"),
            &format!("{new_eff}\n"),
        )?;
    }
    Ok(())
}

/// Workqueues (tuned's [sysfs] plugin / workqueue.unbound_cpus) confined to H.
fn write_workqueues(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let hmask = plan.housekeeping.hex_mask();
    let mut wq = vec![
        "/sys/devices/virtual/workqueue/cpumask".to_string(),
        "/sys/bus/workqueue/devices/writeback/cpumask".to_string(),
    ];
    for d in t.list("/sys/devices/virtual/workqueue") {
        let p = format!("/sys/devices/virtual/workqueue/{d}/cpumask");
        if t.exists(&p) {
            wq.push(p);
        }
    }
    wq.sort();
    wq.dedup();
    for p in wq {
        if p == "/sys/devices/virtual/workqueue/cpumask" || t.exists(&p) {
            t.write(&p, &format!("{hmask}\n"))?;
        }
    }
    Ok(())
}

/// Every task allowed on I but not confined to it restarts on H (systemd CPUAffinity; tuned's scheduler
/// plugin moves the unbound kthreads). Tasks pinned inside I and per-CPU kthreads keep their affinity;
/// irqbalance's environment, where a capture kept it, bans I.
fn write_tasks(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let i = &plan.isolated;
    let h = &plan.housekeeping;
    let moves = |a: &CpuSet| !a.intersection(i).is_empty() && !a.difference(i).is_empty();
    for pid in t
        .list("/proc")
        .into_iter()
        .filter(|p| p.parse::<u32>().is_ok())
    {
        // A capture may hold only the main thread's status: the process's is the same file.
        let main = format!("/proc/{pid}/status");
        if !t.exists(&main) {
            if let Some(text) = t.read(&format!("/proc/{pid}/task/{pid}/status")) {
                t.write(&main, &text)?;
            }
        }
        let mut paths = vec![main];
        for tid in t.list(&format!("/proc/{pid}/task")) {
            paths.push(format!("/proc/{pid}/task/{tid}/status"));
        }
        for p in paths {
            let Some(text) = t.read(&p) else { continue };
            if allowed_of(&text).is_some_and(|a| moves(&a)) {
                t.write(&p, &rewrite_status(&text, h))?;
            }
        }
        // irqbalance's environment, where a capture kept it.
        let env_path = format!("/proc/{pid}/environ");
        if let Ok(env) = std::fs::read(t.path(&env_path)) {
            if env
                .split(|b| *b == 0)
                .any(|v| v.starts_with(b"IRQBALANCE_BANNED_CPU"))
            {
                let mut kept: Vec<u8> = env
                    .split(|b| *b == 0)
                    .filter(|v| !v.is_empty() && !v.starts_with(b"IRQBALANCE_BANNED_CPU"))
                    .flat_map(|v| v.iter().copied().chain([0]))
                    .collect();
                kept.extend_from_slice(format!("IRQBALANCE_BANNED_CPULIST={i}").as_bytes());
                kept.push(0);
                let pth = t.path(&env_path);
                std::fs::write(&pth, kept).map_err(io(&pth))?;
                t.out.written.push(env_path);
            }
        }
    }
    Ok(())
}

/// RPS: no receive steering onto I.
fn write_rps(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let i = &plan.isolated;
    for dev in t.list("/sys/class/net") {
        for q in t.list(&format!("/sys/class/net/{dev}/queues")) {
            let p = format!("/sys/class/net/{dev}/queues/{q}/rps_cpus");
            if let Some(m) = t.read(&p).and_then(|s| parse_hex_mask(s.trim()).ok()) {
                if !m.intersection(i).is_empty() {
                    t.write(&p, &format!("{}\n", m.difference(i).hex_mask()))?;
                }
            }
        }
    }
    Ok(())
}

/// The sysctl.d settings as applied at boot, and transparent huge pages off.
fn write_sysctls(t: &mut Tree<'_>) -> Result<(), ApplyError> {
    for (_, path, v, _) in super::emit::sysctls() {
        t.write(path, &format!("{v}\n"))?;
    }
    t.write(
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "always madvise [never]\n",
    )?;
    Ok(())
}

/// Frequency and idle on a host: with intel_pstate/amd_pstate=disable the kernel registers acpi-cpufreq
/// (no intel_pstate/amd_pstate directory), tuned sets the performance governor; max_cstate=1 leaves
/// cpuidle states 0 (POLL) and 1 (C1) registered.
fn write_freq_idle(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let planned_line = cmdline(plan);
    let params = parse_cmdline(&planned_line);
    if params.get("intel_pstate") == Some("disable") || params.get("amd_pstate") == Some("disable")
    {
        for d in [
            "/sys/devices/system/cpu/intel_pstate",
            "/sys/devices/system/cpu/amd_pstate",
        ] {
            let p = t.path(d);
            if p.is_dir() {
                std::fs::remove_dir_all(&p).map_err(io(&p))?;
                t.out.written.push(format!("{d} (removed)"));
            }
        }
        for pol in t.list("/sys/devices/system/cpu/cpufreq") {
            if pol.starts_with("policy") {
                let b = format!("/sys/devices/system/cpu/cpufreq/{pol}");
                t.write(&format!("{b}/scaling_driver"), "acpi-cpufreq\n")?;
                t.write(&format!("{b}/scaling_governor"), "performance\n")?;
            }
        }
    }
    if params.get("processor.max_cstate") == Some("1") {
        for cpu in plan.online.iter() {
            let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
            for st in t.list(&base) {
                let deep = st
                    .strip_prefix("state")
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| n >= 2);
                if deep {
                    let p = t.path(&format!("{base}/{st}"));
                    std::fs::remove_dir_all(&p).map_err(io(&p))?;
                    t.out.written.push(format!("{base}/{st} (removed)"));
                }
            }
        }
    }
    Ok(())
}

/// module.param=value on the command line is the parameter of a loaded (or built-in) module; `mce=ignore_ce`
/// shows in every machine-check bank.
fn write_module_params(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let params = parse_cmdline(&cmdline(plan));
    for (k, v) in &params.tokens {
        let (Some((module, param)), Some(v)) = (k.split_once('.'), v) else {
            continue;
        };
        if t.path(&format!("/sys/module/{module}")).is_dir() {
            t.write(
                &format!("/sys/module/{module}/parameters/{param}"),
                &format!("{v}\n"),
            )?;
        }
    }
    if params.get("mce") == Some("ignore_ce") {
        for m in t.list("/sys/devices/system/machinecheck") {
            let f = format!("/sys/devices/system/machinecheck/{m}/ignore_ce");
            if t.exists(&f) {
                t.write(&f, "1\n")?;
            }
        }
    }
    Ok(())
}

/// Huge pages reserved at boot, per node.
fn write_hugepages(t: &mut Tree<'_>, plan: &Plan) -> Result<(), ApplyError> {
    let total = plan.total_hugepages_1g();
    if total > 0 {
        let base = "/sys/kernel/mm/hugepages/hugepages-1048576kB";
        t.write(&format!("{base}/nr_hugepages"), &format!("{total}\n"))?;
        t.write(&format!("{base}/free_hugepages"), &format!("{total}\n"))?;
        for n in &plan.nodes {
            let nb = format!(
                "/sys/devices/system/node/node{}/hugepages/hugepages-1048576kB",
                n.id
            );
            t.write(
                &format!("{nb}/nr_hugepages"),
                &format!("{}\n", n.hugepages_1g),
            )?;
            t.write(
                &format!("{nb}/free_hugepages"),
                &format!("{}\n", n.hugepages_1g),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_destination_is_checked_without_writing() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("sys")).unwrap();
        // New, with parents that do not exist yet (mkdir -p), `..` among them: accepted, nothing created.
        let nested = tmp.path().join("a/b/../c/d");
        check_destination(&src, &nested).unwrap();
        assert!(!tmp.path().join("a").exists());
        assert_eq!(
            resolve_new(&nested).unwrap(),
            tmp.path().canonicalize().unwrap().join("a/c/d")
        );
        // Inside the source through a new directory and `..`: refused.
        let sneaky = src.join("new/../after");
        assert!(matches!(
            check_destination(&src, &sneaky),
            Err(ApplyError::InsideSource(_))
        ));
        // A file on the way, or as the destination: refused naming it.
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        for d in [file.join("tree"), file.clone()] {
            let e = check_destination(&src, &d).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{} is not a directory", file.display())),
                "{e}"
            );
        }
        // A dangling symbolic link as the destination or on the way: refused naming it.
        let dl = tmp.path().join("dl");
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dl).unwrap();
        for d in [dl.clone(), dl.join("tree")] {
            let e = check_destination(&src, &d).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "{} is a symbolic link to a missing path",
                    dl.display()
                )),
                "{e}"
            );
        }
        // Empty is fine, not empty is not.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        check_destination(&src, &empty).unwrap();
        std::fs::write(empty.join("k"), "").unwrap();
        assert!(matches!(
            check_destination(&src, &empty),
            Err(ApplyError::NotEmpty(_))
        ));
    }
}

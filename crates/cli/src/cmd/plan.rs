//! `rtgauge plan`: compute the real-time partition of this host (or a captured tree) for a stated need, print
//! the reasoning, write every configuration file into `--config-dir DIR`, and with `--apply-to-tree DIR` write
//! the plan into a copy of the captured tree for `rtgauge audit --root DIR` (the closed loop). `--numa`
//! instead advises bindings for running work whose memory is not local. Exit: 0 planned, 2 impossible
//! request or bad input (one line naming it).

use anyhow::{bail, Context as _};
use rtgauge_flags::plan::*;
use rtgauge_flags::PrintFormat;
use rtgauge_host::HostRoot;
use rtgauge_plan::{
    apply::{apply_to_tree, check_destination},
    check_topology_files, emit, numa, partition, read_topology_input, Need, PlanTarget, Smt,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn host_root(root: &Option<PathBuf>) -> anyhow::Result<HostRoot> {
    match root {
        Some(d) if !d.is_dir() => bail!("--root {}: not a directory", d.display()),
        Some(d) => Ok(HostRoot::at(d)),
        None => Ok(HostRoot::live()),
    }
}

/// Check that `--config-dir DIR` can be written without writing anything: DIR is a directory or can be created
/// (the nearest of its parents that exists is a directory). Run before any output so that a refused
/// destination, like any other bad input, leaves no file behind.
fn check_output_dir(dir: &Path) -> anyhow::Result<()> {
    let existing = dir
        .ancestors()
        .find(|p| p.as_os_str().is_empty() || p.exists())
        .filter(|p| !p.as_os_str().is_empty());
    match existing {
        Some(p) if !p.is_dir() => bail!(
            "--config-dir {}: {} is not a directory",
            dir.display(),
            p.display()
        ),
        _ => Ok(()),
    }
}

/// Whether `inner` is `outer` or lies inside it (paths made absolute, not resolved: a guard against the
/// plain mistake `--config-dir after/ --apply-to-tree after/`, whose copy must start empty).
fn inside(inner: &Path, outer: &Path) -> bool {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    abs(inner).starts_with(abs(outer))
}

fn write_file(dir: &Path, rel: &str, text: &str) -> anyhow::Result<()> {
    let p = dir.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("--config-dir {}", d.display()))?;
    }
    crate::output::write_atomic(&p, text.as_bytes())
        .with_context(|| format!("--config-dir {}", dir.display()))
}

/// Read the NUMA cells of a `rtgauge mem` run document (or a bare `{"numa": [...]}`).
fn read_matrix(path: &Path, machine_nodes: &[u32]) -> anyhow::Result<numa::Matrix> {
    let bytes = rtgauge_flags::read_user_file(path, "--matrix", rtgauge_flags::MAX_IMPORT_BYTES)?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("--matrix {}: not JSON", path.display()))?;
    let cells = v
        .get("probes")
        .and_then(|p| p.as_array())
        .and_then(|probes| {
            probes
                .iter()
                .filter(|p| p.get("probe").and_then(|x| x.as_str()) == Some("mem"))
                .find_map(|p| p.get("numa").filter(|n| n.as_array().is_some_and(|a| !a.is_empty())))
        })
        .or_else(|| v.get("numa"))
        .cloned()
        .with_context(|| {
            format!(
                "--matrix {}: no NUMA matrix (run `rtgauge mem --output FILE` on a multi-node machine)",
                path.display()
            )
        })?;
    let cells: Vec<rtgauge_model::mem::NumaCell> = serde_json::from_value(cells)
        .with_context(|| format!("--matrix {}: malformed NUMA cells", path.display()))?;
    let (matrix, left_out) =
        numa::Matrix::from_cells(&path.display().to_string(), &cells, machine_nodes)
            .map_err(|e| anyhow::anyhow!("--matrix {}: {e}", path.display()))?;
    if left_out > 0 {
        eprintln!(
            "rtgauge: warning: --matrix {}: {left_out} of {} NUMA cells failed; gains that need them are not estimated",
            path.display(),
            cells.len()
        );
    }
    Ok(matrix)
}

fn run_numa(a: &PlanArgs, root: &HostRoot) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &a.config_dir {
        check_output_dir(dir)?;
    }
    let result = rtgauge_host::numa::read_numa(root, None, 0);
    super::warn_refused(root);
    let matrix = match &a.matrix {
        Some(p) => {
            let nodes: Vec<u32> = result.nodes.iter().map(|n| n.node).collect();
            read_matrix(p, &nodes)?
        }
        None => numa::Matrix::from_slit(root, &result.nodes),
    };
    let plan = numa::numa_plan(&result, matrix, a.below);
    let text = match a.format.format {
        PrintFormat::Text => rtgauge_report::plan::render_numa(&plan),
        PrintFormat::Json => serde_json::to_string_pretty(&plan)? + "\n",
    };
    super::print_text(&text)?;
    if let Some(dir) = &a.config_dir {
        write_file(dir, "numa.txt", &rtgauge_report::plan::render_numa(&plan))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    let root = host_root(&a.root)?;
    if a.numa {
        return run_numa(a, &root);
    }
    let target = PlanTarget::parse(&a.target)
        .with_context(|| format!("--for {}: unknown target", a.target))?;
    if !a.vms.is_empty() && !matches!(target, PlanTarget::KvmHost | PlanTarget::VmwareGuest) {
        bail!("--vm: VMs are placed only with --for kvm-host (libvirt) or vmware-guest (.vmx)");
    }
    let mut names = std::collections::BTreeSet::new();
    for v in &a.vms {
        if !names.insert(v.name.as_str()) {
            bail!("--vm {}: the name is given twice", v.name);
        }
    }
    let (fp, topo) = read_topology_input(&root);
    super::warn_refused(&root);
    let what = a
        .root
        .as_ref()
        .map(|r| format!("--root {}", r.display()))
        .unwrap_or_else(|| "this system".into());
    // The fingerprint reads malformed topology files leniently; a plan built on them would be wrong, so
    // refuse naming the file (an absent online list is reported below as "no online CPU").
    if root.exists("/sys/devices/system/cpu/online") {
        if let Err(e) = check_topology_files(&root, a.nic.as_deref()) {
            bail!("{what}: {e}");
        }
    }
    if topo.cores.is_empty() {
        // The fingerprint reads an unparsable list as no CPU; say what is wrong with it instead (a list
        // beyond the supported CPU numbers is "out of range", with the limit).
        if let Err(rtgauge_host::HostError::Parse { path, reason }) =
            rtgauge_host::cpu::read_cpu_mask(&root, rtgauge_host::cpu::CpuMask::Online)
        {
            bail!("{what}: {path}: {reason}");
        }
        bail!("{what}: no online CPU found (/sys/devices/system/cpu/online)");
    }
    if fp.virt.platform != "none" && !target.is_guest() && target != PlanTarget::K8s {
        eprintln!(
            "rtgauge: warning: this system is a {} guest: --for vmware-guest or kvm-guest fits it (planning for {})",
            fp.virt.platform,
            target.as_str()
        );
    }
    let need = Need {
        target,
        rt_cpus: a.rt_cpus,
        rt_per_node: a.rt_per_node,
        housekeeping: a.housekeeping,
        nic: a.nic.clone(),
        smt: match a.smt {
            SmtArg::Keep => Smt::Keep,
            SmtArg::Off => Smt::Off,
        },
        vms: a.vms.clone(),
        mem_gib: a.mem,
    };
    let plan = partition(&topo, &need).map_err(|e| anyhow::anyhow!("plan: {e}"))?;
    // Every check before any output: a refused --config-dir or --apply-to-tree leaves no file behind (and
    // prints no plan that was not written).
    if let Some(dir) = &a.config_dir {
        check_output_dir(dir)?;
    }
    if let (Some(dst), Some(src)) = (&a.apply_to_tree, &a.root) {
        check_destination(src, dst)?;
        if let Some(out) = a.config_dir.as_ref().filter(|o| inside(o, dst)) {
            bail!(
                "--apply-to-tree {}: --config-dir {} is inside it (the copy must start empty; give another directory)",
                dst.display(),
                out.display()
            );
        }
    }
    let guest_mem_mib = fp.memory.total_kib.map(|k| k / 1024);
    let files = emit::files(&plan, guest_mem_mib);
    let text = rtgauge_report::plan::render_text(&plan) + &emit::explain(&plan, &files);
    let json = serde_json::to_string_pretty(&plan)? + "\n";
    match a.format.format {
        PrintFormat::Text => super::print_text(&text)?,
        PrintFormat::Json => super::print_text(&json)?,
    }
    if let Some(dir) = &a.config_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("--config-dir {}", dir.display()))?;
        for f in &files {
            write_file(dir, &f.path, &f.text)?;
        }
        write_file(dir, "plan.txt", &text)?;
        write_file(dir, "plan.json", &json)?;
        eprintln!(
            "rtgauge: wrote {} files into {}",
            files.len() + 2,
            dir.display()
        );
    }
    if let (Some(dst), Some(src)) = (&a.apply_to_tree, &a.root) {
        let applied = apply_to_tree(src, dst, &plan)?;
        eprintln!(
            "rtgauge: copied {} files into {}, wrote {} ({} symlinks not copied); check it with: rtgauge audit --root {} --target {} --no-sample",
            applied.copied,
            dst.display(),
            applied.written.len(),
            applied.skipped_links,
            dst.display(),
            target.audit_target()
        );
    }
    Ok(ExitCode::SUCCESS)
}

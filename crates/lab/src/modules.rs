//! A guest's kernel modules: those it asks for by name ([`crate::Guest::modules`]) and everything they need,
//! installed under `/lib/modules/<release>/` with a `modules.dep` that names each one's dependencies, so that
//! the guest's busybox `modprobe NAME` loads the chain (`modprobe virtio_net`: virtio_ring, virtio, the PCI
//! transport, failover, net_failover, then virtio_net).
//!
//! A Debian image package carries no `modules.dep` (its postinst runs depmod): the dependencies come from each
//! module's own `.modinfo` section, its `depends=` field (what `modinfo -F depends` prints), and from
//! [`TRANSPORTS`]. A dependency built into the kernel ([`Kernel::builtin`]) is left out; the package's
//! `modules.builtin` goes into the guest too, for busybox modprobe to know those.

use crate::initramfs::Initramfs;
use crate::kernel::module_name;
use crate::{Kernel, LabError};

/// Modules loaded before a driver though its `.ko` does not name them: the bus transport its device comes
/// through. A system with udev loads `virtio_pci` from the PCI device's modalias; the lab's guests have no
/// udev, and virtio_net's own `depends=` names only the virtio core, so that `modprobe virtio_net` alone would
/// load a driver with no device to bind. (driver, transport)
pub const TRANSPORTS: &[(&str, &str)] = &[("virtio_net", "virtio_pci")];

/// The modules `names` need, each with its dependencies: (name, dependencies as `modules.dep` lists them: the
/// one to load first last), in load order (dependencies before what needs them, each once). Built-in
/// modules are left out, also when asked for by name.
pub fn load_order(
    kernel: &Kernel,
    names: &[String],
) -> Result<Vec<(String, Vec<String>)>, LabError> {
    let mut order: Vec<(String, Vec<String>)> = Vec::new();
    for n in names {
        visit(kernel, &module_name(n), &mut order, &mut Vec::new())?;
    }
    Ok(order)
}

/// Depth first: `name`'s dependencies, then `name` (with all it needs, transitively) onto `order`.
fn visit(
    kernel: &Kernel,
    name: &str,
    order: &mut Vec<(String, Vec<String>)>,
    path: &mut Vec<String>,
) -> Result<(), LabError> {
    if order.iter().any(|(m, _)| m == name) || kernel.builtin(name) {
        return Ok(());
    }
    if path.iter().any(|p| p == name) {
        return Err(missing(format!(
            "module {name}: a circle of dependencies ({})",
            path.join(" → ")
        )));
    }
    let deps = direct_dependencies(kernel, name)?;
    path.push(name.to_string());
    for d in &deps {
        visit(kernel, d, order, path)?;
    }
    path.pop();
    // Every module `name` needs, transitively, in load order; modules.dep lists them the other way round.
    let mut all: Vec<String> = Vec::new();
    for d in deps.iter().filter(|d| !kernel.builtin(d)) {
        let (_, of_d) = order.iter().find(|(m, _)| m == d).ok_or_else(|| {
            missing(format!(
                "module {name}: its dependency {d} was not resolved"
            ))
        })?;
        for m in of_d.iter().rev().chain(std::iter::once(d)) {
            if !all.contains(m) {
                all.push(m.clone());
            }
        }
    }
    all.reverse();
    order.push((name.to_string(), all));
    Ok(())
}

/// What `name`'s `.ko` says it depends on, and its transport ([`TRANSPORTS`]).
fn direct_dependencies(kernel: &Kernel, name: &str) -> Result<Vec<String>, LabError> {
    let (host, _) = kernel.module(name).ok_or_else(|| {
        missing(format!(
            "module {name}: not among the modules kept from {} (KEPT_MODULES)",
            kernel.package
        ))
    })?;
    let ko = std::fs::read(&host).map_err(crate::io(&host))?;
    let mut deps = modinfo_depends(&ko).ok_or_else(|| {
        missing(format!(
            "{}: not a kernel module (no .modinfo section in an ELF64 object)",
            host.display()
        ))
    })?;
    deps.extend(
        TRANSPORTS
            .iter()
            .filter(|(driver, _)| *driver == name)
            .map(|(_, t)| t.to_string()),
    );
    Ok(deps)
}

fn missing(message: String) -> LabError {
    LabError::Program {
        program: "rtgauge-lab".into(),
        message,
    }
}

/// Install `names` and all they need into `fs` under `/lib/modules/<release>/`, with `modules.dep` (and the
/// package's `modules.builtin`).
pub fn install(fs: &mut Initramfs, kernel: &Kernel, names: &[String]) -> Result<(), LabError> {
    let base = format!("lib/modules/{}", kernel.release());
    fs.dir(&base);
    let rel_of = |name: &str| {
        kernel.module(name).ok_or_else(|| {
            missing(format!(
                "module {name}: not among the modules kept from {}",
                kernel.package
            ))
        })
    };
    let mut dep = String::new();
    for (name, deps) in load_order(kernel, names)? {
        let (host, rel) = rel_of(&name)?;
        fs.host_file(&format!("{base}/{rel}"), &host, 0o644);
        let deps: Vec<String> = deps
            .iter()
            .map(|d| rel_of(d).map(|(_, r)| r))
            .collect::<Result<_, _>>()?;
        dep.push_str(&format!("{rel}: {}\n", deps.join(" ")).replace(": \n", ":\n"));
    }
    fs.file(&format!("{base}/modules.dep"), dep, 0o644);
    fs.file(
        &format!("{base}/modules.builtin"),
        kernel.builtin_list(),
        0o644,
    );
    Ok(())
}

/// The `depends=` field of a kernel module's `.modinfo` section (what `modinfo -F depends` prints): the
/// modules it needs loaded first, by name (empty when it needs none). None: not a little-endian ELF64 object
/// with a `.modinfo` section.
pub fn modinfo_depends(ko: &[u8]) -> Option<Vec<String>> {
    let info = elf_section(ko, ".modinfo")?;
    let field = info
        .split(|&b| b == 0)
        .find_map(|f| f.strip_prefix(b"depends="))
        .unwrap_or_default();
    Some(
        String::from_utf8_lossy(field)
            .split(',')
            .filter(|d| !d.is_empty())
            .map(module_name)
            .collect(),
    )
}

/// The bytes of section `name` of a little-endian ELF64 object.
fn elf_section<'a>(elf: &'a [u8], name: &str) -> Option<&'a [u8]> {
    if !elf.starts_with(b"\x7fELF\x02\x01") {
        return None;
    }
    let int = |at: usize, len: usize| -> Option<usize> {
        let b = elf.get(at..at.checked_add(len)?)?;
        let v = b
            .iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        usize::try_from(v).ok()
    };
    let (shoff, shentsize, shnum, shstrndx) =
        (int(0x28, 8)?, int(0x3a, 2)?, int(0x3c, 2)?, int(0x3e, 2)?);
    // A section header: its name's offset in the names' section, its offset and size in the file.
    let header = |i: usize| -> Option<(usize, usize, usize)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            int(h, 4)?,
            int(h.checked_add(24)?, 8)?,
            int(h.checked_add(32)?, 8)?,
        ))
    };
    let body = |(_, off, size): (usize, usize, usize)| elf.get(off..off.checked_add(size)?);
    let names = body(header(shstrndx)?)?;
    (0..shnum).find_map(|i| {
        let h = header(i)?;
        let n = names.get(h.0..)?;
        let n = &n[..n.iter().position(|&b| b == 0)?];
        (n == name.as_bytes()).then(|| body(h)).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 object: a null section, `.modinfo` holding `info`, and the section names.
    fn object(info: &[u8]) -> Vec<u8> {
        let names = b"\0.modinfo\0.shstrtab\0";
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        let info_at = elf.len();
        elf.extend_from_slice(info);
        let names_at = elf.len();
        elf.extend_from_slice(names);
        let shoff = elf.len();
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        elf[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        for (name, at, size) in [
            (0u32, 0usize, 0usize),
            (1, info_at, info.len()),
            (10, names_at, names.len()),
        ] {
            let mut h = vec![0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[24..32].copy_from_slice(&(at as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            elf.extend_from_slice(&h);
        }
        elf
    }

    #[test]
    fn the_dependencies_are_read_from_the_modinfo_section() {
        let ko = object(
            b"license=GPL\0depends=virtio_ring,virtio,net_failover\0retpoline=Y\0name=virtio_net\0",
        );
        assert_eq!(
            modinfo_depends(&ko),
            Some(vec![
                "virtio_ring".into(),
                "virtio".into(),
                "net_failover".into()
            ])
        );
        assert_eq!(
            modinfo_depends(&object(b"depends=\0name=virtio_ring\0")),
            Some(vec![])
        );
        assert_eq!(modinfo_depends(&object(b"name=msr\0")), Some(vec![]));
        assert_eq!(modinfo_depends(b"\x7fELF\x02\x01 truncated"), None);
        assert_eq!(modinfo_depends(b"not an object"), None);
    }

    #[test]
    fn module_names_are_the_stems_with_underscores() {
        assert_eq!(
            module_name("kernel/drivers/gpu/virtio-gpu.ko"),
            "virtio_gpu"
        );
        assert_eq!(module_name("msr.ko.xz"), "msr");
        assert_eq!(module_name("virtio_net"), "virtio_net");
    }
}

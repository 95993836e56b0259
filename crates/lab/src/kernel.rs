//! Debian kernels for the lab, fetched like any other test dependency: `apt-get download` of the
//! metapackage (`linux-image-rt-amd64`, `linux-image-amd64`) names the current image package
//! (`linux-image-6.1.0-N-rt-amd64`), which is downloaded and unpacked with `dpkg-deb -x`; only `boot/` and
//! the few modules of [`KEPT_MODULES`] are kept (not the other 400 MB: the guests use built-in drivers, and
//! a guest asks for a kept module by name), and the vmlinux inside
//! the bzImage is decompressed once, so that QEMU boots the ELF through PVH instead of spending ~10 s of TCG
//! time in the kernel's own xz decompressor at every boot.
//!
//! Layout of the cache ([`crate::cache_dir`]): `debs/*.deb`, `PACKAGE_VERSION/{vmlinux,config,vmlinuz}`,
//! `PACKAGE_VERSION/modules/*.ko`.
//! When the package index cannot be reached (offline), the newest kernel already cached is used and a
//! warning says so. Debian 12's backports (6.12) come through apt with a sources list of their own
//! ([`BACKPORTS`]), never through the machine's apt configuration.

use crate::{io, run_program, LabError};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Which Debian kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flavour {
    /// `linux-image-rt-amd64`: PREEMPT_RT, with the osnoise, timerlat and hwlat tracers and NO_HZ_FULL.
    Rt,
    /// `linux-image-amd64`: the standard (PREEMPT_DYNAMIC, voluntary by default) kernel.
    Standard,
    /// `linux-image-rt-amd64` of Debian 12's backports (6.12): what 6.1 lacks, the osnoise tracer's
    /// `OSNOISE_IRQ_DISABLE` (from 6.3) that `rtla hwnoise` needs.
    RtBackports,
}

impl Flavour {
    /// The Debian metapackage that names the current image.
    pub fn metapackage(self) -> &'static str {
        match self {
            Flavour::Rt | Flavour::RtBackports => "linux-image-rt-amd64",
            Flavour::Standard => "linux-image-amd64",
        }
    }

    /// The Debian suite its packages come from beyond the machine's own sources (None: those).
    pub fn suite(self) -> Option<&'static str> {
        match self {
            Flavour::RtBackports => Some(BACKPORTS),
            Flavour::Rt | Flavour::Standard => None,
        }
    }

    /// Short name: `rt` or `std`.
    pub fn short(self) -> &'static str {
        match self {
            Flavour::Rt => "rt",
            Flavour::Standard => "std",
            Flavour::RtBackports => "rt-bpo",
        }
    }

    /// `rt` / `std` (also `standard`) / `rt-bpo` back into a flavour.
    pub fn parse(s: &str) -> Option<Flavour> {
        match s {
            "rt" => Some(Flavour::Rt),
            "rt-bpo" => Some(Flavour::RtBackports),
            "std" | "standard" => Some(Flavour::Standard),
            _ => None,
        }
    }
}

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Which one.
    pub flavour: Flavour,
    /// The image package, e.g. `linux-image-6.1.0-56-rt-amd64`.
    pub package: String,
    /// Its Debian version, e.g. `6.1.192-2`.
    pub version: String,
    /// The decompressed ELF kernel (booted through PVH).
    pub vmlinux: PathBuf,
    /// The kernel's build configuration.
    pub config: PathBuf,
}

impl Kernel {
    /// Fetch (or find in the cache) the current kernel of `flavour`.
    pub fn fetch(flavour: Flavour) -> Result<Kernel, LabError> {
        let cache = crate::cache_dir();
        let apt = Apt::new(&cache, flavour.suite())?;
        let _lock = crate::FileLock::exclusive(&cache.join("fetch.lock"))?;
        let meta = match apt.download(flavour.metapackage()) {
            Ok(p) => p,
            Err(e) => {
                let Some(k) = cached(&cache, flavour) else {
                    return Err(e);
                };
                eprintln!(
                    "rtgauge-lab: warning: {e}; using the cached {} {}",
                    k.package, k.version
                );
                return Ok(k);
            }
        };
        let depends = deb_field(&meta, "Depends")?;
        // "linux-image-6.1.0-56-rt-amd64 (= 6.1.192-2)"
        let package = depends
            .split([',', ' ', '('])
            .find(|w| w.starts_with("linux-image-"))
            .ok_or_else(|| LabError::Program {
                program: "dpkg-deb".into(),
                message: format!("{}: no linux-image in Depends: {depends}", meta.display()),
            })?
            .to_string();
        let version = deb_field(&meta, "Version")?;
        let dir = cache.join(format!("{package}_{version}"));
        let k = Kernel {
            flavour,
            package: package.clone(),
            version,
            vmlinux: dir.join("vmlinux"),
            config: dir.join("config"),
        };
        if k.complete() {
            return Ok(k);
        }
        // A cache unpacked before a module was kept is unpacked again from the .deb already here.
        let deb = match apt.downloaded(&package, &k.version) {
            Some(d) => d,
            None => apt.download(&package)?,
        };
        unpack(&deb, &dir)?;
        Ok(k)
    }

    /// `CONFIG_NAME` of the kernel's configuration (`y`, `m`, a value), if set.
    pub fn config_value(&self, name: &str) -> Option<String> {
        let text = std::fs::read_to_string(&self.config).ok()?;
        let key = format!("{name}=");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map(str::to_string)
    }

    /// A module kept from the package ([`KEPT_MODULES`], by name: `msr`, `virtio_net`; `-` and `_` alike):
    /// its path on this machine and its path under `/lib/modules/<release>/` in a guest. None for a module
    /// this kernel has built in ([`Kernel::builtin`]) or the lab does not keep.
    pub fn module(&self, name: &str) -> Option<(PathBuf, String)> {
        let rel = KEPT_MODULES
            .iter()
            .find(|m| module_name(m) == module_name(name))?;
        Some((self.module_at(rel), format!("kernel/{rel}"))).filter(|(p, _)| p.is_file())
    }

    /// Whether module `name` is built into this kernel (its package's `modules.builtin` lists it): 6.12's
    /// `virtio` and `virtio_pci` are, 6.1's are modules.
    pub fn builtin(&self, name: &str) -> bool {
        let name = module_name(name);
        self.builtin_list().lines().any(|l| module_name(l) == name)
    }

    /// The package's `modules.builtin`, as kept in the cache ("" when absent).
    pub fn builtin_list(&self) -> String {
        std::fs::read_to_string(self.modules_dir().join("modules.builtin")).unwrap_or_default()
    }

    /// Whether everything the lab keeps of the package is in the cache (a kernel cached before a module
    /// was kept is unpacked again).
    fn complete(&self) -> bool {
        self.vmlinux.is_file()
            && self.config.is_file()
            && KEPT_MODULES
                .iter()
                .all(|m| self.module_at(m).is_file() || self.builtin(m))
    }

    fn modules_dir(&self) -> PathBuf {
        self.vmlinux.with_file_name("modules")
    }

    fn module_at(&self, rel: &str) -> PathBuf {
        let file = rel.rsplit('/').next().unwrap_or(rel);
        self.modules_dir().join(file)
    }

    /// The kernel release (`uname -r`), from the package name.
    pub fn release(&self) -> &str {
        self.package
            .strip_prefix("linux-image-")
            .unwrap_or(&self.package)
    }
}

/// Debian 12's backports suite, where its newer kernels and their tools are.
pub const BACKPORTS: &str = "bookworm-backports";

/// apt as the lab uses it: the machine's own sources, or one other suite of the Debian archive through a
/// sources list, package lists and cache of its own under the lab's cache (`apt-<suite>/`), so that the
/// machine's apt configuration is never changed. Its `.deb`s go to `debs/` or `debs-<suite>/` (a suite's
/// metapackage has the same name as the machine's).
struct Apt {
    debs: PathBuf,
    options: Vec<String>,
}

impl Apt {
    fn new(cache: &Path, suite: Option<&str>) -> Result<Apt, LabError> {
        let Some(suite) = suite else {
            let debs = cache.join("debs");
            std::fs::create_dir_all(&debs).map_err(io(&debs))?;
            return Ok(Apt {
                debs,
                options: Vec::new(),
            });
        };
        let root = cache.join(format!("apt-{suite}"));
        for d in ["lists/partial", "cache/archives/partial", "parts"] {
            std::fs::create_dir_all(root.join(d)).map_err(io(&root.join(d)))?;
        }
        let list = root.join("sources.list");
        let line = format!(
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian {suite} main\n"
        );
        std::fs::write(&list, line).map_err(io(&list))?;
        let debs = cache.join(format!("debs-{suite}"));
        std::fs::create_dir_all(&debs).map_err(io(&debs))?;
        let opt = |k: &str, v: &Path| vec!["-o".to_string(), format!("{k}={}", v.display())];
        let options = [
            opt("Dir::Etc::SourceList", &list),
            opt("Dir::Etc::SourceParts", &root.join("parts")),
            opt("Dir::State::Lists", &root.join("lists")),
            opt("Dir::Cache", &root.join("cache")),
        ]
        .concat();
        Ok(Apt { debs, options })
    }

    /// The .deb of `package` `version` already downloaded, if any.
    fn downloaded(&self, package: &str, version: &str) -> Option<PathBuf> {
        let prefix = format!("{package}_{}_", version.replace(':', "%3a"));
        std::fs::read_dir(&self.debs)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
            })
    }

    /// `apt-get download PACKAGE` (after `apt-get update` when the index does not know it: a fresh
    /// machine has no package lists); the .deb downloaded.
    fn download(&self, package: &str) -> Result<PathBuf, LabError> {
        download(&self.debs, &self.options, package)
    }

    /// A package's files unpacked under the lab's cache (`PACKAGE_VERSION/`), downloaded once.
    fn unpacked(&self, cache: &Path, package: &str) -> Result<PathBuf, LabError> {
        let deb = self.download(package)?;
        let version = deb_field(&deb, "Version")?;
        let dir = cache.join(format!("{package}_{version}"));
        if !dir.join(".complete").is_file() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            let d = dir.display().to_string();
            run_program("dpkg-deb", &["-x", &deb.display().to_string(), &d])?;
            std::fs::write(dir.join(".complete"), b"").map_err(io(&dir))?;
        }
        Ok(dir)
    }
}

/// Debian package `package` of `suite` (the machine's own sources when None) unpacked under the lab's cache:
/// the directory its files are in (`usr/bin/…`). For a program newer than the machine's own (`rtla` 6.12 of
/// the backports, which has `hwnoise`), to be copied into a guest with its libraries.
pub fn debian_package(suite: Option<&str>, package: &str) -> Result<PathBuf, LabError> {
    let cache = crate::cache_dir();
    let apt = Apt::new(&cache, suite)?;
    let _lock = crate::FileLock::exclusive(&cache.join("fetch.lock"))?;
    apt.unpacked(&cache, package)
}

/// `apt-get OPTIONS download PACKAGE` into `dir` (after `apt-get update` when the index does not know it: a
/// fresh machine has no package lists); the .deb downloaded.
fn download(dir: &Path, options: &[String], package: &str) -> Result<PathBuf, LabError> {
    let find = || -> Option<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
            })
            .collect();
        found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        found.pop()
    };
    let get = || {
        let out = rtgauge_programs::command("apt-get")
            .args(options)
            .args(["download", "-q", package])
            .current_dir(dir)
            .output()
            .map_err(|e| LabError::Program {
                program: "apt-get".into(),
                message: rtgauge_programs::not_found("apt-get", &e),
            })?;
        match out.status.success() {
            true => Ok(()),
            false => Err(LabError::Program {
                program: format!("apt-get download {package}"),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    };
    // The metapackage is downloaded again every time (3 KB): it is what says which image is current.
    let before = find();
    if let Some(b) = &before {
        let _ = std::fs::remove_file(b);
    }
    if get().is_err() {
        let mut update: Vec<&str> = options.iter().map(String::as_str).collect();
        update.extend(["update", "-qq"]);
        run_program("apt-get", &update)?;
        if let Err(e) = get() {
            // Offline: keep what was cached.
            if let Some(b) = before {
                return Err(LabError::Program {
                    program: format!("apt-get download {package}"),
                    message: format!("{e} (the cached {} was removed)", b.display()),
                });
            }
            return Err(e);
        }
    }
    find().ok_or_else(|| LabError::Program {
        program: format!("apt-get download {package}"),
        message: format!("no .deb appeared in {}", dir.display()),
    })
}

/// A control field of a .deb.
fn deb_field(deb: &Path, field: &str) -> Result<String, LabError> {
    let p = deb.display().to_string();
    let out = run_program("dpkg-deb", &["-f", &p, field])?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// Unpack the image package's `boot/` into `dir`: vmlinuz, config and the decompressed vmlinux.
fn unpack(deb: &Path, dir: &Path) -> Result<(), LabError> {
    let parent = dir.parent().unwrap_or(dir);
    let tmp = tempfile::Builder::new()
        .prefix(".unpack-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let t = tmp.path().display().to_string();
    run_program("dpkg-deb", &["-x", &deb.display().to_string(), &t])?;
    let boot = tmp.path().join("boot");
    let mut vmlinuz = None;
    let mut config = None;
    for e in std::fs::read_dir(&boot).map_err(io(&boot))?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("vmlinuz-") {
            vmlinuz = Some(e.path());
        } else if name.starts_with("config-") {
            config = Some(e.path());
        }
    }
    let (Some(vmlinuz), Some(config)) = (vmlinuz, config) else {
        return Err(LabError::Program {
            program: "dpkg-deb".into(),
            message: format!("{}: no boot/vmlinuz-* and boot/config-*", deb.display()),
        });
    };
    let staged = tempfile::Builder::new()
        .prefix(".kernel-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let image = std::fs::read(&vmlinuz).map_err(io(&vmlinuz))?;
    let elf = extract_vmlinux(&image).map_err(|e| LabError::Io {
        path: vmlinuz.display().to_string(),
        source: e,
    })?;
    let s = staged.path();
    std::fs::write(s.join("vmlinux"), elf).map_err(io(&s.join("vmlinux")))?;
    std::fs::copy(&config, s.join("config")).map_err(io(&config))?;
    std::fs::copy(&vmlinuz, s.join("vmlinuz")).map_err(io(&vmlinuz))?;
    let modules = tmp.path().join("lib/modules");
    let release = std::fs::read_dir(&modules)
        .map_err(io(&modules))?
        .flatten()
        .next()
        .map(|e| e.path())
        .ok_or_else(|| LabError::Program {
            program: "dpkg-deb".into(),
            message: format!("{}: no lib/modules/<release>", deb.display()),
        })?;
    std::fs::create_dir_all(s.join("modules")).map_err(io(&s.join("modules")))?;
    let builtin = release.join("modules.builtin");
    let builtin_list = std::fs::read_to_string(&builtin).unwrap_or_default();
    if builtin.is_file() {
        let to = s.join("modules/modules.builtin");
        std::fs::copy(&builtin, &to).map_err(io(&to))?;
    }
    for m in KEPT_MODULES {
        let from = release.join("kernel").join(m);
        let to = s.join("modules").join(m.rsplit('/').next().unwrap_or(m));
        // 6.12's modules are xz-compressed (`msr.ko.xz`): kept decompressed, as a guest's busybox
        // insmod takes them.
        let xz = from.with_extension("ko.xz");
        let in_kernel = builtin_list
            .lines()
            .any(|l| module_name(l) == module_name(m));
        if !from.exists() && !xz.exists() && in_kernel {
            // Built in (6.12's virtio core and PCI transport): nothing to keep.
            continue;
        }
        if !from.exists() && xz.is_file() {
            let packed = std::fs::read(&xz).map_err(io(&xz))?;
            let mut plain = Vec::new();
            liblzma::read::XzDecoder::new(&packed[..])
                .read_to_end(&mut plain)
                .map_err(io(&xz))?;
            std::fs::write(&to, plain).map_err(io(&to))?;
        } else {
            std::fs::copy(&from, &to).map_err(io(&from))?;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    let staged = staged.keep();
    std::fs::rename(&staged, dir).map_err(io(dir))?;
    Ok(())
}

/// Modules kept from the image package (paths under `lib/modules/<release>/kernel/`; the other 400 MB are
/// not): the msr driver that SMI counting reads through; veth and netem, for the packet probe's namespaces
/// and the loss and reordering it counts; the virtio-net stack of a guest's NIC on a host tap device
/// ([`crate::Guest::tap`]): Debian 6.1 builds all of it as modules (virtio_ring, virtio, the PCI transport and
/// its two device libraries, failover, net_failover, virtio_net), 6.12 builds in the virtio core and the PCI
/// transport (a module built in is skipped, as its package's `modules.builtin` says).
pub const KEPT_MODULES: &[&str] = &[
    "arch/x86/kernel/msr.ko",
    "drivers/net/veth.ko",
    "net/sched/sch_netem.ko",
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

/// A module's name from its name or path (`kernel/drivers/virtio/virtio-mmio.ko` → `virtio_mmio`): the
/// file's stem with `-` as `_`, as the kernel and modprobe name it.
pub fn module_name(path: &str) -> String {
    let file = path.trim().rsplit('/').next().unwrap_or(path);
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

/// The ELF vmlinux inside an x86 bzImage whose payload is xz-compressed (Debian 12's CONFIG_KERNEL_XZ) or
/// zstd-compressed (its backports' CONFIG_KERNEL_ZSTD), as the kernel's scripts/extract-vmlinux finds it:
/// the first stream of either that decompresses to an ELF image.
pub fn extract_vmlinux(bzimage: &[u8]) -> std::io::Result<Vec<u8>> {
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    const ZSTD_MAGIC: &[u8] = b"\x28\xb5\x2f\xfd";
    for magic in [XZ_MAGIC, ZSTD_MAGIC] {
        let mut from = 0;
        while let Some(i) = find(&bzimage[from..], magic) {
            let at = from + i;
            let mut out = Vec::new();
            // The stream is followed by the image's trailer: decoding stops at the stream's end.
            let ok = if magic == XZ_MAGIC {
                liblzma::read::XzDecoder::new(&bzimage[at..])
                    .read_to_end(&mut out)
                    .is_ok()
            } else {
                let mut src = &bzimage[at..];
                ruzstd::StreamingDecoder::new(&mut src)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
                    .and_then(|mut d| d.read_to_end(&mut out))
                    .is_ok()
            };
            if ok && out.starts_with(b"\x7fELF") {
                return Ok(out);
            }
            from = at + 1;
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "no xz- or zstd-compressed ELF kernel inside (not a CONFIG_KERNEL_XZ or _ZSTD bzImage)",
    ))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The newest kernel of `flavour` already in the cache.
fn cached(cache: &Path, flavour: Flavour) -> Option<Kernel> {
    let rt = flavour != Flavour::Standard;
    let backports = flavour.suite().is_some();
    let mut found: Vec<Kernel> = std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (package, version) = name.split_once('_')?;
            let is_rt = package.ends_with("-rt-amd64");
            let is_bpo = version.contains("~bpo");
            (package.starts_with("linux-image-") && is_rt == rt && is_bpo == backports).then(|| {
                Kernel {
                    flavour,
                    package: package.to_string(),
                    version: version.to_string(),
                    vmlinux: e.path().join("vmlinux"),
                    config: e.path().join("config"),
                }
            })
        })
        .filter(Kernel::complete)
        .collect();
    found.sort_by_key(|k| {
        std::fs::metadata(&k.vmlinux)
            .and_then(|m| m.modified())
            .ok()
    });
    found.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavours_round_trip() {
        for f in [Flavour::Rt, Flavour::Standard, Flavour::RtBackports] {
            assert_eq!(Flavour::parse(f.short()), Some(f));
        }
        assert_eq!(Flavour::parse("x"), None);
    }

    #[test]
    fn an_image_without_an_xz_elf_is_refused() {
        assert!(extract_vmlinux(b"MZ no kernel here").is_err());
        // An xz magic followed by garbage is skipped, not a panic.
        let mut junk = b"xx\xfd7zXZ\x00garbage".to_vec();
        junk.extend_from_slice(&[0u8; 64]);
        assert!(extract_vmlinux(&junk).is_err());
    }

    #[test]
    fn the_elf_inside_an_xz_stream_is_found_after_a_false_start() {
        use std::io::Write as _;
        let elf = b"\x7fELF-payload".repeat(100);
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
        enc.write_all(&elf).unwrap();
        let xz = enc.finish().unwrap();
        let mut image = b"setup code \xfd7zXZ\x00 not a stream ".to_vec();
        image.extend_from_slice(&xz);
        image.extend_from_slice(b"trailer");
        assert_eq!(extract_vmlinux(&image).unwrap(), elf);
    }
}

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
//! warning says so.

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
}

impl Flavour {
    /// The Debian metapackage that names the current image.
    pub fn metapackage(self) -> &'static str {
        match self {
            Flavour::Rt => "linux-image-rt-amd64",
            Flavour::Standard => "linux-image-amd64",
        }
    }

    /// Short name: `rt` or `std`.
    pub fn short(self) -> &'static str {
        match self {
            Flavour::Rt => "rt",
            Flavour::Standard => "std",
        }
    }

    /// `rt` / `std` (also `standard`) back into a flavour.
    pub fn parse(s: &str) -> Option<Flavour> {
        match s {
            "rt" => Some(Flavour::Rt),
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
        let debs = cache.join("debs");
        std::fs::create_dir_all(&debs).map_err(io(&debs))?;
        let _lock = crate::boot::FileLock::exclusive(&cache.join("fetch.lock"))?;
        let meta = match download(&debs, flavour.metapackage()) {
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
        let deb = download(&debs, &package)?;
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

    /// A module kept from the package ([`KEPT_MODULES`], by file name without `.ko`: `msr`): its path on
    /// this machine and its path under `/lib/modules/<release>/` in a guest.
    pub fn module(&self, name: &str) -> Option<(PathBuf, String)> {
        let rel = KEPT_MODULES
            .iter()
            .find(|m| m.rsplit('/').next() == Some(&format!("{name}.ko")))?;
        Some((self.module_at(rel), format!("kernel/{rel}")))
    }

    /// Whether everything the lab keeps of the package is in the cache (a kernel cached before a module
    /// was kept is unpacked again).
    fn complete(&self) -> bool {
        self.vmlinux.is_file()
            && self.config.is_file()
            && KEPT_MODULES.iter().all(|m| self.module_at(m).is_file())
    }

    fn module_at(&self, rel: &str) -> PathBuf {
        let file = rel.rsplit('/').next().unwrap_or(rel);
        self.vmlinux.with_file_name("modules").join(file)
    }

    /// The kernel release (`uname -r`), from the package name.
    pub fn release(&self) -> &str {
        self.package
            .strip_prefix("linux-image-")
            .unwrap_or(&self.package)
    }
}

/// `apt-get download PACKAGE` into `dir` (after `apt-get update` when the index does not know it: a fresh
/// machine has no package lists); the .deb downloaded.
fn download(dir: &Path, package: &str) -> Result<PathBuf, LabError> {
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
        run_program("apt-get", &["update", "-qq"])?;
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
    for m in KEPT_MODULES {
        let from = release.join("kernel").join(m);
        let file = m.rsplit('/').next().unwrap_or(m);
        std::fs::copy(&from, s.join("modules").join(file)).map_err(io(&from))?;
    }
    let _ = std::fs::remove_dir_all(dir);
    let staged = staged.keep();
    std::fs::rename(&staged, dir).map_err(io(dir))?;
    Ok(())
}

/// Modules kept from the image package (paths under `lib/modules/<release>/kernel/`; the other 400 MB are
/// not): the msr driver that SMI counting reads through.
pub const KEPT_MODULES: &[&str] = &["arch/x86/kernel/msr.ko"];

/// The ELF vmlinux inside an x86 bzImage whose payload is xz-compressed (Debian's CONFIG_KERNEL_XZ), as the
/// kernel's scripts/extract-vmlinux finds it: the first xz stream that decompresses to an ELF image.
pub fn extract_vmlinux(bzimage: &[u8]) -> std::io::Result<Vec<u8>> {
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    let mut from = 0;
    while let Some(i) = find(&bzimage[from..], XZ_MAGIC) {
        let at = from + i;
        let mut out = Vec::new();
        let mut dec = liblzma::read::XzDecoder::new(&bzimage[at..]);
        // The xz stream is followed by the image's trailer: decoding stops at the stream's end.
        if dec.read_to_end(&mut out).is_ok() && out.starts_with(b"\x7fELF") {
            return Ok(out);
        }
        from = at + 1;
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "no xz-compressed ELF kernel inside (not a CONFIG_KERNEL_XZ bzImage)",
    ))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The newest kernel of `flavour` already in the cache.
fn cached(cache: &Path, flavour: Flavour) -> Option<Kernel> {
    let rt = flavour == Flavour::Rt;
    let mut found: Vec<Kernel> = std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (package, version) = name.split_once('_')?;
            let is_rt = package.ends_with("-rt-amd64");
            (package.starts_with("linux-image-") && is_rt == rt).then(|| Kernel {
                flavour,
                package: package.to_string(),
                version: version.to_string(),
                vmlinux: e.path().join("vmlinux"),
                config: e.path().join("config"),
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
        for f in [Flavour::Rt, Flavour::Standard] {
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

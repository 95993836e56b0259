//! The host root: the one place that turns a kernel path such as `/sys/devices/system/cpu/online` into a
//! file path. Tests and `--root DIR` point it at a fixture tree.
//!
//! A root can also record every read (`recording()`), so `--capture DIR` can write exactly the files an audit
//! looked at (and the directory listings it walked) into a tree that `--root DIR` replays with the same findings.
//! Recording never changes what a read returns.
//!
//! A captured tree is someone else's files replayed on the analyst's machine, so a non-live root confines
//! every read to the tree: each path is resolved component by component as if the tree were `/` (an
//! absolute symlink restarts at the tree's top, `..` stops there, more than 40 links is a loop), only
//! regular files are read (a FIFO, a device or a socket in the tree is refused, and files are opened
//! non-blocking so nothing can hang), and each read is capped at [`MAX_FILE_BYTES`]. A refused file reads
//! as missing and is remembered with its reason ([`HostRoot::refused`]) so the verbs can name it. The live
//! root reads the running system's own /proc, /sys and /dev as they are (a device such as
//! /dev/cpu_dma_latency included), with the same cap.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Largest file a root reads (procfs and sysfs files are far smaller; /proc/interrupts of a 256-CPU host is
/// about 1 MiB). A larger file is refused rather than read in part.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Symlinks followed while resolving one path before it counts as a loop (the kernel's limit too).
const MAX_LINKS: u32 = 40;

/// Marker file a capture puts into every empty directory so that git (which drops empty directories) keeps the
/// tree whole; [`HostRoot::list_dir`] never reports it.
pub const KEEP_MARKER: &str = ".rtgauge-keep";

/// Where host files are read from.
#[derive(Debug, Clone)]
pub struct HostRoot {
    base: PathBuf,
    log: Option<Arc<Mutex<ReadLog>>>,
    /// Paths of a captured tree that broke the rules (with why), for the verbs to name.
    refused: Arc<Mutex<BTreeMap<String, String>>>,
}

impl PartialEq for HostRoot {
    fn eq(&self, other: &Self) -> bool {
        self.base == other.base
    }
}
impl Eq for HostRoot {}

/// What a recording root saw: file contents (raw bytes) and directory listings, by kernel path.
#[derive(Debug, Default, Clone)]
pub struct ReadLog {
    /// Every file read, by kernel path, as raw bytes.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Every directory listed, by kernel path: the names of its entries.
    pub dirs: BTreeMap<String, Vec<String>>,
}

/// A host file could not be read or understood. Always names the path.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The file could not be read. The cause is the `source`, not part of the message: a chained report
    /// (the binary's) prints "cannot read PATH: CAUSE"; [`rtgauge_model::error::one_line`] gives that line.
    #[error("cannot read {path}")]
    Read {
        /// The kernel path (as seen by the platform, not the root's directory).
        path: String,
        /// Why the read failed.
        #[source]
        cause: std::io::Error,
    },
    /// The file was read but its content is not what the kernel writes there. (`reason` is the parser's
    /// message as text: the binary matches this variant and prints it.)
    #[error("cannot parse {path}: {reason}")]
    Parse {
        /// The kernel path.
        path: String,
        /// What was wrong, in one line.
        reason: String,
    },
}

impl Default for HostRoot {
    fn default() -> Self {
        HostRoot::live()
    }
}

impl HostRoot {
    /// The running system (`/`).
    pub fn live() -> HostRoot {
        HostRoot {
            base: PathBuf::from("/"),
            log: None,
            refused: Arc::default(),
        }
    }
    /// A captured tree: `dir/proc/...`, `dir/sys/...`.
    pub fn at(dir: impl Into<PathBuf>) -> HostRoot {
        HostRoot {
            base: dir.into(),
            log: None,
            refused: Arc::default(),
        }
    }
    /// The same root, recording every successful read from now on (clones share the log).
    pub fn recording(mut self) -> HostRoot {
        self.log = Some(Arc::new(Mutex::new(ReadLog::default())));
        self
    }
    /// A copy of what was recorded so far (empty when not recording).
    pub fn read_log(&self) -> ReadLog {
        self.log
            .as_ref()
            .and_then(|l| l.lock().ok().map(|g| g.clone()))
            .unwrap_or_default()
    }
    /// Record `bytes` under `kernel_path` as if read there: used for facts that do not come from a file
    /// (CPUID) or for a second sample of a file, so that a captured tree replays them.
    pub fn record(&self, kernel_path: &str, bytes: &[u8]) {
        if let Some(Ok(mut g)) = self.log.as_ref().map(|l| l.lock()) {
            g.files.insert(kernel_path.to_string(), bytes.to_vec());
        }
    }
    /// Read raw bytes (recorded). In a captured tree only a regular file inside the tree is read.
    pub fn read_bytes(&self, kernel_path: &str) -> Result<Vec<u8>, HostError> {
        let bytes = self
            .open_checked(kernel_path)
            .and_then(|(f, _)| read_capped(f))
            .map_err(|source| self.read_error(kernel_path, source))?;
        self.record(kernel_path, &bytes);
        Ok(bytes)
    }
    /// The paths of a captured tree that were refused so far, with the reason (empty for the live root).
    pub fn refused(&self) -> Vec<(String, String)> {
        self.refused
            .lock()
            .map(|g| g.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
    fn read_error(&self, kernel_path: &str, source: std::io::Error) -> HostError {
        if is_refusal(&source) {
            if let Ok(mut g) = self.refused.lock() {
                g.insert(kernel_path.to_string(), source.to_string());
            }
        }
        HostError::Read {
            path: kernel_path.to_string(),
            cause: source,
        }
    }
    /// Resolve `kernel_path` inside the root (see the module comment); the live root resolves as the kernel
    /// does.
    fn resolve(&self, kernel_path: &str) -> std::io::Result<PathBuf> {
        if self.is_live() {
            Ok(self.path(kernel_path))
        } else {
            resolve_in_root(&self.base, kernel_path)
        }
    }
    /// Open a file for reading: in a captured tree, the resolved path without following a last link,
    /// non-blocking, and only if it is a regular file.
    fn open_checked(
        &self,
        kernel_path: &str,
    ) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
        let path = self.resolve(kernel_path)?;
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        if !self.is_live() {
            opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY);
        }
        let f = opts.open(&path)?;
        let m = f.metadata()?;
        if !self.is_live() && !m.is_file() {
            return Err(refusal(format!("not a regular file ({})", kind_of(&m))));
        }
        Ok((f, m))
    }
    /// Whether a file or directory exists there (a successful check is recorded so a capture keeps it).
    pub fn exists(&self, kernel_path: &str) -> bool {
        let Ok(p) = self.resolve(kernel_path) else {
            return false;
        };
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => {
                if let Some(Ok(mut g)) = self.log.as_ref().map(|l| l.lock()) {
                    g.dirs.entry(kernel_path.to_string()).or_default();
                }
                true
            }
            Ok(_) => {
                // Content is not needed, only presence: record an empty file unless it was read already.
                if let Some(Ok(mut g)) = self.log.as_ref().map(|l| l.lock()) {
                    g.files.entry(kernel_path.to_string()).or_default();
                }
                true
            }
            Err(_) => false,
        }
    }
    /// Whether this is the running system (live-only facts such as CPUID or uname apply).
    pub fn is_live(&self) -> bool {
        self.base == Path::new("/")
    }
    /// File path of a kernel path (`/proc/cmdline` → `<root>/proc/cmdline`).
    pub fn path(&self, kernel_path: &str) -> PathBuf {
        self.base.join(kernel_path.trim_start_matches('/'))
    }
    /// Read a whole text file (lossy UTF-8: kernel files may hold arbitrary bytes).
    pub fn read_text(&self, kernel_path: &str) -> Result<String, HostError> {
        self.read_bytes(kernel_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
    /// Read a file, `None` if it does not exist or cannot be read.
    pub fn read_optional(&self, kernel_path: &str) -> Option<String> {
        self.read_text(kernel_path).ok()
    }
    /// Names in a directory, sorted; empty if it does not exist.
    pub fn list_dir(&self, kernel_path: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .resolve(kernel_path)
            .and_then(std::fs::read_dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != KEEP_MARKER)
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        if let Some(Ok(mut g)) = self.log.as_ref().map(|l| l.lock()) {
            if !names.is_empty() {
                g.dirs.insert(kernel_path.to_string(), names.clone());
            }
        }
        names
    }

    /// Write everything recorded into `dir` as a tree that [`HostRoot::at`] replays: files with the bytes that
    /// were read, and every name of every listed directory (as an empty directory when it was not itself read).
    pub fn write_capture(&self, dir: &Path) -> Result<usize, HostError> {
        let log = self.read_log();
        let werr = |p: &Path, cause| HostError::Read {
            path: p.display().to_string(),
            cause,
        };
        let target = |k: &str| dir.join(k.trim_start_matches('/'));
        let mut n = 0;
        for (k, bytes) in &log.files {
            let p = target(k);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| werr(parent, e))?;
            }
            std::fs::write(&p, bytes).map_err(|e| werr(&p, e))?;
            n += 1;
        }
        for (k, names) in &log.dirs {
            let d = target(k);
            std::fs::create_dir_all(&d).map_err(|e| werr(&d, e))?;
            for name in names {
                let p = d.join(name);
                if !p.exists() {
                    std::fs::create_dir_all(&p).map_err(|e| werr(&p, e))?;
                }
            }
        }
        mark_empty_dirs(dir).map_err(|e| werr(dir, e))?;
        Ok(n)
    }
}

/// An error that means "this file breaks the rules of a captured tree" (as opposed to "it is not there").
fn refusal(reason: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, reason)
}

fn is_refusal(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidData
}

fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Read at most [`MAX_FILE_BYTES`]; a longer file is refused, not cut.
fn read_capped(f: std::fs::File) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(refusal(format!("larger than {} MiB", MAX_FILE_BYTES >> 20)));
    }
    Ok(bytes)
}

/// The file path of `kernel_path` inside `base`, resolved as if `base` were `/`: symlinks are followed by
/// reading them (never by the kernel), an absolute target restarts at `base`, `..` stops at `base`, and
/// more than `MAX_LINKS` links is a loop (ELOOP). The result holds no symlink when this returns; the last
/// component is opened with O_NOFOLLOW by the caller. (openat2's RESOLVE_IN_ROOT does the same in the
/// kernel but needs Linux 5.6, later than the enterprise kernels this tool must run on, and is blocked by
/// older container seccomp profiles.)
pub fn resolve_in_root(base: &Path, kernel_path: &str) -> std::io::Result<PathBuf> {
    fn push_components(q: &mut VecDeque<OsString>, p: &Path) {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => q.push_front(n.to_os_string()),
                Component::ParentDir => q.push_front(OsString::from("..")),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    }
    let mut pending = VecDeque::new();
    push_components(&mut pending, Path::new(kernel_path));
    let mut resolved: Vec<OsString> = Vec::new();
    let mut links = 0;
    // A link that pointed out of the tree (absolute, or `..` past the top), for naming it when its
    // in-tree counterpart is missing.
    let mut outward: Option<PathBuf> = None;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            if resolved.pop().is_none() && links > 0 {
                outward.get_or_insert_with(|| PathBuf::from(".."));
            }
            continue;
        }
        let mut candidate = base.to_path_buf();
        candidate.extend(&resolved);
        candidate.push(&c);
        let meta = match std::fs::symlink_metadata(&candidate) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(match outward {
                    Some(t) => refusal(format!(
                        "a symlink to {} points out of the tree, and the tree has nothing there",
                        t.display()
                    )),
                    None => e,
                })
            }
            Err(e) => return Err(e),
        };
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(refusal(format!("more than {MAX_LINKS} symlinks (a loop)")));
            }
            let target = std::fs::read_link(&candidate)?;
            if target.is_absolute() {
                resolved.clear();
                outward = Some(target.clone());
            }
            push_components(&mut pending, &target);
        } else {
            resolved.push(c);
        }
    }
    let mut out = base.to_path_buf();
    out.extend(&resolved);
    Ok(out)
}

/// Put [`KEEP_MARKER`] into every empty directory under `dir` (not following links).
pub fn mark_empty_dirs(dir: &Path) -> std::io::Result<()> {
    let mut empty = true;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        empty = false;
        if e.file_type()?.is_dir() {
            mark_empty_dirs(&e.path())?;
        }
    }
    if empty {
        std::fs::write(dir.join(KEEP_MARKER), b"")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_relocated() {
        let r = HostRoot::at("/tmp/fx");
        assert_eq!(
            r.path("/proc/cmdline"),
            PathBuf::from("/tmp/fx/proc/cmdline")
        );
        assert!(!r.is_live());
        assert!(HostRoot::live().is_live());
    }

    #[test]
    fn capture_replays_reads_and_listings() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("proc/irq/5")).unwrap();
        std::fs::create_dir_all(src.path().join("proc/irq/7")).unwrap();
        std::fs::write(src.path().join("proc/cmdline"), b"quiet\xff\n").unwrap();
        std::fs::write(src.path().join("proc/unread"), b"x").unwrap();
        let r = HostRoot::at(src.path()).recording();
        let c = r.clone();
        assert_eq!(c.read_text("/proc/cmdline").unwrap(), "quiet\u{fffd}\n");
        assert_eq!(c.list_dir("/proc/irq"), vec!["5", "7"]);
        assert!(c.read_optional("/proc/missing").is_none());
        c.record("/.rtgauge/cpuid", b"KVMKVMKVM");
        let out = tempfile::tempdir().unwrap();
        assert_eq!(r.write_capture(out.path()).unwrap(), 2);
        let replay = HostRoot::at(out.path());
        assert_eq!(replay.read_bytes("/proc/cmdline").unwrap(), b"quiet\xff\n");
        assert_eq!(replay.list_dir("/proc/irq"), vec!["5", "7"]);
        assert!(replay.read_optional("/proc/unread").is_none());
        assert_eq!(replay.read_text("/.rtgauge/cpuid").unwrap(), "KVMKVMKVM");
        // Empty listed directories survive version control through the marker, which listings hide.
        assert!(out.path().join("proc/irq/5").join(KEEP_MARKER).exists());
        assert!(replay.list_dir("/proc/irq/5").is_empty());
    }

    #[test]
    fn a_captured_tree_cannot_be_left_and_only_regular_files_are_read() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"live machine").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::create_dir_all(t.join("sys/devices/system/cpu/cpu0/topology")).unwrap();
        std::fs::create_dir_all(t.join("sys/devices/system/node/node0")).unwrap();
        std::fs::create_dir_all(t.join("proc")).unwrap();
        std::fs::write(
            t.join("sys/devices/system/cpu/cpu0/topology/core_id"),
            b"7\n",
        )
        .unwrap();
        // A relative link inside the tree, as sysfs has them, keeps working.
        symlink(
            "../../cpu/cpu0",
            t.join("sys/devices/system/node/node0/cpu0"),
        )
        .unwrap();
        // An absolute link is read as if the tree were /: this one leads back into the tree.
        symlink("/sys/devices/system/cpu", t.join("cpus")).unwrap();
        // Links out of the tree, absolute and relative, and a loop.
        symlink(&secret, t.join("proc/cmdline")).unwrap();
        symlink("../../../../../../../../../../../../..", t.join("proc/up")).unwrap();
        symlink("b", t.join("proc/a")).unwrap();
        symlink("a", t.join("proc/b")).unwrap();
        // Not regular files: a FIFO (opening it blocking would hang) and an oversized file.
        let fifo =
            std::ffi::CString::new(t.join("proc/stat").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let big = std::fs::File::create(t.join("proc/kcore")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();

        let r = HostRoot::at(t);
        let core = "/sys/devices/system/node/node0/cpu0/topology/core_id";
        assert_eq!(r.read_text(core).unwrap(), "7\n");
        assert_eq!(r.read_text("/cpus/cpu0/topology/core_id").unwrap(), "7\n");
        assert_eq!(r.list_dir("/cpus"), vec!["cpu0"]);
        for (path, why) in [
            ("/proc/cmdline", "points out of the tree"),
            ("/proc/a", "loop"),
            ("/proc/stat", "not a regular file (a FIFO)"),
            ("/proc/kcore", "larger than 16 MiB"),
        ] {
            let e = rtgauge_model::error::one_line(&r.read_text(path).unwrap_err());
            assert!(e.contains(path) && e.contains(why), "{path}: {e}");
        }
        // `..` stops at the top of the tree: this lists the tree, not the machine's /.
        assert!(r.list_dir("/proc/up").contains(&"cpus".to_string()));
        assert!(!r.exists("/proc/a"));
        let refused: Vec<String> = r.refused().into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            refused,
            ["/proc/a", "/proc/cmdline", "/proc/kcore", "/proc/stat"]
        );
    }

    #[test]
    fn missing_file_names_the_kernel_path() {
        let dir = tempfile::tempdir().unwrap();
        let r = HostRoot::at(dir.path());
        let e = r.read_text("/proc/nothing").unwrap_err();
        assert!(e.to_string().contains("/proc/nothing"), "{e}");
    }
}

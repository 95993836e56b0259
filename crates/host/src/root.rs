//! The host root: the one place that turns a kernel path such as `/sys/devices/system/cpu/online` into a
//! file path. Tests and `--root DIR` point it at a fixture tree.
//!
//! A root can also record every read (`recording()`), so `--capture DIR` can write exactly the files an audit
//! looked at (and the directory listings it walked) into a tree that `--root DIR` replays with the same findings.
//! Recording never changes what a read returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Marker file a capture puts into every empty directory so that git (which drops empty directories) keeps the
/// tree whole; [`HostRoot::list_dir`] never reports it.
pub const KEEP_MARKER: &str = ".rtgauge-keep";

/// Where host files are read from.
#[derive(Debug, Clone)]
pub struct HostRoot {
    base: PathBuf,
    log: Option<Arc<Mutex<ReadLog>>>,
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
    pub files: BTreeMap<String, Vec<u8>>,
    pub dirs: BTreeMap<String, Vec<String>>,
}

/// A host file could not be read or understood. Always names the path.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {reason}")]
    Parse { path: String, reason: String },
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
        }
    }
    /// A captured tree: `dir/proc/...`, `dir/sys/...`.
    pub fn at(dir: impl Into<PathBuf>) -> HostRoot {
        HostRoot {
            base: dir.into(),
            log: None,
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
    /// Read raw bytes (recorded).
    pub fn read_bytes(&self, kernel_path: &str) -> Result<Vec<u8>, HostError> {
        let bytes = std::fs::read(self.path(kernel_path)).map_err(|source| HostError::Read {
            path: kernel_path.to_string(),
            source,
        })?;
        self.record(kernel_path, &bytes);
        Ok(bytes)
    }
    /// Whether a file or directory exists there (a successful check is recorded so a capture keeps it).
    pub fn exists(&self, kernel_path: &str) -> bool {
        let p = self.path(kernel_path);
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
        let mut names: Vec<String> = std::fs::read_dir(self.path(kernel_path))
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
        let werr = |p: &Path, source| HostError::Read {
            path: p.display().to_string(),
            source,
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
    fn missing_file_names_the_kernel_path() {
        let dir = tempfile::tempdir().unwrap();
        let r = HostRoot::at(dir.path());
        let e = r.read_text("/proc/nothing").unwrap_err();
        assert!(e.to_string().contains("/proc/nothing"), "{e}");
    }
}

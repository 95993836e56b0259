//! The host root: the one place that turns a kernel path such as `/sys/devices/system/cpu/online` into a
//! file path. Tests and `--root DIR` point it at a fixture tree.

use std::path::{Path, PathBuf};

/// Where host files are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoot {
    base: PathBuf,
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
        }
    }
    /// A captured tree: `dir/proc/...`, `dir/sys/...`.
    pub fn at(dir: impl Into<PathBuf>) -> HostRoot {
        HostRoot { base: dir.into() }
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
        std::fs::read(self.path(kernel_path))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(|source| HostError::Read {
                path: kernel_path.to_string(),
                source,
            })
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
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
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
    fn missing_file_names_the_kernel_path() {
        let dir = tempfile::tempdir().unwrap();
        let r = HostRoot::at(dir.path());
        let e = r.read_text("/proc/nothing").unwrap_err();
        assert!(e.to_string().contains("/proc/nothing"), "{e}");
    }
}

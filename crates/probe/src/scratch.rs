//! The scratch directory of a load: `rtgauge-load-PID` under a scratch root (the temporary directory), one
//! per rtgauge process, holding the io generator's files ([`crate::load`]) and the external command's
//! process group id in `cmd.pgid` ([`crate::load_cmd`]).
//!
//! This module owns the directory's name and the cleanup of those left behind: a run killed before it
//! could remove its directory (kill -9, a reboot) leaves it, and the next start of either kind of load
//! kills the process group it records, then removes it. A directory whose process is still alive is never
//! touched, whoever owns it.

use std::path::{Path, PathBuf};

/// The file, in a scratch directory, holding the external command's process group id.
pub(crate) const PGID_FILE: &str = "cmd.pgid";

/// This process's scratch directory under `root` (not created here).
pub(crate) fn own_dir(root: &Path) -> PathBuf {
    root.join(format!("rtgauge-load-{}", std::process::id()))
}

/// Remove the scratch directories under `root` of runs that are gone (`rtgauge-load-PID` whose PID is not
/// alive), killing first the external command group each records. Returns how many were removed.
pub fn clean_leftovers(root: &Path) -> usize {
    let dirs = leftover_dirs(root);
    // A killed run's external command group goes before its directory (which names the group).
    for dir in &dirs {
        kill_recorded_group(dir);
    }
    dirs.into_iter()
        .filter(|dir| std::fs::remove_dir_all(dir).is_ok())
        .count()
}

/// Kill the process group a gone run's directory records in [`PGID_FILE`], if it records one.
fn kill_recorded_group(dir: &Path) {
    let Some(pgid) = std::fs::read_to_string(dir.join(PGID_FILE))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .filter(|g| *g > 1)
    else {
        return;
    };
    // SAFETY: kill(2) takes plain integers; the group is one this tool created (its id was written when it
    // was made) and `g > 1` keeps -1 (every process) and 0 (our own group) out.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

/// The scratch directories (`rtgauge-load-PID`) under `root` of runs whose process is gone. A process that
/// exists but belongs to someone else (EPERM) counts as alive.
fn leftover_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("rtgauge-load-")
                .and_then(|p| p.parse::<i32>().ok())
                .filter(|&p| p > 0)
            else {
                return false;
            };
            // SAFETY: kill with signal 0 only asks whether the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            !alive
        })
        .map(|e| e.path())
        .collect()
}

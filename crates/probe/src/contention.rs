//! Who else measures the same CPUs: an advisory claim per measured CPU, so that two runs that disturb each
//! other both say so (a timer probe and a busy loop on one CPU measure each other, not the platform).
//!
//! Each run holds an exclusive `flock` on a file named after its pid in a directory per CPU
//! (`/run/rtgauge/cpu/N/`, or under `$XDG_RUNTIME_DIR` / the temporary directory when /run is not
//! writable). At its start a run lists the directory: a file whose lock is held belongs to a live run (a
//! contender); a file whose lock can be taken is a leftover of a killed run and is removed. A newcomer also
//! leaves a note for each live run it finds (`PID.with.NEWPID`), so the run that started first learns of
//! the newcomer even if the newcomer ends first. [`CpuClaim::contenders`] reads the notes and the live
//! locks again at the end. The files go with the claim (Drop); the kernel drops the locks of a killed run.
//!
//! Advisory and per user directory: runs of different non-root users do not see each other. Nothing here
//! runs on a measured CPU or inside a measuring loop.

use rtgauge_model::rt::Contender;
use rtgauge_model::CpuSet;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

/// The claim of one run on its measured CPUs.
#[derive(Debug)]
pub struct CpuClaim {
    base: PathBuf,
    pid: u32,
    /// Held lock files, one per claimed CPU.
    held: Vec<(u32, File)>,
    /// Contenders seen at the start.
    seen: BTreeMap<u32, Contender>,
}

/// The directory of claims: `$RTGAUGE_RUN_DIR` when set (tests, or separate claim spaces), /run when it
/// is ours to write (root), else the user's runtime directory.
fn base_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RTGAUGE_RUN_DIR") {
        return PathBuf::from(d).join("cpu");
    }
    let run = Path::new("/run/rtgauge/cpu");
    if std::fs::create_dir_all(run).is_ok() {
        return run.to_path_buf();
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join("rtgauge/cpu")
}

/// Try to take `f`'s lock without waiting: `true` when taken (no live owner).
fn lock(f: &File, exclusive: bool) -> bool {
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock on a descriptor this File owns.
    unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) == 0 }
}

/// The command line a contender wrote into its file (first line: pid, second: command).
fn read_command(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.lines().nth(1).map(str::to_string))
        .unwrap_or_default()
}

impl CpuClaim {
    /// Claim `cpus` for this process. Never fails: where the directory cannot be written the claim is
    /// empty and detects nothing.
    pub fn claim(cpus: &CpuSet) -> CpuClaim {
        Self::claim_in(&base_dir(), cpus)
    }

    /// [`CpuClaim::claim`] under `base` (tests).
    pub fn claim_in(base: &Path, cpus: &CpuSet) -> CpuClaim {
        let pid = std::process::id();
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        let mut claim = CpuClaim {
            base: base.to_path_buf(),
            pid,
            held: Vec::new(),
            seen: BTreeMap::new(),
        };
        for cpu in cpus.iter() {
            let dir = base.join(cpu.to_string());
            if std::fs::create_dir_all(&dir).is_err() {
                continue;
            }
            // Created under a dot name, locked and filled, then renamed: no other run can see our claim
            // before it is locked (it would take it for a killed run's leftover and remove it).
            let mine = dir.join(pid.to_string());
            let staging = dir.join(format!(".{pid}"));
            let Ok(mut f) = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&staging)
            else {
                continue;
            };
            if !lock(&f, true) || std::fs::rename(&staging, &mine).is_err() {
                let _ = std::fs::remove_file(&staging);
                continue;
            }
            let _ = writeln!(f, "{pid}\n{command}");
            for other in claim.live_others(cpu) {
                // Tell the other run about us: it may end after we do and never list us itself.
                let _ = std::fs::write(
                    dir.join(format!("{}.with.{pid}", other.pid)),
                    format!("{pid}\n{command}\n"),
                );
                claim.note(cpu, other);
            }
            claim.held.push((cpu, f));
        }
        claim
    }

    /// Live runs holding `cpu` besides this one; leftovers of dead runs are removed on the way.
    fn live_others(&self, cpu: u32) -> Vec<Contender> {
        let dir = self.base.join(cpu.to_string());
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return out;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(pid) = name.parse::<u32>() else {
                continue;
            };
            if pid == self.pid {
                continue;
            }
            let path = e.path();
            let Ok(f) = File::open(&path) else {
                continue;
            };
            if lock(&f, false) {
                // Nobody holds it: a run that was killed. Remove its file and the notes left for it.
                let _ = std::fs::remove_file(&path);
                remove_notes(&dir, pid);
            } else {
                out.push(Contender {
                    pid,
                    command: read_command(&path),
                    cpus: CpuSet::new([cpu]),
                });
            }
        }
        out
    }

    fn note(&mut self, cpu: u32, c: Contender) {
        self.seen
            .entry(c.pid)
            .and_modify(|x| x.cpus = CpuSet::new(x.cpus.iter().chain([cpu])))
            .or_insert(c);
    }

    /// Every other run that measured one of our CPUs while we did: seen at the start, announced by a
    /// newcomer's note, or holding a claim now.
    pub fn contenders(&mut self) -> Vec<Contender> {
        let cpus: Vec<u32> = self.held.iter().map(|(c, _)| *c).collect();
        for cpu in cpus {
            let dir = self.base.join(cpu.to_string());
            for other in self.live_others(cpu) {
                self.note(cpu, other);
            }
            let prefix = format!("{}.with.", self.pid);
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let Some(pid) = name
                        .strip_prefix(&prefix)
                        .and_then(|p| p.parse::<u32>().ok())
                    else {
                        continue;
                    };
                    // The note carries the newcomer's command line: it may have ended already.
                    let command = read_command(&e.path());
                    self.note(
                        cpu,
                        Contender {
                            pid,
                            command,
                            cpus: CpuSet::new([cpu]),
                        },
                    );
                }
            }
        }
        self.seen.values().cloned().collect()
    }
}

fn remove_notes(dir: &Path, pid: u32) {
    let prefix = format!("{pid}.with.");
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

impl Drop for CpuClaim {
    fn drop(&mut self) {
        for (cpu, _) in &self.held {
            let dir = self.base.join(cpu.to_string());
            let _ = std::fs::remove_file(dir.join(self.pid.to_string()));
            remove_notes(&dir, self.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dead_runs_file_is_a_leftover_and_a_live_lock_is_a_contender() {
        let dir = tempfile::tempdir().unwrap();
        let cpus = CpuSet::new([3]);
        // A leftover of a killed run: a file nobody locks.
        std::fs::create_dir_all(dir.path().join("3")).unwrap();
        std::fs::write(dir.path().join("3/999999"), "999999\nrtgauge cyclic\n").unwrap();
        std::fs::write(dir.path().join("3/999999.with.4"), "").unwrap();
        let mut alone = CpuClaim::claim_in(dir.path(), &cpus);
        assert!(alone.contenders().is_empty());
        assert!(!dir.path().join("3/999999").exists());
        assert!(!dir.path().join("3/999999.with.4").exists());
        drop(alone);
        assert!(!dir
            .path()
            .join(format!("3/{}", std::process::id()))
            .exists());

        // A live claim by another process: flock is per open file, so a second File in this process
        // stands in for it when it locks a file named after another pid.
        let other = dir.path().join("3/4242");
        let mut f = File::create(&other).unwrap();
        writeln!(f, "4242\nrtgauge oslat -c 3").unwrap();
        assert!(lock(&f, true));
        let mut c = CpuClaim::claim_in(dir.path(), &cpus);
        let seen = c.contenders();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            (seen[0].pid, seen[0].command.as_str()),
            (4242, "rtgauge oslat -c 3")
        );
        // The newcomer left a note for the run it found.
        assert!(dir
            .path()
            .join(format!("3/4242.with.{}", std::process::id()))
            .exists());
    }
}

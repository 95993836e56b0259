//! An external load command (`--load-cmd 'stress-ng --cpu 4'`), started and stopped with the probe, its CPU
//! use recorded — and never outliving rtgauge.
//!
//! The command runs under `/bin/sh -c` in a process group of its own, so stopping it reaches every process
//! it started (SIGTERM to the group, SIGKILL after a grace period). If rtgauge dies without stopping it
//! (kill -9), the kernel kills the shell by PR_SET_PDEATHSIG, set in the child before exec; the group id is
//! also written to `rtgauge-load-PID/cmd.pgid` in the scratch directory, so the next start kills what is
//! left of the group (grandchildren that did not ask for a death signal) and removes the directory.
//!
//! PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process: [`LoadCommand::start`] must
//! be called from a thread that lives as long as the load (the verbs call it from the main thread).

use rtgauge_model::load::CommandLoadResult;
use rtgauge_model::{CpuSet, Nanos};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long the command may take to end after SIGTERM before its group gets SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// A running external load command.
#[derive(Debug)]
pub struct LoadCommand {
    command: String,
    pid: i32,
    started: Instant,
    marker: PathBuf,
    done: bool,
}

impl LoadCommand {
    /// Start `command` under `/bin/sh -c`, optionally restricted to `cpus`; stdout goes to /dev/null (the
    /// probe's output stays clean), stderr is inherited (its errors stay visible).
    pub fn start(
        command: &str,
        cpus: Option<&CpuSet>,
        scratch: &Path,
    ) -> std::io::Result<LoadCommand> {
        crate::scratch::clean_leftovers(scratch);
        let dir = crate::scratch::own_dir(scratch);
        std::fs::create_dir_all(&dir)?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let mut set: Option<libc::cpu_set_t> = None;
        if let Some(c) = cpus {
            // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it.
            let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for cpu in c.iter() {
                // SAFETY: CPU_SET writes one bit of the set we own (it ignores CPUs beyond its size).
                unsafe { libc::CPU_SET(cpu as usize, &mut s) };
            }
            set = Some(s);
        }
        let mut cmd = rtgauge_programs::command("/bin/sh");
        cmd.arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0);
        // SAFETY: between fork and exec the closure calls only async-signal-safe functions (prctl, getppid,
        // sched_setaffinity, _exit) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The parent may have died before prctl: then no signal will ever come.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                if let Some(s) = &set {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), s);
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        // The Child handle is not kept: wait4 below reaps it and gives its rusage, which std does not.
        drop(child);
        let marker = dir.join(crate::scratch::PGID_FILE);
        std::fs::write(&marker, pid.to_string())?;
        Ok(LoadCommand {
            command: command.to_string(),
            pid,
            started: Instant::now(),
            marker,
            done: false,
        })
    }

    /// Reap the command without blocking: Some((status, rusage)) once it has ended.
    fn reap(&self, flags: i32) -> Option<(i32, libc::rusage)> {
        let mut status = 0;
        // SAFETY: a zeroed rusage is valid output storage.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child only.
        let r = unsafe { libc::wait4(self.pid, &mut status, flags, &mut ru) };
        (r == self.pid).then(|| {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            (code, ru)
        })
    }

    /// Stop the command (its whole process group) and report its CPU use.
    pub fn stop(mut self) -> CommandLoadResult {
        let wall = self.started.elapsed();
        // Taken before SIGTERM: a group killed at once never waits for its members, so wait4's rusage
        // would miss their CPU time (stress-ng's workers, for one).
        let group_ns = group_cpu_ns(self.pid);
        let mut exited_early = false;
        let mut ended = self.reap(libc::WNOHANG);
        if ended.is_some() {
            exited_early = true;
        } else {
            // SAFETY: signals the process group the command leads.
            unsafe { libc::kill(-self.pid, libc::SIGTERM) };
            let deadline = Instant::now() + GRACE;
            while ended.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                ended = self.reap(libc::WNOHANG);
            }
        }
        // Whatever is left of the group (the leader, or children that ignored SIGTERM) is killed.
        // SAFETY: as above.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        if ended.is_none() {
            ended = self.reap(0);
        }
        self.done = true;
        let _ = std::fs::remove_file(&self.marker);
        if let Some(dir) = self.marker.parent() {
            let _ = std::fs::remove_dir(dir);
        }
        // SAFETY: a zeroed rusage is a valid value (no CPU time known).
        let (status, ru) = ended.unwrap_or((-1, unsafe { std::mem::zeroed() }));
        let tv = |t: libc::timeval| {
            Nanos::from_secs(t.tv_sec.max(0) as u64).as_ns()
                + Nanos::from_us(t.tv_usec.max(0) as u64).as_ns()
        };
        let cpu_ns = (tv(ru.ru_utime) + tv(ru.ru_stime)).max(group_ns);
        CommandLoadResult {
            command: self.command.clone(),
            cpu_ns,
            cpu_percent: cpu_ns as f64 / wall.as_nanos().max(1) as f64 * 100.0,
            exited_early,
            status,
        }
    }
}

/// CPU time of every live process in group `pgid`, with the children each has waited for (utime, stime,
/// cutime and cstime of /proc/PID/stat), ns. Read directly: these are this tool's own children, and the
/// probe crate does not depend on the host crate's /proc readers.
fn group_cpu_ns(pgid: i32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick_ns = 1_000_000_000 / if hz > 0 { hz as u64 } else { 100 };
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut ticks = 0u64;
    for e in rd.flatten() {
        if !e
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces and parentheses): state, ppid, pgrp, …
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.get(2).and_then(|g| g.parse::<i32>().ok()) != Some(pgid) {
            continue;
        }
        ticks += (11..=14)
            .filter_map(|i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
            .sum::<u64>();
    }
    ticks * tick_ns
}

impl Drop for LoadCommand {
    /// A command that was not stopped (an error path) is killed with its group and reaped.
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: signals the process group the command leads, then reaps our own child.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
            let _ = std::fs::remove_file(&self.marker);
            if let Some(dir) = self.marker.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

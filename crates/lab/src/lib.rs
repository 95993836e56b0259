//! rtgauge's kernel lab: Debian's PREEMPT_RT and standard kernels booted in QEMU with a chosen CPU/NUMA
//! topology and kernel command line, running the freshly built `rtgauge` (and Debian's `rtla`, `chrt`) from
//! an initramfs, and handing back the files the guest's script wrote.
//!
//! - [`kernel`]: a Debian kernel package fetched with `apt-get download`, unpacked with `dpkg-deb`, its
//!   vmlinux decompressed once, all cached outside the checkout ([`cache_dir`]).
//! - [`GuestTopology`]: sockets × cores × threads and NUMA nodes as QEMU's `-smp` and `-numa`.
//! - [`modules`]: the modules a guest asks for and those they need, with a `modules.dep` for its `modprobe`.
//! - [`Guest::boot`]: builds the initramfs (busybox, the programs and the shared libraries `ldd` lists),
//!   boots under KVM where it works and TCG otherwise, bounds the boot by a timeout, boots a stuck guest
//!   again (init never started, or its kernel reported a stall), and returns the serial console, the
//!   guest's files, the clocksource the guest found and the script's exit status.
//!
//! Invariants: a guest never outlives its [`Guest::boot`] call (the QEMU child is killed on timeout, on every
//! error path and by a drop guard; the kernel kills it if the test process dies, `PR_SET_PDEATHSIG`); a
//! killed earlier run's QEMU and work directory are removed by the next boot ([`clean_stale`]); boots are
//! serialised across processes (one lock file), since a TCG guest takes every host CPU it is given.
//! Nothing here judges what the guest measured: that is the tests' job.

pub mod boot;
pub mod initramfs;
pub mod kernel;
pub mod modules;
pub mod topology;

pub use boot::{clean_stale, Accel, Boot, Clocksource, During, Guest, RunningGuest, GUEST_MAC};
pub use kernel::{debian_package, Flavour, Kernel, BACKPORTS};
pub use topology::GuestTopology;

use std::path::PathBuf;

/// What went wrong in the lab. Each message names the program, file or guest concerned.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A host program failed or could not be started.
    #[error("{program}: {message}")]
    Program {
        /// The program (a manifest name).
        program: String,
        /// Its error output, or why it could not start.
        message: String,
    },
    /// A program the guest needs is not on this machine or not in deps/programs.tsv.
    #[error("{0}")]
    GuestProgram(String),
    /// The topology cannot be built.
    #[error("topology: {0}")]
    Topology(String),
    /// The guest did not power off in time; it was killed.
    #[error("{guest}: no power-off within {secs} s (killed); console ends with:\n{tail}")]
    Timeout {
        /// The guest's label.
        guest: String,
        /// The bound.
        secs: u64,
        /// The last lines of its serial console.
        tail: String,
    },
    /// The guest's init did not start within the bound; it was killed.
    #[error("{guest}: init did not start within {secs} s (killed); console ends with:\n{tail}")]
    NoInit {
        /// The guest's label (and its acceleration).
        guest: String,
        /// The bound.
        secs: u64,
        /// The last lines of its serial console.
        tail: String,
    },
    /// The guest's kernel reported a stall (an RCU grace period or a CPU stuck); it was killed.
    #[error("{guest}: its kernel reported a stall, `{line}` (killed); console ends with:\n{tail}")]
    Stalled {
        /// The guest's label.
        guest: String,
        /// The kernel's line.
        line: String,
        /// The last lines of its serial console.
        tail: String,
    },
    /// The guest ended without handing its files back (a panic, a crash of the script's shell).
    #[error("{guest}: ended without handing its files back ({why}); console ends with:\n{tail}")]
    NoResult {
        /// The guest's label.
        guest: String,
        /// What was missing.
        why: String,
        /// The last lines of its serial console.
        tail: String,
    },
}

impl LabError {
    /// Whether the guest got stuck below its script (its init never started, or its kernel reported a
    /// stall): what the lab boots again, up to [`crate::Guest::boots`] boots. A script that runs past the
    /// timeout is the caller's to judge.
    pub fn is_stuck(&self) -> bool {
        matches!(self, LabError::NoInit { .. } | LabError::Stalled { .. })
    }
}

pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> LabError + '_ {
    move |source| LabError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Where downloaded kernel packages, unpacked kernels and stripped binaries are kept, outside the checkout:
/// `$RTGAUGE_LAB_CACHE`, else `/var/cache/rtgauge-lab` as root, else `$XDG_CACHE_HOME/rtgauge-lab`
/// (`~/.cache/rtgauge-lab`).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RTGAUGE_LAB_CACHE") {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/rtgauge-lab");
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("rtgauge-lab")
}

/// The host path of a program the guest runs (copied into its initramfs with its libraries): it must be
/// listed in deps/programs.tsv (which scripts/test installs from) and be on this machine's PATH.
pub fn guest_program(name: &str) -> Result<PathBuf, LabError> {
    let entry = rtgauge_programs::entry(name).ok_or_else(|| {
        LabError::GuestProgram(format!(
            "{name} runs in the lab's guests but is not listed in deps/programs.tsv"
        ))
    })?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = if entry.program.starts_with('/') {
        Some(PathBuf::from(entry.program)).filter(|p| p.is_file())
    } else {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    };
    found.ok_or_else(|| {
        LabError::GuestProgram(format!(
            "{name} (for the lab's guests) not found: install the {} package",
            entry.package
        ))
    })
}

/// Run a host program to completion; its stdout, or an error carrying its stderr.
pub(crate) fn run_program(program: &str, args: &[&str]) -> Result<Vec<u8>, LabError> {
    let out = rtgauge_programs::command(program)
        .args(args)
        .output()
        .map_err(|e| LabError::Program {
            program: program.to_string(),
            message: rtgauge_programs::not_found(program, &e),
        })?;
    if !out.status.success() {
        return Err(LabError::Program {
            program: format!("{program} {}", args.join(" ")),
            message: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(out.stdout)
}

/// Whether process `pid` exists.
pub(crate) fn pid_alive(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

/// An exclusive `flock` held until dropped.
pub(crate) struct FileLock {
    _held: std::fs::File,
}

impl FileLock {
    pub(crate) fn exclusive(path: &std::path::Path) -> Result<FileLock, LabError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io(path))?;
        use std::os::fd::AsRawFd as _;
        // SAFETY: a valid open descriptor.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(io(path)(std::io::Error::last_os_error()));
        }
        Ok(FileLock { _held: f })
    }
}

//! The OS plumbing of the operations: scratch files, descriptors, the SIGUSR1 handler, echoing partner
//! processes, fork/exec and file mappings. Everything here is set up before a sample starts, except the
//! `#[inline(always)]` calls the samples are made of (round_trip, fork_wait).

use super::{os_err, OpError};
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) fn cstr(s: &str) -> Result<CString, OpError> {
    CString::new(s).map_err(|_| OpError::Nul(s.to_string()))
}

pub(super) fn path_cstr(p: &std::path::Path) -> Result<CString, OpError> {
    cstr(&p.to_string_lossy())
}

fn scratch_err(path: &std::path::Path, cause: std::io::Error) -> OpError {
    OpError::Scratch {
        path: path.to_path_buf(),
        cause,
    }
}

/// A scratch file of `size` bytes of data (not sparse, so its pages are in the page cache), removed on drop.
pub(super) struct Scratch {
    pub(super) path: std::path::PathBuf,
}

impl Scratch {
    pub(super) fn new(dir: &std::path::Path, tag: &str, size: u64) -> Result<Scratch, OpError> {
        use std::io::Write as _;
        let path = dir.join(format!("rtgauge-ops-{}-{tag}", std::process::id()));
        let mut f = std::fs::File::create(&path).map_err(|cause| scratch_err(&path, cause))?;
        let block = vec![0x5au8; 1 << 16];
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n])
                .map_err(|cause| scratch_err(&path, cause))?;
            left -= n as u64;
        }
        f.sync_all().map_err(|cause| scratch_err(&path, cause))?;
        Ok(Scratch { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub(super) fn open_fd(path: &CString, flags: libc::c_int) -> Result<libc::c_int, OpError> {
    // SAFETY: valid NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(os_err(&format!("open {}", path.to_string_lossy())))
    } else {
        Ok(fd)
    }
}

pub(super) fn close(fd: libc::c_int) {
    // SAFETY: closing a descriptor this module opened.
    unsafe { libc::close(fd) };
}

pub(super) static CAUGHT: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr1(_: libc::c_int) {
    CAUGHT.fetch_add(1, Ordering::Relaxed);
}

pub(super) fn usr1_action() -> libc::sigaction {
    // SAFETY: sigaction is plain data; zeroed is a valid empty mask and no flags.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
    sa
}

/// Restores SIGUSR1's previous disposition when dropped.
pub(super) struct Usr1Restore(libc::sigaction);

impl Drop for Usr1Restore {
    fn drop(&mut self) {
        // SAFETY: restoring a disposition read from the kernel.
        unsafe { libc::sigaction(libc::SIGUSR1, &self.0, std::ptr::null_mut()) };
    }
}

pub(super) fn install_usr1() -> Result<Usr1Restore, OpError> {
    let sa = usr1_action();
    // SAFETY: zeroed sigaction is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    if unsafe { libc::sigaction(libc::SIGUSR1, &sa, &mut old) } != 0 {
        return Err(os_err("sigaction"));
    }
    // The measuring thread may inherit a mask that blocks SIGUSR1 (see rt::block_signals): unblock it here.
    // SAFETY: the set is initialised before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    Ok(Usr1Restore(old))
}

/// A pair of pipes (or a socket pair) and an echoing child; the child ends when its read sees EOF.
pub(super) struct Echo {
    pid: libc::pid_t,
    /// Parent's write and read ends.
    w: libc::c_int,
    r: libc::c_int,
}

impl Drop for Echo {
    fn drop(&mut self) {
        close(self.w);
        if self.r != self.w {
            close(self.r);
        }
        reap(self.pid);
    }
}

pub(super) fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

pub(super) fn pipe_pair() -> Result<[libc::c_int; 2], OpError> {
    let mut p = [0; 2];
    // SAFETY: valid out-array of two ints.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("pipe"));
    }
    Ok(p)
}

/// Child side of an echo: read one byte, write it back, until EOF. Only async-signal-safe calls.
pub(super) fn echo_child(r: libc::c_int, w: libc::c_int) -> ! {
    let mut b = 0u8;
    loop {
        // SAFETY: one byte into a local.
        let n = unsafe { libc::read(r, (&mut b as *mut u8).cast(), 1) };
        if n <= 0 {
            break;
        }
        // SAFETY: one byte from a local.
        if unsafe { libc::write(w, (&b as *const u8).cast(), 1) } != 1 {
            break;
        }
    }
    // SAFETY: _exit is async-signal-safe and skips the parent's atexit handlers.
    unsafe { libc::_exit(0) }
}

pub(super) fn spawn_pipe_echo() -> Result<Echo, OpError> {
    let to_child = pipe_pair()?;
    let to_parent = pipe_pair()?;
    // SAFETY: the child only runs echo_child (async-signal-safe calls).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_err("fork"));
    }
    if pid == 0 {
        close(to_child[1]);
        close(to_parent[0]);
        echo_child(to_child[0], to_parent[1]);
    }
    close(to_child[0]);
    close(to_parent[1]);
    Ok(Echo {
        pid,
        w: to_child[1],
        r: to_parent[0],
    })
}

pub(super) fn spawn_unix_echo() -> Result<Echo, OpError> {
    let mut sv = [0; 2];
    // SAFETY: valid out-array.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    } != 0
    {
        return Err(os_err("socketpair"));
    }
    // SAFETY: as in spawn_pipe_echo.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_err("fork"));
    }
    if pid == 0 {
        close(sv[0]);
        echo_child(sv[1], sv[1]);
    }
    close(sv[1]);
    Ok(Echo {
        pid,
        w: sv[0],
        r: sv[0],
    })
}

#[inline(always)]
pub(super) fn round_trip(e: &Echo) -> i64 {
    let mut b = 1u8;
    // SAFETY: one byte to/from a local over descriptors owned by `e`.
    unsafe {
        if libc::write(e.w, (&b as *const u8).cast(), 1) != 1 {
            return -1;
        }
        libc::read(e.r, (&mut b as *mut u8).cast(), 1) as i64 - 1
    }
}

/// fork, then in the child `then` (which must not return normally), and wait: 0 when the child exited 0.
#[inline(always)]
pub(super) fn fork_wait(then: &impl Fn()) -> i64 {
    // SAFETY: the child only calls _exit or execve (async-signal-safe).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return -1;
    }
    if pid == 0 {
        then();
        // SAFETY: `then` does not return; should it, the child must still not run the parent's code.
        unsafe { libc::_exit(127) }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        0
    } else {
        -1
    }
}

pub(super) fn exec_child(path: &CString, argv: &[*const libc::c_char; 4]) -> ! {
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: NUL-terminated path and NULL-terminated argv/envp arrays that outlive the call.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
        }
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        libc::_exit(127)
    }
}

pub(super) fn mmap_file(fd: libc::c_int, len: usize, prot: libc::c_int) -> *mut u8 {
    // SAFETY: mapping a file this module created and sized; failure is MAP_FAILED, checked by callers.
    unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) as *mut u8 }
}

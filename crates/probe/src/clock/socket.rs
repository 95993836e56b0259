//! The client end of a daemon's Unix datagram socket (ptp4l's management socket, chronyd's command
//! socket): both answer at the path the client's socket is bound to, so it is bound beside the daemon's
//! (where their own clients, pmc and chronyc, bind theirs) and removed when dropped.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A number for each client socket this process binds (two sources beside one daemon's socket, or one
/// opened again, never share a path).
fn next_client() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A socket bound beside a daemon's and connected to it.
pub struct DaemonSocket {
    socket: UnixDatagram,
    own: PathBuf,
    /// What a request that got no answer in time is said to be ("ptp4l did not answer …").
    silent: String,
}

impl Drop for DaemonSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.own);
    }
}

impl DaemonSocket {
    /// Bind `prefix.PID.N` beside `path` and connect to `path`; an answer not in `timeout` is an error
    /// that says `silent`. `open_to_all`: the socket is made writable by anyone (a daemon that dropped
    /// root must be able to answer).
    pub fn connect(
        path: &str,
        prefix: &str,
        timeout: Duration,
        silent: String,
        open_to_all: bool,
    ) -> std::io::Result<DaemonSocket> {
        let dir = Path::new(path)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let own = dir.join(format!("{prefix}.{}.{}", std::process::id(), next_client()));
        let _ = std::fs::remove_file(&own);
        let bind_error = |own: &Path, e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create the client socket {}: {e}", own.display()),
            )
        };
        let socket = UnixDatagram::bind(&own).map_err(|e| bind_error(&own, e))?;
        let s = DaemonSocket {
            socket,
            own,
            silent,
        };
        if open_to_all {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&s.own, std::fs::Permissions::from_mode(0o666))
                .map_err(|e| bind_error(&s.own, e))?;
        }
        s.socket.connect(path)?;
        s.socket.set_read_timeout(Some(timeout))?;
        Ok(s)
    }

    /// Send `request` and wait for the datagram `accept` takes (others, answers to earlier requests that
    /// timed out, are skipped): its length in `buf`.
    pub fn exchange(
        &mut self,
        request: &[u8],
        buf: &mut [u8],
        accept: impl Fn(&[u8]) -> std::io::Result<bool>,
    ) -> std::io::Result<usize> {
        // Answers to earlier, timed-out requests are stale.
        self.socket.set_nonblocking(true)?;
        while self.socket.recv(buf).is_ok() {}
        self.socket.set_nonblocking(false)?;
        self.socket.send(request)?;
        loop {
            let n = self.socket.recv(buf).map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    std::io::Error::new(e.kind(), self.silent.clone())
                }
                _ => e,
            })?;
            if accept(&buf[..n])? {
                return Ok(n);
            }
        }
    }
}

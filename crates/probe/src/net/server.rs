//! The reference HTTP/1.1 server: one pinned thread per CPU, each with its own SO_REUSEPORT listener (the
//! kernel spreads new connections across them) and an edge-triggered epoll loop. It serves `GET`/`HEAD` of
//! `/2b` (2 bytes), `/128k` (131072 bytes) and `/N` with an optional binary suffix (`/4096`, `/64k`,
//! `/1m`, at most 1 GiB), keep-alive or close as the request asks (HTTP/1.1 keeps alive unless
//! `Connection: close`), pipelined requests in order. Bodies come from one shared buffer of `x` bytes
//! with a gathered write (head + body) per send; nothing is allocated per request.
//!
//! When a response to `Connection: close` is sent, the server closes first and holds the TIME_WAIT
//! state, which is what a client measuring CPS wants (see docs/net.md).

use super::sys::{self, Epoll, EV_ERR, EV_ET, EV_IN, EV_OUT, EV_RDHUP};
use crate::stop::StopFlag;
use crate::time::{now_ns, ClockId};
use crate::ProbeError;
use rtgauge_model::Nanos;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

/// What to serve.
#[derive(Debug, Clone)]
pub struct ServerPlan {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// One loop per CPU.
    pub cpus: Vec<u32>,
    /// Stop after this long (`None`: until the stop flag).
    pub duration: Option<Nanos>,
}

/// What one server served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Requests answered.
    pub requests: u64,
    /// Response bytes written.
    pub bytes_sent: u64,
    /// Connections that ended in an error (reset by the client, bad request, …).
    pub errors: u64,
}

/// A running server: its address (the port resolved when 0 was asked for) and its loops.
pub struct ServerHandle {
    /// The address the server listens on.
    pub addr: SocketAddr,
    stop: StopFlag,
    threads: Vec<std::thread::JoinHandle<ServerStats>>,
}

impl ServerHandle {
    /// Stop the loops and return the merged counters.
    pub fn stop(self) -> ServerStats {
        self.stop.set();
        self.join()
    }

    /// Wait for the loops to end (duration or stop flag).
    pub fn join(self) -> ServerStats {
        let mut s = ServerStats::default();
        for t in self.threads {
            if let Ok(p) = t.join() {
                s.accepted += p.accepted;
                s.requests += p.requests;
                s.bytes_sent += p.bytes_sent;
                s.errors += p.errors;
            }
        }
        s
    }
}

const IN_BUF: usize = 8192;
const BODY_BUF: usize = 256 * 1024;
/// Largest body served.
pub const MAX_BODY: u64 = 1 << 30;
const LISTENER: u64 = u64::MAX;

struct Conn {
    fd: i32,
    gen: u32,
    inbuf: Box<[u8]>,
    in_len: usize,
    head: [u8; 256],
    head_len: usize,
    head_off: usize,
    body_len: u64,
    body_off: u64,
    busy: bool,
    close_after: bool,
}

/// Body size for a path, `None` when not served.
pub fn body_size(path: &str) -> Option<u64> {
    let p = path.split('?').next().unwrap_or(path);
    let t = p.strip_prefix('/')?;
    if t.is_empty() {
        return Some(2);
    }
    let (num, mult) = match t.as_bytes()[t.len() - 1] {
        b'k' | b'K' => (&t[..t.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&t[..t.len() - 1], 1 << 20),
        b'g' | b'G' => (&t[..t.len() - 1], 1 << 30),
        b'b' | b'B' => (&t[..t.len() - 1], 1),
        _ => (t, 1),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) || num.len() > 12 {
        return None;
    }
    let n = num.parse::<u64>().ok()?.checked_mul(mult)?;
    (n <= MAX_BODY).then_some(n)
}

enum ConnStep {
    Open,
    Closed,
}

struct Loop {
    ep: Epoll,
    listener: i32,
    conns: Vec<Conn>,
    free: Vec<usize>,
    body: Arc<Vec<u8>>,
    stats: ServerStats,
}

impl Loop {
    fn accept_all(&mut self) {
        loop {
            let fd = match sys::accept(self.listener) {
                Ok(fd) => fd,
                Err(libc::EINTR | libc::ECONNABORTED) => continue,
                Err(_) => return,
            };
            self.stats.accepted += 1;
            let _ = sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
            let i = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(Conn {
                        fd: -1,
                        gen: 0,
                        inbuf: vec![0u8; IN_BUF].into_boxed_slice(),
                        in_len: 0,
                        head: [0; 256],
                        head_len: 0,
                        head_off: 0,
                        body_len: 0,
                        body_off: 0,
                        busy: false,
                        close_after: false,
                    });
                    self.conns.len() - 1
                }
            };
            let c = &mut self.conns[i];
            c.fd = fd;
            c.gen = c.gen.wrapping_add(1);
            c.in_len = 0;
            c.busy = false;
            c.close_after = false;
            let data = ((c.gen as u64) << 32) | i as u64;
            if self
                .ep
                .add(fd, EV_IN | EV_OUT | EV_RDHUP | EV_ET, data)
                .is_err()
            {
                self.close(i, true);
                continue;
            }
            // Data may already be there (the request often arrives with the handshake's last ACK).
            self.drive(i);
        }
    }

    fn close(&mut self, i: usize, error: bool) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            sys::close(c.fd);
            c.fd = -1;
            self.free.push(i);
            if error {
                self.stats.errors += 1;
            }
        }
    }

    /// Write, parse, read, in that order, until the socket would block.
    fn drive(&mut self, i: usize) {
        loop {
            if self.conns[i].busy {
                match self.write(i) {
                    Some(ConnStep::Open) if self.conns[i].busy => return,
                    Some(ConnStep::Open) => {}
                    _ => return,
                }
            }
            if self.respond(i) {
                continue;
            }
            let c = &mut self.conns[i];
            if c.in_len == c.inbuf.len() {
                // A request head larger than the buffer: refuse it.
                return self.close(i, true);
            }
            match sys::recv(c.fd, &mut c.inbuf[c.in_len..]) {
                Ok(0) => {
                    let partial = c.in_len != 0;
                    return self.close(i, partial);
                }
                Ok(n) => c.in_len += n,
                Err(libc::EINTR) => {}
                Err(libc::EAGAIN) => return,
                Err(_) => return self.close(i, true),
            }
        }
    }

    /// Parse one request from the input buffer and queue its response. Returns whether one was queued.
    fn respond(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        if c.in_len == 0 {
            return false;
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(&c.inbuf[..c.in_len]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return false,
            Err(_) => {
                c.in_len = 0;
                queue(c, 400, 0, true, false);
                return true;
            }
        };
        let mut keep_alive = req.version == Some(1);
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("connection") {
                keep_alive = super::http::connection_keep_alive(h.value, keep_alive);
            }
        }
        let method = req.method.unwrap_or("");
        let (status, len) = match (method, req.path.and_then(body_size)) {
            ("GET" | "HEAD", Some(len)) => (200, len),
            ("GET" | "HEAD", None) => (404, 0),
            _ => (405, 0),
        };
        let head_only = method == "HEAD";
        c.inbuf.copy_within(n..c.in_len, 0);
        c.in_len -= n;
        self.stats.requests += 1;
        queue(c, status, len, !keep_alive || status == 405, head_only);
        true
    }

    /// Send the queued response; `None` when the connection was closed.
    fn write(&mut self, i: usize) -> Option<ConnStep> {
        let c = &mut self.conns[i];
        while c.head_off < c.head_len || c.body_off < c.body_len {
            let head = &c.head[c.head_off..c.head_len];
            let left = c.body_len - c.body_off;
            let start = (c.body_off % BODY_BUF as u64) as usize;
            let take = (left.min((BODY_BUF - start) as u64)) as usize;
            match sys::send2(c.fd, head, &self.body[start..start + take]) {
                Ok(n) => {
                    self.stats.bytes_sent += n as u64;
                    if n <= head.len() {
                        c.head_off += n;
                    } else {
                        c.body_off += (n - head.len()) as u64;
                        c.head_off = c.head_len;
                    }
                }
                Err(libc::EINTR) => {}
                Err(libc::EAGAIN) => return Some(ConnStep::Open),
                Err(_) => {
                    self.close(i, true);
                    return None;
                }
            }
        }
        c.busy = false;
        if c.close_after {
            self.close(i, false);
            return Some(ConnStep::Closed);
        }
        Some(ConnStep::Open)
    }
}

/// Fill the connection's head buffer for a response.
fn queue(c: &mut Conn, status: u16, len: u64, close: bool, head_only: bool) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    let mut w = &mut c.head[..];
    let before = w.len();
    // 256 bytes hold the longest head written here; a failure would only truncate it.
    let _ = write!(
        w,
        "HTTP/1.1 {status} {reason}\r\nServer: rtgauge\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\nConnection: {}\r\n\r\n",
        if close { "close" } else { "keep-alive" }
    );
    c.head_len = before - w.len();
    c.head_off = 0;
    c.body_len = if head_only { 0 } else { len };
    c.body_off = 0;
    c.busy = true;
    c.close_after = close;
}

fn serve_loop(mut l: Loop, cpu: u32, stop: &StopFlag, end: Option<u64>) -> ServerStats {
    crate::rt::block_signals();
    let _ = crate::rt::pin_thread(Some(cpu));
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    loop {
        if stop.is_set() || end.is_some_and(|e| now_ns(ClockId::Monotonic) >= e) {
            break;
        }
        let n = l.ep.wait(&mut events, 50);
        for ev in &events[..n] {
            let data = ev.u64;
            if data == LISTENER {
                l.accept_all();
                continue;
            }
            let i = (data & 0xffff_ffff) as usize;
            let gen = (data >> 32) as u32;
            let live = l.conns.get(i).is_some_and(|c| c.gen == gen && c.fd >= 0);
            if live {
                if ev.events & EV_ERR != 0 && ev.events & EV_IN == 0 {
                    l.close(i, true);
                } else {
                    l.drive(i);
                }
            }
        }
    }
    for c in &mut l.conns {
        if c.fd >= 0 {
            sys::close(c.fd);
            c.fd = -1;
        }
    }
    sys::close(l.listener);
    l.stats
}

/// Bind one listener per CPU (the first on the asked address, the others on the port it got), then start
/// the loops. Binding errors (address in use, not local) are returned before anything runs.
pub fn start(plan: &ServerPlan, stop: &StopFlag) -> Result<ServerHandle, ProbeError> {
    if plan.cpus.is_empty() {
        return Err(ProbeError::Config(
            "the server needs at least one CPU".into(),
        ));
    }
    let bind_err =
        |e: std::io::Error| ProbeError::Config(format!("cannot listen on {}: {e}", plan.listen));
    let first = sys::listener(&plan.listen).map_err(bind_err)?;
    let addr = match sys::local_addr(first) {
        Ok(a) => a,
        Err(e) => {
            sys::close(first);
            return Err(bind_err(e));
        }
    };
    let mut listeners = vec![first];
    for _ in 1..plan.cpus.len() {
        match sys::listener(&addr) {
            Ok(fd) => listeners.push(fd),
            Err(e) => {
                listeners.iter().for_each(|fd| sys::close(*fd));
                return Err(bind_err(e));
            }
        }
    }
    let body = Arc::new(vec![b'x'; BODY_BUF]);
    let end = plan
        .duration
        .map(|d| now_ns(ClockId::Monotonic).saturating_add(d.as_ns()));
    let mut threads = Vec::new();
    let mut listeners = listeners.into_iter();
    for (index, &cpu) in plan.cpus.iter().enumerate() {
        let Some(listener) = listeners.next() else {
            break;
        };
        let ep = Epoll::new()
            .map_err(|e| format!("epoll_create1: {e}"))
            .and_then(|ep| {
                ep.add(listener, EV_IN | EV_ET, LISTENER)
                    .map(|()| ep)
                    .map_err(|e| format!("epoll_ctl: {}", sys::errno_text(e)))
            });
        let spawned = match ep {
            Ok(ep) => {
                let l = Loop {
                    ep,
                    listener,
                    conns: Vec::with_capacity(1024),
                    free: Vec::with_capacity(1024),
                    body: Arc::clone(&body),
                    stats: ServerStats::default(),
                };
                let stop2 = stop.clone();
                crate::rt::spawn_thread(format!("rtgauge-serve-{index}"), index, move || {
                    serve_loop(l, cpu, &stop2, end)
                })
            }
            Err(reason) => {
                sys::close(listener);
                Err(ProbeError::Thread { index, reason })
            }
        };
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                listeners.for_each(sys::close);
                stop.set();
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
    }
    Ok(ServerHandle {
        addr,
        stop: stop.clone(),
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn paths_and_sizes() {
        assert_eq!(body_size("/2b"), Some(2));
        assert_eq!(body_size("/128k"), Some(131_072));
        assert_eq!(body_size("/4096"), Some(4096));
        assert_eq!(body_size("/1m?x=1"), Some(1 << 20));
        assert_eq!(body_size("/"), Some(2));
        assert_eq!(body_size("/2g"), None);
        assert_eq!(body_size("/index.html"), None);
        assert_eq!(body_size("/k"), None);
        assert_eq!(body_size("/99999999999999999"), None);
        assert_eq!(body_size("2b"), None);
    }

    #[test]
    fn serves_keep_alive_pipelined_and_close() {
        let stop = StopFlag::new();
        let h = start(
            &ServerPlan {
                listen: "127.0.0.1:0".parse().unwrap(),
                cpus: vec![0],
                duration: Some(Nanos::from_secs(10)),
            },
            &stop,
        )
        .unwrap();
        let mut s = std::net::TcpStream::connect(h.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        s.write_all(b"GET /2b HTTP/1.1\r\nHost: x\r\n\r\nGET /128k HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        let text = String::from_utf8_lossy(&got);
        assert_eq!(
            text.matches("HTTP/1.1 200 OK").count(),
            2,
            "{}",
            &text[..200.min(text.len())]
        );
        assert!(text.contains("Content-Length: 131072\r\n"));
        assert!(text.contains("HTTP/1.1 404 Not Found"));
        assert!(text.ends_with("Connection: close\r\n\r\n"));
        let body_bytes = got.iter().filter(|&&b| b == b'x').count();
        assert_eq!(body_bytes, 2 + 131_072);
        let stats = h.stop();
        assert_eq!(stats.requests, 3);
        assert_eq!(stats.accepted, 1);
    }
}

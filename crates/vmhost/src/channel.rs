//! The clock channel between a guest and its host: an NTP-style exchange over a byte stream both sides
//! have — a serial or virtio-serial port (a QEMU chardev on the host: a unix socket or a pty), or TCP.
//!
//! Protocol (binary, tiny so that a 115 200 baud UART adds little to the round trip): the host sends
//! `A5 seq`; the guest answers `5A seq` and its CLOCK_MONOTONIC as 8 bytes little-endian, read when the
//! probe arrived. The host stamps its send and the answer's arrival on its CLOCK_MONOTONIC
//! ([`rtgauge_model::vm::ClockSample`]). Stale bytes (a probe answered after its timeout, bytes queued in
//! the UART before the guest's side opened it) are drained before every probe, and an answer whose
//! sequence number is not the one awaited is a failed exchange, never a sample.
//!
//! A burst is [`BURST`] exchanges; the one with the smallest round trip is kept (its bound is the
//! tightest). Until the guest has answered once, a burst whose first exchange gets no answer is given up
//! at once (its side is not up yet); after that, [`GIVE_UP`] unanswered exchanges in a row end a burst, so
//! an observer is never held for more than that many timeouts per burst.

use rtgauge_model::vm::{ClockSample, ClockSync};
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::time::{now_ns, ClockId};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use crate::VmError;

const PROBE: u8 = 0xA5;
const ANSWER: u8 = 0x5A;
/// Exchanges per burst.
pub const BURST: usize = 16;
/// Unanswered exchanges in a row that end a burst once the other side has answered.
pub const GIVE_UP: usize = 3;
/// How long one exchange may take.
pub const TIMEOUT: Duration = Duration::from_millis(50);

/// Where the other side is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    /// A unix stream socket (a QEMU `-chardev socket,path=…,server=on`).
    Unix(PathBuf),
    /// TCP, `HOST:PORT`.
    Tcp(String),
    /// A character device or pty: a serial port, a virtio-serial port (`/dev/virtio-ports/NAME`), a QEMU
    /// `-chardev pty`.
    Device(PathBuf),
}

impl Channel {
    /// `unix:PATH`, `tcp:HOST:PORT` or a device path; `flag` names the flag in errors.
    pub fn parse(s: &str, flag: &str) -> Result<Channel, VmError> {
        let bad = |why: &str| VmError::Input(format!("{flag} {}: {why}", s.escape_debug()));
        if s.is_empty() || s.chars().any(char::is_control) {
            return Err(bad("expected unix:PATH, tcp:HOST:PORT or a device path"));
        }
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(bad("no socket path"));
            }
            return Ok(Channel::Unix(PathBuf::from(p)));
        }
        if let Some(a) = s.strip_prefix("tcp:") {
            let port = a.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>()));
            return match port {
                Some((h, Ok(p))) if !h.is_empty() && p > 0 => Ok(Channel::Tcp(a.to_string())),
                _ => Err(bad("expected tcp:HOST:PORT")),
            };
        }
        if !s.starts_with('/') {
            return Err(bad(
                "expected unix:PATH, tcp:HOST:PORT or an absolute device path",
            ));
        }
        Ok(Channel::Device(PathBuf::from(s)))
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Channel::Unix(p) => write!(f, "unix:{}", p.display()),
            Channel::Tcp(a) => write!(f, "tcp:{a}"),
            Channel::Device(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A byte stream with a descriptor to poll.
pub trait ClockStream: Read + Write + AsRawFd + Send {}
impl<T: Read + Write + AsRawFd + Send> ClockStream for T {}

/// Put a tty into raw mode at 115 200 baud (no echo, no line discipline): what a UART carries then is the
/// protocol's bytes. A non-tty (a virtio-serial port, a socket) is left as it is (`None`); for a tty, the
/// settings it had, to put back.
fn raw_tty(fd: RawFd) -> std::io::Result<Option<libc::termios>> {
    // SAFETY: isatty on a descriptor we own.
    if unsafe { libc::isatty(fd) } != 1 {
        return Ok(None);
    }
    // SAFETY: termios is plain data, filled by tcgetattr on our descriptor before use.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and out-pointer.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let saved = t;
    // SAFETY: plain updates of the termios we own.
    unsafe {
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, libc::B115200);
        libc::cfsetospeed(&mut t, libc::B115200);
    }
    t.c_cflag |= libc::CLOCAL | libc::CREAD;
    t.c_cc[libc::VMIN] = 1;
    t.c_cc[libc::VTIME] = 0;
    // SAFETY: valid descriptor and termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Some(saved))
}

/// A serial device opened for the clock protocol. The settings it had before [`raw_tty`] are put back when
/// it is dropped, on every exit path that unwinds or returns (the port may be a login console or another
/// tool's; a SIGKILL leaves it raw).
struct Device {
    file: std::fs::File,
    saved: Option<libc::termios>,
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let fd = self.file.as_raw_fd();
            // SAFETY: our open descriptor and the termios tcgetattr filled for it. Unsent output and
            // unread answers are dropped (not left for the port's next reader) and the settings apply at
            // once: waiting for output to drain (TCSADRAIN) never ends when the other side holds flow
            // control. Best effort: a device gone has nothing to restore.
            unsafe {
                libc::tcflush(fd, libc::TCIOFLUSH);
                libc::tcsetattr(fd, libc::TCSANOW, t);
            }
        }
    }
}

impl Read for Device {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.file.read(buf)
    }
}

impl Write for Device {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// Whether `fd` has bytes to read within `timeout`.
fn readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n > 0 && p.revents & libc::POLLIN != 0
}

/// Read exactly `buf.len()` bytes before `deadline_ns` (CLOCK_MONOTONIC), or `false`.
fn read_until(s: &mut dyn ClockStream, buf: &mut [u8], deadline_ns: u64) -> bool {
    let mut got = 0;
    while got < buf.len() {
        let now = now_ns(ClockId::Monotonic);
        if now >= deadline_ns || !readable(s.as_raw_fd(), Duration::from_nanos(deadline_ns - now)) {
            return false;
        }
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    true
}

/// Throw away whatever is waiting to be read.
fn drain(s: &mut dyn ClockStream) {
    let mut junk = [0u8; 256];
    while readable(s.as_raw_fd(), Duration::ZERO) {
        match s.read(&mut junk) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

fn open(ch: &Channel) -> std::io::Result<Box<dyn ClockStream>> {
    Ok(match ch {
        Channel::Unix(p) => Box::new(std::os::unix::net::UnixStream::connect(p)?),
        Channel::Tcp(a) => {
            // Bounded: an unreachable host must not hold a burst (and every source polled after it) for
            // the minutes of SYN retries a plain connect waits.
            use std::net::ToSocketAddrs as _;
            let addr = a.to_socket_addrs()?.next().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, format!("{a}: no address"))
            })?;
            let s = std::net::TcpStream::connect_timeout(&addr, TIMEOUT * 4)?;
            s.set_nodelay(true)?;
            Box::new(s)
        }
        Channel::Device(p) => {
            use std::os::unix::fs::OpenOptionsExt as _;
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOCTTY)
                .open(p)?;
            let saved = raw_tty(f.as_raw_fd())?;
            Box::new(Device { file: f, saved })
        }
    })
}

/// The host's end: sends probes, keeps each burst's best exchange.
pub struct ClockClient {
    channel: Channel,
    stream: Option<Box<dyn ClockStream>>,
    seq: u8,
    /// What was measured so far.
    pub sync: ClockSync,
    /// Why the channel could not be opened, last time it was tried.
    pub error: Option<String>,
}

impl ClockClient {
    /// Connect to `channel` (a failed connection is retried at each burst).
    pub fn new(channel: Channel) -> ClockClient {
        let mut c = ClockClient {
            sync: ClockSync {
                channel: channel.to_string(),
                method: format!(
                    "bursts of {BURST} exchanges, the smallest round trip of each kept; offset = guest − host midpoint, bound = round trip / 2; interpolated between bursts"
                ),
                ..ClockSync::default()
            },
            channel,
            stream: None,
            seq: 0,
            error: None,
        };
        c.connect();
        c
    }

    fn connect(&mut self) {
        match open(&self.channel) {
            Ok(s) => {
                self.stream = Some(s);
                self.error = None;
            }
            Err(e) => self.error = Some(format!("--clock {}: {e}", self.channel)),
        }
    }

    /// One exchange: a sample, or `None` (no answer in time, a garbled one).
    fn exchange(&mut self) -> Option<ClockSample> {
        let s = self.stream.as_mut()?;
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        drain(s.as_mut());
        let t1 = now_ns(ClockId::Monotonic);
        if s.write_all(&[PROBE, seq]).is_err() {
            self.stream = None;
            return None;
        }
        let mut a = [0u8; 10];
        let ok = read_until(s.as_mut(), &mut a, t1 + TIMEOUT.as_nanos() as u64);
        let t4 = now_ns(ClockId::Monotonic);
        if !ok || a[0] != ANSWER || a[1] != seq {
            return None;
        }
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&a[2..]);
        Some(ClockSample {
            host_send_ns: t1,
            guest_ns: u64::from_le_bytes(ts),
            host_recv_ns: t4,
        })
    }

    /// One burst: up to [`BURST`] exchanges, the best kept. Until the other side has answered once, a
    /// first unanswered exchange ends it (the guest's side is not up); after that, [`GIVE_UP`] unanswered
    /// ones in a row do: a loaded guest answers some probes late, and a burst lost to one late answer left
    /// a run on a busy host with two samples in a minute.
    pub fn burst(&mut self) {
        if self.stream.is_none() {
            self.connect();
        }
        let give_up = if self.sync.samples.is_empty() {
            1
        } else {
            GIVE_UP
        };
        let mut best: Option<ClockSample> = None;
        let mut unanswered = 0;
        for _ in 0..BURST {
            self.sync.exchanges += 1;
            match self.exchange() {
                Some(x) => {
                    unanswered = 0;
                    if best.is_none_or(|b| x.rtt_ns() < b.rtt_ns()) {
                        best = Some(x);
                    }
                }
                None => {
                    self.sync.failed += 1;
                    unanswered += 1;
                    if unanswered == give_up {
                        break;
                    }
                }
            }
        }
        if let Some(b) = best {
            self.sync.samples.push(b);
        }
    }
}

/// The calling thread on every CPU it may use but `cpu` (left as it is when that is the only one).
fn avoid(cpu: u32) {
    let rest = rtgauge_probe::rt::current_affinity().difference(&rtgauge_model::CpuSet::new([cpu]));
    if !rest.is_empty() {
        rtgauge_probe::rt::set_affinity(&rest);
    }
}

/// How long [`PeerReader::start`] waits for the other end's first answer.
pub const FIRST_WAIT: Duration = Duration::from_secs(3);

/// A burst whose best exchange's bound is more than this many times the run's best is slow: set aside
/// when a run's clock bound is worked out ([`PeerReader::finish`]).
pub const SLOW_BURST: u64 = 4;

/// A run's own reading of the other side's clock, the channel's client at the guest's end (a receive-only
/// packet stream reading its sender's, whose `rtgauge vm clock-serve` answers): a first burst before the
/// run, then one a second in a thread of its own until [`PeerReader::finish`]. Its samples are this
/// side's view: sent and received on this clock, the other side's stamp between.
pub struct PeerReader {
    first: ClockSample,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<ClockSync>,
}

impl PeerReader {
    /// Connect and take a first sample (a burst every 200 ms for up to [`FIRST_WAIT`]: the other end may
    /// be starting), or say why not; `flag` names the channel's flag. Its thread keeps off `avoid_cpu` (a
    /// measuring thread's) where another CPU is allowed.
    pub fn start(
        channel: Channel,
        flag: &str,
        avoid_cpu: Option<u32>,
    ) -> Result<PeerReader, VmError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut c = ClockClient::new(channel.clone());
        let until = std::time::Instant::now() + FIRST_WAIT;
        c.burst();
        while c.sync.samples.is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            c.burst();
        }
        let Some(first) = c.sync.samples.first().copied() else {
            return Err(VmError::Input(format!(
                "{flag} {channel}: no exchange answered{} (is `rtgauge vm clock-serve` answering at the other end?)",
                c.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
            )));
        };
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let seen = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("rtgauge-clock".into())
            .spawn(move || {
                if let Some(c) = avoid_cpu {
                    avoid(c);
                }
                let mut next = now_ns(ClockId::Monotonic) + 1_000_000_000;
                while !seen.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                    if now_ns(ClockId::Monotonic) >= next {
                        c.burst();
                        next += 1_000_000_000;
                    }
                }
                c.sync
            })
            .map_err(|e| VmError::Input(format!("{flag} {channel}: the clock thread: {e}")))?;
        Ok(PeerReader {
            first,
            stop,
            thread,
        })
    }

    /// This side's CLOCK_REALTIME minus the other side's CLOCK_MONOTONIC, ns, by the first sample: what
    /// puts the other side's monotonic stamps on this wall clock.
    pub fn realtime_shift_ns(&self) -> i64 {
        rtgauge_probe::time::realtime_minus_monotonic() - self.first.offset_ns()
    }

    /// Stop reading: the offset applied (this side's CLOCK_MONOTONIC minus the other's, by the first
    /// sample), the bound on it over the run (each sample's own bound and how far its offset lay from the
    /// one applied, the largest), and the exchanges as the other side would have recorded them.
    pub fn finish(self) -> rtgauge_model::vm::PeerClock {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let sync = self.thread.join().unwrap_or_default();
        let applied = self.first.offset_ns();
        let off = |s: &ClockSample| s.offset_ns().abs_diff(applied);
        // A burst whose best exchange took far longer than the best one came while the channel was slow
        // (the other side busy): its wide bound says little about the offset, and the offset is taken to
        // move smoothly between the good ones (as `vm join` interpolates).
        let best = sync
            .samples
            .iter()
            .map(ClockSample::bound_ns)
            .min()
            .unwrap_or(self.first.bound_ns());
        let good: Vec<&ClockSample> = sync
            .samples
            .iter()
            .filter(|s| s.bound_ns() <= SLOW_BURST * best)
            .collect();
        // One pass: how far the good bursts wander from the applied offset, and that plus each one's bound.
        let (wander, bound) = good.iter().fold((0, self.first.bound_ns()), |(w, b), s| {
            let o = off(s);
            (w.max(o), b.max(o.saturating_add(s.bound_ns())))
        });
        rtgauge_model::vm::PeerClock {
            method: format!(
                "the sender's CLOCK_MONOTONIC read through {} ({} bursts answered, {} of them slow and set aside; {} of {} exchanges failed), the first burst's offset applied",
                sync.channel,
                sync.samples.len(),
                sync.samples.len() - good.len(),
                sync.failed,
                sync.exchanges
            ),
            offset_ns: applied.saturating_neg(),
            bound_ns: Some(bound),
            wander_ns: wander,
            sync: Some(ClockSync {
                method: format!(
                    "exchanges made by the receiving guest over {}, as the host would have recorded them",
                    sync.channel
                ),
                samples: sync.samples.iter().map(ClockSample::reversed).collect(),
                ..sync
            }),
        }
    }
}

/// The guest's end: answer every probe on `channel` until `stop` (SIGINT/SIGTERM) or `until_ns`
/// (CLOCK_MONOTONIC), reconnecting a TCP listener's peer as it comes. Returns the probes answered.
pub fn serve(channel: &Channel, stop: &StopFlag, until_ns: Option<u64>) -> Result<u64, VmError> {
    let io = |e: std::io::Error| VmError::Input(format!("{channel}: {e}"));
    let mut answered = 0;
    let done = || stop.is_set() || until_ns.is_some_and(|u| now_ns(ClockId::Monotonic) >= u);
    match channel {
        Channel::Device(_) | Channel::Unix(_) => {
            let mut s = open(channel).map_err(io)?;
            answer(s.as_mut(), &done, &mut answered);
        }
        Channel::Tcp(addr) => {
            let l = std::net::TcpListener::bind(addr).map_err(io)?;
            l.set_nonblocking(true).map_err(io)?;
            while !done() {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).map_err(io)?;
                        s.set_nodelay(true).map_err(io)?;
                        let mut s: Box<dyn ClockStream> = Box::new(s);
                        answer(s.as_mut(), &done, &mut answered);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        }
    }
    Ok(answered)
}

/// Answer probes on one stream until `done` or its end.
fn answer(s: &mut dyn ClockStream, done: &dyn Fn() -> bool, answered: &mut u64) {
    let mut b = [0u8; 1];
    while !done() {
        if !readable(s.as_raw_fd(), Duration::from_millis(200)) {
            continue;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(_) if b[0] != PROBE => continue,
            Ok(_) => {}
        }
        let mut seq = [0u8; 1];
        if !read_until(
            s,
            &mut seq,
            now_ns(ClockId::Monotonic) + TIMEOUT.as_nanos() as u64,
        ) {
            continue;
        }
        let t = now_ns(ClockId::Monotonic);
        let mut a = [0u8; 10];
        a[0] = ANSWER;
        a[1] = seq[0];
        a[2..].copy_from_slice(&t.to_le_bytes());
        if s.write_all(&a).is_err() {
            return;
        }
        *answered += 1;
    }
}

/// The channel's client as a clock source of `rtgauge clock` (`--host`): one burst per poll, its best
/// exchange's offset (the other side minus this one) and bound. Only the last sample is kept: the source
/// polls for as long as a monitor runs.
impl rtgauge_probe::clock::ChannelClock for ClockClient {
    fn sample(&mut self) -> std::io::Result<(i64, u64)> {
        let before = self.sync.samples.len();
        self.burst();
        if self.sync.samples.len() == before {
            return Err(std::io::Error::other(format!(
                "no exchange answered{} (is `rtgauge vm clock-serve` answering at the other end?)",
                self.error
                    .as_deref()
                    .map(|e| format!(" ({})", e.trim_start_matches("--clock ")))
                    .unwrap_or_default()
            )));
        }
        let keep = self.sync.samples.len() - 1;
        self.sync.samples.drain(..keep);
        let s = self.sync.samples[0];
        Ok((s.offset_ns(), s.bound_ns()))
    }
}

/// Opens `rtgauge clock`'s `host` sources: the channel parsed (`unix:PATH`, `tcp:HOST:PORT`, a device)
/// and its client connected.
pub fn peer_opener() -> rtgauge_probe::clock::PeerOpener {
    rtgauge_probe::clock::PeerOpener(std::sync::Arc::new(|channel: &str| {
        let ch = Channel::parse(channel, "--host")
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        // The other end may be starting (a TCP listener accepts every 100 ms): a burst every 200 ms for
        // up to FIRST_WAIT, as a packet stream's reader waits.
        let mut c = ClockClient::new(ch);
        let until = std::time::Instant::now() + FIRST_WAIT;
        c.burst();
        while c.sync.samples.is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            c.burst();
        }
        Ok(Box::new(c) as Box<dyn rtgauge_probe::clock::ChannelClock>)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local-mode flags of the tty behind `fd`.
    fn lflag(fd: RawFd) -> libc::tcflag_t {
        // SAFETY: plain data filled by tcgetattr on a descriptor the test owns.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and out-pointer.
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut t) }, 0);
        t.c_lflag
    }

    #[test]
    fn a_serial_device_is_raw_while_open_and_as_it_was_after() {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: out-pointers to two ints; no name, termios or window size asked for.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        use std::os::fd::{FromRawFd as _, OwnedFd};
        // SAFETY: two descriptors openpty just opened for this test, each owned once (closed on drop, also
        // when an assertion fails).
        let (_master, _slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let path = std::fs::read_link(format!("/proc/self/fd/{slave}")).unwrap();
        let before = lflag(slave);
        assert_ne!(before & libc::ECHO, 0, "a new pty echoes");
        let dev = open(&Channel::Device(path.clone())).unwrap();
        assert_eq!(
            lflag(slave) & (libc::ECHO | libc::ICANON),
            0,
            "raw while open"
        );
        drop(dev);
        assert_eq!(
            lflag(slave),
            before,
            "{}: settings put back",
            path.display()
        );
    }

    #[test]
    fn channels_parse_and_bad_ones_are_named() {
        assert_eq!(
            Channel::parse("unix:/run/vm.sock", "--clock").unwrap(),
            Channel::Unix("/run/vm.sock".into())
        );
        assert_eq!(
            Channel::parse("tcp:10.0.0.2:7031", "--clock").unwrap(),
            Channel::Tcp("10.0.0.2:7031".into())
        );
        assert_eq!(
            Channel::parse("/dev/ttyS3", "--clock").unwrap().to_string(),
            "/dev/ttyS3"
        );
        for bad in [
            "",
            "unix:",
            "tcp:host",
            "tcp::1",
            "tcp:h:0",
            "tcp:h:99999",
            "ttyS3",
            "a\nb",
        ] {
            let e = Channel::parse(bad, "--clock").unwrap_err().to_string();
            assert!(e.starts_with("--clock "), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn an_exchange_over_a_real_socket_bounds_the_offset() {
        // Both ends in this process, on one clock: the true offset is 0, so it must lie within each
        // sample's bound.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clock.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let stop = StopFlag::new();
        let guest_stop = stop.clone();
        let guest = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut s: Box<dyn ClockStream> = Box::new(s);
            let mut n = 0;
            answer(s.as_mut(), &|| guest_stop.is_set(), &mut n);
            n
        });
        let mut c = ClockClient::new(Channel::Unix(path));
        assert!(c.error.is_none(), "{:?}", c.error);
        for _ in 0..3 {
            c.burst();
        }
        stop.set();
        drop(c.stream.take());
        let answered = guest.join().unwrap();
        assert_eq!(c.sync.samples.len(), 3);
        assert_eq!(answered, 3 * BURST as u64);
        assert_eq!(c.sync.failed, 0);
        for s in &c.sync.samples {
            assert!(s.offset_ns().unsigned_abs() <= s.bound_ns(), "{s:?}");
            assert!(s.host_send_ns <= s.guest_ns && s.guest_ns <= s.host_recv_ns);
        }
    }

    #[test]
    fn a_late_answer_costs_an_exchange_not_the_burst() {
        // A guest that answers, leaves one probe unanswered (a loaded guest), answers again, then falls
        // silent: the second burst keeps its sample, the third gives up after GIVE_UP timeouts.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let guest = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            for n in 0..2 * BURST {
                let mut p = [0u8; 2];
                s.read_exact(&mut p).unwrap();
                if n == BURST {
                    continue; // the second burst's first probe: no answer
                }
                let mut a = vec![ANSWER, p[1]];
                a.extend_from_slice(&now_ns(ClockId::Monotonic).to_le_bytes());
                s.write_all(&a).unwrap();
            }
            s // held open, silent
        });
        let mut c = ClockClient::new(Channel::Unix(path));
        c.burst();
        c.burst();
        assert_eq!(c.sync.samples.len(), 2, "{:?}", c.sync);
        assert_eq!((c.sync.exchanges, c.sync.failed), (2 * BURST as u64, 1));
        let t = std::time::Instant::now();
        c.burst();
        assert!(
            t.elapsed() < TIMEOUT * (GIVE_UP as u32 + 2),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(c.sync.samples.len(), 2);
        assert_eq!(c.sync.failed, 1 + GIVE_UP as u64);
        drop(guest.join().unwrap());
    }

    #[test]
    fn a_silent_guest_costs_one_timeout_per_burst() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("silent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut c = ClockClient::new(Channel::Unix(path));
        let t = std::time::Instant::now();
        c.burst();
        assert!(t.elapsed() < TIMEOUT * 3, "{:?}", t.elapsed());
        assert_eq!((c.sync.exchanges, c.sync.failed), (1, 1));
        assert!(c.sync.samples.is_empty());
        // Nobody there at all: the error names the channel.
        let c = ClockClient::new(Channel::Unix(dir.path().join("none.sock")));
        assert!(
            c.error.as_deref().unwrap().starts_with("--clock unix:"),
            "{:?}",
            c.error
        );
    }
}

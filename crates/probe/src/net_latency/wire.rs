//! The packet-latency probe's packet layout, its UDP socket with kernel receive timestamps, its clocks and
//! the network-namespace switch of a thread.

use crate::net::sys::{self, RawAddr};
use crate::time::{self, ClockId};
use std::net::SocketAddr;

/// The tag that opens every packet ("RTGL").
const MAGIC: u32 = u32::from_le_bytes(*b"RTGL");

/// Bytes of the header: tag, stream id, sequence number, send time on both clocks.
pub const HEADER: usize = 32;

/// What a packet carries (little-endian, then zero padding to the configured size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// The run's stream id: a packet of another run (or anything else on the port) is foreign.
    pub stream: u32,
    /// Sequence number, from 0.
    pub seq: u64,
    /// CLOCK_REALTIME just before the send, ns.
    pub sent_realtime_ns: u64,
    /// CLOCK_MONOTONIC just before the send, ns: what a receiver on another clock puts on its own through
    /// `rtgauge vm`'s clock channel (which exchanges CLOCK_MONOTONIC).
    pub sent_mono_ns: u64,
}

impl Packet {
    /// Write the header into the first [`HEADER`] bytes of `buf` (at least that long).
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        buf[4..8].copy_from_slice(&self.stream.to_le_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_le_bytes());
        buf[16..24].copy_from_slice(&self.sent_realtime_ns.to_le_bytes());
        buf[24..32].copy_from_slice(&self.sent_mono_ns.to_le_bytes());
    }

    /// The header of a datagram of stream `stream`, `None` for anything else.
    #[inline]
    pub fn read(data: &[u8], stream: u32) -> Option<Packet> {
        let h = data.get(..HEADER)?;
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_le_bytes(b)
        };
        if u32_at(0) != MAGIC || u32_at(4) != stream {
            return None;
        }
        Some(Packet {
            stream,
            seq: u64_at(8),
            sent_realtime_ns: u64_at(16),
            sent_mono_ns: u64_at(24),
        })
    }
}

/// The first packet of stream `stream` in `bytes`, within the headers before it (a sent packet comes back
/// from the error queue as the driver had it: Ethernet, IP and UDP headers, or a frame's, first).
#[inline]
pub fn find_packet(bytes: &[u8], stream: u32) -> Option<Packet> {
    (0..=bytes.len().saturating_sub(HEADER).min(128))
        .find(|&i| is_probe_packet(&bytes[i..]))
        .and_then(|i| Packet::read(&bytes[i..], stream))
}

/// Whether a datagram opens with the probe's tag (any stream).
pub fn is_probe_packet(data: &[u8]) -> bool {
    data.len() >= HEADER && data[..4] == MAGIC.to_le_bytes()
}

/// A stream id unlikely to repeat between runs: the clock's nanoseconds mixed with the process id.
pub fn stream_id() -> u32 {
    let t = time::now_ns(ClockId::Realtime);
    (t as u32) ^ ((t >> 32) as u32) ^ std::process::id().rotate_left(16)
}

#[inline(always)]
pub fn realtime_ns() -> u64 {
    time::now_ns(ClockId::Realtime)
}

#[inline(always)]
pub fn monotonic_ns() -> u64 {
    time::now_ns(ClockId::Monotonic)
}

pub fn thread_cpu_ns() -> u64 {
    time::thread_cpu_ns()
}

/// Sleep until CLOCK_MONOTONIC reaches `at_ns` (absolute: no drift from the time spent sending).
#[inline]
pub fn sleep_until(at_ns: u64) {
    while time::sleep_until(ClockId::Monotonic, at_ns) == libc::EINTR {}
}

/// Move the calling thread into network namespace `ns`: a name under /run/netns (as `ip netns` makes
/// them), or a path (/proc/PID/ns/net). Only this thread moves; sockets it opens afterwards live there.
pub fn enter_netns(ns: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let path = if ns.contains('/') {
        std::path::PathBuf::from(ns)
    } else {
        std::path::Path::new("/run/netns").join(ns)
    };
    let f = std::fs::File::open(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: `f` is an open namespace file; CLONE_NEWNET asks the kernel to check it is a network one.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("setns({}): {e}", path.display()),
        ));
    }
    Ok(())
}

fn os(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

/// A UDP socket, closed on drop.
#[derive(Debug)]
pub struct Socket(i32);

impl Drop for Socket {
    fn drop(&mut self) {
        sys::close(self.0);
    }
}

impl Socket {
    /// Own `fd` (closed on drop).
    pub fn from_fd(fd: i32) -> Socket {
        Socket(fd)
    }

    /// A blocking, close-on-exec UDP socket of `addr`'s family.
    pub fn udp(addr: &SocketAddr) -> std::io::Result<Socket> {
        let family = RawAddr::new(addr).family();
        // SAFETY: plain system call.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Socket(fd))
    }

    pub fn bind(&self, addr: &SocketAddr) -> std::io::Result<()> {
        sys::bind(self.0, &RawAddr::new(addr)).map_err(os)
    }

    /// Join multicast group `group` on the interface the kernel routes the group to (a default route, or
    /// `ip route add 224.0.0.0/4 dev DEV`).
    pub fn join_group(&self, group: &std::net::IpAddr) -> std::io::Result<()> {
        match group {
            std::net::IpAddr::V4(g) => {
                let m = libc::ip_mreqn {
                    imr_multiaddr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(g.octets()),
                    },
                    imr_address: libc::in_addr { s_addr: 0 },
                    imr_ifindex: 0,
                };
                sys::setsockopt(self.0, libc::IPPROTO_IP, libc::IP_ADD_MEMBERSHIP, &m)
            }
            std::net::IpAddr::V6(g) => {
                let m = libc::ipv6_mreq {
                    ipv6mr_multiaddr: libc::in6_addr {
                        s6_addr: g.octets(),
                    },
                    ipv6mr_interface: 0,
                };
                sys::setsockopt(self.0, libc::IPPROTO_IPV6, libc::IPV6_ADD_MEMBERSHIP, &m)
            }
        }
        .map_err(os)
    }

    /// Fix the peer: `send` goes there and only its datagrams are received.
    pub fn connect(&self, addr: &SocketAddr) -> std::io::Result<()> {
        sys::connect(self.0, &RawAddr::new(addr))
            .map(|_| ())
            .map_err(os)
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        sys::local_addr(self.0)
    }

    /// A second descriptor of the same socket (the round trip's receiver reads the sender's socket).
    pub fn try_clone(&self) -> std::io::Result<Socket> {
        // SAFETY: plain system call on our descriptor.
        let fd = unsafe { libc::fcntl(self.0, libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Socket(fd))
    }

    #[inline]
    pub fn send(&self, buf: &[u8]) -> Result<usize, i32> {
        sys::send(self.0, buf)
    }

    /// Ask for software timestamps (SO_TIMESTAMPING, nanoseconds, CLOCK_REALTIME): `rx`, each packet
    /// received carries one; `tx`, each packet sent comes back on the error queue with one
    /// ([`Socket::drain_tx_stamps`]).
    pub fn timestamp_software(&self, rx: bool, tx: bool) -> std::io::Result<()> {
        let mut flags = libc::SOF_TIMESTAMPING_SOFTWARE;
        if rx {
            flags |= libc::SOF_TIMESTAMPING_RX_SOFTWARE;
        }
        if tx {
            flags |= libc::SOF_TIMESTAMPING_TX_SOFTWARE;
        }
        sys::set_int(
            self.0,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            flags as i32,
        )
        .map_err(os)
    }

    /// Take up to `most` sent packets waiting on the error queue with their software transmit timestamps,
    /// without waiting: `f(stamp_ns, bytes)` for each one that carried a stamp (the bytes are the packet
    /// as the driver had it, headers included, cut to `buf`). Returns how many were taken.
    #[inline]
    pub fn drain_tx_stamps(&self, buf: &mut [u8], most: u64, mut f: impl FnMut(u64, &[u8])) -> u64 {
        let mut taken = 0;
        while taken < most {
            let Ok((n, stamp)) = self.recv_with_stamp(buf, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)
            else {
                return taken;
            };
            taken += 1;
            if let Some(stamp) = stamp {
                f(stamp, &buf[..n.min(buf.len())]);
            }
        }
        taken
    }

    /// Ask for a receive queue of `bytes` (the kernel caps it at net.core.rmem_max; best effort).
    pub fn grow_receive_buffer(&self, bytes: i32) {
        let _ = sys::set_int(self.0, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes);
    }

    /// A blocking receive gives up after `timeout_ns` (EAGAIN).
    pub fn receive_timeout(&self, timeout_ns: u64) -> std::io::Result<()> {
        let tv = libc::timeval {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_usec: rtgauge_model::units::us_trunc(timeout_ns % 1_000_000_000)
                as libc::suseconds_t,
        };
        sys::setsockopt(self.0, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv).map_err(os)
    }

    /// One datagram into `buf`: its length and the kernel's software receive timestamp (CLOCK_REALTIME
    /// ns) when it carried one; `poll`: without waiting. Err(errno): EAGAIN when nothing came (at once
    /// when polling, else after the receive timeout).
    #[inline]
    pub fn recv_stamped(&self, buf: &mut [u8], poll: bool) -> Result<(usize, Option<u64>), i32> {
        self.recv_with_stamp(buf, if poll { libc::MSG_DONTWAIT } else { 0 })
    }

    /// `recvmsg` with `flags` into `buf`: the length and the software timestamp of its SCM_TIMESTAMPING
    /// control message, if it had one; Err(errno).
    #[inline]
    fn recv_with_stamp(&self, buf: &mut [u8], flags: i32) -> Result<(usize, Option<u64>), i32> {
        // Room for one SCM_TIMESTAMPING (three timespecs) and, from the error queue, the extended error
        // that comes with it, aligned for cmsghdr.
        let mut control = [0u64; 32];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data, valid when zeroed; it points at `iov` and `control`, which outlive
        // the call; the kernel writes at most their lengths.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: as above.
        let n = unsafe { libc::recvmsg(self.0, &mut msg, flags) };
        if n < 0 {
            return Err(sys::errno());
        }
        // SAFETY: the walk stays within what the kernel filled.
        Ok((n as usize, unsafe { software_stamp(&msg) }))
    }

    /// One datagram into `buf` with its sender's address (the reflector).
    pub fn recv_from(&self, buf: &mut [u8]) -> Result<(usize, RawAddr), i32> {
        sys::recv_from(self.0, buf)
    }

    /// Send `buf` to `to` (the reflector's echo).
    pub fn send_to(&self, buf: &[u8], to: &RawAddr) -> Result<usize, i32> {
        sys::send_to(self.0, buf, to)
    }
}

/// The software timestamp of an SCM_TIMESTAMPING control message of `msg`, CLOCK_REALTIME ns.
///
/// # Safety
/// `msg`'s control buffer must hold what `recvmsg` filled (`msg_controllen` bytes).
unsafe fn software_stamp(msg: &libc::msghdr) -> Option<u64> {
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays within msg_controllen bytes of the control buffer, as the caller vouches.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
                // struct scm_timestamping { struct timespec ts[3]; }: [0] is the software stamp.
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_reads_back_only_in_its_own_stream() {
        let p = Packet {
            stream: 7,
            seq: 1 << 40,
            sent_realtime_ns: 1_790_000_000_123_456_789,
            sent_mono_ns: 86_400_000_000_017,
        };
        let mut buf = [0u8; 64];
        p.write(&mut buf);
        assert_eq!(Packet::read(&buf, 7), Some(p));
        assert_eq!(Packet::read(&buf, 8), None, "another run's stream");
        assert_eq!(Packet::read(&buf[..HEADER - 1], 7), None, "too short");
        buf[0] ^= 1;
        assert_eq!(Packet::read(&buf, 7), None, "not our tag");
    }
}

//! Thin, safe wrappers over the socket and epoll system calls the net loops use. Errors are errno values
//! (the loops classify them; no allocation on the error path either).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// errno of the last failed call.
#[inline]
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// strerror-like text of an errno, for messages outside the loops.
pub fn errno_text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// A socket address in the kernel's layout.
#[derive(Clone, Copy)]
pub struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    pub fn new(addr: &SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain data, valid when zeroed.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    pub fn family(&self) -> i32 {
        self.storage.ss_family as i32
    }

    fn ptr(&self) -> *const libc::sockaddr {
        &self.storage as *const _ as *const libc::sockaddr
    }

    fn to_socket_addr(self) -> Option<SocketAddr> {
        match self.family() {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin = unsafe { &*(self.ptr() as *const libc::sockaddr_in) };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6 = unsafe { &*(self.ptr() as *const libc::sockaddr_in6) };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// A non-blocking, close-on-exec TCP socket.
#[inline]
pub fn tcp_socket(family: i32) -> Result<i32, i32> {
    // SAFETY: plain system call.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd)
    }
}

#[inline]
pub fn set_int(fd: i32, level: i32, opt: i32, val: i32) -> Result<(), i32> {
    setsockopt(fd, level, opt, &val)
}

/// SO_LINGER {1, 0}: close() sends RST and leaves no TIME_WAIT.
#[inline]
pub fn set_linger_reset(fd: i32) -> Result<(), i32> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, &l)
}

/// setsockopt with a plain C value as the option.
#[inline]
pub fn setsockopt<T: Copy>(fd: i32, level: i32, opt: i32, val: &T) -> Result<(), i32> {
    // SAFETY: `val` outlives the call; its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Start a non-blocking connect: Ok(true) connected at once, Ok(false) in progress.
#[inline]
pub fn connect(fd: i32, addr: &RawAddr) -> Result<bool, i32> {
    // SAFETY: `addr` holds a valid sockaddr of `len` bytes.
    let r = unsafe { libc::connect(fd, addr.ptr(), addr.len) };
    if r == 0 {
        return Ok(true);
    }
    match errno() {
        libc::EINPROGRESS => Ok(false),
        e => Err(e),
    }
}

/// bind() to `addr`.
pub fn bind(fd: i32, addr: &RawAddr) -> Result<(), i32> {
    // SAFETY: `addr` holds a valid sockaddr of `len` bytes.
    if unsafe { libc::bind(fd, addr.ptr(), addr.len) } < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// The pending error of a socket (SO_ERROR), 0 when none.
#[inline]
pub fn so_error(fd: i32) -> i32 {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid out-pointers of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        errno()
    } else {
        v
    }
}

#[inline]
pub fn close(fd: i32) {
    // SAFETY: the caller owns `fd` and never uses it again.
    unsafe { libc::close(fd) };
}

/// recv(): Ok(0) is end of stream; Err(EAGAIN) means nothing more now.
#[inline]
pub fn recv(fd: i32, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: `buf` is valid for writes of its length.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// recvfrom(): one datagram and its sender's address.
pub fn recv_from(fd: i32, buf: &mut [u8]) -> Result<(usize, RawAddr), i32> {
    let mut from = RawAddr {
        // SAFETY: sockaddr_storage is plain data: all zeroes is a valid value.
        storage: unsafe { std::mem::zeroed() },
        len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
    };
    // SAFETY: `buf` is valid for writes of its length, `from.storage` for `from.len` bytes.
    let r = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
            &mut from.storage as *mut _ as *mut libc::sockaddr,
            &mut from.len,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok((r as usize, from))
    }
}

/// sendto() without SIGPIPE.
pub fn send_to(fd: i32, buf: &[u8], to: &RawAddr) -> Result<usize, i32> {
    // SAFETY: `buf` is valid for reads of its length; `to` holds a valid sockaddr of `len` bytes.
    let r = unsafe {
        libc::sendto(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
            to.ptr(),
            to.len,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// send() without SIGPIPE.
#[inline]
pub fn send(fd: i32, buf: &[u8]) -> Result<usize, i32> {
    // SAFETY: `buf` is valid for reads of its length.
    let r = unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// Gathered send of two buffers without SIGPIPE (sendmsg, so MSG_NOSIGNAL applies).
#[inline]
pub fn send2(fd: i32, a: &[u8], b: &[u8]) -> Result<usize, i32> {
    let mut iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut libc::c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        },
    ];
    // SAFETY: msghdr is plain data, valid when zeroed; the iovecs point into live buffers the kernel only
    // reads.
    let r = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = if b.is_empty() { 1 } else { 2 };
        libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL)
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// An epoll instance, closed on drop.
pub struct Epoll(i32);

impl Epoll {
    pub fn new() -> std::io::Result<Epoll> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(Epoll(fd))
        }
    }

    #[inline]
    pub fn add(&self, fd: i32, events: u32, data: u64) -> Result<(), i32> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    /// Wait up to `timeout_ms`; EINTR counts as no events.
    #[inline]
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: `events` is valid for writes of its length.
        let n = unsafe {
            libc::epoll_wait(self.0, events.as_mut_ptr(), events.len() as i32, timeout_ms)
        };
        n.max(0) as usize
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        close(self.0);
    }
}

pub const EV_IN: u32 = libc::EPOLLIN as u32;
pub const EV_OUT: u32 = libc::EPOLLOUT as u32;
pub const EV_ET: u32 = libc::EPOLLET as u32;
pub const EV_RDHUP: u32 = libc::EPOLLRDHUP as u32;
pub const EV_ERR: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;

/// A listening socket on `addr` (SO_REUSEADDR, and SO_REUSEPORT so that one listener per event loop shares
/// the port and the kernel spreads connections across them), non-blocking, backlog 4096 (capped by
/// net.core.somaxconn).
pub fn listener(addr: &SocketAddr) -> std::io::Result<i32> {
    let raw = RawAddr::new(addr);
    let fd = tcp_socket(raw.family()).map_err(std::io::Error::from_raw_os_error)?;
    let fail = |e: i32| {
        close(fd);
        std::io::Error::from_raw_os_error(e)
    };
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).map_err(fail)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1).map_err(fail)?;
    // SAFETY: `raw` holds a valid sockaddr of `len` bytes.
    if unsafe { libc::bind(fd, raw.ptr(), raw.len) } < 0 {
        return Err(fail(errno()));
    }
    // SAFETY: plain system call on our socket.
    if unsafe { libc::listen(fd, 4096) } < 0 {
        return Err(fail(errno()));
    }
    Ok(fd)
}

/// The local address a socket is bound to.
pub fn local_addr(fd: i32) -> std::io::Result<SocketAddr> {
    let mut raw = RawAddr {
        // SAFETY: sockaddr_storage is plain data (integers and byte arrays): all zeroes is a valid value.
        storage: unsafe { std::mem::zeroed() },
        len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
    };
    // SAFETY: `raw.storage` is valid for writes of `raw.len` bytes.
    let r = unsafe {
        libc::getsockname(
            fd,
            &mut raw.storage as *mut _ as *mut libc::sockaddr,
            &mut raw.len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    raw.to_socket_addr()
        .ok_or_else(|| std::io::Error::other("not an IP socket"))
}

/// accept4() a non-blocking connection; Err(EAGAIN) when none is pending.
#[inline]
pub fn accept(fd: i32) -> Result<i32, i32> {
    // SAFETY: null address pointers are allowed (peer address not wanted).
    let r = unsafe {
        libc::accept4(
            fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

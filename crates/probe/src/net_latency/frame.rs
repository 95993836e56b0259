//! Raw Ethernet frames for the packet-latency probe (`--ethernet`): what a protection relay's Sampled
//! Values stream is (IEC 61850-9-2: EtherType 0x88BA, an 802.1Q tag with its priority, no IP). Sent and
//! received through `AF_PACKET` sockets bound to one interface each; the probe's header rides after a
//! 9-2-style APPID/length/reserved header, so that a capture shows SV-like frames.
//!
//! Raw `libc` like the UDP socket: the kernel's packet socket and its `sockaddr_ll` have no wrapper in the
//! crates we use.

use super::wire::Socket;

/// 802.1Q's tag protocol identifier.
const TPID_8021Q: u16 = 0x8100;

/// Bytes of the 9-2 header before the probe's own: APPID, length, two reserved words.
pub const SV_HEADER: usize = 8;

/// The APPID of the frames (9-2 LE's range for Sampled Values starts at 0x4000).
const APPID: u16 = 0x4000;

/// An 802.1Q tag: VLAN id and priority (PCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vlan {
    /// VLAN id, 0..=4095 (0: priority only).
    pub id: u16,
    /// Priority code point, 0..=7 (9-2 LE: 4).
    pub pcp: u8,
}

/// The Ethernet header the sender puts before each frame's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub vlan: Option<Vlan>,
    pub ethertype: u16,
}

impl FrameHeader {
    /// Bytes before the probe's header: Ethernet (with its tag) and the 9-2 header.
    pub fn len(&self) -> usize {
        14 + if self.vlan.is_some() { 4 } else { 0 } + SV_HEADER
    }

    /// Write the headers into the start of `frame`, whose payload after them is `payload` bytes.
    pub fn write(&self, frame: &mut [u8], payload: usize) {
        frame[0..6].copy_from_slice(&self.dst);
        frame[6..12].copy_from_slice(&self.src);
        let mut i = 12;
        if let Some(v) = self.vlan {
            frame[i..i + 2].copy_from_slice(&TPID_8021Q.to_be_bytes());
            let tci = (u16::from(v.pcp) << 13) | (v.id & 0x0fff);
            frame[i + 2..i + 4].copy_from_slice(&tci.to_be_bytes());
            i += 4;
        }
        frame[i..i + 2].copy_from_slice(&self.ethertype.to_be_bytes());
        i += 2;
        let length = (SV_HEADER + payload) as u16;
        frame[i..i + 2].copy_from_slice(&APPID.to_be_bytes());
        frame[i + 2..i + 4].copy_from_slice(&length.to_be_bytes());
        frame[i + 4..i + 8].fill(0);
    }
}

/// The probe's payload of a received frame of `ethertype` (its tag, where the kernel left it in the data,
/// skipped), `None` for another EtherType.
pub fn payload(frame: &[u8], ethertype: u16) -> Option<&[u8]> {
    let be = |i: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(i)?, *frame.get(i + 1)?]))
    };
    let mut i = 12;
    if be(i)? == TPID_8021Q {
        i += 4;
    }
    if be(i)? != ethertype {
        return None;
    }
    frame.get(i + 2 + SV_HEADER..)
}

/// `interface`'s index and MAC address, as the calling thread's network namespace sees it.
fn interface(fd: i32, name: &str) -> std::io::Result<(i32, [u8; 6])> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{name}' is not an interface name"),
        ));
    }
    // struct ifreq: the name, then a union whose largest member is 24 bytes (the hardware address is a
    // struct sockaddr in it).
    #[repr(C)]
    struct IfReq {
        name: [libc::c_char; libc::IFNAMSIZ],
        data: [u8; 24],
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: [0; 24],
    };
    for (d, s) in req.name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq-sized buffer the kernel fills.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFINDEX, &mut req) } < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("interface {name}: {e}"),
        ));
    }
    let index = i32::from_ne_bytes([req.data[0], req.data[1], req.data[2], req.data[3]]);
    // SAFETY: as above.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR, &mut req) } < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("interface {name}: {e}"),
        ));
    }
    // sockaddr: a 2-byte family, then the address.
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&req.data[2..8]);
    Ok((index, mac))
}

/// `aa:bb:cc:dd:ee:ff` (or with dashes) as six bytes. (Six hex pairs: not worth a crate.)
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split([':', '-']);
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// A raw packet socket on `interface`: receiving frames of `ethertype` (`Some`), or sending only (`None`).
/// Its interface's MAC address with it. A receiver of a multicast `group` (a Sampled Values stream goes to
/// 01:0C:CD:04:xx:xx) subscribes the interface to it (`PACKET_ADD_MEMBERSHIP`), so that a NIC's address
/// filter passes it; the subscription ends with the socket.
pub fn open(
    interface_name: &str,
    ethertype: Option<u16>,
    group: Option<[u8; 6]>,
) -> std::io::Result<(Socket, [u8; 6])> {
    let proto = ethertype.unwrap_or(0).to_be() as i32;
    // SAFETY: plain system call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("AF_PACKET socket: {e}"),
        ));
    }
    let sock = Socket::from_fd(fd);
    let (index, mac) = interface(fd, interface_name)?;
    // SAFETY: sockaddr_ll is plain data, valid when zeroed.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto as u16;
    sll.sll_ifindex = index;
    // SAFETY: `sll` is a valid sockaddr_ll of the size given.
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("bind to {interface_name}: {e}"),
        ));
    }
    if let Some(g) = group.filter(|g| g[0] & 1 == 1) {
        // SAFETY: packet_mreq is plain data, valid when zeroed.
        let mut m: libc::packet_mreq = unsafe { std::mem::zeroed() };
        m.mr_ifindex = index;
        m.mr_type = libc::PACKET_MR_MULTICAST as u16;
        m.mr_alen = 6;
        m.mr_address[..6].copy_from_slice(&g);
        crate::net::sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &m)
            .map_err(|e| {
                let e = std::io::Error::from_raw_os_error(e);
                std::io::Error::new(
                    e.kind(),
                    format!("subscribing {interface_name} to the group: {e}"),
                )
            })?;
    }
    Ok((sock, mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mac_address_is_six_hex_pairs() {
        assert_eq!(
            parse_mac("52:54:00:ab:CD:0f"),
            Some([0x52, 0x54, 0, 0xab, 0xcd, 0x0f])
        );
        assert_eq!(
            parse_mac("01-0c-cd-04-00-01"),
            Some([1, 0x0c, 0xcd, 4, 0, 1])
        );
        for bad in [
            "",
            "52:54:00:ab:cd",
            "52:54:00:ab:cd:0f:00",
            "5:54:00:ab:cd:0f",
            "zz:54:00:ab:cd:0f",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_tagged_frame_carries_its_priority_and_gives_back_its_payload() {
        let h = FrameHeader {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan: Some(Vlan { id: 100, pcp: 4 }),
            ethertype: 0x88ba,
        };
        assert_eq!(h.len(), 26);
        let mut f = [0u8; 26 + 4];
        h.write(&mut f, 4);
        f[26..].copy_from_slice(b"data");
        assert_eq!(
            &f[12..16],
            &[0x81, 0x00, 0x80, 100],
            "TPID, PCP 4 in the top bits, VLAN 100"
        );
        assert_eq!(&f[16..18], &[0x88, 0xba]);
        assert_eq!(
            &f[18..22],
            &[0x40, 0x00, 0, 12],
            "APPID 0x4000, length of the 9-2 header and payload"
        );
        assert_eq!(payload(&f, 0x88ba), Some(&b"data"[..]));
        assert_eq!(payload(&f, 0x0800), None, "another EtherType");
        // The kernel takes the tag out of an untagged receive path's data: the same payload without it.
        let mut untagged = Vec::from(&f[..12]);
        untagged.extend_from_slice(&f[16..]);
        assert_eq!(payload(&untagged, 0x88ba), Some(&b"data"[..]));
        assert_eq!(payload(&f[..13], 0x88ba), None, "too short");
    }
}

//! chrony read through its command socket, as `chronyc tracking` reads it: one `TRACKING` request per
//! poll (chrony's protocol version 6, candm.h). A new offset is chrony's last measured offset, counted
//! once per clock update (when its reference time moves).
//!
//! Written here rather than taken from a crate: no maintained Rust crate speaks chrony's command protocol,
//! and one request of 104 bytes is all that is needed. chronyd's `local` reference (its own clock, kept
//! when every source is lost) is no reference: its state is `local`.

use super::socket::DaemonSocket;
use super::track::Reading;
use rtgauge_model::clock::Reference;
use std::time::Duration;

const VERSION: u8 = 6;
const REQUEST: u8 = 1;
const REPLY: u8 = 2;
const REQ_TRACKING: u16 = 33;
const RPY_TRACKING: u16 = 5;
/// A request is padded to its reply's length (chronyd refuses a shorter one).
const TRACKING_LEN: usize = 104;
/// The reference id of chronyd's `local` reference: its own clock, kept when every source is lost.
const LOCAL_REFERENCE: u32 = 0x7f7f_0101;

/// A client of one chronyd.
pub struct Chronyc {
    socket: DaemonSocket,
    sequence: u32,
    last_ref_time: Option<(u64, u32)>,
}

/// chrony's 32-bit float: a 7-bit signed exponent over a 25-bit signed coefficient.
pub fn float(x: u32) -> f64 {
    let mut exp = (x >> 25) as i32;
    if exp >= 64 {
        exp -= 128;
    }
    let mut coef = (x & 0x01ff_ffff) as i64;
    if coef >= 1 << 24 {
        coef -= 1 << 25;
    }
    coef as f64 * 2f64.powi(exp - 25)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// chrony's tracking reply, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracking {
    /// Its reference's id (an IPv4 address, or four characters of a refclock's name).
    pub ref_id: u32,
    /// The reference's address, where it has one.
    pub address: Option<std::net::IpAddr>,
    /// Its stratum.
    pub stratum: u16,
    /// 0 normal, 1 insert second, 2 delete second, 3 not synchronised.
    pub leap: u16,
    /// When the clock was last updated: seconds, ns.
    pub ref_time: (u64, u32),
    /// The offset measured at the last update, s.
    pub last_offset: f64,
    /// Its RMS over recent updates, s.
    pub rms_offset: f64,
    /// Frequency, ppm (positive: the clock runs fast).
    pub freq_ppm: f64,
    /// Its skew, ppm.
    pub skew_ppm: f64,
    /// Root delay, s.
    pub root_delay: f64,
}

/// Parse a `RPY_TRACKING` answer to request `sequence`.
pub fn parse_tracking(b: &[u8], sequence: u32) -> std::io::Result<Tracking> {
    let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    if b.len() < 28 || b[0] != VERSION || b[1] != REPLY || u32_at(b, 16) != sequence {
        return Err(bad(format!(
            "not an answer to this request ({} bytes)",
            b.len()
        )));
    }
    let status = u16_at(b, 8);
    if status != 0 {
        return Err(bad(format!(
            "chronyd refused the request (status {status})"
        )));
    }
    if u16_at(b, 6) != RPY_TRACKING || b.len() < TRACKING_LEN {
        return Err(bad(format!("not a tracking reply ({} bytes)", b.len())));
    }
    let address = match u16_at(b, 48) {
        1 => Some(std::net::IpAddr::from([b[32], b[33], b[34], b[35]])),
        2 => Some(std::net::IpAddr::from(
            <[u8; 16]>::try_from(&b[32..48]).unwrap_or_default(),
        )),
        _ => None,
    };
    let high = u32_at(b, 56);
    let secs = if high == 0x7fff_ffff {
        0
    } else {
        (high as u64) << 32
    } | u32_at(b, 60) as u64;
    Ok(Tracking {
        ref_id: u32_at(b, 28),
        address,
        stratum: u16_at(b, 52),
        leap: u16_at(b, 54),
        ref_time: (secs, u32_at(b, 64)),
        last_offset: float(u32_at(b, 72)),
        rms_offset: float(u32_at(b, 76)),
        freq_ppm: float(u32_at(b, 80)),
        skew_ppm: float(u32_at(b, 88)),
        root_delay: float(u32_at(b, 92)),
    })
}

impl Tracking {
    /// The reference as the views name it: its address, else its id as chronyc prints it (four
    /// characters where they are printable, else hex).
    fn reference(&self) -> Reference {
        let id = match self.address {
            Some(a) => a.to_string(),
            None => {
                let b = self.ref_id.to_be_bytes();
                let text: String = b
                    .iter()
                    .take_while(|c| **c != 0)
                    .map(|c| *c as char)
                    .collect();
                if !text.is_empty() && text.chars().all(|c| c.is_ascii_graphic()) {
                    text
                } else {
                    format!("{:08X}", self.ref_id)
                }
            }
        };
        Reference {
            id,
            class: u8::try_from(self.stratum).ok(),
        }
    }
}

fn ns(s: f64) -> i64 {
    (s * 1e9).round() as i64
}

impl Chronyc {
    /// Bind a socket beside chronyd's `path` and connect to it.
    pub fn connect(path: &str, timeout: Duration) -> std::io::Result<Chronyc> {
        Ok(Chronyc {
            // chronyd may have dropped root: it must be able to write to this socket.
            socket: DaemonSocket::connect(
                path,
                "rtgauge",
                timeout,
                "chronyd did not answer in time".into(),
                true,
            )?,
            sequence: 0,
            last_ref_time: None,
        })
    }

    /// One `TRACKING` exchange.
    pub fn tracking(&mut self) -> std::io::Result<Tracking> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut req = [0u8; TRACKING_LEN];
        req[0] = VERSION;
        req[1] = REQUEST;
        req[4..6].copy_from_slice(&REQ_TRACKING.to_be_bytes());
        req[8..12].copy_from_slice(&self.sequence.to_be_bytes());
        let mut buf = [0u8; 512];
        let seq = self.sequence;
        let n =
            self.socket.exchange(
                &req,
                &mut buf,
                |b| Ok(b.len() >= 20 && u32_at(b, 16) == seq),
            )?;
        parse_tracking(&buf[..n], seq)
    }

    /// Count the next clock update as new, whatever was read before (the read that checked the source).
    pub fn forget(&mut self) {
        self.last_ref_time = None;
    }

    /// One poll.
    pub fn read(&mut self) -> std::io::Result<Reading> {
        let t = self.tracking()?;
        let fresh = self.last_ref_time != Some(t.ref_time);
        self.last_ref_time = Some(t.ref_time);
        // Its `local` reference is its own clock, kept when every source is lost: no reference.
        let local = t.ref_id == LOCAL_REFERENCE;
        let synced = t.leap != 3 && t.ref_id != 0 && !local;
        Ok(Reading {
            state: match t.leap {
                0..=2 if local => "local",
                0 => "normal",
                1 => "insert second",
                2 => "delete second",
                _ => "unsynchronised",
            }
            .into(),
            has_reference: synced,
            serving: false,
            reference: synced.then(|| t.reference()),
            offset_ns: (synced && fresh).then(|| ns(t.last_offset)),
            delay_ns: synced.then(|| ns(t.root_delay)),
            // chrony's frequency is the clock's own error (positive: fast); the correction is its
            // opposite.
            freq_ppb: Some(-t.freq_ppm * 1000.0),
            rms_offset_ns: synced.then(|| ns(t.rms_offset)),
            skew_ppb: Some(t.skew_ppm * 1000.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_decode_as_chrony_encodes_them() {
        // value = coefficient · 2^(exponent − 25): 1.0 = 2^23 · 2^(2 − 25).
        assert_eq!(float((2 << 25) | (1 << 23)), 1.0);
        // −1.0: coefficient −2^23 (two's complement in 25 bits), exponent 2.
        assert_eq!(float((2 << 25) | ((1 << 25) - (1 << 23))), -1.0);
        // A negative exponent: 0.25 = 2^23 · 2^(0 − 25).
        assert_eq!(float(1 << 23), 0.25);
        assert_eq!(float(0), 0.0);
    }

    #[test]
    fn a_reply_to_another_request_or_a_refusal_is_an_error() {
        let mut b = [0u8; TRACKING_LEN];
        b[0] = VERSION;
        b[1] = REPLY;
        b[6..8].copy_from_slice(&RPY_TRACKING.to_be_bytes());
        b[16..20].copy_from_slice(&7u32.to_be_bytes());
        assert!(parse_tracking(&b, 7).is_ok());
        assert!(parse_tracking(&b, 8).is_err());
        b[8..10].copy_from_slice(&19u16.to_be_bytes());
        let e = parse_tracking(&b, 7).unwrap_err().to_string();
        assert!(e.contains("status 19"), "{e}");
        assert!(parse_tracking(&b[..20], 7).is_err());
    }
}

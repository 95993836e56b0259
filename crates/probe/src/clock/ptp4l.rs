//! ptp4l read through its management socket, as `pmc -u -b 0` reads it: per poll a GET of
//! `TIME_STATUS_NP` (offset from the master, the sync's ingress time, whether a grandmaster is present and
//! which), `PORT_DATA_SET` of port 1 (its state), `PARENT_DATA_SET` (the grandmaster's class) and
//! `CURRENT_DATA_SET` (mean path delay). An offset counts once per sync: a new one is a new ingress time.
//!
//! Written here rather than taken from a crate: no maintained Rust crate speaks linuxptp's management
//! protocol over its Unix socket, and four GETs of IEEE 1588 management messages are all that is needed.
//! ptp4l answers at the path the client's socket is bound to; it is bound beside ptp4l's and removed when
//! done.

use super::socket::DaemonSocket;
use super::track::Reading;
use rtgauge_model::clock::Reference;
use std::time::Duration;

/// Header, target port identity, boundary hops, action; then the TLV.
const TLV_AT: usize = 48;
const MANAGEMENT: u8 = 0x0d;
const TLV_MANAGEMENT: u16 = 0x0001;
const TLV_MANAGEMENT_ERROR_STATUS: u16 = 0x0002;
const GET: u8 = 0;
const RESPONSE: u8 = 2;

/// The management ids read.
pub const DEFAULT_DATA_SET: u16 = 0x2000;
/// See [`DEFAULT_DATA_SET`].
pub const CURRENT_DATA_SET: u16 = 0x2001;
/// See [`DEFAULT_DATA_SET`].
pub const PARENT_DATA_SET: u16 = 0x2002;
/// See [`DEFAULT_DATA_SET`].
pub const PORT_DATA_SET: u16 = 0x2004;
/// See [`DEFAULT_DATA_SET`].
pub const TIME_STATUS_NP: u16 = 0xc000;

/// IEEE 1588 port states, as pmc names them.
pub fn port_state(s: u8) -> &'static str {
    match s {
        1 => "INITIALIZING",
        2 => "FAULTY",
        3 => "DISABLED",
        4 => "LISTENING",
        5 => "PRE_MASTER",
        6 => "MASTER",
        7 => "PASSIVE",
        8 => "UNCALIBRATED",
        9 => "SLAVE",
        10 => "GRAND_MASTER",
        _ => "UNKNOWN",
    }
}

/// A clockIdentity as linuxptp prints it (`001122.fffe.334455`).
pub fn clock_identity(b: &[u8]) -> String {
    let h = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("{}.{}.{}", h(0..3), h(3..5), h(5..8))
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// The GET of `id` with sequence `seq`: management to every clock (wildcard identity) at `port`
/// (0xffff: the clock itself), boundary hops 0 (this clock only), from source port `me`.
pub fn get_message(id: u16, seq: u16, domain: u8, port: u16, me: u16) -> [u8; TLV_AT + 6] {
    let mut m = [0u8; TLV_AT + 6];
    m[0] = MANAGEMENT;
    m[1] = 2;
    m[2..4].copy_from_slice(&((TLV_AT + 6) as u16).to_be_bytes());
    m[4] = domain;
    // sourcePortIdentity: identity zero (never ptp4l's own), the port this process's pid, as pmc sends.
    m[28..30].copy_from_slice(&me.to_be_bytes());
    m[30..32].copy_from_slice(&seq.to_be_bytes());
    m[32] = 0x04;
    m[33] = 0x7f;
    m[34..42].fill(0xff);
    m[42..44].copy_from_slice(&port.to_be_bytes());
    m[44] = 0;
    m[45] = 0;
    m[46] = GET;
    m[TLV_AT..TLV_AT + 2].copy_from_slice(&TLV_MANAGEMENT.to_be_bytes());
    m[TLV_AT + 2..TLV_AT + 4].copy_from_slice(&2u16.to_be_bytes());
    m[TLV_AT + 4..TLV_AT + 6].copy_from_slice(&id.to_be_bytes());
    m
}

/// The data of a RESPONSE to GET `id` with sequence `seq`, sent to `port` (the source port number the
/// request carried): `Ok(None)` for a message that answers something else (skipped), an error for a
/// refusal or a malformed answer.
pub fn response_data(b: &[u8], id: u16, seq: u16, port: u16) -> std::io::Result<Option<&[u8]>> {
    let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    if b.len() < TLV_AT + 6 || b[0] & 0x0f != MANAGEMENT {
        return Ok(None);
    }
    let be = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    // An answer to another client (pmc, phc2sys) of the same ptp4l, or to an earlier request.
    if be(30) != seq || be(42) != port {
        return Ok(None);
    }
    let (tlv, len) = (be(TLV_AT), be(TLV_AT + 2) as usize);
    if len < 2 {
        return Err(bad(format!(
            "ptp4l's answer to GET {id:#06x} has a TLV of {len} bytes"
        )));
    }
    let end = (TLV_AT + 4 + len).min(b.len());
    match tlv {
        TLV_MANAGEMENT_ERROR_STATUS => Err(bad(format!(
            "ptp4l refused GET {id:#06x} (management error {:#06x})",
            be(TLV_AT + 4)
        ))),
        TLV_MANAGEMENT if b[46] & 0x0f == RESPONSE => {
            Ok((be(TLV_AT + 4) == id).then(|| &b[TLV_AT + 6..end]))
        }
        _ => Ok(None),
    }
}

/// What one poll read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ptp4lStatus {
    /// `TIME_STATUS_NP`'s master offset, ns.
    pub master_offset_ns: i64,
    /// The sync it was measured on arrived at this time (ptp4l's clock), ns.
    pub ingress_ns: i64,
    /// Whether a grandmaster other than this clock is present.
    pub gm_present: bool,
    /// The grandmaster's identity.
    pub gm_identity: String,
    /// Its clockClass.
    pub gm_class: u8,
    /// The state of the port that follows a master, else port 1's.
    pub port_state: u8,
    /// Whether a port is a master or a standby one (PRE_MASTER, MASTER, PASSIVE, GRAND_MASTER).
    pub serving: bool,
    /// Mean path delay, ns (`CURRENT_DATA_SET`, scaled ns / 2^16).
    pub path_delay_ns: i64,
}

/// A client of one ptp4l.
pub struct Pmc {
    socket: DaemonSocket,
    domain: u8,
    seq: u16,
    /// The source port number its requests carry (answers carry it back).
    me: u16,
    /// The clock's ports (`DEFAULT_DATA_SET`'s numberPorts).
    ports: u16,
    last_ingress: Option<i64>,
}

impl Pmc {
    /// Bind a socket beside ptp4l's `path` and connect to it; `domain` is ptp4l's `domainNumber`. Reads
    /// how many ports the clock has.
    pub fn connect(path: &str, domain: u8, timeout: Duration) -> std::io::Result<Pmc> {
        let socket = DaemonSocket::connect(
            path,
            "rtgauge-pmc",
            timeout,
            format!("ptp4l did not answer in time (is its domainNumber {domain}? --ptp-domain)"),
            false,
        )?;
        let mut p = Pmc {
            socket,
            domain,
            seq: 0,
            me: (std::process::id() & 0xffff) as u16,
            ports: 1,
            last_ingress: None,
        };
        let d = p.get(DEFAULT_DATA_SET, 0xffff)?;
        if d.len() < 4 {
            return Err(short("DEFAULT_DATA_SET"));
        }
        p.ports = u16::from_be_bytes([d[2], d[3]]).max(1);
        Ok(p)
    }

    /// GET `id` (of `port`, 0xffff for the clock): its data.
    fn get(&mut self, id: u16, port: u16) -> std::io::Result<Vec<u8>> {
        self.seq = self.seq.wrapping_add(1);
        let (seq, me) = (self.seq, self.me);
        let mut buf = [0u8; 1500];
        let request = get_message(id, seq, self.domain, port, me);
        let n = self.socket.exchange(&request, &mut buf, |b| {
            response_data(b, id, seq, me).map(|d| d.is_some())
        })?;
        Ok(response_data(&buf[..n], id, seq, me)?
            .unwrap_or_default()
            .to_vec())
    }

    /// The GETs of one poll: the clock's status, each port's state, the parent and the current data set.
    pub fn status(&mut self) -> std::io::Result<Ptp4lStatus> {
        let t = self.get(TIME_STATUS_NP, 0xffff)?;
        if t.len() < 50 {
            return Err(short("TIME_STATUS_NP"));
        }
        // The port that follows a master, if one does (on a boundary clock it need not be port 1).
        let (mut port_state, mut serving) = (0, false);
        for port in 1..=self.ports {
            let p = self.get(PORT_DATA_SET, port)?;
            let s = *p.get(10).ok_or_else(|| short("PORT_DATA_SET"))?;
            // PASSIVE: a standby grandmaster, or a boundary clock's redundant port.
            serving |= matches!(s, 5 | 6 | 7 | 10);
            if port == 1 || matches!(s, 8 | 9) && !matches!(port_state, 9) {
                port_state = s;
            }
        }
        let parent = self.get(PARENT_DATA_SET, 0xffff)?;
        if parent.len() < 32 {
            return Err(short("PARENT_DATA_SET"));
        }
        let current = self.get(CURRENT_DATA_SET, 0xffff)?;
        if current.len() < 18 {
            return Err(short("CURRENT_DATA_SET"));
        }
        Ok(Ptp4lStatus {
            master_offset_ns: i64_at(&t, 0),
            ingress_ns: i64_at(&t, 8),
            gm_present: i32::from_be_bytes([t[38], t[39], t[40], t[41]]) != 0,
            gm_identity: clock_identity(&t[42..50]),
            gm_class: parent[19],
            port_state,
            serving,
            path_delay_ns: i64_at(&current, 10) >> 16,
        })
    }

    /// Count the next sync as new, whatever was read before (the read that checked the source).
    pub fn forget(&mut self) {
        self.last_ingress = None;
    }

    /// One poll.
    pub fn read(&mut self) -> std::io::Result<Reading> {
        let s = self.status()?;
        // Following a master: a port UNCALIBRATED or SLAVE (a slaveOnly clock keeps its last
        // grandmaster and offset when the master goes, gmPresent stays 1: the state tells). A new offset
        // is a new sync's (ptp4l zeroes the ingress time when it changes or loses its master).
        let following = matches!(s.port_state, 8 | 9);
        let fresh = self.last_ingress != Some(s.ingress_ns) && s.ingress_ns != 0;
        self.last_ingress = Some(s.ingress_ns);
        Ok(Reading {
            state: port_state(s.port_state).into(),
            has_reference: following,
            serving: s.serving && !following,
            reference: (following && s.gm_present).then(|| Reference {
                id: s.gm_identity.clone(),
                class: Some(s.gm_class),
            }),
            offset_ns: (following && fresh).then_some(s.master_offset_ns),
            delay_ns: following.then_some(s.path_delay_ns),
            ..Reading::default()
        })
    }
}

fn short(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("ptp4l's {what} answer is too short"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_is_a_management_message_with_an_empty_tlv() {
        let m = get_message(TIME_STATUS_NP, 7, 0, 0xffff, 9);
        assert_eq!(m.len(), 54);
        assert_eq!(m[0], 0x0d);
        assert_eq!(u16::from_be_bytes([m[2], m[3]]), 54);
        assert_eq!(&m[48..54], &[0, 1, 0, 2, 0xc0, 0]);
        assert_eq!(
            clock_identity(&[0, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]),
            "001122.fffe.334455"
        );
    }

    #[test]
    fn an_error_status_is_a_refusal_and_another_answer_is_skipped() {
        let mut m = get_message(PORT_DATA_SET, 3, 0, 1, 9).to_vec();
        m[46] = RESPONSE;
        // ptp4l answers to the request's source port.
        m[42..44].copy_from_slice(&9u16.to_be_bytes());
        m.extend_from_slice(&[0; 26]);
        m[50..52].copy_from_slice(&28u16.to_be_bytes());
        assert_eq!(
            response_data(&m, PORT_DATA_SET, 3, 9)
                .unwrap()
                .unwrap()
                .len(),
            26
        );
        assert!(response_data(&m, PORT_DATA_SET, 4, 9).unwrap().is_none());
        assert!(response_data(&m, TIME_STATUS_NP, 3, 9).unwrap().is_none());
        // Another client's answer.
        assert!(response_data(&m, PORT_DATA_SET, 3, 10).unwrap().is_none());
        // A TLV too short to hold its id is malformed, not a panic.
        let mut short = m.clone();
        short[50..52].copy_from_slice(&0u16.to_be_bytes());
        assert!(response_data(&short, PORT_DATA_SET, 3, 9).is_err());
        m[48..50].copy_from_slice(&TLV_MANAGEMENT_ERROR_STATUS.to_be_bytes());
        assert!(response_data(&m, PORT_DATA_SET, 3, 9).is_err());
    }
}

//! The binary side of the trace: `per_cpu/cpuN/trace_pipe_raw` hands the reader the ring buffer's pages as
//! they are (the kernel copies or swaps a page; it formats nothing), decoded here with the layouts the
//! kernel publishes: `events/header_page` (where a page's length and data are) and each event's
//! `events/<system>/<event>/format` (its id and its fields' offsets and sizes).
//!
//! Why: reading `trace_pipe` as text made the kernel format every event for the reader, and the reader
//! parse it back — ~5 µs of the housekeeping CPU per event, most of it in the kernel (measured on this
//! project's VM: 140 of 250 ms system time for 45,000 events), which is what put a 256-CPU traced run out
//! of one CPU's reach (docs/why.md). Decoding a page's records is a few loads per event.
//!
//! Why by hand: the page and record formats are the kernel's published ABI (the files above and the event
//! header of include/linux/ring_buffer.h: a 32-bit word of 5 bits type/length and 27 bits time delta); the
//! maintained decoder is libtraceevent, a C library whose Rust bindings need it installed at build time,
//! which the README's first command (a machine with only Rust) cannot assume. Text `trace_pipe` stays the
//! path where a layout cannot be read ([`PageLayout::load`] returns `None`), and for readers of raw lines.

use super::fold::Ev;
use std::collections::HashMap;
use std::path::Path;

/// Where a field lies in a record, from a `format` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    offset: usize,
    size: usize,
    signed: bool,
    loc: Loc,
}

/// How a field holds its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    /// In place (integers, `char comm[16]`).
    Plain,
    /// `__data_loc`: a 32-bit word, the data's offset from the record's start (low 16 bits) and its length.
    Data,
    /// `__rel_loc`: the same, the offset counted from the end of the word.
    Rel,
}

impl Field {
    /// The field as an integer (sign-extended where the format says signed).
    fn int(&self, rec: &[u8]) -> Option<i64> {
        let b = rec.get(self.offset..self.offset + self.size)?;
        Some(match (self.size, self.signed) {
            (1, true) => i64::from(b[0] as i8),
            (1, false) => i64::from(b[0]),
            (2, true) => i64::from(i16::from_ne_bytes(b.try_into().ok()?)),
            (2, false) => i64::from(u16::from_ne_bytes(b.try_into().ok()?)),
            (4, true) => i64::from(i32::from_ne_bytes(b.try_into().ok()?)),
            (4, false) => i64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            (8, _) => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// The field's bytes as a string: up to its first NUL.
    fn bytes<'a>(&self, rec: &'a [u8]) -> Option<&'a [u8]> {
        let b = match self.loc {
            Loc::Plain => rec.get(self.offset..self.offset + self.size)?,
            Loc::Data | Loc::Rel => {
                let w = u32::from_ne_bytes(rec.get(self.offset..self.offset + 4)?.try_into().ok()?);
                let (off, len) = ((w & 0xffff) as usize, (w >> 16) as usize);
                let off = if self.loc == Loc::Rel {
                    off + self.offset + 4
                } else {
                    off
                };
                rec.get(off..off.checked_add(len)?)?
            }
        };
        Some(b.split(|&c| c == 0).next().unwrap_or(b))
    }
}

/// A comm or name as text: valid UTF-8 as it is; otherwise (or holding a newline, as `echo name >
/// /proc/PID/comm` leaves) written into `scratch`, the newline as `?` (as the text reader joins such a
/// line) and invalid bytes as U+FFFD (as the text reader reads them).
fn text<'a>(b: &'a [u8], scratch: &'a mut String) -> &'a str {
    match std::str::from_utf8(b) {
        Ok(s) if !s.contains('\n') => s,
        _ => {
            scratch.clear();
            scratch.extend(
                String::from_utf8_lossy(b)
                    .chars()
                    .map(|c| if c == '\n' { '?' } else { c }),
            );
            scratch
        }
    }
}

/// One event's id, name and fields, from its `format` file.
pub(crate) fn parse_format(text: &str) -> Option<(u16, String, HashMap<String, Field>)> {
    let mut id = None;
    let mut name = None;
    let mut fields = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("ID:") {
            id = v.trim().parse().ok();
        } else if line.starts_with("field:") {
            if let Some((n, f)) = parse_field(line) {
                fields.insert(n, f);
            }
        }
    }
    Some((id?, name?, fields))
}

/// `field:unsigned int vec; offset:8; size:4; signed:0;` → ("vec", its place).
fn parse_field(line: &str) -> Option<(String, Field)> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl?;
    let last = decl.rsplit([' ', '*']).find(|w| !w.is_empty())?;
    let name = last.split('[').next()?.to_string();
    let loc = if decl.starts_with("__data_loc") {
        Loc::Data
    } else if decl.starts_with("__rel_loc") {
        Loc::Rel
    } else {
        Loc::Plain
    };
    Some((
        name,
        Field {
            offset: offset?,
            size: size?,
            signed,
            loc,
        },
    ))
}

/// How one event id is decoded.
#[derive(Debug, Clone)]
enum Decoder {
    IrqEntry { irq: Field, name: Field },
    IrqExit,
    SoftirqEntry { vec: Field },
    SoftirqExit,
    WorkStart { function: Field },
    WorkEnd,
    Nmi { handler: Field, delta: Field },
    Switch([Field; 6]),
    SetschedEnter { pid: Field, policy: Field },
    SetschedExit { ret: Field },
    VectorEntry(String),
    VectorExit,
}

impl Decoder {
    fn of(event: &str, f: &HashMap<String, Field>) -> Option<Decoder> {
        let g = |n: &str| f.get(n).copied();
        Some(match event {
            "irq_handler_entry" => Decoder::IrqEntry {
                irq: g("irq")?,
                name: g("name")?,
            },
            "irq_handler_exit" => Decoder::IrqExit,
            "softirq_entry" => Decoder::SoftirqEntry { vec: g("vec")? },
            "softirq_exit" => Decoder::SoftirqExit,
            "workqueue_execute_start" => Decoder::WorkStart {
                function: g("function")?,
            },
            "workqueue_execute_end" => Decoder::WorkEnd,
            "nmi_handler" => Decoder::Nmi {
                handler: g("handler")?,
                delta: g("delta_ns")?,
            },
            "sched_switch" => Decoder::Switch([
                g("prev_comm")?,
                g("prev_pid")?,
                g("prev_prio")?,
                g("next_comm")?,
                g("next_pid")?,
                g("next_prio")?,
            ]),
            "sys_enter_sched_setscheduler" => Decoder::SetschedEnter {
                pid: g("pid")?,
                policy: g("policy")?,
            },
            "sys_exit_sched_setscheduler" => Decoder::SetschedExit { ret: g("ret")? },
            e => {
                if let Some(v) = e.strip_suffix("_entry") {
                    Decoder::VectorEntry(v.to_string())
                } else if e.ends_with("_exit") {
                    Decoder::VectorExit
                } else {
                    return None;
                }
            }
        })
    }
}

fn set_kind(kinds: &mut Vec<Option<Decoder>>, id: u16, k: Decoder) {
    let i = usize::from(id);
    if kinds.len() <= i {
        kinds.resize(i + 1, None);
    }
    kinds[i] = Some(k);
}

/// The softirq vectors' names, as the kernel prints them (`softirq_to_name`).
const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// A page's layout and the decoders of the enabled events.
#[derive(Debug, Clone)]
pub(crate) struct PageLayout {
    commit: Field,
    data: usize,
    /// The page (sub-buffer) size: what one read of trace_pipe_raw returns at most.
    pub(crate) page: usize,
    common_type: Field,
    common_pid: Field,
    /// By event id (ids are small: a few thousand events on a distribution kernel).
    kinds: Vec<Option<Decoder>>,
}

/// A tracefs layout file, read until the kernel says it is done: `header_page` answers only a read at
/// offset 0 (6.18 here: `read_to_string`'s first small read got its first 32 bytes and the next nothing), so
/// the first read asks for far more than it holds; a `format` file is a seq_file that may come in pieces.
fn read_whole(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match std::io::Read::read(&mut f, &mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// The length bits of a read page's commit word; the two above are flags (events missed before it, their
/// count stored at its end).
const LENGTH_MASK: u64 = (1 << 30) - 1;

/// Event header type_len values (include/linux/ring_buffer.h).
const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;

impl PageLayout {
    /// The layout of instance `dir`'s pages and of `events` (system, event) that the kernel has; `None`
    /// where the page header or a common field cannot be read (the reader then uses text).
    pub(crate) fn load(dir: &Path, events: &[(&str, &str)]) -> Option<PageLayout> {
        // The event header's bit fields are laid out for little-endian here; a big-endian kernel's are
        // the other way round: read as text there.
        if cfg!(target_endian = "big") {
            return None;
        }
        let header = read_whole(&dir.join("events/header_page"))?;
        let mut commit = None;
        let mut data = None;
        for line in header.lines() {
            let Some((name, f)) = parse_field(line.trim()) else {
                continue;
            };
            match name.as_str() {
                "commit" => commit = Some(f),
                "data" => data = Some(f),
                _ => {}
            }
        }
        let (commit, data) = (commit?, data?);
        let subbuf = std::fs::read_to_string(dir.join("buffer_subbuf_size_kb"))
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .map_or(0, |kb| kb * 1024);
        let mut kinds = Vec::new();
        let mut common = None;
        for (sys, ev) in events {
            let Some(text) = read_whole(&dir.join("events").join(sys).join(ev).join("format"))
            else {
                continue;
            };
            let Some((id, name, fields)) = parse_format(&text) else {
                continue;
            };
            if common.is_none() {
                common = Some((
                    fields.get("common_type").copied()?,
                    fields.get("common_pid").copied()?,
                ));
            }
            if let Some(k) = Decoder::of(&name, &fields) {
                set_kind(&mut kinds, id, k);
            }
        }
        let (common_type, common_pid) = common?;
        // Without sched_switch no thread would be charged: the text reader is used instead.
        if !kinds
            .iter()
            .flatten()
            .any(|k| matches!(k, Decoder::Switch(_)))
        {
            return None;
        }
        Some(PageLayout {
            commit,
            data: data.offset,
            page: (data.offset + data.size).max(subbuf),
            common_type,
            common_pid,
            kinds,
        })
    }

    /// Every record of one page read from trace_pipe_raw, in order, to `f` with its time (ns of the
    /// trace clock) and task. Records of events not decoded here reach `f` as [`Ev::Other`]. Anything
    /// that does not fit the page ends it: a torn page is cut short, never read past.
    pub(crate) fn page(&self, page: &[u8], f: &mut dyn FnMut(u64, Option<i64>, &Ev<'_>)) {
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(page.get(at..at + 4)?.try_into().ok()?))
        };
        let Some(mut ts) = page
            .get(..8)
            .and_then(|b| Some(u64::from_ne_bytes(b.try_into().ok()?)))
        else {
            return;
        };
        let Some(commit) = self.commit.int(page) else {
            return;
        };
        // The length is in the low 30 bits: the flags above may be set, and a 4-byte local_t (a 32-bit
        // kernel) reads sign-extended when the top one is.
        let len = (commit as u64 & LENGTH_MASK) as usize;
        let end = self.data.saturating_add(len).min(page.len());
        let mut at = self.data;
        let mut scratch = [String::new(), String::new(), String::new()];
        while at + 4 <= end {
            let Some(h) = word(at) else { break };
            let (type_len, delta) = (h & 0x1f, u64::from(h >> 5));
            let (payload, next) = match type_len {
                PADDING => {
                    if delta == 0 {
                        break; // The rest of the page is empty.
                    }
                    let Some(n) = word(at + 4) else { break };
                    ts = ts.wrapping_add(delta);
                    at = at.saturating_add(4 + n as usize);
                    continue;
                }
                TIME_EXTEND | TIME_STAMP => {
                    let Some(n) = word(at + 4) else { break };
                    let v = (u64::from(n) << 27) | delta;
                    ts = if type_len == TIME_STAMP {
                        v
                    } else {
                        ts.wrapping_add((u64::from(n) << 27) + delta)
                    };
                    at += 8;
                    continue;
                }
                0 => {
                    let Some(n) = word(at + 4) else { break };
                    let n = n as usize;
                    if n < 4 {
                        break;
                    }
                    (at + 8..at + 4 + n, at + 4 + n.div_ceil(4) * 4)
                }
                n => (at + 4..at + 4 + n as usize * 4, at + 4 + n as usize * 4),
            };
            ts = ts.wrapping_add(delta);
            let Some(rec) = page.get(payload) else { break };
            let pid = self.common_pid.int(rec);
            let ev = self.decode(rec, &mut scratch);
            f(ts, pid, &ev);
            at = next;
        }
    }

    fn decode<'a>(&'a self, rec: &'a [u8], scratch: &'a mut [String; 3]) -> Ev<'a> {
        use std::fmt::Write as _;
        let Some(kind) = self
            .common_type
            .int(rec)
            .and_then(|id| self.kinds.get(usize::try_from(id).ok()?)?.as_ref())
        else {
            return Ev::Other;
        };
        let [s0, s1, s2] = scratch;
        let bytes = |f: &Field| f.bytes(rec).unwrap_or_default();
        match kind {
            Decoder::IrqEntry { irq, name } => Ev::IrqEntry {
                irq: irq.int(rec),
                name: text(bytes(name), s0),
            },
            Decoder::IrqExit => Ev::IrqExit,
            Decoder::SoftirqEntry { vec } => Ev::SoftirqEntry(
                vec.int(rec)
                    .and_then(|v| SOFTIRQS.get(usize::try_from(v).ok()?))
                    .copied()
                    .unwrap_or("?"),
            ),
            Decoder::SoftirqExit => Ev::SoftirqExit,
            // A function pointer: named from /proc/kallsyms when the spans are handed back
            // ([`resolve_symbols`]), once for the whole run rather than per event.
            Decoder::WorkStart { function } => {
                s0.clear();
                let _ = write!(s0, "{:#x}", function.int(rec).unwrap_or(0) as u64);
                Ev::WorkStart(s0)
            }
            Decoder::WorkEnd => Ev::WorkEnd,
            Decoder::Nmi { handler, delta } => {
                s0.clear();
                let _ = write!(s0, "{:#x}", handler.int(rec).unwrap_or(0) as u64);
                Ev::Nmi {
                    handler: s0,
                    delta_ns: delta.int(rec).unwrap_or(0).max(0) as u64,
                }
            }
            Decoder::Switch([pc, pp, pprio, nc, np, nprio]) => Ev::Switch {
                prev_comm: Some(text(bytes(pc), s1)),
                prev_pid: pp.int(rec),
                prev_prio: pprio.int(rec).unwrap_or(120),
                next_comm: text(bytes(nc), s2),
                next_pid: np.int(rec).unwrap_or(0),
                next_prio: nprio.int(rec).unwrap_or(120),
            },
            Decoder::SetschedEnter { pid, policy } => Ev::SetschedEnter {
                target: pid.int(rec),
                policy: policy.int(rec),
            },
            Decoder::SetschedExit { ret } => Ev::SetschedExit {
                ok: ret.int(rec) == Some(0),
            },
            Decoder::VectorEntry(v) => Ev::VectorEntry(v),
            Decoder::VectorExit => Ev::VectorExit,
        }
    }
}

/// Name the work functions and NMI handlers that the binary records hold as addresses (`0x…`), from
/// `/proc/kallsyms` read once; an address it does not name (no privilege to see them, a module unloaded
/// since) stays as it is.
/// Whether `/proc/kallsyms` was read (some name needed it).
pub(crate) fn resolve_symbols<'a>(names: impl Iterator<Item = &'a mut String>) -> bool {
    let mut want: Vec<(&'a mut String, u64, usize)> = names
        .filter_map(|n| {
            let at = n.find("0x")?;
            let addr = u64::from_str_radix(n.get(at + 2..)?, 16).ok()?;
            Some((n, addr, at))
        })
        .collect();
    if want.is_empty() {
        return false;
    }
    let mut addrs: Vec<u64> = want.iter().map(|w| w.1).collect();
    addrs.sort_unstable();
    addrs.dedup();
    let Ok(syms) = std::fs::read_to_string("/proc/kallsyms") else {
        return true;
    };
    let mut found: HashMap<u64, &str> = HashMap::new();
    for line in syms.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(a), Some(_), Some(name)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        if let Ok(a) = u64::from_str_radix(a, 16) {
            if a != 0 && addrs.binary_search(&a).is_ok() {
                found.entry(a).or_insert(name);
            }
        }
    }
    for (n, addr, at) in want.iter_mut() {
        if let Some(sym) = found.get(addr) {
            n.replace_range(*at.., sym);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch
ID: 316
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s prev_pid=%d\"
";

    const IRQ: &str = "name: irq_handler_entry
ID: 120
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;
";

    fn layout() -> PageLayout {
        let mut kinds = Vec::new();
        for t in [SWITCH, IRQ] {
            let (id, name, f) = parse_format(t).expect("format");
            set_kind(&mut kinds, id, Decoder::of(&name, &f).expect("kind"));
        }
        let (_, _, f) = parse_format(SWITCH).expect("format");
        PageLayout {
            commit: Field {
                offset: 8,
                size: 8,
                signed: true,
                loc: Loc::Plain,
            },
            data: 16,
            page: 4096,
            common_type: f["common_type"],
            common_pid: f["common_pid"],
            kinds,
        }
    }

    /// A page as the kernel writes it: `events` are (time delta, record) — a delta over 27 bits goes in a
    /// time-extend word first.
    fn page(start: u64, events: &[(u64, Vec<u8>)], flags: u64) -> Vec<u8> {
        let mut p = vec![0u8; 16];
        p[..8].copy_from_slice(&start.to_ne_bytes());
        for (delta, rec) in events {
            let mut d = *delta;
            if d >= 1 << 27 {
                p.extend_from_slice(
                    &(TIME_EXTEND | ((d as u32 & ((1 << 27) - 1)) << 5)).to_ne_bytes(),
                );
                p.extend_from_slice(&((d >> 27) as u32).to_ne_bytes());
                d = 0;
            }
            let len = rec.len().div_ceil(4);
            if len <= 28 {
                p.extend_from_slice(&((len as u32) | ((d as u32) << 5)).to_ne_bytes());
            } else {
                p.extend_from_slice(&((d as u32) << 5).to_ne_bytes());
                p.extend_from_slice(&((len * 4 + 4) as u32).to_ne_bytes());
            }
            p.extend_from_slice(rec);
            p.resize(p.len().div_ceil(4) * 4, 0);
        }
        let commit = (p.len() - 16) as u64 | flags;
        p[8..16].copy_from_slice(&commit.to_ne_bytes());
        p.resize(4096, 0);
        p
    }

    fn switch(pid: i32, prev: &[u8], next: &[u8], next_pid: i32, next_prio: i32) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[..2].copy_from_slice(&316u16.to_ne_bytes());
        r[4..8].copy_from_slice(&pid.to_ne_bytes());
        r[8..8 + prev.len()].copy_from_slice(prev);
        r[24..28].copy_from_slice(&pid.to_ne_bytes());
        r[28..32].copy_from_slice(&120i32.to_ne_bytes());
        r[40..40 + next.len()].copy_from_slice(next);
        r[56..60].copy_from_slice(&next_pid.to_ne_bytes());
        r[60..64].copy_from_slice(&next_prio.to_ne_bytes());
        r
    }

    fn irq(n: i32, name: &str) -> Vec<u8> {
        // A record longer than 112 bytes takes the type_len-0 header with its own length word.
        let mut r = vec![0u8; 16];
        r[..2].copy_from_slice(&120u16.to_ne_bytes());
        r[8..12].copy_from_slice(&n.to_ne_bytes());
        let loc = ((name.len() as u32 + 1) << 16) | 16;
        r[12..16].copy_from_slice(&loc.to_ne_bytes());
        r.extend_from_slice(name.as_bytes());
        r.push(0);
        r.resize(r.len().max(120), 0);
        r
    }

    fn decode(p: &[u8]) -> Vec<(u64, Option<i64>, String)> {
        let mut out = Vec::new();
        layout().page(p, &mut |t, pid, e| out.push((t, pid, format!("{e:?}"))));
        out
    }

    #[test]
    fn records_decode_with_their_times_and_fields() {
        let p = page(
            1_000,
            &[
                (5, switch(7, b"bash", b"rtg\nculprit", 77, 49)),
                (1 << 28, irq(24, "virtio0-input.0")),
                (3, vec![0xff, 0xff, 0, 0, 1, 0, 0, 0]),
            ],
            1 << 31,
        );
        let got = decode(&p);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].0, 1_005);
        assert_eq!(got[0].1, Some(7));
        assert!(
            got[0].2.contains("prev_comm: Some(\"bash\")"),
            "{}",
            got[0].2
        );
        assert!(
            got[0].2.contains("next_comm: \"rtg?culprit\""),
            "{}",
            got[0].2
        );
        assert!(
            got[0].2.contains("next_pid: 77, next_prio: 49"),
            "{}",
            got[0].2
        );
        assert_eq!(got[1].0, 1_005 + (1 << 28));
        assert_eq!(
            got[1].2,
            "IrqEntry { irq: Some(24), name: \"virtio0-input.0\" }"
        );
        assert_eq!(
            got[2],
            (1_005 + (1 << 28) + 3, Some(1), "Other".to_string())
        );
    }

    #[test]
    fn torn_and_hostile_pages_end_without_reading_past() {
        let good = page(0, &[(1, switch(1, b"a", b"b", 2, 120))], 0);
        // Cut anywhere, with any commit word: no panic, never more records than the page holds.
        for cut in 0..good.len().min(200) {
            assert!(decode(&good[..cut]).len() <= 1);
        }
        let mut lying = good.clone();
        lying[8..16].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(decode(&lying).len() <= 1);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            let mut p = good.clone();
            for _ in 0..8 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let i = (seed % 96) as usize;
                p[i] = (seed >> 32) as u8;
            }
            let _ = decode(&p);
        }
    }

    #[test]
    fn format_fields_of_every_kind() {
        let (id, name, f) = parse_format(IRQ).expect("irq");
        assert_eq!((id, name.as_str()), (120, "irq_handler_entry"));
        assert_eq!(f["name"].loc, Loc::Data);
        let (_, _, f) = parse_format(
            "name: x\nID: 1\n\tfield:struct sched_param __user * param;\toffset:32;\tsize:8;\tsigned:0;\n\tfield:__rel_loc char[] s;\toffset:8;\tsize:4;\tsigned:0;\n",
        )
        .expect("x");
        assert_eq!(f["param"].offset, 32);
        assert_eq!(f["s"].loc, Loc::Rel);
        assert!(parse_format("ID: x\n").is_none());
    }
}

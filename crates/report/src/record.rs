//! The content hash of a run document, embedded in every report page and PDF record so that a filed record
//! can be checked against the stored run later (`rtgauge verify`).
//!
//! The hash is SHA-256 of the canonical JSON of the document (serde's serialization of the parsed run: field
//! order fixed by the model, no whitespace), so re-storing or re-exporting a run keeps it while any changed
//! value changes it. Beside it go short hashes of each part (top-level field, each probe on its own), so a
//! mismatch can say what differs without the original at hand. Everything is written as plain visible text
//! (one line per item) as well as in `<meta>`: `pdftotext` of the PDF gives the same lines back.
//!
//! The record also names the run's uuid: a copy of the run in another store (pushed, or exported and
//! imported) has another id but the same uuid, so `verify` finds it by the uuid first and by the id only for
//! a record without one (written before the uuid was embedded).

use rtgauge_model::run::RunDocument;
use sha2::{Digest as _, Sha256};

/// `<meta name=…>` of the whole-document hash and of the run id.
pub const META_HASH: &str = "rtgauge-content-hash";
/// `<meta name=…>` of the run id.
pub const META_RUN: &str = "rtgauge-run";
/// `<meta name=…>` of the run's uuid.
pub const META_UUID: &str = "rtgauge-run-uuid";
/// Hex digits of a part hash (64 bits: enough to tell parts apart, short enough to print).
const PART_HEX: usize = 16;

/// The hashes of a run document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashes {
    /// `sha256:` and 64 hex digits.
    pub whole: String,
    /// (part name, 16 hex digits), in document order.
    pub parts: Vec<(String, String)>,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn sha(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The whole-document hash and the part hashes. The document is serialized once; its parts are read
/// back from those bytes as raw JSON (no value tree: a week-long run is ~100 MB of JSON).
pub fn hashes(doc: &RunDocument) -> Hashes {
    use serde_json::value::RawValue;
    let bytes = serde_json::to_vec(doc).unwrap_or_default();
    let whole = format!("sha256:{}", sha(&bytes));
    let mut parts = Vec::new();
    // Top-level fields in name order (a map, so a field added to the model is covered without a list).
    let fields: std::collections::BTreeMap<String, &RawValue> =
        serde_json::from_slice(&bytes).unwrap_or_default();
    for (k, v) in &fields {
        let probes: Option<Vec<&RawValue>> = (k == "probes")
            .then(|| serde_json::from_str(v.get()).ok())
            .flatten();
        match probes {
            Some(ps) => {
                for (i, p) in ps.iter().enumerate() {
                    parts.push((format!("probes[{i}]"), part_hash(p.get())));
                }
            }
            None => parts.push((k.clone(), part_hash(v.get()))),
        }
    }
    Hashes { whole, parts }
}

fn part_hash(json: &str) -> String {
    let mut h = sha(json.as_bytes());
    h.truncate(PART_HEX);
    h
}

/// What a report page or a PDF's text says about the run it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embedded {
    /// The run's id in the store, when the page names it.
    pub run: Option<i64>,
    /// The run's uuid, when the page names it (records written since it was embedded).
    pub uuid: Option<String>,
    /// The whole-document hash and the hash of each part.
    pub hashes: Hashes,
}

/// The visible lines that [`extract`] reads back: "Content hash sha256:… of run N", "Run uuid U" (when the
/// run has one) and one "part NAME: HEX" per part.
pub fn html(id: i64, uuid: Option<&str>, hashes: &Hashes) -> maud::Markup {
    maud::html! {
        section #record {
            h2 { "Record integrity" }
            p { "Content hash " code.hash { (hashes.whole) " of run " (id) } }
            // On one line (no break at its hyphens), so that the PDF's text gives it back whole.
            @if let Some(u) = uuid { p { "Run " code.hash style="white-space:nowrap" { "uuid " (u) } } }
            p.muted { "SHA-256 of the run document's canonical JSON; check a filed copy with "
                code { "rtgauge verify FILE" } ". Parts:" }
            ul.parts { @for (n, x) in &hashes.parts { li { "part " (n) ": " (x) } } }
        }
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Read the hashes back from a report page or the text of a PDF record; `None` when there is no hash.
pub fn extract(text: &str) -> Option<Embedded> {
    // Every "sha256:<64 hex>" of the text: a label, a tag or a note may hold one too (an image digest), so
    // the record's hash is the one the record writes as "sha256:… of run N"; the first one only when no
    // hash is written that way.
    let found: Vec<(usize, String)> = text
        .match_indices("sha256:")
        .filter_map(|(i, m)| {
            let h = text.get(i + m.len()..i + m.len() + 64)?;
            is_hex(h).then(|| (i, format!("sha256:{}", h.to_ascii_lowercase())))
        })
        .collect();
    let of_run = |i: usize, whole: &str| -> Option<i64> {
        let r = text
            .get(i + whole.len()..)?
            .trim_start()
            .strip_prefix("of run ")?;
        let d: String = r.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok()
    };
    let (whole, run) = found
        .iter()
        .find_map(|(i, h)| of_run(*i, h).map(|r| (h.clone(), Some(r))))
        .or_else(|| found.first().map(|(_, h)| (h.clone(), None)))?;
    // The visible "uuid U" after the last mention of the hash (the record section; the <meta> are before).
    let uuid = text.rfind(&whole).and_then(|at| {
        text[at..]
            .match_indices("uuid ")
            .find_map(|(i, m)| parse_uuid(&text[at + i + m.len()..]))
    });
    let mut parts = Vec::new();
    for (i, m) in text.match_indices("part ") {
        let rest = &text[i + m.len()..];
        let Some(colon) = rest.find(": ") else {
            continue;
        };
        let name = &rest[..colon];
        let valid = !name.is_empty()
            && name.len() < 40
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_[]".contains(&b));
        let Some(x) = rest.get(colon + 2..colon + 2 + PART_HEX) else {
            continue;
        };
        if valid && is_hex(x) && !parts.iter().any(|(n, _)| n == name) {
            parts.push((name.to_string(), x.to_ascii_lowercase()));
        }
    }
    Some(Embedded {
        run,
        uuid,
        hashes: Hashes { whole, parts },
    })
}

/// A uuid at the start of `text` (32 hex digits in 8-4-4-4-12 groups), lower case. Line breaks and dropped
/// hyphens are tolerated: `pdftotext` drops a hyphen where a line was broken after one.
fn parse_uuid(text: &str) -> Option<String> {
    let mut hex = String::with_capacity(32);
    for c in text.trim_start().chars() {
        if hex.len() == 32 {
            break;
        }
        match c {
            c if c.is_ascii_hexdigit() => hex.push(c.to_ascii_lowercase()),
            '-' | '\n' | '\r' => {}
            _ => return None,
        }
    }
    (hex.len() == 32).then(|| {
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    })
}

/// The parts that differ between a record's hashes and a document's, in words ("probes[0] changed",
/// "label added"); empty when the parts agree.
pub fn differences(record: &Hashes, now: &Hashes) -> Vec<String> {
    let mut out = Vec::new();
    for (n, x) in &record.parts {
        match now.parts.iter().find(|(m, _)| m == n) {
            Some((_, y)) if y == x => {}
            Some(_) => out.push(format!("{n} changed")),
            None => out.push(format!("{n} removed")),
        }
    }
    for (n, _) in &now.parts {
        if !record.parts.iter().any(|(m, _)| m == n) {
            out.push(format!("{n} added"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip_through_the_visible_text() {
        let h = Hashes {
            whole: format!("sha256:{}", "ab".repeat(32)),
            parts: vec![
                ("label".into(), "0123456789abcdef".into()),
                ("probes[0]".into(), "fedcba9876543210".into()),
            ],
        };
        let page = format!(
            "<meta name=\"{META_HASH}\" content=\"{}\">{}",
            h.whole,
            html(7, Some("4932F94D-c424-4286-a351-57696f358f87"), &h).into_string()
        );
        let e = extract(&page).unwrap_or_else(|| panic!("no hash in {page}"));
        assert_eq!(e.run, Some(7));
        assert_eq!(
            e.uuid.as_deref(),
            Some("4932f94d-c424-4286-a351-57696f358f87")
        );
        assert_eq!(e.hashes, h);
        // pdftotext gives the list items as lines with a bullet.
        let text = format!(
            "Content hash {} of run 7\n• part label: 0123456789abcdef\n• part probes[0]: fedcba9876543210\n",
            h.whole
        );
        assert_eq!(extract(&text).map(|e| e.hashes), Some(h.clone()));
        // A record written before the uuid was embedded names none.
        assert_eq!(extract(&text).and_then(|e| e.uuid), None);
        // pdftotext of a uuid broken over two lines after a hyphen (which it drops).
        let wrapped = format!(
            "Content hash {} of run 7\nRun uuid 4932f94d-c424-4286\na351-57696f358f87\n",
            h.whole
        );
        assert_eq!(
            extract(&wrapped).and_then(|e| e.uuid).as_deref(),
            Some("4932f94d-c424-4286-a351-57696f358f87")
        );
        // Not a uuid: too short, or interrupted.
        assert_eq!(parse_uuid("4932f94d-c424"), None);
        assert_eq!(parse_uuid("4932f94d-c424-4286-a351-57696f35 8f87"), None);
        let mut other = h.clone();
        other.parts[1].1 = "ffffffffffffffff".into();
        other
            .parts
            .push(("audit".into(), "0000000000000000".into()));
        assert_eq!(
            differences(&h, &other),
            ["probes[0] changed", "audit added"]
        );
        assert!(extract("no hash here").is_none());
        // A label or tag holding an image digest, before the record: the record's hash is read.
        let digest = format!("sha256:{}", "a".repeat(64));
        let labelled = format!("Label img@{digest}\ntag {digest}\n{text}");
        assert_eq!(extract(&labelled).map(|e| e.hashes), Some(h.clone()));
        assert_eq!(extract(&labelled).and_then(|e| e.run), Some(7));
    }
}

//! The external programs rtgauge starts, and where each comes from: the one registry every crate that starts
//! a program goes through (the probes' loads, the PDF record, the kernel lab, the tests).
//!
//! Every program the binary (and its test suite) starts is listed in the repository's manifest,
//! `deps/programs.tsv` (program → Debian package), compiled in here. Starting one goes through [`command`]
//! (clippy's `disallowed_methods` forbids `std::process::Command::new` elsewhere), so that:
//! - a program that is not in the manifest is a bug caught by the test that scans the sources
//!   (`crates/cli/tests/programs.rs`), on the development machine, before a fresh machine finds it;
//! - a program missing on this machine is named with the package to install ([`not_found`]), instead of a
//!   bare "No such file or directory".

#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The manifest, as written in the repository.
pub const MANIFEST: &str = include_str!("../../../deps/programs.tsv");

/// One manifest line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// A command name looked up on PATH, or an absolute path (a glob where the directory is versioned).
    pub program: &'static str,
    /// The Debian package that provides it.
    pub package: &'static str,
    /// Who starts it: `binary`, `test`, `bench`, `lab` (the kernel lab, on this machine or inside its
    /// guests), comma-separated.
    pub users: &'static str,
}

impl Entry {
    /// The name the program is started by (the last path component).
    pub fn name(&self) -> &'static str {
        self.program.rsplit('/').next().unwrap_or(self.program)
    }
}

/// Every entry of the manifest, in order.
pub fn entries() -> impl Iterator<Item = Entry> {
    MANIFEST.lines().filter_map(|l| {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            return None;
        }
        let mut w = l.split_whitespace();
        Some(Entry {
            program: w.next()?,
            package: w.next()?,
            users: w.next().unwrap_or(""),
        })
    })
}

/// The manifest entry of `program` (a name or an absolute path), matching by name.
pub fn entry(program: &str) -> Option<Entry> {
    let name = program.rsplit('/').next().unwrap_or(program);
    entries().find(|e| e.program == program || e.name() == name)
}

/// A command that starts `program` (a manifest program, or a path the user named, such as `--exec`).
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    #[allow(clippy::disallowed_methods)] // the one place programs are started from
    std::process::Command::new(program)
}

/// The error for a program that could not be started: names the program and, when it is simply not
/// installed, the package that provides it.
pub fn not_found(program: &str, e: &std::io::Error) -> String {
    match (e.kind(), entry(program)) {
        (std::io::ErrorKind::NotFound, Some(en)) => {
            format!("{program} not found: install the {} package", en.package)
        }
        _ => format!("{program}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_parses_and_names_each_program_once() {
        let all: Vec<Entry> = entries().collect();
        assert!(all.len() >= 10, "{all:?}");
        for e in &all {
            assert!(!e.package.is_empty() && !e.users.is_empty(), "{e:?}");
            for u in e.users.split(',') {
                assert!(
                    ["binary", "test", "bench", "lab"].contains(&u),
                    "{e:?}: user {u}"
                );
            }
            assert_eq!(
                all.iter().filter(|o| o.name() == e.name()).count(),
                1,
                "{} listed twice",
                e.name()
            );
        }
        assert_eq!(entry("pdftotext").map(|e| e.package), Some("poppler-utils"));
        assert_eq!(entry("/bin/sh").map(|e| e.package), Some("dash"));
        assert_eq!(
            entry("/usr/lib/postgresql/15/bin/initdb").map(|e| e.package),
            Some("postgresql")
        );
        assert!(entry("no-such-program").is_none());
    }

    #[test]
    fn a_missing_program_names_its_package() {
        let e = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(
            not_found("pdftotext", &e),
            "pdftotext not found: install the poppler-utils package"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(not_found("pdftotext", &denied).starts_with("pdftotext: "));
    }
}

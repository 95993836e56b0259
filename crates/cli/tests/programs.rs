//! The manifest of external programs, deps/programs.tsv, is complete and true: a fresh Debian machine that
//! installs what it lists (scripts/test does) can run every program rtgauge and its tests start.
//!
//! - Every program the sources start is found by scanning them: programs are started only through
//!   `rtgauge_programs::command` and the tests' `common::program` / `common::program_line` /
//!   `common::program_in_netns` (`ip netns exec NS PROGRAM`; clippy's `disallowed_methods` forbids
//!   `Command::new` elsewhere, and this test checks it too), programs the kernel lab copies into its guests
//!   through `guest_program("name")` (crates/lab), and absolute program paths (`/bin/true`, `/usr/sbin/…`)
//!   are found wherever they are written.
//! - Every listed program is on this machine and comes from the package the manifest names (dpkg says so).
#![allow(clippy::unwrap_used)]

mod common;

use rtgauge_programs::{entries, entry};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The string literal right after `at` in `line` (`"…"`), if the text there is one.
fn literal_at(line: &str, at: usize) -> Option<&str> {
    let rest = line.get(at..)?.trim_start();
    let rest = rest.strip_prefix('"')?;
    rest.get(..rest.find('"')?)
}

/// The programs a line of Rust starts (by name), and whether it calls `Command::new` itself.
fn started(line: &str) -> (Vec<String>, bool) {
    let code = line.split("//").next().unwrap_or("");
    let mut names = Vec::new();
    // `guest_program(` names a program the kernel lab copies into its guests, `run_program(` one it runs on
    // the host (crates/lab).
    for call in [
        "programs::command(",
        "program(",
        "program_line(",
        "program_in_netns(",
        "guest_program(",
        "run_program(",
    ] {
        let mut from = 0;
        while let Some(i) = code[from..].find(call) {
            let at = from + i + call.len();
            // `program(` must be the helper, not the tail of another name (`my_program(`).
            let before = code[..from + i].chars().next_back();
            if call.starts_with("program")
                && before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            {
                from = at;
                continue;
            }
            if let Some(l) = literal_at(code, at) {
                names.push(l.to_string());
            } else if let Some(j) = code[at..].find(".join(") {
                // program(bin.join("initdb"))
                if let Some(l) = literal_at(code, at + j + ".join(".len()) {
                    names.push(l.to_string());
                }
            }
            from = at;
        }
    }
    // Absolute program paths anywhere: "/bin/true", "/usr/sbin/ip".
    for prefix in ["\"/bin/", "\"/sbin/", "\"/usr/bin/", "\"/usr/sbin/"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(prefix) {
            let at = from + i + 1;
            if let Some(l) = literal_at(code, at - 1) {
                let name = l.rsplit('/').next().unwrap_or("");
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
                {
                    names.push(l.to_string());
                }
            }
            from = at;
        }
    }
    (names, code.contains("Command::new("))
}

#[test]
fn the_scanner_finds_what_it_must() {
    let (n, new) = started(r#"    let out = common::program("cyclictest").args(["-q"]);"#);
    assert_eq!((n, new), (vec!["cyclictest".to_string()], false));
    let (n, _) = started(r#"let mut cmd = program(bin.join("initdb"));"#);
    assert_eq!(n, ["initdb"]);
    let (n, _) = started(r#"let s = common::program_line("stress-ng", "--cpu 1");"#);
    assert_eq!(n, ["stress-ng"]);
    let (n, _) = started(r#"let c = common::program_in_netns("sshd", &ns);"#);
    assert_eq!(n, ["sshd"]);
    let (n, _) = started(r#"exec_program: "/bin/true".into(), x: "/usr/sbin/ip""#);
    assert_eq!(n, ["/bin/true", "/usr/sbin/ip"]);
    let (n, new) = started(r#"std::process::Command::new("nginx") // comment "/bin/x""#);
    assert!(n.is_empty() && new);
    let (n, _) = started(r#"fn my_program("x")"#);
    assert!(n.is_empty());
    let (n, _) = started(r#"g.guest_program("rtla"); let b = crate::guest_program("busybox")?;"#);
    assert_eq!(n, ["rtla", "busybox"]);
    let (n, _) = started(r#"run_program("objcopy", &["--strip-debug"])?;"#);
    assert_eq!(n, ["objcopy"]);
}

#[test]
fn every_program_started_is_in_the_manifest() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates"), &mut files);
    files.sort();
    assert!(
        files.len() > 50,
        "the scan found the sources: {}",
        files.len()
    );
    let mut unlisted = Vec::new();
    let mut direct = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for f in &files {
        if f.ends_with("crates/cli/tests/programs.rs") {
            continue; // the scanner's own patterns and examples
        }
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f
            .strip_prefix(workspace())
            .unwrap_or(f)
            .display()
            .to_string();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // A call that rustfmt broke after its `(` has its program on the next line.
            let line = match lines.get(i + 1) {
                Some(next) if line.trim_end().ends_with('(') => {
                    format!("{}{}", line.trim_end(), next.trim_start())
                }
                _ => line.to_string(),
            };
            let (names, new) = started(&line);
            if new && !rel.ends_with("crates/programs/src/lib.rs") {
                direct.push(format!("{rel}:{}: {}", i + 1, line.trim()));
            }
            for n in names {
                if entry(&n).is_none() {
                    unlisted.push(format!("{rel}:{}: {n}", i + 1));
                }
                seen.insert(n);
            }
        }
    }
    assert!(
        direct.is_empty(),
        "programs started without rtgauge_programs::command or common::program, which the \
         manifest check cannot see:\n{}",
        direct.join("\n")
    );
    assert!(
        unlisted.is_empty(),
        "programs started but not listed in deps/programs.tsv (a fresh machine lacks them; add each \
         with its Debian package):\n{}",
        unlisted.join("\n")
    );
    // The scan is not blind: it sees the programs the suite is known to start.
    for known in [
        "cyclictest",
        "chromium",
        "pdftotext",
        "ansible-playbook",
        "initdb",
        "/bin/sh",
        "/usr/sbin/sshd",
    ] {
        assert!(
            seen.contains(known),
            "the scan did not see {known}: {seen:?}"
        );
    }
}

/// Where `program` is on this machine: a PATH lookup, or the manifest's glob.
fn locate(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let (dir, name) = program.rsplit_once('/')?;
        // One `*` for a versioned directory (/usr/lib/postgresql/*/bin).
        let (head, tail) = dir.split_once("/*").unwrap_or((dir, ""));
        let candidates: Vec<PathBuf> = if dir.contains('*') {
            std::fs::read_dir(head)
                .ok()?
                .flatten()
                .map(|e| e.path().join(tail.trim_start_matches('/')).join(name))
                .collect()
        } else {
            vec![PathBuf::from(program)]
        };
        return candidates.into_iter().find(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// `dpkg-query ARGS` as text ("" when dpkg knows nothing).
fn dpkg_query(args: &[&str]) -> String {
    let o = common::program("dpkg-query").args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The package and what it depends on, two levels down (a metapackage ships its programs through another:
/// `postgresql` through `postgresql-15`, `ansible` through `ansible-core`, `python3` through
/// `python3.11` → `python3-minimal`).
fn package_and_depends(package: &str) -> Vec<String> {
    let mut out = vec![package.to_string()];
    let mut level = vec![package.to_string()];
    for _ in 0..2 {
        let mut next = Vec::new();
        for p in &level {
            for alt in dpkg_query(&["-W", "-f=${Pre-Depends},${Depends}", p]).split([',', '|']) {
                if let Some(name) = alt.split_whitespace().next() {
                    let name = name.split(':').next().unwrap_or(name).to_string();
                    if !out.contains(&name) {
                        out.push(name.clone());
                        next.push(name);
                    }
                }
            }
        }
        level = next;
    }
    out
}

/// Whether `file` (a path a package ships) is `program`: the same path (a glob's `*` matches one
/// directory), or for a bare name, a file of that name in a bin directory.
fn ships(file: &str, program: &str) -> bool {
    match program.split_once('*') {
        Some((head, tail)) => {
            file.starts_with(head)
                && file.ends_with(tail)
                && !file[head.len()..file.len() - tail.len()].contains('/')
        }
        None if program.starts_with('/') => {
            // merged /usr: a package may ship /bin/sh as /usr/bin/sh or the reverse
            file == program
                || file.strip_prefix("/usr") == Some(program)
                || program.strip_prefix("/usr") == Some(file)
        }
        None => ["/bin/", "/sbin/"]
            .iter()
            .any(|d| file.ends_with(&format!("{d}{program}"))),
    }
}

#[test]
fn every_listed_program_is_here_and_comes_from_its_package() {
    let mut wrong = Vec::new();
    for e in entries() {
        if locate(e.program).is_none() {
            wrong.push(format!(
                "{}: not on this machine (scripts/test installs package {})",
                e.program, e.package
            ));
            continue;
        }
        let packages = package_and_depends(e.package);
        let shipped = packages.iter().any(|p| {
            dpkg_query(&["-L", p])
                .lines()
                .any(|f| ships(f.trim(), e.program))
        });
        if !shipped {
            wrong.push(format!(
                "{}: not shipped by {} (nor by what it depends on: {:?})",
                e.program,
                e.package,
                &packages[1..]
            ));
        }
    }
    assert!(wrong.is_empty(), "deps/programs.tsv:\n{}", wrong.join("\n"));
}

#[test]
fn shipped_paths_match_programs() {
    assert!(ships(
        "/usr/lib/postgresql/15/bin/initdb",
        "/usr/lib/postgresql/*/bin/initdb"
    ));
    assert!(!ships(
        "/usr/lib/postgresql/15/x/bin/initdb",
        "/usr/lib/postgresql/*/bin/initdb"
    ));
    assert!(ships("/usr/bin/pdftotext", "pdftotext"));
    assert!(ships("/sbin/ip", "ip"));
    assert!(!ships("/usr/share/doc/ip", "ip"));
    assert!(ships("/bin/sh", "/bin/sh") && ships("/usr/bin/sh", "/bin/sh"));
    assert!(!ships("/usr/bin/shx", "/bin/sh"));
}

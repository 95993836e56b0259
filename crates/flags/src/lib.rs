//! The command line's flags, in the manner of ripgrep's flag layer: one clap definition per verb and its
//! resolution into a typed plan (`resolve`), tested beside them, so that the binary's verbs (crates/cli)
//! are glue from a plan to the session engine and the views. Flags several verbs share are defined here
//! once, each with one meaning: `--output FILE` (the verb's machine-readable result), `--html FILE`,
//! `--format text|json` (what it prints), `--root`, `--db` (and the store it opens), `--tag`, durations,
//! sizes, names, and the bounded read of a file the user names. `--json FILE` is rt-tests' own, in
//! `cyclic` and `oslat` only. The kinds are listed once here, in [`kinds`]: each kind's profile stage and,
//! for a kind the monitor follows, its flags and watch; each kind's flags are its own module.

pub mod audit;
pub mod capacity;
pub mod clock;
pub mod cyclic;
pub mod fingerprint;
pub mod fleet;
pub mod hwnoise;
pub mod kinds;
pub mod load;
pub mod mem;
pub mod monitor;
pub mod net;
pub mod net_latency;
pub mod numa;
pub mod ops;
pub mod oslat;
pub mod plan;
pub mod push;
pub mod report;
pub mod run;
pub mod runs;
pub mod stage;
pub mod verify;
pub mod vm;

use rtgauge_model::units::parse_duration;
use rtgauge_model::Nanos;
use std::path::PathBuf;

/// Open the store `--db` names, or `RTGAUGE_DB`, or the default SQLite file: a SQLite path or a
/// `postgresql://` URL. Returns the store and its name for messages (a URL without its password). An error
/// names where the store came from (`--db`, `RTGAUGE_DB`).
pub fn open_store(
    db: Option<&std::path::Path>,
) -> anyhow::Result<(Box<dyn rtgauge_store::RunStore>, String)> {
    use anyhow::Context as _;
    let spec = rtgauge_store::store_spec(db);
    let shown = rtgauge_store::display_spec(&spec);
    let from = store_source(db);
    let store = rtgauge_store::open_store(&spec).with_context(|| format!("{from} {shown}"))?;
    Ok((store, shown))
}

/// Where the store's spec came from, for messages: `--db`, `RTGAUGE_DB` or the default database.
fn store_source(db: Option<&std::path::Path>) -> &'static str {
    if db.is_some() {
        "--db"
    } else if std::env::var_os("RTGAUGE_DB").is_some_and(|v| !v.is_empty()) {
        "RTGAUGE_DB"
    } else {
        "the default database"
    }
}

/// Open the store like [`open_store`] for a verb that only reads runs: a SQLite file that does not exist is
/// refused, naming where the path came from, instead of being created empty (a mistyped `--db` would
/// otherwise answer "no runs" and leave a stray database behind). PostgreSQL URLs are opened as they are.
pub fn open_existing_store(
    db: Option<&std::path::Path>,
) -> anyhow::Result<(Box<dyn rtgauge_store::RunStore>, String)> {
    let spec = rtgauge_store::store_spec(db);
    // URLs (PostgreSQL, or another scheme that open_store refuses by name) are not files to look for.
    let is_url = spec.to_str().is_some_and(|s| s.contains("://"));
    if !is_url && !spec.exists() {
        anyhow::bail!(
            "{} {}: no such store (rtgauge run, a probe or rtgauge import creates one)",
            store_source(db),
            spec.display()
        );
    }
    open_store(db)
}

/// The directory reports go to by default: beside a SQLite file, or beside the default one when the store
/// is a PostgreSQL server.
pub fn store_dir(db: Option<&std::path::Path>) -> std::path::PathBuf {
    let spec = rtgauge_store::store_spec(db);
    let file = if spec.to_str().is_some_and(rtgauge_store::is_postgres_url) {
        rtgauge_store::SqliteStore::default_path()
    } else {
        spec
    };
    file.parent()
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf()
}

/// Largest definition or profile a verb reads (a .vmx, a domain XML, a manifest, a TOML profile).
pub const MAX_DEFINITION_BYTES: u64 = 16 << 20;
/// Largest rt-tests or run document `import` reads (a week of cyclictest with wide histograms on many
/// CPUs stays far below).
pub const MAX_IMPORT_BYTES: u64 = 256 << 20;

/// Read a file the user names, refusing one larger than `max` before reading it (regular files) or after
/// `max` bytes (pipes, devices): nothing unbounded is ever held in memory. The error names the flag or verb
/// (`what`) and the path.
pub fn read_user_file(path: &std::path::Path, what: &str, max: u64) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let f = std::fs::File::open(path).with_context(|| format!("{what} {}", path.display()))?;
    let too_large = || {
        anyhow::anyhow!(
            "{what} {}: larger than {} MiB, refused",
            path.display(),
            max >> 20
        )
    };
    if f.metadata().is_ok_and(|m| m.is_file() && m.len() > max) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{what} {}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A latency verb's flags resolved: the probe's plan, what to collect beside its samples, and notes on
/// settings adjusted on the way (said before measuring).
pub struct Resolved<P> {
    /// The probe's plan.
    pub plan: P,
    /// Settings rejected or adjusted before running that the user should know about.
    pub notes: Vec<String>,
    /// Interval counters, `--trace`, the episode threshold.
    pub why: rtgauge_session::why::WhyOpts,
}

/// The results database, one definition for every verb that reads or stores runs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DbArg {
    /// Results database: a SQLite file or a postgresql:// URL (default: $RTGAUGE_DB, else
    /// $XDG_DATA_HOME/rtgauge/rtgauge.db).
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub db: Option<PathBuf>,
}

impl DbArg {
    /// The store and its name for messages (see [`open_store`]), created when missing: for
    /// verbs that store runs.
    pub fn open(&self) -> anyhow::Result<(Box<dyn rtgauge_store::RunStore>, String)> {
        open_store(self.db.as_deref())
    }

    /// The store for a verb that only reads (or deletes) runs: a SQLite file that does not exist is refused,
    /// not created (see [`open_existing_store`]).
    pub fn open_existing(&self) -> anyhow::Result<(Box<dyn rtgauge_store::RunStore>, String)> {
        open_existing_store(self.db.as_deref())
    }
}

/// `--output FILE`, one definition and one meaning for every verb that has it: the verb's result in its
/// machine-readable form, written to FILE atomically, or to standard output after the verb's text for
/// `-` (a measuring verb's run document; `export`'s chosen format; `load`'s and `capacity`'s own JSON, as
/// their help says). A verb whose result is something else rewords the help with `mut_arg("output", …)`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArg {
    /// Also write the run document to FILE ('-' = standard output, after the text): rtgauge's native,
    /// versioned JSON (ns, HDR histograms, the conditions it ran under), which `import` reads back.
    #[arg(long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `-v/--verbose`, one definition for the verbs that print a stored run on the terminal.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct VerboseArg {
    /// Print everything: every CPU's rows and worst interval, the accounting per CPU, every operation,
    /// the whole memory curve's steps and NUMA counters (default: at most 8 CPUs in full, explanations
    /// grouped, each probe's headline figures; the verdict block last either way).
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// `--html FILE`, one definition for every verb that renders a page: a self-contained HTML page (inline
/// SVG, no script; it opens from file://), written atomically, or to standard output for `-`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HtmlArg {
    /// Also write a self-contained HTML page to FILE ('-' = standard output).
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// What a verb prints on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PrintFormat {
    /// Text for people: tables and sentences.
    #[default]
    Text,
    /// The same as JSON, for scripts.
    Json,
}

/// `--format text|json`, one definition for every verb that can print JSON instead of text (`--json` is
/// rt-tests' own flag, a file, and only `cyclic` and `oslat` have it). `export --format` is the format of
/// the file it writes (its own values: json, csv, rt-tests).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct FormatArg {
    /// What to print on standard output: text, or the same as JSON for scripts.
    #[arg(long = "format", value_enum, value_name = "FORMAT", default_value_t = PrintFormat::Text)]
    pub format: PrintFormat,
}

impl FormatArg {
    /// Whether JSON was asked for.
    pub fn json(&self) -> bool {
        self.format == PrintFormat::Json
    }
}

/// Where a measuring verb stores its run and what it stores with it (`--tag`, `--db`).
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// KEY=VALUE to store with the run (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    #[command(flatten)]
    pub db: DbArg,
}

/// `--root DIR`, one definition for every verb that reads the host: /proc, /sys, /etc and /dev are read
/// under DIR (a captured or fixture tree) instead of this system. A verb flattens it and, where its help
/// says more (what the tree is used for), rewords the help with `mut_arg("root", …)`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RootArg {
    /// Read a captured tree (DIR/proc, DIR/sys, DIR/etc, DIR/dev) instead of this system.
    #[arg(long = "root", value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
}

impl RootArg {
    /// The tree to read: DIR, or the live system without `--root`. A DIR that is not a directory is refused
    /// here, naming it, rather than read as an empty system.
    pub fn open(&self) -> anyhow::Result<rtgauge_host::HostRoot> {
        match &self.root {
            Some(dir) if !dir.is_dir() => {
                anyhow::bail!("--root {}: not a directory", dir.display())
            }
            Some(dir) => Ok(rtgauge_host::HostRoot::at(dir)),
            None => Ok(rtgauge_host::HostRoot::live()),
        }
    }
}

/// The CPUs a probe's threads may use by default: this process's affinity on the live system, every online
/// CPU of a captured tree (whose affinity is not this process's).
pub(crate) fn allowed_cpus(
    root: &rtgauge_host::HostRoot,
    online: &rtgauge_model::CpuSet,
) -> rtgauge_model::CpuSet {
    if root.is_live() {
        rtgauge_probe::rt::current_affinity().intersection(online)
    } else {
        online.clone()
    }
}

/// Sizes with an optional K, M or G suffix (binary units), at most `max`.
pub fn parse_size_max(s: &str, max: u64) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 4096, 16K, 1M)"))?;
    let bytes = n.checked_mul(mult).ok_or("size too large")?;
    if bytes > max {
        return Err(format!("at most {}", rtgauge_model::mem::size_label(max)));
    }
    Ok(bytes)
}

/// A duration as the verbs take it (`30s`, `200us`, `24h`, …).
pub fn parse_duration_arg(s: &str) -> Result<Nanos, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration that must be above zero (`run --duration`, `--checkpoint`): 0 would measure nothing, or, where
/// a probe reads 0 as "until stopped", measure until a signal.
pub fn parse_positive_duration(s: &str) -> Result<Nanos, String> {
    match parse_duration_arg(s)? {
        d if d.as_ns() == 0 => Err(format!("'{s}' is zero; give a duration above 0 (e.g. 30s)")),
        d => Ok(d),
    }
}

/// `--tag KEY=VALUE`.
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    parse_name(s)?;
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}' is not KEY=VALUE")),
    }
}

/// A label or host name given on the command line (`--label`, `--host-name`): refused when it is empty or
/// blank (stored, it would be a run without a name that listings show as nothing), or holds a control or
/// format character (see [`rtgauge_model::run::forbidden_in_name`]); it would be stored and shown raw in
/// every later listing and report.
pub fn parse_name(s: &str) -> Result<String, String> {
    match rtgauge_model::run::forbidden_in_name(s) {
        Some(c) => Err(format!(
            "holds the {} character U+{:04X}: a name must be printable text",
            if c.is_control() { "control" } else { "format" },
            c as u32
        )),
        None if s.trim().is_empty() => Err("a name must not be empty or blank".into()),
        None => Ok(s.to_string()),
    }
}

/// A captured /sys tree for the verbs' command-line tests: `cpus` CPUs, `per_node` to a NUMA node, and the
/// `online` and `possible` CPU lists.
#[cfg(test)]
pub(crate) fn cpu_tree(
    cpus: u32,
    per_node: u32,
    online: &str,
    possible: &str,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("sys/devices/system/cpu");
    for c in 0..cpus {
        std::fs::create_dir_all(cpu.join(format!("cpu{c}/node{}", c / per_node))).unwrap();
    }
    std::fs::write(cpu.join("online"), format!("{online}\n")).unwrap();
    std::fs::write(cpu.join("possible"), format!("{possible}\n")).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_opens_a_directory_and_refuses_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let live = RootArg::default().open().unwrap();
        assert!(live.is_live());
        let at = RootArg {
            root: Some(dir.path().to_path_buf()),
        }
        .open()
        .unwrap();
        assert!(!at.is_live());
        assert_eq!(at.path("/proc/stat"), dir.path().join("proc/stat"));
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        for bad in [file, dir.path().join("missing")] {
            let e = RootArg {
                root: Some(bad.clone()),
            }
            .open()
            .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("--root {}: not a directory", bad.display())
            );
        }
    }

    #[test]
    fn names_are_printable_and_not_blank() {
        assert_eq!(parse_name("bare-metal µs").as_deref(), Ok("bare-metal µs"));
        for blank in ["", " ", "\u{3000}"] {
            assert_eq!(
                parse_name(blank),
                Err("a name must not be empty or blank".to_string()),
                "{blank:?}"
            );
        }
        assert_eq!(
            parse_name("host\u{200b}1"),
            Err("holds the format character U+200B: a name must be printable text".to_string())
        );
        assert_eq!(
            parse_name("a\u{1b}[31m"),
            Err("holds the control character U+001B: a name must be printable text".to_string())
        );
    }
}

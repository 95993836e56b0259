//! The shape of the code, checked: no circle between a crate's modules, no non-test part of a file over
//! 1,000 lines, no function over 120 lines, the probe kinds (read from the one list, `with_kinds!`) named
//! outside their own modules only where they are registered, the shared crates within their line budgets,
//! every ns→µs conversion through the one helper (float and integer shapes), no `Result<_, String>` in the
//! probe crate, and no type name defined twice (but the listed exceptions). Each
//! check reads the sources as text (rustfmt's layout: a function's closing brace sits at the indentation of
//! its `fn`), and each has a test of its own that feeds it a made-up source breaking the rule, so a check
//! that stopped finding anything would fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's `crates/` folder.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf()
}

/// Every library and binary source file of a crate (`src/`, not `tests/` or fixtures), sorted.
fn sources(krate: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&krate.join("src"), &mut out);
    out.sort();
    out
}

fn crates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    v.sort();
    v
}

/// The part of a source before its test module (`#[cfg(test)]` followed by `mod NAME {`), and a file that
/// is a test module of its parent (`mod tests;` under `#[cfg(test)]`) is all test.
fn non_test(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "#[cfg(test)]" {
            let rest = &text[at + line.len()..];
            let next = after_visibility(rest.lines().next().unwrap_or("")).trim_end();
            if next.starts_with("mod ") && next.ends_with('{') {
                return &text[..at];
            }
        }
        at += line.len();
    }
    text
}

/// Files that are test modules of their parent (`#[cfg(test)] mod NAME;`).
fn test_module_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for w in lines.windows(2) {
            if w[0].trim() == "#[cfg(test)]" {
                if let Some(name) = after_visibility(w[1])
                    .trim_end()
                    .strip_prefix("mod ")
                    .and_then(|r| r.strip_suffix(';'))
                {
                    let dir = module_dir(f);
                    out.insert(dir.join(format!("{name}.rs")));
                    out.insert(dir.join(name).join("mod.rs"));
                }
            }
        }
    }
    out
}

/// The folder a file's child modules live in: `src/` for lib.rs/main.rs/mod.rs, `src/a/` for `src/a.rs`.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().expect("a file's folder").to_path_buf();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => parent,
        _ => parent.join(file.file_stem().expect("a name")),
    }
}

/// Every non-test source of the workspace: (file, its non-test text).
fn workspace_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for c in crates() {
        let files = sources(&c);
        let tests = test_module_files(&files);
        for f in files {
            if tests.contains(&f) {
                continue;
            }
            let text = std::fs::read_to_string(&f).expect("a source");
            out.push((f, non_test(&text).to_string()));
        }
    }
    out
}

/// A line without its `//` comment (outside a string: good enough for code laid out by rustfmt).
fn code_of(line: &str) -> &str {
    let mut in_str = false;
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// The functions of a source longer than `max` lines: (name, first line, length). A function runs from its
/// `fn` line to the first later line that is its closing brace at the same indentation.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = l.len() - t.len();
        // After the visibility: `const`, `async`, `unsafe` and `extern "ABI"` in any order, then `fn`.
        let mut q = after_visibility(t);
        loop {
            let before = q;
            for k in ["const ", "async ", "unsafe "] {
                q = q.strip_prefix(k).unwrap_or(q);
            }
            if let Some(r) = q.strip_prefix("extern ") {
                q = r
                    .trim_start()
                    .strip_prefix('"')
                    .and_then(|r| r.split_once('"'))
                    .map_or(r, |(_, r)| r)
                    .trim_start();
            }
            if q == before {
                break;
            }
        }
        let Some(rest) = q.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // A declaration without a body (a trait's required method) ends with `;` before any `{`.
        let mut j = i;
        let mut has_body = false;
        while j < lines.len() {
            let c = code_of(lines[j]);
            if c.trim_end().ends_with('{') || c.contains("{ }") || c.contains("{}") {
                has_body = true;
                break;
            }
            if c.trim_end().ends_with(';') {
                break;
            }
            j += 1;
        }
        if !has_body {
            continue;
        }
        let close = " ".repeat(indent) + "}";
        let end = (j..lines.len()).find(|&k| {
            let c = lines[k];
            (k > i && c.trim_end() == close) || (k == j && code_of(c).trim_end().ends_with('}'))
        });
        match end {
            Some(e) if e - i + 1 > max => out.push((name, i + 1, e - i + 1)),
            Some(_) => {}
            // A function whose end cannot be found is not laid out as rustfmt lays it out: reported, with
            // the rest of the file as its length, rather than let through unmeasured.
            None => out.push((name, i + 1, lines.len() - i)),
        }
    }
    out
}

/// The modules of one crate a source refers to (`crate::a::…`, `super::b`), as module paths.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src/");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The edges between a crate's modules: module → modules whose items it names. A reference to a module's
/// own descendant or ancestor is not an edge (a parent declaring its children, a child using its parent's
/// items through `super`); `crate::a::b::c` names `a::b` where that is a module (else `a`).
fn module_edges(files: &[(Vec<String>, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.join("::")).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in files {
        let me = m.join("::");
        let mut refs: Vec<Vec<String>> = Vec::new();
        for line in text.lines().map(code_of) {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (i, _) in line.match_indices("crate::") {
                // `rtgauge_model::…` contains no `crate::`, but `$crate::` in a macro does: leave it out.
                if i > 0 && line.as_bytes()[i - 1] == b'$' {
                    continue;
                }
                if i > 0
                    && (line.as_bytes()[i - 1].is_ascii_alphanumeric()
                        || line.as_bytes()[i - 1] == b'_')
                {
                    continue;
                }
                refs.push(path_after(&line[i + "crate::".len()..]));
            }
            for (i, _) in line.match_indices("super::") {
                if i > 0
                    && (line.as_bytes()[i - 1].is_ascii_alphanumeric()
                        || line.as_bytes()[i - 1] == b'_'
                        || line.as_bytes()[i - 1] == b':')
                {
                    continue;
                }
                let mut base = m.clone();
                let mut rest = &line[i..];
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                let mut p = base;
                p.extend(path_after(rest));
                refs.push(p);
            }
        }
        // A `use` names several paths at once (`use super::{a, b::c};`, over several lines).
        for tree in use_trees(text) {
            for path in use_paths(&tree) {
                if let Some(r) = path.strip_prefix("crate::") {
                    refs.push(path_after(r));
                } else if path.starts_with("super::") {
                    let mut base = m.clone();
                    let mut rest = path.as_str();
                    while let Some(r) = rest.strip_prefix("super::") {
                        base.pop();
                        rest = r;
                    }
                    base.extend(path_after(rest));
                    refs.push(base);
                }
            }
        }
        for r in refs {
            // The longest prefix of the path that is a module.
            let target = (1..=r.len())
                .rev()
                .map(|n| r[..n].join("::"))
                .find(|p| modules.contains(p));
            let Some(t) = target else { continue };
            let related = t == me
                || me.starts_with(&format!("{t}::"))
                || t.starts_with(&format!("{me}::"))
                || (t.is_empty() || me.is_empty());
            if !related {
                edges.entry(me.clone()).or_default().insert(t);
            }
        }
    }
    edges
}

/// The trees of a source's `use` declarations (what follows `use`, up to its `;`, lines joined).
fn use_trees(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines().map(code_of) {
        let t = after_visibility(line).trim();
        let part = match open.as_mut() {
            Some(acc) => {
                acc.push_str(t);
                acc.clone()
            }
            None => match t.strip_prefix("use ") {
                Some(r) => r.to_string(),
                None => continue,
            },
        };
        match part.split_once(';') {
            Some((tree, _)) => {
                out.push(tree.replace(' ', ""));
                open = None;
            }
            None => open = Some(part),
        }
    }
    out
}

/// The paths a `use` tree names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(tree: &str) -> Vec<String> {
    // The top-level items of a brace group, split at the commas outside nested braces.
    fn items(s: &str) -> Vec<&str> {
        let (mut depth, mut from, mut out) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&s[from..i]);
                    from = i + 1;
                }
                _ => {}
            }
        }
        out.push(&s[from..]);
        out.into_iter().filter(|x| !x.is_empty()).collect()
    }
    match tree.find('{') {
        Some(b) if tree.ends_with('}') => {
            let prefix = &tree[..b];
            items(&tree[b + 1..tree.len() - 1])
                .into_iter()
                .flat_map(|i| {
                    use_paths(i)
                        .into_iter()
                        .map(move |p| format!("{prefix}{p}"))
                })
                .collect()
        }
        _ => vec![tree.to_string()],
    }
}

/// The identifiers of a path up to the first that is not one (`a::b::C` → [a, b, C]).
fn path_after(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for seg in s.split("::") {
        let id: String = seg
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if id.is_empty() {
            break;
        }
        let whole = id.len() == seg.len();
        out.push(id);
        if !whole {
            break;
        }
    }
    out
}

/// One circle among `edges`, if there is any (depth-first search).
fn find_circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|x| x == m).unwrap_or(0);
                    let mut c = stack[from..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, edges, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

/// One probe kind as the code lists it (`rtgauge_model::with_kinds!`): its variant, its result type's
/// name and its name (the name of its module in every layer).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kind {
    variant: String,
    result: String,
    name: String,
}

/// The kinds of the one list, from the list itself.
fn kinds() -> Vec<Kind> {
    macro_rules! collect {
        ($($variant:ident => $ty:ty, $name:literal, $doc:literal;)*) => {
            vec![$(Kind {
                variant: stringify!($variant).to_string(),
                result: stringify!($ty).rsplit("::").next().unwrap_or("").trim().to_string(),
                name: $name.to_string(),
            }),*]
        };
    }
    rtgauge_model::with_kinds!(collect)
}

/// Whether `needle` occurs in `line` as a whole name (not inside a longer identifier on either side).
fn names_word(line: &str, needle: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(needle).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + needle.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The files naming a variant of the run document's probe result (`ProbeResult::Cyclic`, …).
fn variant_namers(files: &[(PathBuf, String)], kinds: &[Kind]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|(_, text)| {
            text.lines().map(code_of).any(|l| {
                kinds
                    .iter()
                    .any(|k| names_word(l, &format!("ProbeResult::{}", k.variant)))
            })
        })
        .map(|(f, _)| f.clone())
        .collect()
}

/// Whether `file` is one of `kind`'s own modules: below its crate's `src/`, a module named after the kind
/// (`clock.rs`, `net_latency/rx.rs`) or one in a folder of per-kind modules (`kind/clock.rs` of analysis,
/// report and session, `cmd/clock.rs`, `rttests/hwnoise.rs`, `import/oslat.rs`).
fn is_own_module(file: &Path, kind: &Kind) -> bool {
    const PER_KIND: [&str; 4] = ["kind", "cmd", "rttests", "import"];
    let rel = rel(file);
    let below_src = rel.split_once("/src/").map_or("", |(_, r)| r);
    let parts: Vec<&str> = below_src.split('/').collect();
    let named = |c: &str| c == kind.name || c.strip_suffix(".rs") == Some(kind.name.as_str());
    match parts.as_slice() {
        [first, rest @ ..] if named(first) => !rest.is_empty() || first.ends_with(".rs"),
        [dir, second, ..] if PER_KIND.contains(dir) => named(second),
        _ => false,
    }
}

/// The crates from outside the workspace (`std`, and `[workspace.dependencies]` but rtgauge's own), as
/// paths name them: a path from one of them (`std::os::unix::net`) names no kind.
fn external_crates() -> Vec<String> {
    let manifest = std::fs::read_to_string(crates_dir().join("../Cargo.toml")).expect("Cargo.toml");
    let deps = manifest
        .split("[workspace.dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap_or("");
    let mut out: Vec<String> = ["std", "core", "alloc"].map(String::from).to_vec();
    out.extend(
        deps.lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().replace('-', "_")))
            .filter(|k| !k.is_empty() && !k.starts_with('#') && !k.starts_with("rtgauge_")),
    );
    out
}

/// A source with its raw string literals (`r#"…"#`) emptied, their lines kept.
fn without_raw_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("r#\"") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 3..];
        let end = after.find("\"#").map_or(after.len(), |e| e + 2);
        out.push_str("r#\"\"#");
        out.extend(after[..end].chars().filter(|c| *c == '\n'));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The string literals of a line of code, their contents (escapes left as written).
fn string_literals(code: &str) -> Vec<&str> {
    let (mut out, mut from, mut esc) = (Vec::new(), None, false);
    for (i, c) in code.char_indices() {
        match (from, c) {
            (Some(_), _) if esc => esc = false,
            (Some(_), '\\') => esc = true,
            (Some(f), '"') => {
                out.push(&code[f..i]);
                from = None;
            }
            (None, '"') => from = Some(i + 1),
            _ => {}
        }
    }
    out
}

/// The kinds whose name is no ordinary word, so that a string holding it names the kind (`"hwnoise"`,
/// `"net.latency.max"`); `clock`, `net`, `mem`, `ops`, `numa` and `cyclic` are also words of messages and
/// of the formats users have (cyclictest's `--clock` and its JSON's `"clock"`).
fn named_by_strings(kind: &Kind) -> Vec<String> {
    match kind.name.as_str() {
        "hwnoise" | "oslat" => vec![kind.name.clone()],
        n if n.contains('_') => vec![n.to_string(), n.replace('_', ".")],
        _ => Vec::new(),
    }
}

/// Whether a source names `kind`: its variant (`ProbeKind::Clock`, `ProbeResult::Clock`, `Self::Clock`),
/// its result type, a path into one of its modules (`rtgauge_model::clock::…`, `crate::clock`,
/// `cmd::clock::run`, `clock::…` beside it, a `clock` in a `use` tree; not a path from another crate, such
/// as `std::os::unix::net`), or, for a kind whose name is no ordinary word, a string holding it
/// ([`named_by_strings`]). Module declarations (`pub mod clock;`) are the module tree, not a use of it;
/// raw strings (`r#"…"#`: documents embedded whole, the built-in profiles' TOML) are data, not code.
fn names_kind(text: &str, kind: &Kind, external: &[String]) -> bool {
    let text = &without_raw_strings(text);
    let n = kind.name.as_str();
    let into_module = |path: &str| {
        let segs: Vec<&str> = path.split("::").collect();
        !external.iter().any(|e| e == segs[0])
            && segs.iter().take_while(|s| **s != "*").any(|s| *s == n)
    };
    let words = named_by_strings(kind);
    let line_names = |line: &str| {
        let t = after_visibility(line).trim();
        if t.starts_with("mod ") && t.ends_with(';') {
            return false;
        }
        ["ProbeKind", "ProbeResult", "Self"]
            .iter()
            .any(|e| names_word(line, &format!("{e}::{}", kind.variant)))
            || names_word(line, &kind.result)
            || line
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .any(|path| path.contains("::") && into_module(path.trim_matches(':')))
            || string_literals(line)
                .iter()
                .any(|lit| words.iter().any(|w| names_word(lit, w)))
    };
    text.lines().map(code_of).any(line_names)
        || use_trees(text)
            .iter()
            .flat_map(|t| use_paths(t))
            .any(|p| into_module(&p))
}

/// Per kind, the non-test files outside its own modules that name it ([`names_kind`]), sorted.
fn kind_namers(files: &[(PathBuf, String)], kinds: &[Kind]) -> BTreeMap<String, Vec<String>> {
    let external = external_crates();
    kinds
        .iter()
        .map(|k| {
            let mut namers: Vec<String> = files
                .iter()
                .filter(|(f, _)| !is_own_module(f, k))
                .filter(|(_, text)| names_kind(text, k, &external))
                .map(|(f, _)| rel(f))
                .collect();
            namers.sort();
            (k.name.clone(), namers)
        })
        .collect()
}

/// The files that register the kinds, one line per kind in each layer: the list in the run document, the
/// flags' registry (a profile's stages, the monitor's watches), the command line's verbs.
const REGISTRIES: [&str; 3] = [
    "crates/model/src/kind.rs",
    "crates/flags/src/kinds.rs",
    "crates/cli/src/cli.rs",
];

/// The files besides the registries where a kind lends a piece to another layer, each kind's own: hwnoise's
/// tracer cleanup in the probe crate's cleanup of killed runs, clock's host source in the VM channel.
const LENT: [(&str, &str); 2] = [
    ("hwnoise", "crates/probe/src/lib.rs"),
    ("clock", "crates/vmhost/src/channel.rs"),
];

/// The most files outside its own modules that may name a kind: the three registries and its one lent
/// piece, if it has one.
const KIND_FILES: usize = 4;

/// The kinds older than the registries, each with the files that still name it today: the ceiling they
/// must not grow past (every kind since — hwnoise, net latency, clock, and any new one — has
/// [`KIND_FILES`] and no file but the registries and its lent piece). The monitor and `capacity` are the
/// timer probe's; the rt-tests formats and the fleet name oslat's measures; net latency's modules borrow
/// net's socket helpers and the memory probe ops' random numbers; `host::numa` and `plan::numa` read and
/// plan NUMA for every kind.
const OLDER_KINDS: [(&str, usize); 6] = [
    ("cyclic", 10),
    ("oslat", 8),
    ("net", 9),
    ("ops", 4),
    ("mem", 7),
    ("numa", 8),
];

/// Lines dividing or multiplying by a thousand in floating point (`/ 1000.0`, `/ 1e3`, `* 1e-3`): the
/// shape of a ns→µs conversion written inline.
fn inline_us_conversions(text: &str) -> Vec<(usize, String)> {
    const SHAPES: [&str; 8] = [
        "/ 1000.0",
        "/ 1_000.0",
        "/ 1e3",
        "/ 1000f64",
        "* 1e-3",
        "* 0.001",
        "/1000.0",
        "/1e3",
    ];
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let c = code_of(l);
            // A thousand that is not a unit of time says so on its line.
            (SHAPES.iter().any(|s| c.contains(s)) || integer_thousandth(c))
                && !l.contains("not a time")
        })
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

/// Whether a line divides an integer by a thousand (`x_ns / 1000`, `ns / 1_000`): the shape of a ns→µs
/// conversion in integers (`us_trunc` is the one), not a division by a million or more.
fn integer_thousandth(code: &str) -> bool {
    let shapes = [
        "/ 1000",
        "/ 1_000",
        "/1000",
        "/1_000",
        "/= 1000",
        "/= 1_000",
        "div_ceil(1000",
        "div_ceil(1_000",
    ];
    shapes.iter().any(|shape| {
        code.match_indices(shape).any(|(i, s)| {
            let after = code[i + s.len()..].chars().next();
            !after
                .is_some_and(|c| c.is_ascii_digit() || c == '_' || c == '.' || c == 'f' || c == 'e')
        })
    })
}

/// The non-test lines of a crate outside the probe kinds' own modules: the shared part a new kind must not
/// make grow. The kinds' own modules (`clock.rs`, `net_latency/`, …) grow with the kinds, by design.
fn shared_lines(krate: &str, files: &[(PathBuf, String)], kinds: &[Kind]) -> (usize, usize) {
    let of_crate: Vec<&(PathBuf, String)> = files
        .iter()
        .filter(|(f, _)| f.starts_with(crates_dir().join(krate).join("src")))
        .collect();
    let total = of_crate.iter().map(|(_, t)| t.lines().count()).sum();
    let shared = of_crate
        .iter()
        .filter(|(f, _)| !kinds.iter().any(|k| is_own_module(f, k)))
        .map(|(_, t)| t.lines().count())
        .sum();
    (shared, total)
}

/// The most non-test lines the shared part of a crate may hold: the run document's data and units, and the
/// engine around the probes (what the last restructure reached; it grew again with three kinds).
const LINE_BUDGETS: [(&str, usize); 2] = [("model", 4_000), ("session", 1_500)];

/// The `Result<T, E>` types of a source whose error `E` is a plain `String` (a line each): the probe crate's
/// errors are typed (thiserror), so that a caller can tell them apart and a message is made in one place.
fn string_errors(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = code_of(line);
        for (i, _) in code.match_indices("Result<") {
            if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            // The arguments up to the matching `>`, split at the commas outside nested brackets.
            let start = i + "Result<".len();
            let (mut depth, mut args, mut from) = (0usize, Vec::new(), start);
            for (j, c) in code[start..].char_indices().map(|(j, c)| (j + start, c)) {
                match c {
                    '<' | '(' | '[' => depth += 1,
                    '>' | ')' | ']' if depth == 0 => {
                        args.push(code[from..j].trim());
                        break;
                    }
                    '>' | ')' | ']' => depth -= 1,
                    ',' if depth == 0 => {
                        args.push(code[from..j].trim());
                        from = j + 1;
                    }
                    _ => {}
                }
            }
            if args.len() == 2 && args[1] == "String" {
                out.push((n + 1, line.trim().to_string()));
            }
        }
    }
    out
}

/// Type names defined more than once on purpose, each with why (every other name is defined once).
const SHARED_TYPE_NAMES: [(&str, &str); 5] = [
    ("Check", "each linter's own check signature (lint: k8s, libvirt, vmx), private to it"),
    ("Facts", "what each of lint's libvirt and vmx linters parsed, private to it"),
    ("Pinning", "each of lint's libvirt and vmx linters' reading of CPU pinning, private to it"),
    ("Key", "a private alias for a map's key, local to its module or function (analysis vm_join, cli fleet)"),
    ("Cli", "the command line of each binary: rtgauge (cli) and rtgauge-lab (lab)"),
];

/// The item a line sits in: the nearest line above it indented less (a `{` alone on its line, after a
/// `where` clause, stands for the header above it).
fn enclosing<'a>(lines: &[&'a str], i: usize) -> Option<&'a str> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let n = indent(lines[i]);
    let j = (0..i)
        .rev()
        .find(|&j| !code_of(lines[j]).trim().is_empty() && indent(lines[j]) < n)?;
    if code_of(lines[j]).trim() != "{" {
        return Some(lines[j]);
    }
    let m = indent(lines[j]);
    (0..j).rev().map(|k| lines[k]).find(|l| {
        let c = code_of(l).trim();
        !c.is_empty() && indent(l) <= m && !c.starts_with("where")
    })
}

/// A line of code without its visibility (`pub`, `pub(crate)`, `pub(in …)`) and `unsafe`.
fn after_visibility(t: &str) -> &str {
    let t = t.trim_start();
    let t = match t.strip_prefix("pub") {
        Some(r) if r.starts_with(' ') => r.trim_start(),
        Some(r) if r.starts_with('(') => r.find(')').map_or(t, |e| r[e + 1..].trim_start()),
        _ => t,
    };
    t.strip_prefix("unsafe ").unwrap_or(t)
}

/// The types a source defines — structs, enums, unions, traits and type aliases, also those local to a
/// function, but not the associated types of a trait or an impl: (name, line).
fn type_definitions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = after_visibility(code_of(l));
        let Some(rest) = ["struct ", "enum ", "union ", "trait ", "type "]
            .iter()
            .find_map(|k| t.strip_prefix(k))
        else {
            continue;
        };
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let associated = t.starts_with("type ")
            && enclosing(&lines, i).is_some_and(|e| {
                let e = after_visibility(code_of(e));
                e.starts_with("impl") || e.starts_with("trait ")
            });
        if !name.is_empty() && !associated {
            out.push((name, i + 1));
        }
    }
    out
}

/// Every type name of `files` with where it is defined (`file:line`), for the names defined more than once.
fn types_defined_twice(files: &[(PathBuf, String)]) -> BTreeMap<String, Vec<String>> {
    let mut all: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (f, text) in files {
        for (name, line) in type_definitions(text) {
            all.entry(name)
                .or_default()
                .push(format!("{}:{line}", rel(f)));
        }
    }
    all.retain(|_, at| at.len() > 1);
    all
}

fn rel(p: &Path) -> String {
    p.strip_prefix(crates_dir().parent().expect("the workspace"))
        .unwrap_or(p)
        .display()
        .to_string()
}

#[test]
fn the_checks_see_the_whole_workspace() {
    // A check that found no source would pass on nothing.
    let all = workspace_sources();
    assert!(crates().len() >= 10, "{:?}", crates());
    assert!(all.len() >= 100, "{} sources", all.len());
    assert!(all.iter().any(|(f, _)| f.ends_with("model/src/run.rs")));
}

#[test]
fn no_non_test_part_of_a_file_is_over_1000_lines() {
    let long: Vec<String> = workspace_sources()
        .iter()
        .filter(|(_, t)| t.lines().count() > 1000)
        .map(|(f, t)| format!("{}: {} lines", rel(f), t.lines().count()))
        .collect();
    assert!(long.is_empty(), "{long:#?}");
}

#[test]
fn no_function_is_over_120_lines() {
    let mut long = Vec::new();
    for (f, t) in workspace_sources() {
        for (name, line, len) in long_functions(&t, 120) {
            long.push(format!("{}:{line} {name}: {len} lines", rel(&f)));
        }
    }
    assert!(long.is_empty(), "{long:#?}");
}

#[test]
fn no_crate_has_a_circle_between_its_modules() {
    for c in crates() {
        let src = c.join("src");
        let files = sources(&c);
        let tests = test_module_files(&files);
        // A binary's modules (main.rs and what it declares) and a library's share no path here: `crate::`
        // in each names its own root's modules, which the paths below keep apart by file.
        let lib: Vec<(Vec<String>, String)> = files
            .iter()
            .filter(|f| !tests.contains(*f))
            .map(|f| {
                let text = std::fs::read_to_string(f).expect("a source");
                (module_path(&src, f), non_test(&text).to_string())
            })
            .collect();
        let edges = module_edges(&lib);
        assert_eq!(find_circle(&edges), None, "{}", rel(&c));
    }
}

#[test]
fn the_probe_kinds_are_named_only_where_they_are_listed() {
    let files = workspace_sources();
    let kinds = kinds();
    assert!(kinds.len() >= 9, "{kinds:?}");
    assert_eq!(
        kinds.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        rtgauge_model::kind::ProbeKind::ALL.map(|k| k.as_str()),
        "the list and ProbeKind::ALL"
    );
    // No source names a result's variant: the list makes the dispatches (analysis, report) itself.
    let namers: Vec<String> = variant_namers(&files, &kinds)
        .iter()
        .map(|f| rel(f))
        .filter(|f| f != REGISTRIES[0])
        .collect();
    assert!(
        namers.is_empty(),
        "match through the kind traits instead: {namers:#?}"
    );
    // Each kind is named outside its own modules only where it is registered (and where it lends a piece);
    // the older kinds no more than today.
    let all = kind_namers(&files, &kinds);
    for (name, namers) in &all {
        match OLDER_KINDS.iter().find(|(k, _)| k == name) {
            Some(&(_, most)) => assert!(
                namers.len() <= most,
                "{name} is named in {} files outside its own modules (at most {most}): {namers:#?}",
                namers.len()
            ),
            None => {
                let elsewhere: Vec<&String> = namers
                    .iter()
                    .filter(|f| !REGISTRIES.contains(&f.as_str()))
                    .filter(|f| !LENT.iter().any(|(k, lent)| k == name && lent == f))
                    .collect();
                assert!(
                    elsewhere.is_empty() && namers.len() <= KIND_FILES,
                    "{name} is named outside its own modules and the registries: {elsewhere:#?} (all: {namers:#?})"
                );
            }
        }
    }
    // A kind that took fewer files comes off the list of older kinds' ceilings.
    for (name, most) in OLDER_KINDS {
        let n = all.get(name).map_or(0, Vec::len);
        assert!(
            n == most,
            "{name} is now named in {n} files outside its own modules: set its ceiling in OLDER_KINDS to {n} (or {KIND_FILES}: remove it)"
        );
    }
}

/// The registry files and the other files naming each kind, printed (`cargo test --test structure --
/// --nocapture kind_counts`): the figures of a closing note.
#[test]
fn kind_counts() {
    let (files, kinds) = (workspace_sources(), kinds());
    for (name, namers) in kind_namers(&files, &kinds) {
        println!("{name}: {} {namers:?}", namers.len());
    }
    for (krate, _) in LINE_BUDGETS {
        let (shared, total) = shared_lines(krate, &files, &kinds);
        println!("{krate}: {shared} shared, {total} with the kinds' own modules");
    }
}

#[test]
fn the_shared_crates_keep_their_line_budgets() {
    let (files, kinds) = (workspace_sources(), kinds());
    for (krate, most) in LINE_BUDGETS {
        let (shared, total) = shared_lines(krate, &files, &kinds);
        assert!(shared > 100, "{krate}: {shared} lines seen");
        assert!(
            shared <= most,
            "{krate}: {shared} non-test lines outside the kinds' own modules ({total} with them), over its budget of {most}"
        );
    }
}

#[test]
fn the_probe_crate_has_typed_errors() {
    let probe = crates_dir().join("probe/src");
    let found: Vec<String> = workspace_sources()
        .iter()
        .filter(|(f, _)| f.starts_with(&probe))
        .flat_map(|(f, t)| {
            string_errors(t)
                .into_iter()
                .map(move |(n, l)| format!("{}:{n}: {l}", rel(f)))
        })
        .collect();
    assert!(
        found.is_empty(),
        "an error type of its own (thiserror): {found:#?}"
    );
}

#[test]
fn every_ns_to_us_conversion_goes_through_the_one_helper() {
    let helper = crates_dir().join("model/src/units.rs");
    let mut found = Vec::new();
    for (f, t) in workspace_sources() {
        if f == helper {
            continue;
        }
        for (line, text) in inline_us_conversions(&t) {
            found.push(format!("{}:{line}: {text}", rel(&f)));
        }
    }
    assert!(found.is_empty(), "use rtgauge_model::units: {found:#?}");
}

#[test]
fn no_type_name_is_defined_twice() {
    let twice = types_defined_twice(&workspace_sources());
    let unexpected: BTreeMap<&String, &Vec<String>> = twice
        .iter()
        .filter(|(name, _)| !SHARED_TYPE_NAMES.iter().any(|(n, _)| n == name))
        .collect();
    assert!(
        unexpected.is_empty(),
        "one name per concept: name each after what it is ({unexpected:#?})"
    );
    // An exception that is no longer one comes off the list.
    let stale: Vec<&str> = SHARED_TYPE_NAMES
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !twice.contains_key(*n))
        .collect();
    assert!(
        stale.is_empty(),
        "defined once now: remove from SHARED_TYPE_NAMES: {stale:?}"
    );
}

// The checks themselves, each on a made-up source that breaks its rule.

#[test]
fn the_checks_find_what_they_look_for() {
    // A 130-line function, laid out as rustfmt lays it out, and a trait method without a body.
    let body: String = (0..128).map(|i| format!("    let x{i} = {i};\n")).collect();
    let src = format!(
        "trait T {{\n    fn decl(&self);\n}}\n\nfn long() {{\n{body}}}\n\nfn short() {{}}\n"
    );
    assert_eq!(
        long_functions(&src, 120),
        vec![("long".to_string(), 5, 130)]
    );
    assert!(long_functions(&src, 130).is_empty());
    // A test module is not counted.
    let t = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() {}\n}\n";
    assert_eq!(non_test(t), "fn a() {}\n");
    // A circle a → b → a (through `crate::` and `super::`), and none where a child uses its parent.
    let files = vec![
        (vec!["a".to_string()], "use crate::b::Thing;\n".to_string()),
        (
            vec!["b".to_string()],
            "fn f() -> crate::a::X { todo() }\n".to_string(),
        ),
        (vec!["c".to_string()], "".to_string()),
        (
            vec!["c".to_string(), "d".to_string()],
            "use super::Y;\nuse super::super::b::Z;\n".to_string(),
        ),
    ];
    let edges = module_edges(&files);
    let circle = find_circle(&edges).expect("a circle");
    assert!(
        circle.contains(&"a".to_string()) && circle.contains(&"b".to_string()),
        "{circle:?}"
    );
    assert_eq!(edges.get("c::d"), Some(&BTreeSet::from(["b".to_string()])));
    let no_circle: Vec<_> = files.into_iter().filter(|(m, _)| m[0] != "b").collect();
    assert_eq!(find_circle(&module_edges(&no_circle)), None);
    // A variant named in code (not in a comment, not a longer name), and an inline conversion.
    let f = |s: &str| vec![(PathBuf::from("x.rs"), s.to_string())];
    assert_eq!(
        variant_namers(&f("let x = ProbeResult::Oslat(r);"), &kinds()).len(),
        1
    );
    assert!(variant_namers(
        &f("// ProbeResult::Oslat\nlet y = ProbeResult::OslatLike;"),
        &kinds()
    )
    .is_empty());
    assert_eq!(
        inline_us_conversions("let us = ns as f64 / 1000.0;\n// x / 1e3\n").len(),
        1
    );
    // An integer ns→µs division, but not a division by a million nor a float thousand's other shapes.
    assert_eq!(
        inline_us_conversions(
            "let w = self.config.width_ns / 1000;\nlet v = (x / 1_000).max(1);\nlet ms = ns / 1_000_000;\nt /= 1000;\nlet u = ns.div_ceil(1000);\n"
        )
        .len(),
        4
    );
    // A verb that matches on a kind's variant, and one naming the kind's result type, are found; a kind
    // named in its own module is not counted against it.
    let kinds = kinds();
    let kind = |name: &str| {
        kinds
            .iter()
            .find(|k| k.name == name)
            .expect("a kind of the list")
            .clone()
    };
    let (clock, hwnoise, net_latency) = (kind("clock"), kind("hwnoise"), kind("net_latency"));
    let ext = external_crates();
    assert!(ext.iter().any(|e| e == "tokio") && ext.iter().all(|e| !e.starts_with("rtgauge")));
    let at = |path: &str, text: &str| vec![(crates_dir().join(path), text.to_string())];
    let verb = |text: &str| at("cli/src/cmd/run/mod.rs", text);
    // A verb matching on a kind's variant or naming its result type is found, and the first rule says
    // which; the same text in the kind's own module is not counted against it.
    let m = "match p {\n    ProbeResult::Clock(c) => show(c),\n    _ => {}\n}\n";
    assert_eq!(variant_namers(&verb(m), &kinds).len(), 1);
    assert_eq!(kind_namers(&verb(m), &kinds)["clock"].len(), 1);
    let typed = "fn f(r: &ClockResult) {}\n";
    assert_eq!(kind_namers(&verb(typed), &kinds)["clock"].len(), 1);
    for own in [
        "cli/src/cmd/clock.rs",
        "probe/src/clock/ptp4l.rs",
        "analysis/src/kind/clock.rs",
    ] {
        assert!(
            kind_namers(&at(own, m), &kinds)["clock"].is_empty(),
            "{own}"
        );
    }
    assert!(kind_namers(
        &at("formats/src/rttests/hwnoise.rs", "let x = \"hwnoise\";\n"),
        &kinds
    )["hwnoise"]
        .is_empty());
    assert!(kind_namers(
        &at(
            "probe/src/net_latency/rx.rs",
            "use crate::net_latency::X;\n"
        ),
        &kinds
    )["net_latency"]
        .is_empty());
    // Each way of naming a kind: its variants, a path from this crate or another rtgauge crate, one beside
    // its module, one through a module of the crate, a `use` tree over lines, a distinctive string.
    let named = [
        (&clock, "let k = ProbeKind::Clock;\n"),
        (&clock, "match self { Self::Clock => 1 }\n"),
        (
            &clock,
            "let p = rtgauge_probe::clock::Poller::open(&plan);\n",
        ),
        (&clock, "use super::{\n    clock,\n    cyclic,\n};\n"),
        (&clock, "Command::Clock(a) => cmd::clock::run(a),\n"),
        (&hwnoise, "let c = hwnoise::clean_killed_run();\n"),
        (&hwnoise, "let x = crate::hwnoise::X;\n"),
        (&hwnoise, "eprintln!(\"the hwnoise tracer\");\n"),
        (&net_latency, "let key = \"net.latency.max\";\n"),
    ];
    for (k, text) in named {
        assert!(names_kind(text, k, &ext), "{}: {text}", k.name);
    }
    // Not naming it: a module declaration, a field, another module's type, a path from another crate, a
    // comment, a longer name, an ordinary word in a string.
    let unnamed = [
        (
            &clock,
            "pub mod clock;\nlet c = plan.clock;\nuse crate::time::ClockId;\n",
        ),
        (
            &clock,
            "// ProbeKind::Clock\nlet d = ProbeKind::ClockLike;\n",
        ),
        (&clock, "let s = \"clock\";\n#[arg(long = \"clock\")]\n"),
        (
            &kind("net"),
            "use std::os::unix::net::UnixStream;\nuse tokio::net::TcpListener;\n",
        ),
        (&hwnoise, "let x = \"hwnoises\";\n"),
        (&hwnoise, "const P: &str = r#\"kind = \"hwnoise\"\n\"#;\n"),
    ];
    for (k, text) in unnamed {
        assert!(!names_kind(text, k, &ext), "{}: {text}", k.name);
    }
    // A shared file naming a new kind beyond its registries breaks the rule even within the count.
    let shared = at("session/src/lib.rs", "use rtgauge_model::net_latency::X;\n");
    assert_eq!(
        kind_namers(&shared, &kinds)["net_latency"],
        ["crates/session/src/lib.rs"]
    );
    // A thousand that is not a time says so.
    assert!(inline_us_conversions("let n = bytes / 1000; // not a time: kB\n").is_empty());
    // A `String` error, but not a `String` in a result's value nor a nested one.
    assert_eq!(
        string_errors(
            "fn a() -> Result<Peer, String> {}\nfn b() -> Result<BTreeMap<String, String>, E> {}\nlet c: mpsc::Sender<Result<(u8, String), Error>>;\nfn d() -> io::Result<String> {}\n"
        )
        .len(),
        1
    );
    // A 4,001st line of the shared part of `model` breaks its budget; lines of a kind's own module do not.
    let lines = |n: usize| "let x = 1;\n".repeat(n);
    let model = |file: &str, n: usize| (crates_dir().join("model/src").join(file), lines(n));
    let files = vec![
        model("run.rs", 3_000),
        model("verdict.rs", 1_000),
        model("clock.rs", 900),
    ];
    assert_eq!(shared_lines("model", &files, &kinds), (4_000, 4_900));
    let one_more = vec![model("run.rs", 3_001), model("verdict.rs", 1_000)];
    assert!(shared_lines("model", &one_more, &kinds).0 > LINE_BUDGETS[0].1);
    // A type defined in two files (once inside a function), and neither an impl's or a trait's associated
    // type, a commented-out struct, nor a longer name counts as another definition.
    let files = vec![
        (
            PathBuf::from("a.rs"),
            "pub struct Thing;\nimpl Iterator for Thing {\n    type Item = u8;\n}\n".to_string(),
        ),
        (
            PathBuf::from("b.rs"),
            concat!(
                "fn f() {\n    pub(crate) enum Thing {}\n}\n",
                "impl<T> X for T\nwhere\n    T: Y,\n{\n    type Item = T;\n}\n",
                "trait Z {\n    type Item;\n}\n// struct Item;\npub type ThingLike = u8;\n"
            )
            .to_string(),
        ),
    ];
    assert_eq!(
        types_defined_twice(&files),
        BTreeMap::from([(
            "Thing".to_string(),
            vec!["a.rs:1".to_string(), "b.rs:2".to_string()]
        )])
    );
    // A circle through grouped and multi-line `use` trees, and a test module behind a visibility.
    assert_eq!(
        use_paths("super::{a,b::{c,d}}"),
        ["super::a", "super::b::c", "super::b::d"]
    );
    let grouped = vec![
        (
            vec!["x".to_string()],
            "use crate::{\n    y::Thing,\n    z,\n};\n".to_string(),
        ),
        (
            vec!["y".to_string()],
            "pub(crate) use super::{x::Other, w};\n".to_string(),
        ),
        (vec!["z".to_string()], String::new()),
    ];
    let circle = find_circle(&module_edges(&grouped)).expect("a circle through grouped uses");
    assert!(
        circle.contains(&"x".to_string()) && circle.contains(&"y".to_string()),
        "{circle:?}"
    );
    assert_eq!(
        non_test("fn a() {}\n#[cfg(test)]\npub(crate) mod t {\n}\n"),
        "fn a() {}\n"
    );
    // A qualified function is measured, and one whose end is not found is reported.
    let qualified = format!("pub(crate) unsafe extern \"C\" fn q() {{\n{body}}}\n");
    assert_eq!(long_functions(&qualified, 120).len(), 1);
    assert_eq!(
        long_functions("fn open() {\n    x\n", 120),
        vec![("open".to_string(), 1, 2)]
    );
}

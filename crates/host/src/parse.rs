//! Pure parsers of kernel text files. Nothing here does I/O; each function takes the file's text and never panics,
//! whatever the bytes (property-tested). Each parser names the kernel document that defines its format.

use rtgauge_model::cpuset::CpuSetError;
use rtgauge_model::fingerprint::CpuInfo;
use rtgauge_model::CpuSet;
use std::collections::BTreeMap;

/// Why a kernel parameter or mask was refused (the text is the audit's evidence: it names the bad part).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// An `isolcpus=` flag the kernel does not know (known: `domain`, `managed_irq`, `nohz`).
    #[error("unknown isolcpus flag '{0}'")]
    IsolcpusFlag(String),
    /// A CPU list that does not parse.
    #[error(transparent)]
    CpuList(#[from] CpuSetError),
    /// A hex mask with no digits.
    #[error("empty mask")]
    EmptyMask,
    /// A comma-separated word of a mask that is not 1-8 hex digits.
    #[error("'{0}' is not a 32-bit hex word")]
    MaskWord(String),
    /// A word of a mask that is not hex.
    #[error("'{0}' is not hex")]
    NotHex(String),
    /// A mask wider than the largest CPU number rtgauge handles.
    #[error("mask wider than the supported CPU maximum")]
    MaskTooWide,
}

/// The kernel command line (`/proc/cmdline`, Documentation/admin-guide/kernel-parameters.rst), split into
/// `key[=value]` tokens. Double quotes group a value containing spaces, as the kernel's `next_arg` does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cmdline {
    /// The line as read, surrounding white space trimmed.
    pub raw: String,
    /// `key[=value]` tokens in command-line order; a bare `key` has no value.
    pub tokens: Vec<(String, Option<String>)>,
}

impl Cmdline {
    /// The value of the last occurrence of `key` (the kernel lets a later parameter override an earlier one).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.tokens
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref().unwrap_or(""))
    }
    /// Whether `key` appears, with or without a value.
    pub fn has(&self, key: &str) -> bool {
        self.tokens.iter().any(|(k, _)| k == key)
    }
    /// `key=value` or bare `key` as written, for evidence.
    pub fn token(&self, key: &str) -> Option<String> {
        self.get(key).map(|v| {
            if v.is_empty() {
                key.to_string()
            } else {
                format!("{key}={v}")
            }
        })
    }
}

/// Split a command line into tokens.
pub fn parse_cmdline(text: &str) -> Cmdline {
    let mut tokens = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut push = |cur: &mut String| {
        if !cur.is_empty() {
            let t = std::mem::take(cur);
            match t.split_once('=') {
                Some((k, v)) => tokens.push((k.to_string(), Some(v.trim_matches('"').to_string()))),
                None => tokens.push((t.trim_matches('"').to_string(), None)),
            }
        }
    };
    for ch in text.chars() {
        match ch {
            '"' => in_quote = !in_quote,
            c if c.is_whitespace() && !in_quote => push(&mut cur),
            c => cur.push(c),
        }
    }
    push(&mut cur);
    Cmdline {
        raw: text.trim().to_string(),
        tokens,
    }
}

/// `isolcpus=[flag,...,]<cpu-list>` (kernel-parameters.txt: flags `nohz`, `domain`, `managed_irq`): the flags and
/// the CPU list. Leading alphabetic items are flags; an unknown flag is refused as the kernel refuses it.
pub fn parse_isolcpus(value: &str) -> Result<(Vec<String>, CpuSet), ParseError> {
    let mut flags = Vec::new();
    let mut rest: &str = value.trim();
    loop {
        let (head, tail) = match rest.split_once(',') {
            Some((h, t)) => (h, Some(t)),
            None => (rest, None),
        };
        if head.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            if !matches!(head, "nohz" | "domain" | "managed_irq") {
                return Err(ParseError::IsolcpusFlag(head.to_string()));
            }
            flags.push(head.to_string());
            match tail {
                Some(t) => rest = t,
                None => {
                    rest = "";
                    break;
                }
            }
        } else {
            break;
        }
    }
    Ok((flags, CpuSet::parse(rest)?))
}

/// A CPU list from a parameter that may be `all` or `none` (e.g. `rcu_nocbs=all`, kernel-parameters.txt).
pub fn parse_cpu_list_param(value: &str, online: &CpuSet) -> Result<CpuSet, ParseError> {
    match value.trim() {
        "all" => Ok(online.clone()),
        "none" | "" => Ok(CpuSet::default()),
        v => Ok(CpuSet::parse(v)?),
    }
}

/// A hex CPU mask as in `/proc/irq/*/smp_affinity` and workqueue `cpumask` (Documentation/core-api/irq/
/// irq-affinity.rst): comma-separated 32-bit words, most significant first, leading zeros allowed.
pub fn parse_hex_mask(text: &str) -> Result<CpuSet, ParseError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ParseError::EmptyMask);
    }
    let words: Vec<&str> = t.split(',').collect();
    let mut cpus = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        let w = w.trim();
        if w.is_empty() || w.len() > 8 {
            return Err(ParseError::MaskWord(w.to_string()));
        }
        let v = u32::from_str_radix(w, 16).map_err(|_| ParseError::NotHex(w.to_string()))?;
        let base = (i as u64) * 32;
        if base > u64::from(rtgauge_model::cpuset::MAX_CPU) {
            if v != 0 {
                return Err(ParseError::MaskTooWide);
            }
            continue;
        }
        for b in 0..32u64 {
            if v & (1 << b) != 0 && base + b <= u64::from(rtgauge_model::cpuset::MAX_CPU) {
                cpus.push((base + b) as u32);
            }
        }
    }
    Ok(CpuSet::new(cpus))
}

/// Per-processor facts of `/proc/cpuinfo` (Documentation/filesystems/proc.rst; x86 field names). Only the first
/// processor block is kept: the fields are identical across CPUs on every platform we judge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuinfoFirst {
    /// The first processor's identity (vendor, model name, family, model, stepping, microcode) in the
    /// fingerprint model's own type; its topology fields stay at their defaults (sysfs fills them).
    pub identity: CpuInfo,
    /// `flags` (x86) or `Features` (Arm): the CPU feature names.
    pub flags: Vec<String>,
    /// Number of `processor` blocks: the CPUs the kernel lists.
    pub processors: u32,
}

/// Parse `/proc/cpuinfo`: the first processor block's fields and the number of processors.
pub fn parse_cpuinfo(text: &str) -> CpuinfoFirst {
    let mut c = CpuinfoFirst::default();
    let mut block = 0u32;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "processor" {
            c.processors += 1;
            block += 1;
            continue;
        }
        if block > 1 {
            continue;
        }
        let id = &mut c.identity;
        match k {
            "vendor_id" | "CPU implementer" if id.vendor.is_none() => {
                id.vendor = Some(v.to_string())
            }
            "model name" | "Model Name" if id.model_name.is_none() => {
                id.model_name = Some(v.to_string())
            }
            "cpu family" => id.family = v.parse().ok(),
            "model" => id.model = v.parse().ok(),
            "stepping" => id.stepping = v.parse().ok(),
            "microcode" => id.microcode = Some(v.to_string()),
            "flags" | "Features" if c.flags.is_empty() => {
                c.flags = v.split_whitespace().map(str::to_string).collect()
            }
            _ => {}
        }
    }
    c
}

/// `/proc/meminfo` (Documentation/filesystems/proc.rst, "meminfo"): name → value, in kB where the kernel says kB.
pub fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let n = v.split_whitespace().next()?.parse().ok()?;
            Some((k.trim().to_string(), n))
        })
        .collect()
}

/// The active word of a sysfs "choice" file, written in brackets: `always madvise [never]` → `never`
/// (Documentation/admin-guide/mm/transhuge.rst). A file without brackets yields its whole trimmed text.
pub fn parse_bracketed_choice(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    if let Some(start) = t.find('[') {
        let rest = &t[start + 1..];
        let end = rest.find(']')?;
        return Some(rest[..end].to_string());
    }
    Some(t.to_string())
}

/// Shell-style `KEY=value` files (`/etc/tuned/*-variables.conf`, `/etc/sysconfig/irqbalance`,
/// `/etc/tuned/bootcmdline`): `(key, value, 1-based line)`; comments and blank lines skipped, one level of
/// surrounding quotes removed.
pub fn parse_key_values(text: &str) -> Vec<(String, String, usize)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') || l.starts_with(';') || l.starts_with('[') {
                return None;
            }
            let l = l.strip_prefix("export ").unwrap_or(l);
            let (k, v) = l.split_once('=')?;
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|x| x.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
                .unwrap_or(v);
            Some((k.trim().to_string(), v.to_string(), i + 1))
        })
        .collect()
}

/// The last value of `key` in a `KEY=value` file.
pub fn key_value<'a>(entries: &'a [(String, String, usize)], key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|(k, _, _)| k == key)
        .map(|(_, v, _)| v.as_str())
}

/// One row of `/proc/interrupts` or `/proc/softirqs` (Documentation/filesystems/proc.rst, "interrupts").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterRow {
    /// IRQ number or name (`LOC`, `TIMER`, `24`).
    pub name: String,
    /// Count per CPU, keyed by CPU number from the header.
    pub counts: BTreeMap<u32, u64>,
    /// Chip and device description after the counts.
    pub desc: String,
}

/// `/proc/interrupts` and `/proc/softirqs`: the header names the online CPUs (`CPU0 CPU3 …`), each row has one
/// count per header column. Rows with fewer counts (`ERR`, `MIS`) keep the counts they have.
pub fn parse_counter_table(text: &str) -> Vec<CounterRow> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpus: Vec<u32> = header
        .split_whitespace()
        .filter_map(|h| h.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let mut rows = Vec::new();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let mut counts = BTreeMap::new();
        let mut fields = rest.split_whitespace().peekable();
        for &cpu in &cpus {
            match fields.peek().and_then(|f| f.parse::<u64>().ok()) {
                Some(v) => {
                    counts.insert(cpu, v);
                    fields.next();
                }
                None => break,
            }
        }
        let desc: Vec<&str> = fields.collect();
        rows.push(CounterRow {
            name: name.trim().to_string(),
            counts,
            desc: desc.join(" "),
        });
    }
    rows
}

/// `steal` column (8th value) of each `cpuN` line of `/proc/stat` (Documentation/filesystems/proc.rst, 1.8).
pub fn parse_stat_steal(text: &str) -> BTreeMap<u32, u64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let steal = f.nth(7)?.parse().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

/// `/proc/<pid>/status` (proc.rst, table 1-2): field → value.
pub fn parse_status(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `/proc/<pid>/stat` (proc.rst, table 1-4): `(comm, fields after comm)`. The comm may contain spaces and
/// parentheses, so it ends at the *last* `)`. Field 3 of the man page (`state`) is index 0 of the returned vector.
pub fn parse_proc_stat(text: &str) -> Option<(String, Vec<String>)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let comm = text[open + 1..close].to_string();
    let rest = text[close + 1..]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    Some((comm, rest))
}

/// Scheduling facts from `/proc/<pid>/stat`: (last CPU field 39, rt_priority field 40, policy field 41).
pub fn parse_stat_sched(text: &str) -> Option<(u32, u32, u32)> {
    let (_, f) = parse_proc_stat(text)?;
    // Field n of proc(5) is index n-3 after the comm.
    let g = |n: usize| f.get(n - 3).and_then(|v| v.parse().ok());
    Some((g(39)?, g(40)?, g(41)?))
}

/// Active PREEMPT_DYNAMIC mode from `/sys/kernel/debug/sched/preempt` (kernel/sched/debug.c
/// `sched_dynamic_show`): the word in parentheses, e.g. `none voluntary (full) lazy` → `full`.
pub fn parse_preempt_dynamic(text: &str) -> Option<String> {
    let start = text.find('(')?;
    let end = text[start..].find(')')? + start;
    let w = text[start + 1..end].trim();
    (!w.is_empty()).then(|| w.to_string())
}

/// Preemption words in the UTS version string (`uname -v`, scripts/mkcompile_h): `PREEMPT_RT` (older RT builds
/// `PREEMPT RT`), `PREEMPT_DYNAMIC`, `PREEMPT_LAZY`, `PREEMPT`.
pub fn parse_uts_preempt(version: &str) -> (Option<&'static str>, bool) {
    let words: Vec<&str> = version.split_whitespace().collect();
    let dynamic = words.contains(&"PREEMPT_DYNAMIC");
    let rt = words.contains(&"PREEMPT_RT") || words.windows(2).any(|w| w == ["PREEMPT", "RT"]);
    let model = if rt {
        Some("rt")
    } else if words.contains(&"PREEMPT_LAZY") {
        Some("lazy")
    } else if words.contains(&"PREEMPT") {
        Some("full")
    } else {
        None
    };
    (model, dynamic)
}

/// Number of active swap areas in `/proc/swaps` (header line, then one line per area).
pub fn parse_swaps(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Capability bits of `CapEff:` (hex, proc.rst) → whether `cap` (bit number) is set.
pub fn parse_cap_has(hex: &str, cap: u32) -> Option<bool> {
    let v = u64::from_str_radix(hex.trim(), 16).ok()?;
    Some(cap < 64 && v & (1u64 << cap) != 0)
}

/// A kernel build configuration (`/boot/config-<release>`, scripts/kconfig): `CONFIG_X=value` lines; `# CONFIG_X
/// is not set` lines and other comments are skipped, so an absent key means "not set".
pub fn parse_kconfig(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.starts_with('#') {
                return None;
            }
            let (k, v) = l.split_once('=')?;
            k.starts_with("CONFIG_")
                .then(|| (k.to_string(), v.trim_matches('"').to_string()))
        })
        .collect()
}

/// First integer in a text file (`/proc/sys/*`, sysfs attributes); `None` if there is none.
pub fn parse_int(text: &str) -> Option<i64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_bad_part() {
        // The audit prints these as evidence ("isolcpus unparsable: …"): the text is part of the output.
        let e = |r: Result<CpuSet, ParseError>| r.unwrap_err().to_string();
        assert_eq!(
            parse_isolcpus("nohz,bogus,2-3").unwrap_err().to_string(),
            "unknown isolcpus flag 'bogus'"
        );
        assert_eq!(
            parse_isolcpus("domain,5-2").unwrap_err(),
            ParseError::CpuList(CpuSetError::Reversed(5, 2))
        );
        let online = CpuSet::parse("0-3").unwrap();
        assert_eq!(
            e(parse_cpu_list_param("3-1", &online)),
            "range 3-1 is reversed"
        );
        assert_eq!(e(parse_hex_mask(" ")), "empty mask");
        assert_eq!(
            e(parse_hex_mask("f,123456789")),
            "'123456789' is not a 32-bit hex word"
        );
        assert_eq!(e(parse_hex_mask("xyz")), "'xyz' is not hex");
    }

    #[test]
    fn cmdline_tokens_last_wins_and_quotes() {
        let c = parse_cmdline(
            "BOOT_IMAGE=/vmlinuz ro quiet isolcpus=1 isolcpus=managed_irq,domain,2-5 foo=\"a b\" nohz=on\n",
        );
        assert_eq!(c.get("isolcpus"), Some("managed_irq,domain,2-5"));
        assert_eq!(c.get("quiet"), Some(""));
        assert!(c.has("ro"));
        assert_eq!(c.get("foo"), Some("a b"));
        assert_eq!(c.token("nohz").as_deref(), Some("nohz=on"));
        assert_eq!(c.get("missing"), None);
    }

    #[test]
    fn isolcpus_flags_and_list() {
        let (f, s) = parse_isolcpus("managed_irq,domain,2-5,8").unwrap();
        assert_eq!(f, vec!["managed_irq", "domain"]);
        assert_eq!(s.to_string(), "2-5,8");
        let (f, s) = parse_isolcpus("1").unwrap();
        assert!(f.is_empty());
        assert_eq!(s.to_string(), "1");
        assert!(parse_isolcpus("domain,x-y").is_err());
        assert!(parse_isolcpus("nohz").unwrap().1.is_empty());
    }

    #[test]
    fn hex_masks_round_trip() {
        let s = parse_hex_mask("00000000,00000003").unwrap();
        assert_eq!(s.to_string(), "0-1");
        let s = parse_hex_mask("1,80000000").unwrap();
        assert_eq!(s.to_string(), "31-32");
        assert_eq!(s.hex_mask(), "00000001,80000000");
        assert!(parse_hex_mask("xyz").is_err());
        assert!(parse_hex_mask("").is_err());
        assert!(parse_hex_mask("123456789").is_err());
    }

    #[test]
    fn cpuinfo_first_block() {
        let c = parse_cpuinfo(
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Xeon\nflags\t\t: fpu tsc constant_tsc\n\nprocessor\t: 1\nvendor_id\t: Other\n",
        );
        assert_eq!(c.identity.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(c.identity.family, Some(6));
        assert_eq!(c.flags, vec!["fpu", "tsc", "constant_tsc"]);
        assert_eq!(c.processors, 2);
    }

    #[test]
    fn counter_table_with_short_rows() {
        let t = "           CPU0       CPU2\n  0:         40          0   IO-APIC   2-edge      timer\nLOC:     100    200   Local timer interrupts\nERR:          0\n";
        let rows = parse_counter_table(t);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].counts[&2], 0);
        assert_eq!(rows[0].desc, "IO-APIC 2-edge timer");
        assert_eq!(rows[1].counts[&2], 200);
        assert_eq!(rows[2].counts.len(), 1);
    }

    #[test]
    fn stat_and_status() {
        let s = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 42 0 0\ncpu1 1 2 3\nintr 5\n";
        let m = parse_stat_steal(s);
        assert_eq!(m.get(&0), Some(&42));
        assert_eq!(m.get(&1), None);
        let st = parse_status("Name:\tksoftirqd/1\nCpus_allowed_list:\t1\n");
        assert_eq!(st["Cpus_allowed_list"], "1");
        let stat = "12 (a) b) S 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 -2 0 1 0 0 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 3 1 1 0 0 0";
        let (comm, _) = parse_proc_stat(stat).unwrap();
        assert_eq!(comm, "a) b");
        assert_eq!(parse_stat_sched(stat), Some((3, 1, 1)));
        assert_eq!(parse_stat_sched("garbage"), None);
    }

    #[test]
    fn small_formats() {
        assert_eq!(
            parse_bracketed_choice("always madvise [never]\n").as_deref(),
            Some("never")
        );
        assert_eq!(parse_bracketed_choice("[always").as_deref(), None);
        assert_eq!(
            parse_preempt_dynamic("none voluntary (full) lazy\n").as_deref(),
            Some("full")
        );
        assert_eq!(
            parse_uts_preempt("#1 SMP PREEMPT_RT Debian 6.12"),
            (Some("rt"), false)
        );
        assert_eq!(
            parse_uts_preempt("#1 SMP PREEMPT_DYNAMIC Fri"),
            (None, true)
        );
        assert_eq!(parse_uts_preempt("#1 SMP PREEMPT RT Fri").0, Some("rt"));
        let kv = parse_key_values("# c\nisolated_cores=2-5\nIRQBALANCE_BANNED_CPULIST=\"1,3\"\n");
        assert_eq!(key_value(&kv, "isolated_cores"), Some("2-5"));
        assert_eq!(key_value(&kv, "IRQBALANCE_BANNED_CPULIST"), Some("1,3"));
        assert_eq!(kv[1].2, 3);
        assert_eq!(
            parse_swaps("Filename Type\n/dev/sda2 partition 1 0 -2\n"),
            vec!["/dev/sda2"]
        );
        assert_eq!(parse_cap_has("00000000a80425fb", 23), Some(false));
        assert_eq!(parse_cap_has("000001ffffffffff", 23), Some(true));
        assert_eq!(parse_int("-1\n"), Some(-1));
        let k = parse_kconfig(
            "# c\nCONFIG_PREEMPT_RT=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_HZ=1000\n",
        );
        assert_eq!(k.get("CONFIG_PREEMPT_RT").map(String::as_str), Some("y"));
        assert!(!k.contains_key("CONFIG_NO_HZ_FULL"));
    }

    proptest::proptest! {
        #[test]
        fn no_parser_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_cmdline(&s);
            let _ = parse_isolcpus(&s);
            let _ = parse_hex_mask(&s);
            let _ = parse_cpuinfo(&s);
            let _ = parse_meminfo(&s);
            let _ = parse_bracketed_choice(&s);
            let _ = parse_key_values(&s);
            let _ = parse_counter_table(&s);
            let _ = parse_stat_steal(&s);
            let _ = parse_status(&s);
            let _ = parse_stat_sched(&s);
            let _ = parse_preempt_dynamic(&s);
            let _ = parse_uts_preempt(&s);
            let _ = parse_swaps(&s);
            let _ = parse_cap_has(&s, 23);
            let _ = parse_int(&s);
            let _ = parse_kconfig(&s);
            let _ = parse_cpu_list_param(&s, &CpuSet::new([0, 1]));
        }

        #[test]
        fn hex_mask_round_trips(cpus in proptest::collection::vec(0u32..300, 1..20)) {
            let set = CpuSet::new(cpus);
            proptest::prop_assert_eq!(parse_hex_mask(&set.hex_mask()).unwrap(), set);
        }
    }
}

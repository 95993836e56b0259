//! CPU sets in the kernel's list syntax (`0-3,8,10-11`), as used by `isolcpus=`, `nohz_full=`,
//! `/sys/devices/system/cpu/online` and rt-tests' `-a`/`-c` options (Documentation/admin-guide/kernel-parameters.rst,
//! "cpu lists").

use serde::{Deserialize, Serialize};
use std::fmt;

/// Highest CPU number accepted from text. Linux's NR_CPUS tops out at 8192 today; a bound stops a hostile
/// `0-4294967295` from allocating gigabytes.
pub const MAX_CPU: u32 = 65_535;

/// A sorted, duplicate-free set of CPU numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct CpuSet(Vec<u32>);

/// Why a CPU list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// A piece of the list is neither a number nor a range.
    #[error("'{0}' is not a CPU number or range")]
    Syntax(String),
    /// A range whose start is above its end.
    #[error("range {0}-{1} is reversed")]
    Reversed(u32, u32),
    /// A CPU number above the supported maximum (as written: it may not fit any integer type).
    #[error("out of range: CPU {0} is above the supported maximum {MAX_CPU}")]
    TooLarge(String),
}

impl CpuSet {
    /// The set of `cpus`, sorted and without duplicates.
    pub fn new(cpus: impl IntoIterator<Item = u32>) -> CpuSet {
        let mut v: Vec<u32> = cpus.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CpuSet(v)
    }

    /// Parse the kernel list syntax. Whitespace around items and a trailing newline are tolerated; an empty
    /// string is the empty set (the kernel writes an empty line for "no CPUs", e.g. in `isolated`).
    /// Stride ranges (`0-7:2/4`) are accepted as the kernel's `bitmap_parselist` accepts them.
    pub fn parse(text: &str) -> Result<CpuSet, CpuSetError> {
        let mut cpus = Vec::new();
        for item in text.trim().split(',') {
            let item = item.trim();
            if item.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(CpuSetError::Syntax(item.to_string()));
            }
            let (range, stride) = match item.split_once(':') {
                Some((r, s)) => (r, Some(s)),
                None => (item, None),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_cpu(a)?, parse_cpu(b)?),
                None => {
                    let c = parse_cpu(range)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(CpuSetError::Reversed(lo, hi));
            }
            let (used, group) = match stride {
                None => (1, 1),
                Some(s) => {
                    let (u, g) = s
                        .split_once('/')
                        .ok_or_else(|| CpuSetError::Syntax(item.to_string()))?;
                    let u = parse_cpu(u)?;
                    let g = parse_cpu(g)?;
                    if u == 0 || g == 0 || u > g {
                        return Err(CpuSetError::Syntax(item.to_string()));
                    }
                    (u, g)
                }
            };
            for c in lo..=hi {
                if (c - lo) % group < used {
                    cpus.push(c);
                }
            }
        }
        Ok(CpuSet::new(cpus))
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
    /// How many CPUs the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether the set holds no CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
    /// The CPUs in ascending order, as a slice.
    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }
    /// The set as the kernel writes a cpumask (`tracing_cpumask`, `/proc/irq/N/smp_affinity`, `Cpus_allowed`):
    /// 32-bit hex words, most significant first, comma-separated ("00000001,80000000" for CPUs 31-32).
    pub fn hex_mask(&self) -> String {
        let top = self.iter().max().unwrap_or(0) / 32;
        let mut words = vec![0u32; top as usize + 1];
        for c in self.iter() {
            words[(c / 32) as usize] |= 1 << (c % 32);
        }
        words
            .iter()
            .rev()
            .map(|w| format!("{w:08x}"))
            .collect::<Vec<_>>()
            .join(",")
    }
    /// CPUs in `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|c| !other.contains(*c))
                .collect(),
        )
    }
    /// The CPUs in both `self` and `other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|c| other.contains(*c))
                .collect(),
        )
    }
}

fn parse_cpu(s: &str) -> Result<u32, CpuSetError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuSetError::Syntax(s.to_string()));
    }
    // Digits only (checked above): a parse failure is an overflow, named as written rather than as u64::MAX.
    let v: u64 = s
        .parse()
        .map_err(|_| CpuSetError::TooLarge(s.to_string()))?;
    if v > u64::from(MAX_CPU) {
        return Err(CpuSetError::TooLarge(s.to_string()));
    }
    Ok(v as u32)
}

impl fmt::Display for CpuSet {
    /// Canonical kernel list form with ranges collapsed: `0-3,8,10-11`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl From<CpuSet> for String {
    fn from(c: CpuSet) -> String {
        c.to_string()
    }
}

impl TryFrom<String> for CpuSet {
    type Error = CpuSetError;
    fn try_from(s: String) -> Result<CpuSet, CpuSetError> {
        CpuSet::parse(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_syntax() {
        let s = CpuSet::parse("0-3,8,10-11\n").unwrap();
        assert_eq!(s.as_slice(), &[0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse("").unwrap().len(), 0);
        assert_eq!(CpuSet::parse("\n").unwrap().len(), 0);
        assert_eq!(CpuSet::parse("3,1,1,2").unwrap().to_string(), "1-3");
        assert_eq!(CpuSet::parse("0-7:2/4").unwrap().as_slice(), &[0, 1, 4, 5]);
    }

    #[test]
    fn hostile_lists() {
        assert!(CpuSet::parse("0-4294967295").is_err());
        // Out of range, named as written with the limit, even beyond u64.
        assert_eq!(
            CpuSet::parse("0-99999").unwrap_err().to_string(),
            "out of range: CPU 99999 is above the supported maximum 65535"
        );
        assert_eq!(
            CpuSet::parse("99999999999999999999").unwrap_err(),
            CpuSetError::TooLarge("99999999999999999999".into())
        );
        assert!(CpuSet::parse("5-2").is_err());
        assert!(CpuSet::parse("a").is_err());
        assert!(CpuSet::parse("1,,2").is_err());
        assert!(CpuSet::parse("-1").is_err());
        assert!(CpuSet::parse("+1").is_err());
        assert!(CpuSet::parse("0-3:0/4").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "[0-9,:/ -]{0,20}") {
            let _ = CpuSet::parse(&s);
        }

        #[test]
        fn display_round_trips(v in proptest::collection::vec(0u32..300, 0..40)) {
            let s = CpuSet::new(v);
            proptest::prop_assert_eq!(CpuSet::parse(&s.to_string()).unwrap(), s);
        }
    }
}

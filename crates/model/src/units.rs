//! Units: integer nanoseconds, the duration syntax users know from rt-tests (`90`, `15m`, `1h`, `7d`), and
//! the one ns → µs conversion every view, file format and message uses ([`us`], [`us_f64`], [`us_trunc`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A duration or latency in integer nanoseconds. Latencies never use floating point.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    /// `microseconds` microseconds (saturating).
    pub const fn from_us(microseconds: u64) -> Nanos {
        Nanos(microseconds.saturating_mul(1_000))
    }
    /// `seconds` seconds (saturating).
    pub const fn from_secs(seconds: u64) -> Nanos {
        Nanos(seconds.saturating_mul(1_000_000_000))
    }
    /// The value in nanoseconds.
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    /// Whole microseconds, truncated as cyclictest does.
    pub const fn as_us_trunc(self) -> u64 {
        us_trunc(self.0)
    }
    /// The value in seconds, as a float.
    pub fn as_secs_f64(self) -> f64 {
        secs(self.0)
    }
}

/// `ns` nanoseconds in microseconds: the one ns → µs conversion of every view, file format and message
/// (the unit latencies are shown in; the caller's format says the digits).
pub fn us(ns: u64) -> f64 {
    us_f64(ns as f64)
}

/// A fractional count of nanoseconds (a mean, an interpolated value) in microseconds.
pub fn us_f64(ns: f64) -> f64 {
    ns / 1000.0
}

/// Whole microseconds of `ns`, truncated as cyclictest and oslat print them.
pub const fn us_trunc(ns: u64) -> u64 {
    ns / 1_000
}

/// `ns` nanoseconds in milliseconds.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// `ns` nanoseconds in seconds.
pub fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Where a figure measured with a bound (± `bound`) lies within it, so that it is unresolved: the most the
/// true value can be, figure + bound (its least is 0). None where it is resolved or has no bound.
pub fn unresolved_upper(value: u64, bound: Option<u64>) -> Option<u64> {
    bound
        .filter(|&b| value <= b)
        .map(|b| value.saturating_add(b))
}

/// `ns` nanoseconds in seconds, rounded to the millisecond (oslat's `duration`).
pub fn secs_to_ms(ns: u64) -> f64 {
    ms(ns).round() / 1e3
}

impl fmt::Display for Nanos {
    /// Human form in a unit that suits the size (`850 ns`, `12.345 µs`, `1.500 s`, `1.5 min`, `24.00 h`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0 as f64;
        if self.0 < 1_000 {
            write!(f, "{} ns", self.0)
        } else if self.0 < 1_000_000 {
            write!(f, "{:.3} µs", n / 1e3)
        } else if self.0 < 1_000_000_000 {
            write!(f, "{:.3} ms", n / 1e6)
        } else if self.0 < 60_000_000_000 {
            write!(f, "{:.3} s", n / 1e9)
        } else if self.0 < 3_600_000_000_000 {
            write!(f, "{:.1} min", n / 60e9)
        } else {
            write!(f, "{:.2} h", n / 3600e9)
        }
    }
}

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is empty.
    #[error("empty duration")]
    Empty,
    /// The text starts with a minus sign.
    #[error("duration must not be negative")]
    Negative,
    /// The text is not a number with an optional unit.
    #[error("'{0}' is not a number followed by an optional unit (s, m, h, d, ms, us, ns)")]
    Syntax(String),
    /// The duration does not fit 64-bit nanoseconds.
    #[error("duration is too long")]
    Overflow,
}

/// Parse a duration the way rt-tests does: a bare number is seconds; suffixes `s`, `m`, `h`, `d` (and, for
/// convenience, `ms`, `us`, and `ns` for the bounds of time sync). Upper-case suffixes are accepted as cyclictest accepts them.
pub fn parse_duration(text: &str) -> Result<Nanos, DurationError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    if t.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(DurationError::Syntax(text.to_string()));
    }
    let value: u64 = num.parse().map_err(|_| DurationError::Overflow)?;
    let ns_per_unit: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "ms" => 1_000_000,
        "us" | "µs" => 1_000,
        "ns" => 1,
        _ => return Err(DurationError::Syntax(text.to_string())),
    };
    value
        .checked_mul(ns_per_unit)
        .map(Nanos)
        .ok_or(DurationError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_tests_suffixes() {
        assert_eq!(parse_duration("90"), Ok(Nanos::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Nanos::from_secs(900)));
        assert_eq!(parse_duration("1h"), Ok(Nanos::from_secs(3600)));
        assert_eq!(parse_duration("7d"), Ok(Nanos::from_secs(7 * 86400)));
        assert_eq!(parse_duration("1H"), Ok(Nanos::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Nanos(250_000_000)));
        assert_eq!(parse_duration("100ns"), Ok(Nanos(100)));
    }

    #[test]
    fn hostile_durations() {
        assert_eq!(parse_duration("-5"), Err(DurationError::Negative));
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(parse_duration("h"), Err(DurationError::Syntax(_))));
        assert!(matches!(
            parse_duration("5x"),
            Err(DurationError::Syntax(_))
        ));
        assert!(matches!(
            parse_duration("1.5h"),
            Err(DurationError::Syntax(_))
        ));
        assert_eq!(
            parse_duration("99999999999999999999d"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            parse_duration("999999999999d"),
            Err(DurationError::Overflow)
        );
    }

    #[test]
    fn display_picks_unit() {
        assert_eq!(Nanos(850).to_string(), "850 ns");
        assert_eq!(Nanos(12_345).to_string(), "12.345 µs");
        assert_eq!(Nanos(1_500_000_000).to_string(), "1.500 s");
        assert_eq!(Nanos::from_secs(90).to_string(), "1.5 min");
        assert_eq!(Nanos::from_secs(86_400).to_string(), "24.00 h");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,24}") {
            let _ = parse_duration(&s);
        }
    }
}

//! The terminal's primitives, shared by every kind's section and the verdict block: how much to show
//! ([`TextOptions`]), which rows of a per-CPU table, and sentences wrapped to 80 columns.

use rtgauge_model::units::us;

/// How much the terminal shows, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextOptions {
    /// Every CPU's rows and sentences, every operation, the accounting per CPU (`-v`); else the brief form:
    /// at most [`DETAILED_CPUS`] CPUs in full, explanations grouped, each probe's headline figures.
    pub verbose: bool,
    /// The answer's word in colour (a terminal, and `NO_COLOR` unset).
    pub color: bool,
}

impl TextOptions {
    /// Everything, no colour: what a probe's own verb prints.
    pub fn full() -> TextOptions {
        TextOptions {
            verbose: true,
            color: false,
        }
    }

    /// Colour when standard output is a terminal and `NO_COLOR` is unset or empty (no-color.org).
    pub fn for_stdout(verbose: bool) -> TextOptions {
        use std::io::IsTerminal as _;
        TextOptions {
            verbose,
            color: color_wanted(
                std::io::stdout().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            ),
        }
    }
}

/// Whether to colour: only on a terminal, and never with `NO_COLOR` set to anything but empty.
pub fn color_wanted(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The width the terminal's sentences are wrapped to: an 80-column terminal, a CI log.
pub const TEXT_WIDTH: usize = 80;

/// `text` greedily wrapped at spaces to [`TEXT_WIDTH`] columns, the first line after `first`, the others
/// after `rest` (a hanging indent). Our own plain sentences only: a wrapping crate would add its Unicode
/// tables to the first build the README times.
pub(crate) fn wrap(first: &str, rest: &str, text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    // A prefix that is only an indent takes the first word without a space.
    let mut empty = first.chars().all(|c| c == ' ');
    // A figure stays with its unit: "12 %", "80.0 µs" break before the number, not after it.
    let mut words: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let bare = word.trim_end_matches([',', ';', ':', '.', ')']);
        let unit = ["%", "µs", "ms", "ns", "s"].contains(&bare);
        match words.last_mut() {
            Some(last) if unit && last.ends_with(|c: char| c.is_ascii_digit()) => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    for word in &words {
        let len = line.chars().count();
        if !empty && len + 1 + word.chars().count() > TEXT_WIDTH {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}

/// Up to this many measured CPUs the terminal prints each CPU's rows; beyond, the [`WORST_CPUS`] with the
/// largest maximum, and counts the rest (the report, and `-v`, hold them all).
pub const DETAILED_CPUS: usize = 8;
/// The CPUs detailed beyond [`DETAILED_CPUS`].
pub const WORST_CPUS: usize = 3;

/// Which rows of a per-CPU table the terminal prints (`maxima` in table order): all of them when verbose
/// or at most [`DETAILED_CPUS`], else the [`WORST_CPUS`] largest; and the line that counts the rest.
pub fn cpu_rows(maxima: &[u64], opts: TextOptions) -> (Vec<bool>, Option<String>) {
    if opts.verbose || maxima.len() <= DETAILED_CPUS {
        return (vec![true; maxima.len()], None);
    }
    let mut order: Vec<usize> = (0..maxima.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(maxima[i]));
    let mut shown = vec![false; maxima.len()];
    for &i in order.iter().take(WORST_CPUS) {
        shown[i] = true;
    }
    let rest: Vec<u64> = (0..maxima.len())
        .filter(|&i| !shown[i])
        .map(|i| maxima[i])
        .collect();
    let lo = rest.iter().copied().min().unwrap_or(0);
    let hi = rest.iter().copied().max().unwrap_or(0);
    let line = format!(
        "   … {} more CPUs, max {:.1}–{:.1} µs (-v prints every CPU; the HTML report holds them all)",
        rest.len(),
        us(lo),
        us(hi)
    );
    (shown, Some(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color_set() {
        use std::ffi::OsStr;
        assert!(color_wanted(true, None));
        assert!(
            color_wanted(true, Some(OsStr::new(""))),
            "an empty NO_COLOR is unset"
        );
        assert!(!color_wanted(true, Some(OsStr::new("1"))));
        assert!(!color_wanted(false, None), "a pipe, a CI log");
    }

    #[test]
    fn many_cpus_show_the_worst_few_and_count_the_rest() {
        let brief = TextOptions::default();
        let (shown, rest) = cpu_rows(
            &[5000, 9000, 1000, 7000, 3000, 8000, 2000, 6000, 4000],
            brief,
        );
        assert_eq!(
            shown,
            [false, true, false, true, false, true, false, false, false]
        );
        assert_eq!(
            rest.as_deref(),
            Some("   … 6 more CPUs, max 1.0–6.0 µs (-v prints every CPU; the HTML report holds them all)")
        );
        let (shown, rest) = cpu_rows(&[1; 8], brief);
        assert!(shown.iter().all(|&s| s) && rest.is_none(), "8 CPUs in full");
        let (shown, rest) = cpu_rows(&[1; 9], TextOptions::full());
        assert!(shown.iter().all(|&s| s) && rest.is_none(), "-v: every CPU");
    }

    #[test]
    fn wrapping_keeps_every_word_in_order_within_the_width() {
        let text = "a ".repeat(100) + "longwordthatdoesnotfit".repeat(5).as_str();
        let lines = wrap("Next:", "  ", &text);
        assert!(lines.len() > 2);
        for l in &lines[..lines.len() - 1] {
            assert!(l.chars().count() <= TEXT_WIDTH, "{l}");
        }
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words[0], "Next:");
        assert_eq!(words[1..].join(" "), text.trim());
        assert_eq!(wrap("x", " ", ""), vec!["x".to_string()]);
        let spike = format!("{} 12 %, (3.5 µs), 81 % thread", "w".repeat(TEXT_WIDTH - 4));
        let lines = wrap("", "    ", &spike);
        assert_eq!(
            lines[1], "    12 %, (3.5 µs), 81 % thread",
            "a figure keeps its unit"
        );
    }
}

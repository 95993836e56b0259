//! Text bound for a terminal, made harmless: a stored label, a host name inside a run document imported from
//! another machine, a process name or a file of a captured tree can hold escape sequences that would recolour
//! the terminal, rewrite its title, move the cursor over earlier lines or (bidi overrides) reorder what is
//! shown. Rendering them visibly is the terminal's counterpart of HTML escaping: the stored value never
//! changes, only its display.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is: every control character but newline and tab (C0, DEL,
/// C1), and the Unicode format characters (Cf: the bidirectional controls, zero-width characters, BOM).
fn is_hazard(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || rtgauge_model::run::is_format_char(c)
}

/// `text` with each hazardous character shown as an escape: `\x1b` for bytes below U+0100, `\u{202e}` for
/// the bidi controls. Text without one is returned as it is.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hazard) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_hazard(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// One field of a table row (a label, a host name): like [`visible`], and newlines and tabs too, so a
/// stored value cannot break the row into lines of its own.
pub fn visible_field(text: &str) -> Cow<'_, str> {
    if !text.contains(['\n', '\t']) {
        return visible(text);
    }
    Cow::Owned(visible(text).replace('\n', "\\x0a").replace('\t', "\\x09"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_visible_and_plain_text_is_untouched() {
        assert!(matches!(
            visible("run 4 (bare-metal)\n\tµs"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            visible("\u{1b}[31mRED\u{1b}]0;title\u{7}"),
            "\\x1b[31mRED\\x1b]0;title\\x07"
        );
        assert_eq!(visible("a\rb\u{9b}c\u{7f}"), "a\\x0db\\x9bc\\x7f");
        assert_eq!(visible("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(visible("host\u{200b}1"), "host\\u{200b}1");
        assert_eq!(
            visible_field("two\nlines\t\u{1b}"),
            "two\\x0alines\\x09\\x1b"
        );
    }

    proptest::proptest! {
        #[test]
        fn no_control_character_survives(s in ".*") {
            let v = visible(&s);
            proptest::prop_assert!(!v.chars().any(is_hazard));
        }
    }
}

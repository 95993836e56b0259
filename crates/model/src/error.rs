//! An error as one line of text, for the places that keep an error as text (a warning, an operation a
//! result lists as skipped) instead of returning it.
//!
//! rtgauge's errors follow one rule: a message does not repeat its cause, the cause is the error's
//! `source`, and a report prints the chain — the binary prints anyhow's `{:#}`, "message: cause: …".
//! [`one_line`] is that line, so an error kept as text reads as it would have been printed.

/// `error` and every error in its `source` chain, joined by ": " (what the binary prints for it).
pub fn one_line(error: &dyn std::error::Error) -> String {
    std::iter::successors(Some(error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read /proc/stat")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_line_is_the_message_then_each_cause() {
        let e = Outer(std::io::Error::other("no such thing"));
        assert_eq!(one_line(&e), "cannot read /proc/stat: no such thing");
        assert_eq!(one_line(&std::io::Error::other("alone")), "alone");
    }
}

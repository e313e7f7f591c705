//! Text bound for a terminal: whatever a skill, a source or an error
//! carries is shown with its control characters escaped, so no description
//! can retitle a window, move the cursor or hide text.

use std::borrow::Cow;
use std::fmt::Write as _;

use skillstore::display::acts_on_display as acts_on_terminal;

/// `text` with every such character written as `\u{XX}`; unchanged (and
/// not copied) when it has none.
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts_on_terminal(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Like [`shown`], for text written on several lines: newlines and tabs
/// are kept.
pub fn shown_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| acts_on_terminal(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.split('\n')
            .map(|line| shown(line).replace("\\u{9}", "\t"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        assert_eq!(shown("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(shown("a\u{1b}]0;title\u{7}b"), "a\\u{1b}]0;title\\u{7}b");
        assert_eq!(shown("x\ny\u{9b}z\u{7f}"), "x\\u{a}y\\u{9b}z\\u{7f}");
        assert_eq!(shown("\u{202e}evil"), "\\u{202e}evil");
        assert_eq!(shown_lines("one\ttwo\nthree\u{1b}[2J"), "one\ttwo\nthree\\u{1b}[2J");
    }
}

//! The one rule of which characters text may not carry as they are to a
//! terminal or into a prompt: each front end escapes them (the command
//! line), drops them (prompts), or warns of them (SKILL.md checks).

/// True for a character a terminal or a model could act on rather than
/// show: C0 and C1 controls (tab and newline included), DEL, the line and
/// paragraph separators, and the bidirectional marks, overrides and
/// isolates that reorder what is shown.
pub fn acts_on_display(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::acts_on_display;

    #[test]
    fn controls_separators_and_reordering_act_on_display() {
        for c in [
            '\u{7}', '\t', '\n', '\u{7f}', '\u{85}', '\u{9b}', '\u{2028}', '\u{202e}', '\u{2067}', '\u{200f}',
        ] {
            assert!(acts_on_display(c), "{c:?}");
        }
        for c in ['a', ' ', 'é', '\u{2010}', '\u{2070}', '\u{200b}', '😀'] {
            assert!(!acts_on_display(c), "{c:?}");
        }
    }
}

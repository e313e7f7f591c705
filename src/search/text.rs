//! What of a SKILL.md is indexed: the body after the frontmatter, split into
//! its headings and the rest of its text.

use crate::skill::{Scan, scan};

/// The most bytes of a body indexed; the rest of a longer body is not.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// A body split for the index.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sections {
    /// Every Markdown heading (`#` lines outside code fences), one a line,
    /// without the `#` marks.
    pub headings: String,
    /// Every other line.
    pub text: String,
}

/// The body of a SKILL.md: what follows the frontmatter's closing fence
/// (the whole file when it has no frontmatter), at most [`MAX_BODY_BYTES`],
/// invalid UTF-8 replaced.
pub fn body(file: &[u8]) -> String {
    let rest = match scan(file, true) {
        Scan::Yaml(yaml) => {
            let end = yaml.as_ptr() as usize - file.as_ptr() as usize + yaml.len();
            let after = &file[end..];
            // The closing fence's line, then the body.
            match memchr::memchr(b'\n', after) {
                Some(nl) => &after[nl + 1..],
                None => &[][..],
            }
        }
        _ => file,
    };
    let rest = &rest[..rest.len().min(MAX_BODY_BYTES)];
    String::from_utf8_lossy(rest).into_owned()
}

/// Splits a Markdown body into headings and text. Lines inside fenced code
/// blocks are text, never headings.
pub fn sections(body: &str) -> Sections {
    let mut out = Sections::default();
    lines(body, |line, heading| match heading {
        Some(heading) => {
            out.headings.push_str(heading);
            out.headings.push('\n');
        }
        None => {
            out.text.push_str(line);
            out.text.push('\n');
        }
    });
    out
}

/// The headings of a Markdown body, as [`sections`] gives them, without
/// copying the rest.
pub fn headings(body: &str) -> String {
    let mut out = String::new();
    lines(body, |_, heading| {
        if let Some(heading) = heading {
            out.push_str(heading);
            out.push('\n');
        }
    });
    out
}

/// Calls `f` with each line of `body` and, for a heading outside code
/// fences, its text.
fn lines<'a>(body: &'a str, mut f: impl FnMut(&'a str, Option<&'a str>)) {
    let mut fence: Option<&str> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker) {
                fence = None;
            }
        } else if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
        } else if let Some(heading) = heading(trimmed) {
            f(line, Some(heading));
            continue;
        }
        f(line, None);
    }
}

/// The text of an ATX heading line (`# Title`, up to six marks).
fn heading(line: &str) -> Option<&str> {
    let marks = line.bytes().take_while(|b| *b == b'#').count();
    if marks == 0 || marks > 6 {
        return None;
    }
    let rest = &line[marks..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim_end())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The words of `text` (cut where the analyzer cuts), sorted.
    fn words(text: &str) -> Vec<&str> {
        let mut words: Vec<&str> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        words.sort_unstable();
        words
    }

    proptest! {
        /// The index gives the whole body as the text of the `all` field:
        /// its words must be exactly its headings' and the rest's.
        #[test]
        fn a_body_has_the_words_of_its_headings_and_its_text(
            lines in proptest::collection::vec(
                "(#{0,8}|~~~|```|  ```|    #)[ \t]?[a-zA-Z0-9 #_é\t]{0,20}(\r)?",
                0..20,
            )
        ) {
            let body = lines.join("\n");
            let s = sections(&body);
            let mut both = words(&s.headings);
            both.extend(words(&s.text));
            both.sort_unstable();
            prop_assert_eq!(words(&body), both);
            prop_assert_eq!(headings(&body), s.headings);
        }
    }

    #[test]
    fn body_starts_after_the_closing_fence() {
        let file = b"---\nname: pdf\ndescription: x\n---\n# Use\nRead it.\n";
        assert_eq!(body(file), "# Use\nRead it.\n");
        assert_eq!(body(b"# No frontmatter\n"), "# No frontmatter\n");
    }

    #[test]
    fn headings_are_split_from_text_outside_code_fences() {
        let s = sections("# Title\nintro\n```sh\n# a comment\n```\n## Steps ##\n#hashtag\n");
        assert_eq!(s.headings, "Title\nSteps\n");
        assert_eq!(s.text, "intro\n```sh\n# a comment\n```\n#hashtag\n");
        assert_eq!(
            headings("# Title\nintro\n```sh\n# a comment\n```\n## Steps ##\n#hashtag\n"),
            s.headings
        );
    }
}

//! Path strings that must never reach a backend.

/// Every string here is refused by [`crate::VPath::new`]: parent and current
/// directory steps in every position, empty segments, other platforms'
/// separators and prefixes, control characters, and relative forms.
pub const HOSTILE_PATHS: &[&str] = &[
    // Parent steps, everywhere.
    "..",
    "/..",
    "/../",
    "/../etc/passwd",
    "/a/..",
    "/a/../b",
    "/a/b/../../..",
    "/a/b/../../../etc/shadow",
    "/skills/../../../../root/.ssh/id_rsa",
    "/..%2f../../etc",
    "/%2e%2e/..",
    "/.../..",
    "/a/ ../..",
    "/a/../",
    "/./..",
    // Current-directory steps.
    ".",
    "/.",
    "/./a",
    "/a/.",
    "/a/./b",
    "/a/b/./",
    // Empty segments and trailing separators.
    "",
    "//",
    "///etc/passwd",
    "//server/share",
    "/a//b",
    "/a/b/",
    "/a/",
    // Relative forms.
    "a",
    "a/b",
    "./a",
    "../a",
    "~/secret",
    "etc/passwd",
    // Backslashes: Windows separators, UNC paths, drive letters.
    "\\",
    "\\etc\\passwd",
    "/a\\b",
    "/a\\..\\..\\b",
    "/..\\..\\windows",
    "\\\\server\\share\\x",
    "C:\\Windows\\System32",
    "/C:\\Windows",
    "\\\\?\\C:\\x",
    // NUL and other control characters.
    "/a\0b",
    "/\0",
    "/a/b\0/../c",
    "/a\nb",
    "/a\rb",
    "/a\tb",
    "/\u{1}",
    "/\u{1b}[31mred",
    "/a\u{7f}",
    "/a\u{85}b",
    "/a\u{9b}b",
    "/name\u{1f}",
    "/x\u{8}y",
];

/// Segments that make any path holding them invalid.
const BAD_SEGMENTS: &[&str] = &[
    "..", ".", "", "..\\", "\\..", "..\\..", "a\\b", "\\", "a\0", "\0", "\n", "\r", "\t", "\u{1}", "\u{1b}", "\u{7f}",
    "\u{85}", "\u{9b}", "C:\\", "\\\\srv",
];

/// Where a segment is put: `{}` stands for it.
const TEMPLATES: &[&str] = &[
    "/{}",
    "/{}/x",
    "/{}/{}",
    "/a/{}",
    "/a/{}/b",
    "/a/b/{}",
    "/a/b/{}/c/d",
    "/skills/x/{}/SKILL.md",
    "/skills/{}/../x",
    "/{}/etc/passwd",
    "/base/{}/{}/{}/secret",
    "/team/pdf/references/{}",
    "{}",
    "{}/a",
    "a/{}",
    "./{}",
    "/{}/",
    "//{}",
    "/a//{}",
    "/x/{}\\y",
    "/{}/..",
    "/{}/.",
];

/// Names that look like a step up or a separator, but are ordinary names to
/// [`crate::VPath`]: unicode look-alikes of dots and slashes, percent-encoded
/// dots, dots with padding, drive and share names. A path made of them is
/// valid, and must still never lead anywhere but the literal name.
pub const LOOKALIKE_SEGMENTS: &[&str] = &[
    "\u{2025}",
    "\u{2024}\u{2024}",
    "\u{2024}",
    "\u{ff0e}\u{ff0e}",
    "\u{ff0e}",
    "\u{fe52}\u{fe52}",
    "%2e%2e",
    "%2E%2E",
    "%2e",
    "%252e%252e",
    "..%2f",
    "%2f..",
    "%5c..",
    "...",
    "....",
    ".. ",
    " ..",
    "..;",
    "C:",
    "c$",
    "\u{2215}..",
    "\u{ff0f}..",
    "\u{ff3c}..",
    "\u{200b}..",
    "..\u{200b}",
    ".\u{301}",
    "\u{3002}\u{3002}",
];

/// Where a look-alike is put.
const LOOKALIKE_TEMPLATES: &[&str] = &["/{}", "/a/{}", "/{}/x", "/skills/x/{}/y"];

/// At least 450 path strings every one of which [`crate::VPath::new`]
/// refuses: [`HOSTILE_PATHS`], every bad segment in every position of many
/// templates, deep parent chains, and paths over [`crate::MAX_PATH_BYTES`].
pub fn refused_corpus() -> Vec<String> {
    let mut out: Vec<String> = HOSTILE_PATHS.iter().map(|s| (*s).to_owned()).collect();
    for segment in BAD_SEGMENTS {
        for template in TEMPLATES {
            // An empty segment at the very start only makes the path absolute.
            if segment.is_empty() && (template.starts_with("{}/") || *template == "/{}") {
                continue;
            }
            out.push(template.replace("{}", segment));
        }
    }
    for depth in 1..=12 {
        out.push(format!("/{}etc/passwd", "../".repeat(depth)));
        out.push(format!("/skills/x{}", "/..".repeat(depth)));
    }
    out.push(format!("/{}", "a/".repeat(2048)));
    out.push(format!("/{}b", "a/".repeat(2048)));
    out.push(format!("/{}", "x".repeat(crate::MAX_PATH_BYTES)));
    out.sort();
    out.dedup();
    out
}

/// Valid paths built of [`LOOKALIKE_SEGMENTS`], and very long names that
/// are valid paths but longer than a filesystem name may be.
pub fn lookalike_corpus() -> Vec<String> {
    let mut out = Vec::new();
    for segment in LOOKALIKE_SEGMENTS {
        for template in LOOKALIKE_TEMPLATES {
            out.push(template.replace("{}", segment));
        }
    }
    out.push(format!("/{}", "y".repeat(300)));
    out.push(format!("/skills/{}", "z".repeat(600)));
    out.sort();
    out.dedup();
    out
}

/// Both corpora: at least 500 strings.
pub fn corpus() -> Vec<String> {
    let mut all = refused_corpus();
    all.extend(lookalike_corpus());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_large_enough_and_distinct() {
        let distinct: std::collections::BTreeSet<_> = HOSTILE_PATHS.iter().collect();
        assert_eq!(distinct.len(), HOSTILE_PATHS.len());
        assert!(HOSTILE_PATHS.len() >= 50);
        assert!(refused_corpus().len() >= 450, "{}", refused_corpus().len());
        assert!(corpus().len() >= 500);
    }

    #[test]
    fn the_refused_corpus_is_refused_and_the_lookalikes_are_literal() {
        for raw in refused_corpus() {
            let err = crate::VPath::new(&raw).expect_err(&raw);
            assert_eq!(err.kind(), crate::ErrorKind::InvalidPath, "{raw:?}");
        }
        for raw in lookalike_corpus() {
            let path = crate::VPath::new(&raw).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
            assert_eq!(path.as_str(), raw, "never normalized");
            let base = crate::VPath::new("/skills/x").unwrap();
            let joined = base.join(&raw[1..]).unwrap();
            assert!(joined.starts_with(&base));
            assert_eq!(joined.segments().count(), 2 + path.segments().count());
        }
    }
}

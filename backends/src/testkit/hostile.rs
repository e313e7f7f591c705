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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_large_enough_and_distinct() {
        let distinct: std::collections::BTreeSet<_> = HOSTILE_PATHS.iter().collect();
        assert_eq!(distinct.len(), HOSTILE_PATHS.len());
        assert!(HOSTILE_PATHS.len() >= 50);
    }
}

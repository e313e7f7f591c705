//! The one rule for the directory a skill is written under: `sync` writes
//! it, `mount` shows it, and prompt locations name it.

use skillstore_backends::is_valid_segment;

/// The longest directory name written for a skill, in bytes (the usual
/// limit of Linux filesystems).
pub const MAX_DIR_NAME_BYTES: usize = 255;

/// The directory name a synced or mounted tree holds the skill `name`
/// under, or `None` when no tree holds it: the name itself, when it is one
/// path segment (not empty, `.` or `..`, no `/`, `\` or control character)
/// of at most [`MAX_DIR_NAME_BYTES`] bytes. Two different names never give
/// the same directory.
pub fn dir_name(name: &str) -> Option<&str> {
    (is_valid_segment(name) && name.len() <= MAX_DIR_NAME_BYTES).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_segments_within_the_length_limit_are_directories() {
        for bad in ["", ".", "..", "a/b", "../../../tmp/evil", "a\\b", "a\nb", "a\0b"] {
            assert_eq!(dir_name(bad), None, "{bad:?}");
        }
        assert_eq!(dir_name("pdf"), Some("pdf"));
        assert_eq!(dir_name("good\u{200e}"), Some("good\u{200e}"));
        assert_eq!(dir_name(&"x".repeat(255)).map(str::len), Some(255));
        assert_eq!(dir_name(&"x".repeat(256)), None);
    }
}

//! Where the frontmatter is.
//!
//! A frontmatter is an optional UTF-8 byte order mark, a first line `---`,
//! YAML, and a closing line `---`; lines end in LF or CRLF, and the closing
//! fence may end the file without a newline. Trailing spaces after a fence
//! are tolerated.

/// Where the frontmatter is, in bytes that may be only a prefix of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fence<'a> {
    /// The YAML between the fences (not yet checked to be UTF-8).
    Closed { yaml: &'a [u8] },
    /// An opening fence and no closing one yet.
    Unclosed,
    /// The text does not start with a fence.
    Missing,
}

/// Locates the frontmatter in `bytes`. Fences are ASCII, so this works on
/// the raw bytes. When `complete` is false, `bytes` is a prefix of the
/// file and a last line without a newline is not trusted to be a closing
/// fence (the file may go on: `----`).
pub(crate) fn locate(bytes: &[u8], complete: bool) -> Fence<'_> {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let (first, rest) = match memchr::memchr(b'\n', text) {
        Some(end) => (&text[..end], Some(end + 1)),
        None => (text, None),
    };
    if !is_fence(first) {
        return Fence::Missing;
    }
    let Some(yaml_start) = rest else {
        return Fence::Unclosed;
    };
    // A closing fence is a line starting with `---`: find each `\n---` and
    // check the rest of its line.
    let from = yaml_start - 1;
    for found in memchr::memmem::find_iter(&text[from..], b"\n---") {
        let line_start = from + found + 1;
        let line_end = memchr::memchr(b'\n', &text[line_start..]).map(|n| line_start + n);
        let line = &text[line_start..line_end.unwrap_or(text.len())];
        if is_fence(line) && (line_end.is_some() || complete) {
            return Fence::Closed {
                yaml: &text[yaml_start..line_start],
            };
        }
    }
    Fence::Unclosed
}

fn is_fence(line: &[u8]) -> bool {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b' ' | b'\t' | b'\r') {
        end -= 1;
    }
    &line[..end] == b"---"
}

/// Decodes a possibly cut UTF-8 prefix: a character cut at the very end of
/// an incomplete prefix is dropped, anything else invalid is an error.
pub(crate) fn decode(bytes: &[u8], complete: bool) -> Result<&str, std::str::Utf8Error> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) if !complete && e.error_len().is_none() => {
            Ok(std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid up to here"))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Option<&str> {
        match locate(text.as_bytes(), true) {
            Fence::Closed { yaml } => Some(std::str::from_utf8(yaml).unwrap()),
            _ => None,
        }
    }

    #[test]
    fn finds_lf_crlf_bom_and_eof_fences() {
        assert_eq!(yaml("---\nname: a\n---\nbody"), Some("name: a\n"));
        assert_eq!(yaml("---\r\nname: a\r\n---\r\nbody"), Some("name: a\r\n"));
        assert_eq!(yaml("\u{feff}---\nname: a\n---\n"), Some("name: a\n"));
        assert_eq!(yaml("---\nname: a\n---"), Some("name: a\n"));
        assert_eq!(yaml("---  \nname: a\n---\t\n"), Some("name: a\n"));
        assert_eq!(yaml("---\n---\n"), Some(""));
    }

    #[test]
    fn a_thematic_break_in_the_body_is_not_the_fence() {
        assert_eq!(yaml("---\na: 1\n---\n# body\n---\nmore"), Some("a: 1\n"));
        assert_eq!(yaml("---\na: ----\n----\n---\n"), Some("a: ----\n----\n"));
    }

    #[test]
    fn missing_and_unclosed() {
        assert_eq!(locate(b"# no fence\n---\n", true), Fence::Missing);
        assert_eq!(locate(b"", true), Fence::Missing);
        assert_eq!(locate(b" ---\na: 1\n---\n", true), Fence::Missing);
        assert_eq!(locate(b"---\na: 1\n", true), Fence::Unclosed);
        assert_eq!(locate(b"---", true), Fence::Unclosed);
    }

    #[test]
    fn a_prefix_ending_in_dashes_is_not_trusted() {
        assert_eq!(locate(b"---\na: 1\n---", false), Fence::Unclosed);
        assert_eq!(locate(b"---\na: 1\n---\n", false), Fence::Closed { yaml: b"a: 1\n" });
    }

    #[test]
    fn decode_drops_only_a_cut_last_character() {
        let text = "é".as_bytes();
        assert_eq!(decode(&text[..1], false).unwrap(), "");
        assert!(decode(&text[..1], true).is_err());
        assert!(decode(b"a\xffb", false).is_err());
    }
}

//! The fast path: the YAML that frontmatters are made of.
//!
//! Nearly every SKILL.md frontmatter is a flat mapping of single-line plain
//! or quoted scalars and `>`/`|` block scalars, with a one-level `metadata`
//! map and an `allowed-tools` list. [`parse`] reads exactly that subset and
//! returns `None` for anything else, which then goes to the reference
//! path. For every input it accepts, the result equals what the reference
//! path gives; the differential tests beside it hold it to that. Plain scalars that YAML could read
//! as numbers (anything starting with a digit, `+`, `-` or `.`) are left to
//! `serde_yaml`, so number formatting stays its own.

use std::collections::HashSet;

use serde_yaml::{Mapping, Value};

/// The frontmatter's top-level entries in order, or `None` when it leaves
/// the subset. Keys are distinct, and borrowed from `yaml`.
pub(crate) fn parse(yaml: &str) -> Option<Vec<(&str, Value)>> {
    if !plain_text(yaml.as_bytes()) {
        return None;
    }
    let lines: Vec<&str> = yaml.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut entries: Vec<(&str, Value)> = Vec::with_capacity(8);
    let mut seen = Keys::default();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.is_empty() || line.starts_with('#') {
            i += 1;
            continue;
        }
        let (key, rest) = split_key(line)?;
        if !seen.insert(&entries, key) {
            return None;
        }
        i += 1;
        let value = if rest.is_empty() {
            nested(&lines, &mut i)?
        } else if rest.starts_with(['|', '>']) {
            block_scalar(rest, &lines, &mut i)?
        } else {
            let value = inline_scalar(rest)?;
            if continues(&lines, i) {
                return None;
            }
            value
        };
        entries.push((key, value));
    }
    Some(entries)
}

/// The top-level keys met so far: a look along the entries while they are
/// few, a set once they are many, so a frontmatter of any number of keys is
/// checked in linear time.
#[derive(Default)]
struct Keys<'a> {
    set: Option<HashSet<&'a str>>,
}

impl<'a> Keys<'a> {
    const SCAN: usize = 16;

    /// Records `key`; false when an entry already has it.
    fn insert(&mut self, entries: &[(&'a str, Value)], key: &'a str) -> bool {
        if let Some(set) = &mut self.set {
            return set.insert(key);
        }
        if entries.iter().any(|(k, _)| *k == key) {
            return false;
        }
        if entries.len() >= Self::SCAN {
            let mut set: HashSet<&str> = entries.iter().map(|(k, _)| *k).collect();
            set.insert(key);
            self.set = Some(set);
        }
        true
    }
}

/// True when the text has no character YAML treats specially as a line
/// break or forbids: control characters other than LF (and CR before LF),
/// C1 controls, NEL, the line and paragraph separators, a byte order mark,
/// or the noncharacters U+FFFE and U+FFFF (outside YAML's printable set).
/// One pass over the bytes.
fn plain_text(bytes: &[u8]) -> bool {
    const BLOCK: usize = 32;
    // Printable ASCII and LF, the common case, is passed a block at a time;
    // the check of a whole block has no early exit, so it compiles to
    // vector compares. A block holding anything else is looked at byte by
    // byte (a look-ahead may read into the next block).
    let ordinary = |b: u8| (0x20..0x7f).contains(&b) || b == b'\n';
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + BLOCK).min(bytes.len());
        if let Ok(block) = <&[u8; BLOCK]>::try_from(&bytes[start..end])
            && block.iter().fold(true, |all, &b| all & ordinary(b))
        {
            start = end;
            continue;
        }
        for i in start..end {
            match bytes[i] {
                b'\n' => {}
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => {}
                0..=0x1f | 0x7f => return false,
                0xc2 if matches!(bytes.get(i + 1), Some(0x80..=0x9f)) => return false,
                0xe2 if bytes.get(i + 1) == Some(&0x80) && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9)) => {
                    return false;
                }
                0xef if bytes.get(i + 1) == Some(&0xbb) && bytes.get(i + 2) == Some(&0xbf) => return false,
                0xef if bytes.get(i + 1) == Some(&0xbf) && matches!(bytes.get(i + 2), Some(0xbe | 0xbf)) => {
                    return false;
                }
                _ => {}
            }
        }
        start = end;
    }
    true
}

/// True when `text` holds the two ASCII bytes `first` and `second` in a
/// row (a search for the rarer byte, then a look at its neighbour).
fn holds_pair(text: &str, first: u8, second: u8) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(first, bytes).any(|at| bytes.get(at + 1) == Some(&second))
}

/// True when `text` holds `#` right after a space.
fn holds_comment(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b'#', bytes).any(|at| at > 0 && bytes[at - 1] == b' ')
}

/// `key: rest` at column 0, with a key of letters, digits, `-` and `_`
/// starting with a letter, and not one YAML would read as a boolean or
/// null.
fn split_key(line: &str) -> Option<(&str, &str)> {
    let end = line.find(':')?;
    let key = &line[..end];
    let after = &line[end + 1..];
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    if !key.starts_with(|c: char| c.is_ascii_alphabetic())
        || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        || resolves_to_non_string(key)
    {
        return None;
    }
    Some((key, after.trim_matches(' ')))
}

fn resolves_to_non_string(plain: &str) -> bool {
    matches!(
        plain,
        "null" | "Null" | "NULL" | "~" | "true" | "True" | "TRUE" | "false" | "False" | "FALSE"
    )
}

/// True when the line after a scalar (past blank lines) is indented, which
/// would continue the scalar over several lines.
fn continues(lines: &[&str], mut i: usize) -> bool {
    while i < lines.len() && lines[i].is_empty() {
        i += 1;
    }
    i < lines.len() && lines[i].starts_with(' ')
}

/// A scalar written on one line: plain, `'single'` or `"double"` quoted.
fn inline_scalar(text: &str) -> Option<Value> {
    match text.as_bytes()[0] {
        b'"' => double_quoted(&text[1..]).map(Value::String),
        b'\'' => single_quoted(&text[1..]).map(Value::String),
        _ => plain(text),
    }
}

fn plain(text: &str) -> Option<Value> {
    let first = text.chars().next()?;
    if "-?:,[]{}#&*!|>'\"%@`+.".contains(first) || first.is_ascii_digit() {
        return None;
    }
    if holds_pair(text, b':', b' ') || text.ends_with(':') || holds_comment(text) {
        return None;
    }
    Some(match text {
        "null" | "Null" | "NULL" | "~" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => Value::String(text.to_owned()),
    })
}

/// The rest of a line after an opening `"`: the unescaped text, if the
/// closing quote is on the same line with only spaces after it.
fn double_quoted(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        // Plain runs are copied whole; only quotes and escapes stop the copy.
        let at = memchr::memchr2(b'"', b'\\', rest.as_bytes())?;
        out.push_str(&rest[..at]);
        if rest.as_bytes()[at] == b'"' {
            return rest[at + 1..].bytes().all(|b| b == b' ').then_some(out);
        }
        let mut chars = rest[at + 1..].chars();
        out.push(match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            ' ' => ' ',
            'u' => {
                let hex = chars.as_str().get(..4)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                chars = chars.as_str()[4..].chars();
                char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
            }
            _ => return None,
        });
        rest = chars.as_str();
    }
}

/// The rest of a line after an opening `'`.
fn single_quoted(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let end = rest.find('\'')?;
        out.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix('\'') {
            Some(after) => {
                out.push('\'');
                rest = after;
            }
            None => return rest.bytes().all(|b| b == b' ').then_some(out),
        }
    }
}

/// A `|`, `|-`, `>` or `>-` block scalar whose lines share one indentation
/// (a literal block may also hold empty lines and deeper lines).
fn block_scalar(header: &str, lines: &[&str], i: &mut usize) -> Option<Value> {
    let (literal, strip) = match header {
        "|" => (true, false),
        "|-" => (true, true),
        ">" => (false, false),
        ">-" => (false, true),
        _ => return None,
    };
    let first = *lines.get(*i)?;
    let indent = indentation(first);
    if indent == 0 || first.trim().is_empty() {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    while *i < lines.len() {
        let line = lines[*i];
        if line.is_empty() {
            if !literal {
                return None;
            }
            parts.push("");
            *i += 1;
            continue;
        }
        if line.trim_start_matches(' ').is_empty() {
            // Spaces only: YAML's rules for these depend on the indentation.
            return None;
        }
        let own = indentation(line);
        if own < indent {
            if own > 0 {
                return None;
            }
            break;
        }
        if own > indent && !literal {
            return None;
        }
        parts.push(&line[indent..]);
        *i += 1;
    }
    while parts.last() == Some(&"") {
        parts.pop();
    }
    let mut text = parts.join(if literal { "\n" } else { " " });
    if !strip {
        text.push('\n');
    }
    Some(Value::String(text))
}

/// What follows `key:` on the next lines: a list, a one-level map, or
/// nothing (null).
fn nested(lines: &[&str], i: &mut usize) -> Option<Value> {
    let mut j = *i;
    while j < lines.len() && lines[j].is_empty() {
        j += 1;
    }
    let Some(first) = lines.get(j) else {
        *i = j;
        return Some(Value::Null);
    };
    let indent = indentation(first);
    let body = &first[indent..];
    if body == "-" || body.starts_with("- ") {
        *i = j;
        return sequence(lines, i, indent);
    }
    if indent == 0 {
        *i = j;
        return Some(Value::Null);
    }
    *i = j;
    inner_mapping(lines, i, indent)
}

fn sequence(lines: &[&str], i: &mut usize, indent: usize) -> Option<Value> {
    let mut items = Vec::new();
    block_lines(lines, i, indent, |body| {
        let item = body.strip_prefix("- ")?.trim_matches(' ');
        if item.is_empty() {
            return None;
        }
        items.push(inline_scalar(item)?);
        Some(())
    })?;
    Some(Value::Sequence(items))
}

fn inner_mapping(lines: &[&str], i: &mut usize, indent: usize) -> Option<Value> {
    let mut map = Mapping::new();
    block_lines(lines, i, indent, |body| {
        let (key, rest) = split_key(body)?;
        if rest.is_empty() || rest.starts_with(['|', '>']) {
            return None;
        }
        let key = Value::String(key.to_owned());
        if map.contains_key(&key) {
            return None;
        }
        map.insert(key, inline_scalar(rest)?);
        Some(())
    })?;
    Some(Value::Mapping(map))
}

/// Feeds `each` the lines of a nested block, all at exactly `indent`
/// (without it), skipping empty lines and advancing `i` past the block.
/// `None` when a line is deeper, `each` refuses one, or the block does not
/// end at column 0.
fn block_lines<'a>(
    lines: &[&'a str],
    i: &mut usize,
    indent: usize,
    mut each: impl FnMut(&'a str) -> Option<()>,
) -> Option<()> {
    while *i < lines.len() {
        let line = lines[*i];
        if line.is_empty() {
            *i += 1;
            continue;
        }
        let own = indentation(line);
        if own < indent {
            break;
        }
        if own > indent {
            return None;
        }
        each(&line[indent..])?;
        *i += 1;
    }
    ends_at_column_zero(lines, *i)
}

/// How many spaces a line starts with.
fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// A nested block must give way to a top-level line (or the end).
fn ends_at_column_zero(lines: &[&str], i: usize) -> Option<()> {
    match lines.get(i) {
        Some(line) if line.starts_with(' ') => None,
        _ => Some(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract: whatever the fast path accepts, serde_yaml reads the same.
    fn agrees(yaml: &str) -> Option<Mapping> {
        let fast: Mapping = parse(yaml)?
            .into_iter()
            .map(|(k, v)| (Value::String(k.to_owned()), v))
            .collect();
        let slow: Value =
            serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("fast path accepted invalid YAML {yaml:?}: {e}"));
        let slow = match slow {
            Value::Mapping(m) => m,
            Value::Null => Mapping::new(),
            other => panic!("fast path accepted a non-mapping {yaml:?}: {other:?}"),
        };
        assert_eq!(fast, slow, "{yaml:?}");
        Some(fast)
    }

    #[test]
    fn accepts_the_common_shapes() {
        let cases = [
            "name: pdf\ndescription: Fill forms, and more.\n",
            "name: pdf\ndescription: \"Quoted \\\"text\\\" with \\\\ and \\u00e9\"\nlicense: 'it''s MIT'\n",
            "name: a\ndescription: >-\n  folded line one\n  line two\n",
            "name: a\ndescription: |\n  literal\n\n    indented\n  end\n",
            "name: a\nmetadata:\n  author: sre\n  version: \"1.2\"\nallowed-tools:\n  - Read\n  - Bash\n",
            "name: a\nallowed-tools:\n- Read\n- 'Bash'\n",
            "name: a\r\ndescription: crlf\r\nlicense: ~\r\n",
            "# comment\nname: a\n\ndescription: C# and a:b, [x] {y} !z &w *v\n",
            "name: café-outil\ndescription: 日本語 → unicode…\nflag: true\nempty:\n",
        ];
        for yaml in cases {
            assert!(agrees(yaml).is_some(), "should be on the fast path: {yaml:?}");
        }
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        let cases = [
            "name: 123\n",
            "version: 1.10\n",
            "name: -x\n",
            "name: a\ndescription: multi\n  line plain\n",
            "name: &a x\nother: *a\n",
            "name: !tag x\n",
            "name: [a, b]\n",
            "name: {a: b}\n",
            "name: a # comment\n",
            "name: \"unterminated\n  quote\"\n",
            "name: a\nname: b\n",
            "key with space: x\n",
            "name: >+\n  keep\n",
            "name: >\n  a\n\n  b\n",
            "metadata:\n  nested:\n    deep: x\n",
            "metadata:\n  a: 1\n",
            "list:\n  - a: b\n",
            "name:\tx\n",
            "  indented: x\n",
            "true: x\n",
        ];
        for yaml in cases {
            assert!(parse(yaml).is_none(), "should fall back: {yaml:?}");
        }
    }

    #[test]
    fn special_characters_are_found_anywhere_in_a_block() {
        let specials = [
            "\r", "\t", "\u{0}", "\u{7f}", "\u{85}", "\u{9f}", "\u{2028}", "\u{2029}", "\u{feff}", "\u{fffe}",
            "\u{ffff}",
        ];
        for at in [0, 1, 30, 31, 32, 33, 63, 64, 70] {
            for special in specials {
                let text = format!("{}{special}{}", "a".repeat(at), "b".repeat(40));
                assert!(!plain_text(text.as_bytes()), "{special:?} at {at}");
            }
            let fine = format!("{}\r\né → \u{a0}日本{}\n", "a".repeat(at), "b".repeat(40));
            assert!(plain_text(fine.as_bytes()), "at {at}");
        }
        assert!(plain_text(b""));
        assert!(!plain_text(b"ends in a bare CR\r"));
    }
}

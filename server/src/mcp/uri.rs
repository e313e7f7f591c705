//! `skill://NAME/PATH` URIs: each path segment percent-encoded, so any
//! file name round-trips and no segment can hold a `/`.

/// Encodes everything but unreserved characters.
fn encode_segment(segment: &str, out: &mut String) {
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(
                char::from_digit(u32::from(b >> 4), 16)
                    .expect("hex")
                    .to_ascii_uppercase(),
            );
            out.push(
                char::from_digit(u32::from(b & 15), 16)
                    .expect("hex")
                    .to_ascii_uppercase(),
            );
        }
    }
}

fn encode_path(name: &str, relative: &str) -> String {
    let mut out = String::from("skill://");
    encode_segment(name, &mut out);
    for segment in relative.split('/').filter(|s| !s.is_empty()) {
        out.push('/');
        encode_segment(segment, &mut out);
    }
    out
}

/// The URI of the file `relative` of the skill `name`.
pub fn file(name: &str, relative: &str) -> String {
    encode_path(name, relative)
}

/// The URI of a directory of a skill (its root when `relative` is empty),
/// with no trailing slash.
pub fn dir(name: &str, relative: &str) -> String {
    encode_path(name, relative)
}

fn decode_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).ok()?;
    // A decoded segment holding a separator is not a segment.
    (!text.is_empty() && !text.contains('/')).then_some(text)
}

fn split(uri: &str) -> Option<(String, Vec<String>)> {
    let rest = uri.strip_prefix("skill://")?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let mut segments = rest.split('/');
    let name = decode_segment(segments.next()?)?;
    let rest = segments.map(decode_segment).collect::<Option<Vec<_>>>()?;
    Some((name, rest))
}

/// The skill name and relative file path a file URI names.
pub fn parse(uri: &str) -> Option<(String, String)> {
    let (name, rest) = split(uri)?;
    if rest.is_empty() {
        return None;
    }
    Some((name, rest.join("/")))
}

/// The skill name and relative directory (empty: the skill's root) a
/// directory URI names.
pub fn parse_dir(uri: &str) -> Option<(String, String)> {
    let (name, rest) = split(uri.strip_suffix('/').unwrap_or(uri))?;
    Some((name, rest.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_refuse_smuggled_separators() {
        let uri = file("pdf", "references/a b%.md");
        assert_eq!(uri, "skill://pdf/references/a%20b%25.md");
        assert_eq!(parse(&uri), Some(("pdf".into(), "references/a b%.md".into())));
        assert_eq!(parse("skill://pdf/a%2F..%2Fb"), None);
        assert_eq!(parse("skill://pdf//x"), None);
        assert_eq!(parse("skill://pdf"), None);
        assert_eq!(parse_dir("skill://pdf"), Some(("pdf".into(), String::new())));
        assert_eq!(
            parse_dir("skill://pdf/references"),
            Some(("pdf".into(), "references".into()))
        );
        assert_eq!(parse("file:///etc/passwd"), None);
    }
}

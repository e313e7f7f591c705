//! A file's bytes in an MCP answer, once and in the smaller of two forms:
//! text when the bytes are UTF-8 whose JSON escaping is no larger than
//! base64, else a base64 blob. An answer carrying a file is then at most
//! about four thirds of the file plus its framing, whatever the bytes.

use base64::Engine as _;

/// How a file goes into an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoded {
    /// UTF-8 text, sent as a JSON string.
    Text(String),
    /// Base64 of the bytes.
    Blob(String),
}

impl Encoded {
    /// The name of the encoding: `utf-8` or `base64`.
    pub fn name(&self) -> &'static str {
        match self {
            Encoded::Text(_) => "utf-8",
            Encoded::Blob(_) => "base64",
        }
    }
}

/// `bytes` as text or base64, whichever a JSON answer carries in fewer
/// bytes (text on a tie).
pub fn encode(bytes: &[u8]) -> Encoded {
    let base64_len = bytes.len().div_ceil(3) * 4;
    match std::str::from_utf8(bytes) {
        Ok(text) if json_escaped_len(bytes) <= base64_len.max(bytes.len()) => Encoded::Text(text.to_owned()),
        _ => Encoded::Blob(base64::engine::general_purpose::STANDARD.encode(bytes)),
    }
}

/// The length of `bytes` inside a JSON string, as serde_json escapes it.
fn json_escaped_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .map(|&b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_stays_text_and_escape_heavy_bytes_become_base64() {
        assert_eq!(encode(b"# Guide\n"), Encoded::Text("# Guide\n".into()));
        assert_eq!(encode(b""), Encoded::Text(String::new()));
        assert!(matches!(encode(&[0u8; 4096]), Encoded::Blob(_)));
        assert!(matches!(encode(&[b'"'; 4096]), Encoded::Blob(_)));
        assert!(matches!(encode(&[0xff, 0xfe]), Encoded::Blob(_)));
    }
}

//! Rules more than one crate of skillstore applies, written once.

/// `bytes` as lowercase hex, two digits a byte: how digests, token hashes
/// and cache keys are written everywhere in skillstore.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

/// True when `name` follows the naming rule of the Agent Skills discovery
/// index: 1 to 64 characters of `a-z`, `0-9` and `-`, no `-` first, last
/// or doubled. (A SKILL.md's own `name` may also hold other lowercase
/// letters; the index takes the ASCII form only.)
pub fn is_index_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0, 1, 0xab, 0xff]), "0001abff");
    }

    #[test]
    fn index_names_follow_the_schema() {
        for good in ["a", "pdf", "csv-report", "x1-2", &"a".repeat(64)] {
            assert!(is_index_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "é", "a_b", "a.b", &"a".repeat(65)] {
            assert!(!is_index_name(bad), "{bad}");
        }
    }
}

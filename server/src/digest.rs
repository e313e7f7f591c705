//! SHA-256 digests of skill files, computed once per file version and
//! kept: a file is hashed again only when the backend reports a new
//! version of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use skillstore::backends::Version;

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from_digit(u32::from(byte >> 4), 16).expect("a hex digit"));
        out.push(char::from_digit(u32::from(byte & 15), 16).expect("a hex digit"));
    }
    out
}

/// The most versions kept; past it the cache starts again empty.
const MAX_ENTRIES: usize = 200_000;

/// Digests (`sha256:HEX`) and sizes by virtual path and backend version.
#[derive(Debug, Default)]
pub struct DigestCache {
    entries: Mutex<HashMap<(String, Version), (String, u64)>>,
    frontmatters: Mutex<HashMap<(String, Version), Arc<Frontmatter>>>,
    computed: AtomicU64,
}

/// A SKILL.md frontmatter as JSON.
pub type Frontmatter = serde_json::Map<String, serde_json::Value>;

impl DigestCache {
    /// The digest and size of `path` at `version`, when computed before.
    pub fn get(&self, path: &str, version: &Version) -> Option<(String, u64)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(&(path.to_owned(), version.clone())).cloned()
    }

    /// Hashes `bytes`, the content of `path` at `version`, and keeps the
    /// digest.
    pub fn compute(&self, path: &str, version: &Version, bytes: &[u8]) -> (String, u64) {
        let value = (format!("sha256:{}", sha256_hex(bytes)), bytes.len() as u64);
        self.computed.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert((path.to_owned(), version.clone()), value.clone());
        value
    }

    /// The frontmatter of the SKILL.md at `path` and `version`, when kept.
    pub fn frontmatter(&self, path: &str, version: &Version) -> Option<Arc<Frontmatter>> {
        let kept = self.frontmatters.lock().unwrap_or_else(|e| e.into_inner());
        kept.get(&(path.to_owned(), version.clone())).cloned()
    }

    /// Keeps the frontmatter of the SKILL.md at `path` and `version`.
    pub fn keep_frontmatter(&self, path: &str, version: &Version, frontmatter: Arc<Frontmatter>) {
        let mut kept = self.frontmatters.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MAX_ENTRIES {
            kept.clear();
        }
        kept.insert((path.to_owned(), version.clone()), frontmatter);
    }

    /// How many files were hashed since the start.
    pub fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_the_known_digest() {
        assert_eq!(
            sha256_hex(b"test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }
}

//! SHA-256 digests of skill files, computed once per file version and
//! kept: a file is hashed again only when the backend reports a new
//! version of it. The hashes are the library's
//! ([`skillstore::integrity::FileDigests`]), shared with the tenant's
//! catalogs, so a manifest, a skill digest and a lock's check hash each
//! file version once between them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use skillstore::backends::Version;
use skillstore::integrity::FileDigests;

pub use skillstore::integrity::sha256_hex;

/// The most frontmatters kept; past it the cache starts again empty.
const MAX_ENTRIES: usize = 200_000;

/// Digests (`sha256:HEX`) and sizes by virtual path and backend version,
/// and SKILL.md frontmatters by the same key.
#[derive(Debug, Default)]
pub struct DigestCache {
    files: Arc<FileDigests>,
    frontmatters: Mutex<HashMap<(String, Version), Arc<Frontmatter>>>,
}

/// A SKILL.md frontmatter as JSON.
pub type Frontmatter = serde_json::Map<String, serde_json::Value>;

impl DigestCache {
    /// A cache keeping its file hashes in `files` (a namespace's
    /// [`skillstore::LoadOptions::digests`]).
    pub fn new(files: Arc<FileDigests>) -> Self {
        DigestCache {
            files,
            frontmatters: Mutex::default(),
        }
    }

    /// The digest and size of `path` at `version`, when computed before.
    pub fn get(&self, path: &str, version: &Version) -> Option<(String, u64)> {
        self.files
            .get(path, version)
            .map(|(hex, size)| (format!("sha256:{hex}"), size))
    }

    /// Hashes `bytes`, the content of `path` at `version`, and keeps the
    /// digest.
    pub fn compute(&self, path: &str, version: &Version, bytes: &[u8]) -> (String, u64) {
        let (hex, size) = self.files.compute(path, version, bytes);
        (format!("sha256:{hex}"), size)
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
        self.files.computed()
    }
}

//! The skill digest.
//!
//! A skill's digest is `sha256:` and the lowercase hex SHA-256 of a text
//! with one line per file of the skill, where the files are exactly those
//! a confined read of the skill serves ([`crate::skill_files`]) except
//! those below the reserved directory `.skillstore/` (where a skill's
//! signature lives):
//!
//! ```text
//! HEX SP PATH LF
//! ```
//!
//! `HEX` is the lowercase hex SHA-256 of the file's bytes, `PATH` its path
//! relative to the skill's directory (`/`-separated, UTF-8; a virtual path
//! holds no control character, so no line break), and the lines are sorted
//! by the bytes of `PATH`. A skill whose listing was cut short at its file
//! bound, or one of whose listed files cannot be read, has no digest.
//!
//! File hashes are kept per (virtual path, version) in a [`FileDigests`]:
//! a file is read and hashed again only when its backend reports a new
//! version of it. Nothing is hashed unless a digest is asked for. A
//! store made with [`FileDigests::persistent`] also keeps the hashes of
//! filesystem files in the local cache between processes
//! ([`crate::cache::hashes`]), as Git's index does: a one-shot `--locked`
//! command reads no file unchanged since the last one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use skillstore_backends::{SkillBackend, Version};

use crate::cache::hashes::{KeptHash, keepable, read_moment};
use crate::cache::{CacheSettings, LocalCache};
use crate::error::{Error, Result};
use crate::skill_files::SkillFiles;

/// The directory inside a skill that the digest leaves out: it holds what
/// is said about the skill (its signature), not the skill.
pub const RESERVED_DIR: &str = ".skillstore";

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) use skillstore_backends::hex;

/// True for a path (relative to the skill's directory) the digest leaves
/// out: the reserved directory and everything below it.
pub fn is_reserved(relative: &str) -> bool {
    relative == RESERVED_DIR
        || relative
            .strip_prefix(RESERVED_DIR)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The skill digest of `files`, pairs of (relative path, lowercase hex
/// SHA-256 of the content), in any order: reserved paths are left out, the
/// rest sorted by path bytes, one `HEX SP PATH LF` line each, hashed.
pub fn digest_lines<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut lines: Vec<(&str, &str)> = files.into_iter().filter(|(path, _)| !is_reserved(path)).collect();
    lines.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut hasher = Sha256::new();
    for (path, sha) in lines {
        hasher.update(sha.as_bytes());
        hasher.update(b" ");
        hasher.update(path.as_bytes());
        hasher.update(b"\n");
    }
    format!("sha256:{}", hex(&hasher.finalize()))
}

/// One file of a digested skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestedFile {
    /// The path relative to the skill's directory.
    pub relative: String,
    /// The lowercase hex SHA-256 of its bytes.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The version it was read at, when the backend reports one.
    pub version: Option<Version>,
}

/// A skill's digest and the files it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDigest {
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    /// Every file the skill's listing holds, in listing order, the reserved
    /// directory's included (its files are not part of [`Self::digest`]).
    pub files: Vec<DigestedFile>,
}

/// How many files are read at once for one skill's digest.
const READ_BATCH: usize = 16;

/// The most file versions kept; past it the cache starts again empty.
const MAX_ENTRIES: usize = 200_000;

/// File hashes by virtual path and backend version. Shared by every
/// catalog loaded from one [`crate::Namespace`] (and its refreshes), so a
/// file unchanged since it was last hashed is not read again.
///
/// Made with [`FileDigests::persistent`], the hashes of filesystem files
/// are loaded from the local cache at the first use and written back when
/// [`FileDigests::persist`] is called or the store is dropped.
#[derive(Debug)]
pub struct FileDigests {
    entries: Mutex<Entries>,
    computed: AtomicU64,
    /// Where hashes are kept between processes, if anywhere.
    disk: Option<CacheSettings>,
    /// [`read_moment`] when the store was made: what bytes hashed through
    /// [`FileDigests::compute`] (read by the caller) are kept with.
    born: i64,
}

/// The hashes kept, by path then version: a look-up by a borrowed path
/// allocates nothing.
#[derive(Debug, Default)]
struct Entries {
    by_path: HashMap<Box<str>, Vec<Hashed>>,
    /// How many versions are kept in all.
    len: usize,
    /// The hashes kept on disk were loaded (or there are none to load).
    loaded: bool,
    /// Something was hashed or forgotten since the disk was last written.
    dirty: bool,
}

/// One version of a file, hashed.
#[derive(Debug)]
struct Hashed {
    version: Version,
    sha256: String,
    size: u64,
    /// For a skill file (`SKILL.md`, `skill.md`), the YAML of its
    /// frontmatter as those bytes hold it (`None`: no closed frontmatter).
    head: Option<Arc<str>>,
    /// That frontmatter parsed, once asked for ([`FileDigests::shown`]):
    /// `Some(None)` when it holds no valid skill.
    parsed: Option<Option<Arc<crate::skill::SkillMetadata>>>,
    /// For a filesystem version, the moment before its bytes were read
    /// ([`read_moment`]): what decides whether the hash may be kept on
    /// disk. `None`: never kept on disk.
    since: Option<i64>,
    /// Looked up or hashed by this process.
    used: bool,
}

/// What the bytes of one version of a skill file (`SKILL.md`) were found
/// to hold when they were hashed ([`FileDigests::head`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashedHead {
    /// The lowercase hex SHA-256 of the whole file.
    pub sha256: String,
    /// The YAML between its frontmatter's fences, exactly as in the file;
    /// `None` when it has no closed UTF-8 frontmatter.
    pub yaml: Option<Arc<str>>,
}

/// True for a path whose file name is a skill file's.
fn is_skill_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == crate::skill::SKILL_FILE || name == crate::skill::LOWERCASE_SKILL_FILE
}

impl Entries {
    fn get(&mut self, path: &str, version: &Version) -> Option<(String, u64)> {
        let hashed = self.by_path.get_mut(path)?.iter_mut().find(|h| h.version == *version)?;
        hashed.used = true;
        Some((hashed.sha256.clone(), hashed.size))
    }

    fn head(&self, path: &str, version: &Version) -> Option<HashedHead> {
        let hashed = self.by_path.get(path)?.iter().find(|h| h.version == *version)?;
        Some(HashedHead {
            sha256: hashed.sha256.clone(),
            yaml: hashed.head.clone(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        path: &str,
        version: &Version,
        sha256: &str,
        size: u64,
        head: Option<Arc<str>>,
        since: Option<i64>,
        used: bool,
    ) {
        self.dirty |= used;
        if self.len >= MAX_ENTRIES {
            self.by_path.clear();
            self.len = 0;
        }
        let versions = match self.by_path.get_mut(path) {
            Some(versions) => versions,
            None => self.by_path.entry(path.into()).or_default(),
        };
        match versions.iter_mut().find(|h| h.version == *version) {
            Some(kept) => {
                kept.sha256 = sha256.to_owned();
                kept.size = size;
                kept.head = head;
                kept.parsed = None;
                kept.since = since;
                kept.used |= used;
            }
            None => {
                versions.push(Hashed {
                    version: version.clone(),
                    sha256: sha256.to_owned(),
                    size,
                    head,
                    parsed: None,
                    since,
                    used,
                });
                self.len += 1;
            }
        }
    }
}

impl FileDigests {
    /// An empty cache, kept in this process only.
    pub fn new() -> Self {
        FileDigests {
            entries: Mutex::default(),
            computed: AtomicU64::new(0),
            disk: None,
            born: read_moment(),
        }
    }

    /// An empty cache that also keeps the hashes of filesystem files in
    /// the local cache of `settings` ([`crate::cache::hashes`]): hashes
    /// kept there by an earlier process are used for a file whose version
    /// is unchanged and was not racily clean; new ones are written back by
    /// [`FileDigests::persist`] or when the store is dropped. A cache
    /// directory that cannot be used costs reads, never an error.
    pub fn persistent(settings: CacheSettings) -> Self {
        let mut digests = FileDigests::new();
        digests.disk = Some(settings);
        digests
    }

    /// The hashes kept in this process, without those on disk.
    fn in_memory(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hashes kept, those on disk loaded at the first call: what a
    /// digest looks up. A plain load, which only asks [`FileDigests::head`]
    /// of what this process hashed, never parses the file.
    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        let mut entries = self.in_memory();
        if !entries.loaded {
            entries.loaded = true;
            if let Some(cache) = self.disk.as_ref().and_then(LocalCache::open) {
                for kept in cache.load_hashes() {
                    entries.insert(
                        &kept.path,
                        &kept.version,
                        &kept.sha256,
                        kept.size,
                        kept.head,
                        Some(kept.since),
                        false,
                    );
                }
            }
        }
        entries
    }

    /// True when made [`FileDigests::persistent`].
    pub fn is_persistent(&self) -> bool {
        self.disk.is_some()
    }

    /// Writes the hashes of filesystem files to the local cache, when made
    /// [`FileDigests::persistent`] and something was hashed since the last
    /// write: every hash this process used, and those loaded from disk of
    /// paths it did not use, except racily clean ones. Never fails; a
    /// cache that cannot be written costs a later read.
    pub fn persist(&self) {
        let Some(settings) = &self.disk else { return };
        let kept: Vec<KeptHash> = {
            let mut entries = self.entries();
            if !entries.dirty {
                return;
            }
            entries.dirty = false;
            let mut kept = Vec::with_capacity(entries.len);
            for (path, versions) in &entries.by_path {
                let any_used = versions.iter().any(|h| h.used);
                for hashed in versions.iter().filter(|h| h.used || !any_used) {
                    let Some(since) = hashed.since else { continue };
                    kept.push(KeptHash {
                        path: path.to_string(),
                        version: hashed.version.clone(),
                        sha256: hashed.sha256.clone(),
                        size: hashed.size,
                        head: hashed.head.clone(),
                        since,
                    });
                }
            }
            kept
        };
        if let Some(cache) = LocalCache::open(settings) {
            cache.store_hashes(&kept);
        }
    }

    /// The hex SHA-256 and size of `path` at `version`, when hashed before.
    pub fn get(&self, path: &str, version: &Version) -> Option<(String, u64)> {
        self.entries().get(path, version)
    }

    /// What the bytes of the skill file `path` at `version` held when
    /// they were hashed: their SHA-256 and frontmatter, when hashed before.
    /// This is what a check shows of a skill: it comes from the bytes the
    /// digest was computed from, never from an index or cache entry.
    pub fn head(&self, path: &str, version: &Version) -> Option<HashedHead> {
        self.in_memory().head(path, version)
    }

    /// The skill the frontmatter of the skill file `path` at `version`
    /// describes, as its hashed bytes hold it (parsed once per version, as
    /// a catalog load parses it): `None` when those bytes were not hashed
    /// here, `Some(None)` when they hold no closed frontmatter or no valid
    /// skill.
    pub fn shown(&self, path: &str, version: &Version) -> Option<Option<Arc<crate::skill::SkillMetadata>>> {
        let yaml = {
            let entries = self.entries();
            let hashed = entries.by_path.get(path)?.iter().find(|h| h.version == *version)?;
            if let Some(parsed) = &hashed.parsed {
                return Some(parsed.clone());
            }
            hashed.head.clone()
        };
        let dir = path.rsplit('/').nth(1);
        let parsed = yaml.and_then(|yaml| {
            crate::skill::parse_frontmatter(&yaml, dir, crate::skill::Strictness::Lenient)
                .skill
                .map(Arc::new)
        });
        let mut entries = self.entries();
        if let Some(hashed) = entries
            .by_path
            .get_mut(path)
            .and_then(|versions| versions.iter_mut().find(|h| h.version == *version))
        {
            hashed.parsed = Some(parsed.clone());
        }
        Some(parsed)
    }

    /// Hashes `bytes`, the content of `path` at `version`, keeps and
    /// returns the hex SHA-256 and size. For a skill file (`SKILL.md`) the
    /// frontmatter those bytes hold is kept too ([`FileDigests::head`]).
    /// The bytes must have been read after the store was made.
    pub fn compute(&self, path: &str, version: &Version, bytes: &[u8]) -> (String, u64) {
        self.compute_read_at(path, version, bytes, self.born)
    }

    /// [`FileDigests::compute`] of bytes read after the moment `since`
    /// ([`read_moment`]).
    fn compute_read_at(&self, path: &str, version: &Version, bytes: &[u8], since: i64) -> (String, u64) {
        let value = (sha256_hex(bytes), bytes.len() as u64);
        let head = is_skill_file(path)
            .then(|| match crate::skill::scan(bytes, true) {
                crate::skill::Scan::Yaml(yaml) => Some(Arc::from(yaml)),
                _ => None,
            })
            .flatten();
        self.computed.fetch_add(1, Ordering::Relaxed);
        let since = keepable(version).then_some(since);
        self.entries()
            .insert(path, version, &value.0, value.1, head, since, true);
        value
    }

    /// Forgets the hash kept for `path` at `version`: its bytes were found
    /// to have another hash under that same version (a backend whose
    /// version did not move with the content), so the next check reads
    /// them again.
    pub fn forget(&self, path: &str, version: &Version) {
        let mut entries = self.entries();
        let Some(versions) = entries.by_path.get_mut(path) else {
            return;
        };
        let before = versions.len();
        versions.retain(|h| h.version != *version);
        let removed = before - versions.len();
        if versions.is_empty() {
            entries.by_path.remove(path);
        }
        entries.len -= removed;
        entries.dirty |= removed > 0;
    }

    /// How many files were hashed since the cache was made.
    pub fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
    }

    /// The digest of the skill `listed` lists, reading through `backend`
    /// with the listing's own confined read options the files whose
    /// version is not cached. Fails when the listing was cut short or a
    /// listed file cannot be read.
    pub async fn skill_digest(&self, backend: &dyn SkillBackend, listed: &SkillFiles) -> Result<SkillDigest> {
        if listed.truncated {
            return Err(Error::Usage(format!(
                "{} holds more files than are listed, so it has no digest",
                listed.dir
            )));
        }
        let read = listed.read_options();
        // One lock for every look-up of the skill.
        let (mut files, missing) = {
            let mut entries = self.entries();
            let mut files = Vec::with_capacity(listed.files.len());
            let mut missing = Vec::new();
            for (i, file) in listed.files.iter().enumerate() {
                let cached = file.version.as_ref().and_then(|v| entries.get(file.path.as_str(), v));
                match cached {
                    Some((sha256, size)) => files.push(DigestedFile {
                        relative: file.relative.clone(),
                        sha256,
                        size,
                        version: file.version.clone(),
                    }),
                    None => {
                        missing.push(i);
                        files.push(DigestedFile {
                            relative: file.relative.clone(),
                            sha256: String::new(),
                            size: 0,
                            version: None,
                        });
                    }
                }
            }
            (files, missing)
        };
        if !missing.is_empty() {
            // A batch at a time, so a skill of many large files is never
            // held in memory whole.
            for chunk in missing.chunks(READ_BATCH) {
                let paths: Vec<_> = chunk.iter().map(|&i| listed.files[i].path.clone()).collect();
                let since = read_moment();
                let blobs = backend.read_many(&paths, read).await;
                for (&i, blob) in chunk.iter().zip(blobs) {
                    let blob = blob?;
                    let (sha256, size) =
                        self.compute_read_at(listed.files[i].path.as_str(), &blob.version, &blob.data, since);
                    let entry = &mut files[i];
                    entry.sha256 = sha256;
                    entry.size = size;
                    entry.version = Some(blob.version);
                }
            }
        }
        let digest = digest_lines(files.iter().map(|f| (f.relative.as_str(), f.sha256.as_str())));
        Ok(SkillDigest { digest, files })
    }
}

impl Default for FileDigests {
    fn default() -> Self {
        FileDigests::new()
    }
}

impl Drop for FileDigests {
    fn drop(&mut self) {
        self.persist();
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

    #[test]
    fn the_digest_is_the_documented_text_hashed() {
        // printf 'HEX  SKILL.md\n' style text, computed independently.
        let a = sha256_hex(b"a");
        let b = sha256_hex(b"b");
        let text = format!("{b} SKILL.md\n{a} scripts/run.sh\n");
        let expected = format!("sha256:{}", sha256_hex(text.as_bytes()));
        assert_eq!(
            digest_lines([("scripts/run.sh", a.as_str()), ("SKILL.md", b.as_str())]),
            expected
        );
        // The reserved directory is not part of it; a look-alike name is.
        assert_eq!(
            digest_lines([
                ("scripts/run.sh", a.as_str()),
                ("SKILL.md", b.as_str()),
                (".skillstore/signature", a.as_str())
            ]),
            expected
        );
        assert_ne!(
            digest_lines([
                ("scripts/run.sh", a.as_str()),
                ("SKILL.md", b.as_str()),
                (".skillstore2/signature", a.as_str())
            ]),
            expected
        );
    }
}

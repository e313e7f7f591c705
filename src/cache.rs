//! The local cache: frontmatters of SKILL.md files kept on disk by version,
//! so a cold process over a network store reads none it read before.
//!
//! One file per location (`<hash>.json`), holding the location's identity
//! (checked on every read, so a hash collision is a miss) and its entries
//! keyed by path and version. The directory is private to its user (0700,
//! files 0600); files are written to a temporary name and renamed, so two
//! processes writing at once leave one complete file; everything under
//! the directory (these files, search indexes, discovery blobs, Git
//! repositories) is trimmed to one size bound, oldest first
//! ([`LocalCache::trim`]). Any file that is missing,
//! unreadable, corrupt or for another location is a miss: the cache only
//! ever saves time. An entry is used only when its version and size equal
//! the listing's for that file.
//!
//! The same directory keeps file hashes between processes ([`hashes`]), so
//! a `--locked` command reads no file unchanged since the last one.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::index::Entries;

pub mod hashes;

/// The default bound on the cache directory's size: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

const FORMAT: &str = "skillstore-cache";
const VERSION: u32 = 2;

/// Where the cache lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSettings {
    /// The directory; `None` is `$XDG_CACHE_HOME/skillstore`, or
    /// `~/.cache/skillstore`.
    pub dir: Option<PathBuf>,
    /// The most bytes its files may take together.
    pub max_bytes: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            dir: None,
            max_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

impl CacheSettings {
    /// The directory these settings name, if one can be found.
    pub fn resolved_dir(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.dir {
            return Some(dir.clone());
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("skillstore"))
    }
}

/// An open cache directory.
#[derive(Debug, Clone)]
pub struct LocalCache {
    dir: PathBuf,
    max_bytes: u64,
}

#[derive(Serialize, Deserialize)]
struct File {
    format: String,
    version: u32,
    location: String,
    entries: Entries,
}

impl LocalCache {
    /// Opens (creating it 0700 if needed) the directory of `settings`.
    /// `None` when there is none, or when it exists but is not a directory
    /// of this user's that only this user can enter (it is then made so,
    /// if it is this user's): a cache others could write is not read.
    pub fn open(settings: &CacheSettings) -> Option<LocalCache> {
        let dir = settings.resolved_dir()?;
        if let Some(parent) = dir.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() {
            tracing::debug!("the cache directory is not this user's own directory; not using it");
            return None;
        }
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).ok()?;
        }
        Some(LocalCache {
            dir,
            max_bytes: settings.max_bytes,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file_of(&self, location: &str) -> PathBuf {
        self.dir.join(format!("{}.json", hash_hex(location)))
    }

    /// The entries kept for `location`; empty on any miss.
    pub fn load(&self, location: &str) -> Entries {
        let path = self.file_of(location);
        let Ok(data) = read_bounded(&path, self.max_bytes) else {
            return Entries::new();
        };
        match serde_json::from_slice::<File>(&data) {
            Ok(file) if file.format == FORMAT && file.version == VERSION && file.location == location => file.entries,
            _ => Entries::new(),
        }
    }

    /// Replaces the entries kept for `location` (written whole to a
    /// temporary file, then renamed over the old one), then trims the
    /// directory to its bound. Failures only cost a later miss.
    pub fn store(&self, location: &str, entries: &Entries) {
        if let Err(e) = self.try_store(location, entries) {
            tracing::debug!(error = %e, "cannot write the local cache");
        }
    }

    fn try_store(&self, location: &str, entries: &Entries) -> std::io::Result<()> {
        let file = File {
            format: FORMAT.into(),
            version: VERSION,
            location: location.to_owned(),
            entries: entries.clone(),
        };
        let data = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        if data.len() as u64 > self.max_bytes {
            return Ok(());
        }
        write_whole(&self.dir, "", &self.file_of(location), &data)?;
        self.trim();
        Ok(())
    }

    /// The bound on the directory's size, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Brings everything under the cache directory within its bound,
    /// oldest first: frontmatter files, each search index directory
    /// (`search-*`, whole), each blob of `discovery/`, and each repository
    /// of `git/` (whole, and only while no other process holds its lock:
    /// one being fetched is never removed). Links are never followed, and
    /// what is not the cache's own is counted but never removed. What a
    /// running process finds removed only costs it a read again: a search
    /// index is rebuilt, a discovery file fetched again.
    pub fn trim(&self) {
        let mut total = 0u64;
        let mut units: Vec<Unit> = Vec::new();
        let Ok(read) = std::fs::read_dir(&self.dir) else { return };
        for entry in read.filter_map(|e| e.ok()) {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if meta.is_file() {
                total += meta.len();
                units.push(Unit::new(&meta, meta.len(), path, Removal::File));
            } else if !meta.is_dir() {
                continue;
            } else if name.starts_with("search-") {
                let bytes = tree_bytes(&path);
                total += bytes;
                units.push(Unit::new(&meta, bytes, path, Removal::Dir));
            } else if name == "discovery" {
                for endpoint in std::fs::read_dir(&path).into_iter().flatten().filter_map(|e| e.ok()) {
                    let endpoint = endpoint.path();
                    if !std::fs::symlink_metadata(&endpoint).is_ok_and(|m| m.is_dir()) {
                        continue;
                    }
                    for blob in std::fs::read_dir(&endpoint)
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e.ok())
                    {
                        let Ok(meta) = std::fs::symlink_metadata(blob.path()) else {
                            continue;
                        };
                        if meta.is_file() {
                            total += meta.len();
                            units.push(Unit::new(&meta, meta.len(), blob.path(), Removal::File));
                        }
                    }
                }
            } else if name == "git" {
                for repo in std::fs::read_dir(&path).into_iter().flatten().filter_map(|e| e.ok()) {
                    let repo_path = repo.path();
                    let Ok(meta) = std::fs::symlink_metadata(&repo_path) else {
                        continue;
                    };
                    let repo_name = repo.file_name().to_string_lossy().into_owned();
                    if meta.is_file() {
                        total += meta.len();
                        continue;
                    }
                    let Some(key) = repo_name.strip_suffix(".git").filter(|_| meta.is_dir()) else {
                        continue;
                    };
                    let bytes = tree_bytes(&repo_path);
                    total += bytes;
                    let lock = path.join(format!("{key}.lock"));
                    // The lock's time is the repository's last use.
                    let used = std::fs::symlink_metadata(&lock).unwrap_or(meta);
                    units.push(Unit::new(&used, bytes, repo_path, Removal::Git(lock)));
                }
            } else {
                total += tree_bytes(&path);
            }
        }
        if total <= self.max_bytes {
            return;
        }
        units.sort_by_key(|a| a.modified);
        for unit in units {
            if total <= self.max_bytes {
                break;
            }
            if unit.remove() {
                total = total.saturating_sub(unit.bytes);
            }
        }
    }
}

/// One thing the trim may remove as a whole.
struct Unit {
    modified: std::time::SystemTime,
    bytes: u64,
    path: PathBuf,
    how: Removal,
}

enum Removal {
    File,
    Dir,
    /// A cached Git repository and its lock file.
    Git(PathBuf),
}

impl Unit {
    fn new(meta: &std::fs::Metadata, bytes: u64, path: PathBuf, how: Removal) -> Unit {
        Unit {
            modified: meta.modified().unwrap_or(std::time::UNIX_EPOCH),
            bytes,
            path,
            how,
        }
    }

    fn remove(&self) -> bool {
        match &self.how {
            Removal::File => std::fs::remove_file(&self.path).is_ok(),
            Removal::Dir => std::fs::remove_dir_all(&self.path).is_ok(),
            Removal::Git(lock) => {
                let Ok(file) = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                    .open(lock)
                else {
                    // No lock file: no fetch has run or is running.
                    return std::fs::remove_dir_all(&self.path).is_ok();
                };
                if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
                    return false;
                }
                let removed = std::fs::remove_dir_all(&self.path).is_ok();
                let _ = std::fs::remove_file(lock);
                removed
            }
        }
    }
}

/// The bytes of the regular files under `dir`, links not followed.
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).into_iter().flatten().filter_map(|e| e.ok()) {
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    total
}

/// Reads a regular file of at most `limit` bytes, never through a link.
fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > limit {
        return Err(std::io::Error::other("not a cache file"));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut data)?;
    Ok(data)
}

/// A 128-bit FNV-1a of `text`, in hex: a file name, not a security measure
/// (the identity inside the file is compared on every read).
pub(crate) fn hash_hex(text: &str) -> String {
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash: u128 = 0x6c62272e07bb014262b821756295c58d;
    for byte in text.bytes() {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    format!("{hash:032x}")
}

/// Writes `data` to `target` in the cache directory `dir`, whole or not at
/// all: a new private file (0600, created exclusively, never through a
/// link) named for `kind`, synced, then renamed over `target`; the
/// temporary file is removed when a step fails.
pub(crate) fn write_whole(dir: &Path, kind: &str, target: &Path, data: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let temp = dir.join(format!(
        ".tmp-{kind}{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&temp)?;
        out.write_all(data)?;
        out.sync_data()?;
        std::fs::rename(&temp, target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

//! The local cache: frontmatters of SKILL.md files kept on disk by version,
//! so a cold process over a network store reads none it read before.
//!
//! One file per location (`<hash>.json`), holding the location's identity
//! (checked on every read, so a hash collision is a miss) and its entries
//! keyed by path and version. The directory is private to its user (0700,
//! files 0600); files are written to a temporary name and renamed, so two
//! processes writing at once leave one complete file; the directory is
//! trimmed to a size bound, oldest files first. Any file that is missing,
//! unreadable, corrupt or for another location is a miss: the cache only
//! ever saves time. An entry is used only when its version and size equal
//! the listing's for that file.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::index::Entries;

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
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let temp = self.dir.join(format!(
            ".tmp-{}-{}-{nanos}",
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
            out.write_all(&data)?;
            out.sync_data()?;
            std::fs::rename(&temp, self.file_of(location))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written?;
        self.trim();
        Ok(())
    }

    /// Deletes the oldest cache files until the rest fit the bound.
    fn trim(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = read
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, size, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= size;
            }
        }
    }
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

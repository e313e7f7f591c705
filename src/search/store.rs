//! The index kept in the local cache directory: one directory per
//! namespace, `search-<format>-<hash of the identity>/`, holding tantivy's
//! files and `identity`, the namespace's identity in full (compared on
//! open, so a hash collision is a miss, never another namespace's index).
//! A directory that is unreadable, of another format or another identity
//! is not used. At most [`MAX_CACHED_INDEXES`] are kept, the least recently
//! opened removed first.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use skillstore_backends::Version;
use tantivy::directory::MmapDirectory;
use tantivy::schema::Value;
use tantivy::{Index, TantivyDocument};

use super::schema::Fields;
use crate::cache::{CacheSettings, LocalCache, hash_hex};

/// Bumped whenever the schema or the analysis changes.
const FORMAT: u32 = 1;
const IDENTITY_FILE: &str = "identity";
/// Touched at every open, so a directory's time says when it was last used.
const OPENED_FILE: &str = "opened";
/// The most indexes kept in the cache directory; opening one more removes
/// the least recently opened.
pub const MAX_CACHED_INDEXES: usize = 8;
const MAX_IDENTITY_BYTES: u64 = 64 * 1024;

/// Opens (creating it if needed) the cached index of `identity`.
pub(super) fn open(settings: &CacheSettings, identity: &str) -> Option<(Index, Fields)> {
    let cache = LocalCache::open(settings)?;
    let dir = cache.dir().join(format!("search-{FORMAT}-{}", hash_hex(identity)));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => write_identity(&dir, identity).ok()?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(&dir).ok()?;
            if !meta.is_dir() || read_identity(&dir).as_deref() != Some(identity) {
                return None;
            }
        }
        Err(_) => return None,
    }
    let _ = std::fs::remove_file(dir.join(OPENED_FILE));
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join(OPENED_FILE));
    trim(cache.dir(), &dir);
    // The directory just opened is the newest there, so trimmed last.
    cache.trim();
    let (schema, fields) = Fields::schema();
    let directory = MmapDirectory::open(&dir).ok()?;
    match Index::open_or_create(directory, schema) {
        Ok(index) => Some((index, fields)),
        Err(e) => {
            tracing::debug!(error = %e, "the cached search index cannot be opened");
            None
        }
    }
}

/// Removes the least recently opened index directories (by the time of
/// their last change, which every open moves) until, with `keep`, at most
/// [`MAX_CACHED_INDEXES`] remain. Only directories named `search-*` are
/// touched; a link is never followed.
fn trim(cache_dir: &Path, keep: &Path) {
    let Ok(read) = std::fs::read_dir(cache_dir) else { return };
    let mut dirs: Vec<(std::time::SystemTime, std::path::PathBuf)> = read
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("search-")))
        .filter(|e| e.path() != keep)
        .filter_map(|e| {
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            meta.is_dir().then_some(())?;
            Some((meta.modified().ok()?, e.path()))
        })
        .collect();
    if dirs.len() < MAX_CACHED_INDEXES {
        return;
    }
    dirs.sort();
    let excess = dirs.len() + 1 - MAX_CACHED_INDEXES;
    for (_, path) in dirs.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(path);
    }
}

fn write_identity(dir: &Path, identity: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join(IDENTITY_FILE))?;
    file.write_all(identity.as_bytes())
}

fn read_identity(dir: &Path) -> Option<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join(IDENTITY_FILE))
        .ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_IDENTITY_BYTES), &mut text).ok()?;
    Some(text)
}

/// Every live document's SKILL.md path and version.
pub(super) fn documents(index: &Index, fields: Fields) -> tantivy::Result<HashMap<String, Version>> {
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let mut known = HashMap::new();
    for segment in searcher.segment_readers() {
        let store = segment.get_store_reader(1)?;
        for doc_id in segment.doc_ids_alive() {
            let doc: TantivyDocument = store.get(doc_id)?;
            let text = |field| doc.get_first(field).and_then(|v| v.as_str()).map(str::to_owned);
            if let (Some(path), Some(version)) = (text(fields.path), text(fields.version)) {
                known.insert(path, Version::new(version));
            }
        }
    }
    Ok(known)
}

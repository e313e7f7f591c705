//! File hashes kept on disk between processes, as Git's index keeps them:
//! one file, `file-hashes.json`, in the private cache directory
//! ([`LocalCache`]), holding for each hashed file its virtual path, its
//! backend version, the SHA-256 and size of its bytes, the frontmatter of
//! a skill file, and the moment (whole seconds) before its bytes were read.
//!
//! Only versions that identify a file's bytes by themselves are kept: the
//! filesystem's (device, inode, size, modification and change times, as
//! nanoseconds; see `backends/src/fs`). A write to a file moves its change
//! time, which no caller can set back, so a file whose version equals a
//! kept one holds the bytes that were hashed, unless it was written within
//! the same timestamp tick as it was read. That is Git's "racily clean"
//! case: an entry is trusted only when both the file's modification and
//! change times are strictly older than the moment kept with it, which is
//! taken before the read, at least a second early and rounded down to an
//! even second (so a coarse kernel clock or a filesystem keeping two-second
//! times cannot stamp a later write older than it). Anything else is
//! read and hashed again.
//!
//! The file is written whole to a temporary name (0600, never through a
//! link) and renamed; it counts toward the cache directory's bound and is
//! trimmed with the rest. A file that is missing, a link, not a regular
//! file, not owned by this user, readable or writable by others, larger
//! than the bound, unparsable, of another format, or holding any entry
//! that is not well formed is ignored whole: it only ever saves reads.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skillstore_backends::Version;

use super::LocalCache;

/// The name of the hash file inside the cache directory.
pub const FILE_NAME: &str = "file-hashes.json";

const FORMAT: &str = "skillstore-file-hashes";
const VERSION: u32 = 1;

/// One file's hash, as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptHash {
    /// The file's virtual path.
    pub path: String,
    /// Its backend version (a filesystem fingerprint).
    pub version: Version,
    /// The lowercase hex SHA-256 of its bytes.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// For a skill file, the YAML of its frontmatter as its bytes held it.
    pub head: Option<Arc<str>>,
    /// Seconds since the Unix epoch, at or before the moment its bytes
    /// were read ([`read_moment`]).
    pub since: i64,
}

/// One entry as serialized: path, version, sha256, size, since, head.
type Row = (String, String, String, u64, i64, Option<String>);

#[derive(Serialize, Deserialize)]
struct Disk {
    format: String,
    version: u32,
    entries: Vec<Row>,
}

/// The moment to keep with bytes about to be read: the current time less
/// one second, rounded down to an even second. A write after this call
/// stamps its file at this moment or later on any filesystem whose times
/// are at most two seconds coarse.
pub fn read_moment() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (now.saturating_sub(1) & !1) as i64
}

/// The stamps of a filesystem version: size, modification and change
/// times in whole seconds. `None` for any other backend's version.
fn fs_stamps(version: &Version) -> Option<(u64, i64, i64)> {
    let mut parts = version.as_str().split('.');
    let mut field = || -> Option<u64> {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 16 || !part.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return None;
        }
        u64::from_str_radix(part, 16).ok()
    };
    let (_dev, _ino, size, mtime, mtime_ns, ctime, ctime_ns) =
        (field()?, field()?, field()?, field()?, field()?, field()?, field()?);
    if parts.next().is_some() || mtime_ns >= 1_000_000_000 || ctime_ns >= 1_000_000_000 {
        return None;
    }
    Some((size, mtime as i64, ctime as i64))
}

/// True when `version` is one whose hash may be kept on disk: a
/// filesystem version.
pub fn keepable(version: &Version) -> bool {
    fs_stamps(version).is_some()
}

/// True when the hash of `size` bytes read at `since` under `version` may
/// be trusted for a file reporting `version` later: a filesystem version of
/// that size whose modification and change times are both strictly older
/// than `since`.
pub fn trusted(version: &Version, size: u64, since: i64) -> bool {
    fs_stamps(version).is_some_and(|(v_size, mtime, ctime)| v_size == size && mtime < since && ctime < since)
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl LocalCache {
    fn hashes_path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The trusted file hashes kept in this cache ([`trusted`]); empty on
    /// any miss (see the module's documentation).
    pub fn load_hashes(&self) -> Vec<KeptHash> {
        self.try_load_hashes().unwrap_or_default()
    }

    fn try_load_hashes(&self) -> Option<Vec<KeptHash>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
            .open(self.hashes_path())
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file()
            || meta.uid() != rustix::process::geteuid().as_raw()
            || meta.mode() & 0o077 != 0
            || meta.len() > self.max_bytes
        {
            tracing::debug!("the file hash cache is not this user's private file; not using it");
            return None;
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(file, self.max_bytes + 1), &mut data).ok()?;
        let disk: Disk = serde_json::from_slice(&data).ok()?;
        if disk.format != FORMAT || disk.version != VERSION {
            return None;
        }
        let mut kept = Vec::with_capacity(disk.entries.len());
        for (path, version, sha256, size, since, head) in disk.entries {
            let version = Version::new(version);
            if !keepable(&version) || !is_sha256_hex(&sha256) || !path.starts_with('/') {
                return None;
            }
            if trusted(&version, size, since) {
                kept.push(KeptHash {
                    path,
                    version,
                    sha256,
                    size,
                    head: head.map(Arc::from),
                    since,
                });
            }
        }
        Some(kept)
    }

    /// Replaces the kept file hashes with the trusted ones of `hashes`
    /// (written to a temporary file, then renamed), then trims the
    /// directory. Nothing is written when they would take more than half
    /// the directory's bound (the old file is removed then). Failures only
    /// cost a later read.
    pub fn store_hashes<'a>(&self, hashes: impl IntoIterator<Item = &'a KeptHash>) {
        if let Err(e) = self.try_store_hashes(hashes) {
            tracing::debug!(error = %e, "cannot write the file hash cache");
        }
    }

    fn try_store_hashes<'a>(&self, hashes: impl IntoIterator<Item = &'a KeptHash>) -> std::io::Result<()> {
        let entries: Vec<Row> = hashes
            .into_iter()
            .filter(|h| trusted(&h.version, h.size, h.since))
            .map(|h| {
                (
                    h.path.clone(),
                    h.version.as_str().to_owned(),
                    h.sha256.clone(),
                    h.size,
                    h.since,
                    h.head.as_deref().map(str::to_owned),
                )
            })
            .collect();
        let disk = Disk {
            format: FORMAT.into(),
            version: VERSION,
            entries,
        };
        let data = serde_json::to_vec(&disk).map_err(std::io::Error::other)?;
        if data.len() as u64 > self.max_bytes / 2 {
            let _ = std::fs::remove_file(self.hashes_path());
            return Ok(());
        }
        super::write_whole(&self.dir, "hashes-", &self.hashes_path(), &data)?;
        self.trim();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_filesystem_versions_older_than_the_read_are_trusted() {
        // dev.ino.size.mtime.mtime_ns.ctime.ctime_ns, as backends/src/fs forms it.
        let v = Version::new("803.1a.5.64.0.64.1");
        assert!(keepable(&v));
        assert!(trusted(&v, 5, 101));
        assert!(!trusted(&v, 5, 100), "a change time in the read's second is racy");
        assert!(!trusted(&v, 6, 101), "a size other than the version's");
        let late_mtime = Version::new("803.1a.5.65.0.60.0");
        assert!(!trusted(&late_mtime, 5, 101));
        for foreign in [
            "\"e1\"",
            "m3",
            "sha256:ab",
            "1.2.3",
            "803.1a.5.64.0.64.1.9",
            "803.1A.5.64.0.64.1",
        ] {
            assert!(!keepable(&Version::new(foreign)), "{foreign}");
        }
    }
}

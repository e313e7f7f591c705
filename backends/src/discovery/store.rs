//! Where the verified files of a discovery endpoint are held: on disk in
//! a private directory of content-addressed blobs (one file per SHA-256,
//! so an artifact and the files unpacked from it share one namespace),
//! or, with no directory, in memory. Either way one load holds at most
//! its bound in total ([`Budget`]).
//!
//! A blob on disk is derived data: it is served only after its bytes hash
//! to the digest recorded when they were verified, and any other state
//! (missing, changed, not a regular file) is a miss that costs a download.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// The bytes one load may hold, shared by its downloads.
#[derive(Debug)]
pub(super) struct Budget {
    limit: u64,
    used: AtomicU64,
    /// Set once a take did not fit: every later entry of the load is
    /// refused without a request.
    full: std::sync::atomic::AtomicBool,
}

impl Budget {
    /// A budget of `limit` bytes of which `used` are already held.
    pub(super) fn new(limit: u64, used: u64) -> Budget {
        Budget {
            limit,
            used: AtomicU64::new(used),
            full: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The bound.
    pub(super) fn limit(&self) -> u64 {
        self.limit
    }

    /// True once a take did not fit, or nothing more can be taken.
    pub(super) fn exhausted(&self) -> bool {
        self.full.load(Ordering::SeqCst) || self.used.load(Ordering::SeqCst) >= self.limit
    }

    /// Takes `n` bytes, or nothing when they do not fit.
    pub(super) fn take(&self, n: u64) -> bool {
        let taken = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(n).filter(|total| *total <= self.limit)
            })
            .is_ok();
        if !taken {
            self.full.store(true, Ordering::SeqCst);
        }
        taken
    }

    /// Starts again with `used` bytes taken.
    pub(super) fn reset(&self, used: u64) {
        self.used.store(used, Ordering::SeqCst);
        self.full.store(false, Ordering::SeqCst);
    }

    /// Gives back `n` bytes taken before.
    pub(super) fn give(&self, n: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| Some(used.saturating_sub(n)));
    }
}

/// One file of a loaded skill.
#[derive(Debug, Clone)]
pub(super) struct HeldFile {
    pub(super) size: u64,
    /// The SHA-256 of its bytes, in hex.
    pub(super) hash: String,
    /// Its bytes, when they are held in memory rather than on disk.
    pub(super) inline: Option<Bytes>,
    /// What the endpoint said identifies it (0.1 files): `ETag` and
    /// `Last-Modified`, sent back to revalidate it.
    pub(super) validators: (Option<String>, Option<String>),
}

/// One loaded skill: the key it was loaded at and its files.
#[derive(Debug, Clone, Default)]
pub(super) struct Held {
    pub(super) key: String,
    pub(super) files: BTreeMap<String, HeldFile>,
    /// The bytes of its artifact kept on disk (0 when none is).
    pub(super) artifact_on_disk: u64,
}

impl Held {
    /// The bytes its files take together.
    pub(super) fn bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }

    /// The bytes it keeps on disk.
    pub(super) fn disk_bytes(&self) -> u64 {
        self.artifact_on_disk
            + self
                .files
                .values()
                .filter(|f| f.inline.is_none())
                .map(|f| f.size)
                .sum::<u64>()
    }
}

/// A private directory of blobs named by their SHA-256.
#[derive(Debug, Clone)]
pub(super) struct BlobDir {
    pub(super) dir: PathBuf,
    /// The most bytes the directory keeps of blobs no load holds.
    pub(super) max_bytes: u64,
}

impl BlobDir {
    /// The blob `hex`, if it is a regular file of at most `bound` bytes
    /// whose bytes still hash to `hex`; a blob that does not is removed.
    pub(super) fn get(&self, hex_digest: &str, bound: u64) -> Option<Bytes> {
        let path = self.dir.join(hex_digest);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > bound {
            return None;
        }
        let file = std::fs::File::open(&path).ok()?;
        let opened = file.metadata().ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            if !opened.is_file() || (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
                return None;
            }
        }
        let mut bytes = Vec::with_capacity(opened.len().min(bound) as usize);
        file.take(bound + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() as u64 <= bound && hex(&Sha256::digest(&bytes)) == hex_digest {
            Some(Bytes::from(bytes))
        } else {
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Keeps `bytes` as the blob `hex` (the caller has checked that they
    /// hash to it): written to a temporary name, then renamed. False when
    /// it could not be written.
    pub(super) fn put(&self, hex_digest: &str, bytes: &[u8]) -> bool {
        #[cfg(unix)]
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        builder.mode(0o700);
        if builder.create(&self.dir).is_err() {
            return false;
        }
        let target = self.dir.join(hex_digest);
        if self.get(hex_digest, bytes.len() as u64).is_some() {
            // Touched, so the oldest-first trims take it last.
            let _ = std::fs::File::options()
                .append(true)
                .open(&target)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            return true;
        }
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let temporary = self.dir.join(format!(
            ".{hex_digest}.{}.{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        open.mode(0o600);
        let written = open
            .open(&temporary)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&temporary, &target));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
            return false;
        }
        true
    }

    /// Removes the oldest blobs no load holds (`held`) until the rest of
    /// them take at most `max_bytes`.
    pub(super) fn trim(&self, held: &HashSet<&str>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_str().is_some_and(|n| held.contains(n)))
            .filter_map(|e| {
                let meta = std::fs::symlink_metadata(e.path()).ok()?;
                meta.is_file()
                    .then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

pub(super) use crate::hex;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_takes_up_to_its_limit_and_no_further() {
        let budget = Budget::new(10, 4);
        assert!(budget.take(6));
        assert!(budget.exhausted());
        assert!(!budget.take(1));
        budget.give(3);
        assert!(budget.exhausted(), "a take that did not fit ends the load's takes");
        assert!(budget.take(3));
    }

    #[test]
    fn a_blob_is_served_only_while_it_hashes_to_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = BlobDir {
            dir: dir.path().join("blobs"),
            max_bytes: 1 << 20,
        };
        let name = hex(&Sha256::digest(b"hello"));
        assert!(blobs.put(&name, b"hello"));
        assert_eq!(blobs.get(&name, 100).unwrap(), "hello");
        assert!(blobs.get(&name, 2).is_none(), "larger than the bound");
        std::fs::write(blobs.dir.join(&name), b"HELLO").unwrap();
        assert!(blobs.get(&name, 100).is_none());
        assert!(!blobs.dir.join(&name).exists(), "a changed blob is removed");
    }
}

//! Directory entries kept by the directory's version, so a directory
//! unchanged since it was last read is not read again.
//!
//! A directory's version is its device, inode, size, modification time and
//! change time, as `fstat` gives them on the opened handle. Adding,
//! removing or renaming an entry moves the change time, which no caller
//! can set, and replacing the directory changes the inode. Only the names
//! and the types the listing gave are kept: what each entry is now (its
//! size, version, where a link leads) is asked again at every listing.
//!
//! The change time has the granularity of the kernel's clock, so two
//! changes within one tick leave one value. Entries are therefore kept
//! only for a directory whose times lie [`SETTLED`] or more in the past
//! when it is read: any later change then carries a later time.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{FileType, Stat};

/// How long ago a directory must have last changed for its entries to be
/// kept.
pub(super) const SETTLED: Duration = Duration::from_secs(3);

/// The most directories whose entries are kept; past it the store starts
/// again empty.
const MAX_DIRS: usize = 100_000;

/// A directory's name and type for each of its entries, as read.
pub(super) type Names = Arc<[(CString, FileType)]>;

/// The version of a directory (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DirVersion([i64; 7]);

impl DirVersion {
    /// The version `st` (an `fstat` of the directory's handle) gives.
    // The `Stat` fields' integer types differ between platforms.
    #[allow(clippy::unnecessary_cast)]
    pub(super) fn of(st: &Stat) -> Self {
        DirVersion([
            st.st_dev as i64,
            st.st_ino as i64,
            st.st_size as i64,
            st.st_mtime as i64,
            st.st_mtime_nsec as i64,
            st.st_ctime as i64,
            st.st_ctime_nsec as i64,
        ])
    }

    /// True when both times lie at least [`SETTLED`] before `now`.
    fn settled(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let limit = now.saturating_sub(SETTLED);
        let at = |secs: i64, nanos: i64| match (u64::try_from(secs), u32::try_from(nanos)) {
            (Ok(secs), Ok(nanos)) if nanos < 1_000_000_000 => Some(Duration::new(secs, nanos)),
            _ => None,
        };
        let [_, _, _, mtime, mtime_nsec, ctime, ctime_nsec] = self.0;
        [at(mtime, mtime_nsec), at(ctime, ctime_nsec)]
            .into_iter()
            .all(|time| time.is_some_and(|time| time <= limit))
    }
}

/// The entries of the directories read, by path relative to the root.
#[derive(Debug, Default)]
pub(super) struct Listings {
    dirs: RwLock<HashMap<Box<str>, (DirVersion, Names)>>,
}

impl Listings {
    /// The entries of `dir` kept at `version`, when there are.
    pub(super) fn get(&self, dir: &str, version: &DirVersion) -> Option<Names> {
        let dirs = self.dirs.read().unwrap_or_else(|e| e.into_inner());
        match dirs.get(dir) {
            Some((kept, names)) if kept == version => Some(Arc::clone(names)),
            _ => None,
        }
    }

    /// Keeps `names`, the entries of `dir` read after an `fstat` gave
    /// `version`, when the directory has not changed for [`SETTLED`].
    pub(super) fn keep(&self, dir: &str, version: DirVersion, names: Names) {
        if !version.settled(SystemTime::now()) {
            return;
        }
        let mut dirs = self.dirs.write().unwrap_or_else(|e| e.into_inner());
        if dirs.len() >= MAX_DIRS && !dirs.contains_key(dir) {
            dirs.clear();
        }
        dirs.insert(dir.into(), (version, names));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(mtime: i64, ctime: i64) -> DirVersion {
        DirVersion([1, 2, 4096, mtime, 0, ctime, 0])
    }

    #[test]
    fn a_directory_changed_lately_is_not_kept() {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
        let listings = Listings::default();
        let names: Names = Arc::from(vec![(CString::new("a").unwrap(), FileType::RegularFile)]);
        // Changed a moment ago: a second change in the same tick would
        // leave the same times, so nothing is kept.
        listings.keep("d", version(secs - 100, secs), Arc::clone(&names));
        assert!(listings.get("d", &version(secs - 100, secs)).is_none());
        listings.keep("d", version(secs, secs - 100), Arc::clone(&names));
        assert!(listings.get("d", &version(secs, secs - 100)).is_none());
        // Settled: kept, and given back only at the same version.
        let old = version(secs - 100, secs - 100);
        listings.keep("d", old, Arc::clone(&names));
        assert_eq!(listings.get("d", &old).as_deref(), Some(&*names));
        assert!(listings.get("d", &version(secs - 100, secs - 99)).is_none());
        assert!(listings.get("e", &old).is_none());
    }
}

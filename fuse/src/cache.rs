//! File contents held by the mount: one copy per file version, shared by
//! every handle open on it and kept between opens, all within one byte
//! budget. Entries no handle holds leave oldest-first to make room; when
//! the entries held open fill the budget, a new open is refused.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bytes::Bytes;
use skillstore::backends::{VPath, Version};

type Key = (VPath, Version);

#[derive(Debug)]
struct Entry {
    data: Bytes,
    /// Handles open on it.
    open: usize,
    /// Its place in `idle` while no handle holds it.
    idle_since: u64,
}

/// Bytes that a read under way may take; given back when dropped into
/// [`BlobCache::insert_open`] or [`BlobCache::cancel`].
#[derive(Debug)]
#[must_use]
pub(crate) struct Reservation(usize);

/// The budget is full of contents held open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full;

/// Contents by (path, version), bounded in bytes.
#[derive(Debug)]
pub(crate) struct BlobCache {
    budget: usize,
    /// Bytes of all entries.
    held: usize,
    /// Bytes promised to reads under way.
    reserved: usize,
    entries: HashMap<Key, Entry>,
    /// The version last read of each path, and when it was read.
    newest: HashMap<VPath, (Version, Instant)>,
    /// Entries no handle holds, oldest first.
    idle: BTreeMap<u64, Key>,
    tick: u64,
}

impl BlobCache {
    /// An empty cache holding at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        BlobCache {
            budget,
            held: 0,
            reserved: 0,
            entries: HashMap::new(),
            newest: HashMap::new(),
            idle: BTreeMap::new(),
            tick: 0,
        }
    }

    /// Opens a kept copy of `path`: the version a listing made at
    /// `listed_at` gave, or a version read since then (which is at least as
    /// new). The copy stays until [`BlobCache::release`].
    pub(crate) fn open(
        &mut self,
        path: &VPath,
        listed: Option<&Version>,
        listed_at: Instant,
    ) -> Option<(Version, Bytes)> {
        let version = match listed {
            Some(v) if self.entries.contains_key(&(path.clone(), v.clone())) => v.clone(),
            _ => {
                let (version, read_at) = self.newest.get(path)?;
                if *read_at < listed_at {
                    return None;
                }
                version.clone()
            }
        };
        let key = (path.clone(), version);
        let entry = self.entries.get_mut(&key)?;
        if entry.open == 0 {
            self.idle.remove(&entry.idle_since);
        }
        entry.open += 1;
        let data = entry.data.clone();
        Some((key.1, data))
    }

    /// Makes room for a read of at most `bytes`, dropping idle entries,
    /// oldest first; [`Full`] when the entries held open leave no room.
    pub(crate) fn reserve(&mut self, bytes: usize) -> Result<Reservation, Full> {
        self.make_room(bytes)?;
        self.reserved += bytes;
        Ok(Reservation(bytes))
    }

    /// Gives back a reservation whose read failed.
    pub(crate) fn cancel(&mut self, reservation: Reservation) {
        self.reserved -= reservation.0;
    }

    /// Keeps `data`, read as `version` of `path`, and opens it; when that
    /// version is kept already, opens the kept copy instead, so each
    /// version is held once. [`Full`] when no room is left.
    pub(crate) fn insert_open(
        &mut self,
        path: &VPath,
        version: Version,
        data: Bytes,
        reservation: Reservation,
    ) -> Result<Bytes, Full> {
        self.reserved -= reservation.0;
        self.newest.insert(path.clone(), (version.clone(), Instant::now()));
        let key = (path.clone(), version);
        if let Some(entry) = self.entries.get_mut(&key) {
            if entry.open == 0 {
                self.idle.remove(&entry.idle_since);
            }
            entry.open += 1;
            return Ok(entry.data.clone());
        }
        self.make_room(data.len())?;
        self.held += data.len();
        self.entries.insert(
            key,
            Entry {
                data: data.clone(),
                open: 1,
                idle_since: 0,
            },
        );
        Ok(data)
    }

    /// A handle on `path` at `version` was closed.
    pub(crate) fn release(&mut self, path: &VPath, version: &Version) {
        let key = (path.clone(), version.clone());
        let Some(entry) = self.entries.get_mut(&key) else {
            return;
        };
        entry.open = entry.open.saturating_sub(1);
        if entry.open == 0 {
            self.tick += 1;
            entry.idle_since = self.tick;
            self.idle.insert(self.tick, key);
        }
    }

    /// Bytes of contents held, kept or open.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    fn make_room(&mut self, bytes: usize) -> Result<(), Full> {
        while self.held + self.reserved + bytes > self.budget {
            let Some((_, key)) = self.idle.pop_first() else {
                return Err(Full);
            };
            if let Some(gone) = self.entries.remove(&key) {
                self.held -= gone.data.len();
            }
            if self.newest.get(&key.0).is_some_and(|(v, _)| *v == key.1) {
                self.newest.remove(&key.0);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> VPath {
        VPath::new(p).unwrap()
    }

    fn v(s: &str) -> Version {
        Version::new(s)
    }

    fn read(cache: &mut BlobCache, p: &str, version: &str, data: &'static [u8]) -> Result<Bytes, Full> {
        let reservation = cache.reserve(data.len())?;
        cache.insert_open(&path(p), v(version), Bytes::from_static(data), reservation)
    }

    #[test]
    fn idle_entries_leave_oldest_first_and_open_ones_stay() {
        let mut cache = BlobCache::new(10);
        read(&mut cache, "/a", "1", b"aaaa").unwrap();
        read(&mut cache, "/b", "1", b"bbbb").unwrap();
        cache.release(&path("/a"), &v("1"));
        // /b is open: /a makes room.
        read(&mut cache, "/c", "1", b"cccc").unwrap();
        assert!(cache.held() <= 10);
        let listed = Instant::now();
        assert!(cache.open(&path("/a"), Some(&v("1")), listed).is_none());
        // Nothing idle is left to drop: a fourth file does not fit.
        assert_eq!(read(&mut cache, "/d", "1", b"dddd"), Err(Full));
        cache.release(&path("/b"), &v("1"));
        read(&mut cache, "/d", "1", b"dddd").unwrap();
        assert!(cache.held() <= 10);
    }

    #[test]
    fn each_version_is_held_once_whatever_the_listing_said() {
        let mut cache = BlobCache::new(100);
        let listed = Instant::now();
        // Listed as version 1; the file has changed, and the read gives 2.
        assert!(cache.open(&path("/a"), Some(&v("1")), listed).is_none());
        read(&mut cache, "/a", "2", b"new bytes").unwrap();
        for _ in 0..100 {
            let (version, data) = cache.open(&path("/a"), Some(&v("1")), listed).unwrap();
            assert_eq!((version, &data[..]), (v("2"), &b"new bytes"[..]));
        }
        // A second read of the same version shares the kept copy.
        read(&mut cache, "/a", "2", b"new bytes").unwrap();
        assert_eq!(cache.held(), 9);
        // A listing made after the read wants its own version.
        let later = Instant::now() + std::time::Duration::from_secs(1);
        assert!(cache.open(&path("/a"), Some(&v("3")), later).is_none());
    }

    #[test]
    fn cancelled_reservations_give_their_room_back() {
        let mut cache = BlobCache::new(10);
        let reservation = cache.reserve(8).unwrap();
        assert_eq!(cache.reserve(8).unwrap_err(), Full);
        cache.cancel(reservation);
        let reservation = cache.reserve(8).unwrap();
        cache.cancel(reservation);
    }
}

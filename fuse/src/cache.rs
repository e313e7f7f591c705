//! File contents kept between opens, by virtual path and version, within a
//! byte budget: the oldest entries leave first.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use skillstore::backends::{VPath, Version};

/// Contents by (path, version), bounded in bytes.
#[derive(Debug)]
pub(crate) struct BlobCache {
    budget: usize,
    held: usize,
    blobs: HashMap<(VPath, Version), Bytes>,
    order: VecDeque<(VPath, Version)>,
}

impl BlobCache {
    /// An empty cache holding at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        BlobCache {
            budget,
            held: 0,
            blobs: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The bytes of `path` at `version`, if kept.
    pub(crate) fn get(&self, path: &VPath, version: &Version) -> Option<Bytes> {
        self.blobs.get(&(path.clone(), version.clone())).cloned()
    }

    /// Keeps `data` as the bytes of `path` at `version`, dropping the
    /// oldest entries to stay within the budget. Data larger than the
    /// whole budget is not kept.
    pub(crate) fn insert(&mut self, path: VPath, version: Version, data: Bytes) {
        if data.len() > self.budget {
            return;
        }
        let key = (path, version);
        if self.blobs.contains_key(&key) {
            return;
        }
        while self.held + data.len() > self.budget {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some(gone) = self.blobs.remove(&oldest) {
                self.held -= gone.len();
            }
        }
        self.held += data.len();
        self.order.push_back(key.clone());
        self.blobs.insert(key, data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entries_leave_to_stay_within_the_budget() {
        let mut cache = BlobCache::new(10);
        let path = |p: &str| VPath::new(p).unwrap();
        let v = |s: &str| Version::new(s);
        cache.insert(path("/a"), v("1"), Bytes::from_static(b"aaaa"));
        cache.insert(path("/b"), v("1"), Bytes::from_static(b"bbbb"));
        cache.insert(path("/c"), v("1"), Bytes::from_static(b"cccc"));
        assert!(cache.get(&path("/a"), &v("1")).is_none());
        assert_eq!(cache.get(&path("/b"), &v("1")).unwrap(), &b"bbbb"[..]);
        assert!(
            cache.get(&path("/c"), &v("2")).is_none(),
            "another version is another entry"
        );
        cache.insert(path("/big"), v("1"), Bytes::from(vec![0u8; 11]));
        assert!(cache.get(&path("/big"), &v("1")).is_none());
        assert!(cache.held <= 10);
    }
}

//! Sources loaded once per process and shared by every catalog that mounts
//! them with the same location and settings.
//!
//! A server with many tenants over one platform base would otherwise list,
//! read and hold that base once per tenant. With a [`SourcePool`], the
//! first catalog that loads a shared source loads it into the pool; every
//! other catalog, and every later refresh of any of them, takes the pool's
//! current state of that source (an immutable, reference-counted snapshot)
//! without touching storage. The pool's own [`SourcePool::refresh`] lists
//! each shared source once, whatever the number of catalogs over it, and
//! moves [`SourcePool::changes`] when one changed. What a catalog makes of
//! a shared source (shadowing, its filter, its lock and signature checks,
//! its digests) stays its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

pub use crate::catalog::SharedSources;
use crate::catalog::{Catalog, SharedStates, SourceState};

/// The process-wide set of shared sources. Cheap to share (`Arc`).
pub struct SourcePool {
    entries: Mutex<HashMap<Arc<str>, Arc<Entry>>>,
    changes: watch::Sender<u64>,
    loads: AtomicU64,
    /// How many refreshes the pool has run: a source no catalog asked for
    /// during the last two is dropped.
    round: AtomicU64,
}

impl std::fmt::Debug for SourcePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourcePool")
            .field("sources", &self.len())
            .field("loads", &self.loads())
            .finish_non_exhaustive()
    }
}

/// One shared source: its current state and how to load it again.
struct Entry {
    /// Held while the source is being loaded, so one load runs at a time.
    turn: tokio::sync::Mutex<()>,
    current: Mutex<Option<Loaded>>,
    /// The pool's round when a catalog last asked for the source.
    asked: AtomicU64,
    /// Listings begun, and the number of the last one finished: a caller
    /// that arrives during a listing waits for it, then shares one that
    /// began after it arrived.
    started: AtomicU64,
    finished: AtomicU64,
}

#[derive(Clone)]
struct Loaded {
    state: Arc<SourceState>,
    /// A catalog over the storage and options of the first catalog that
    /// loaded the source (without the pool, so the pool holds no cycle),
    /// and the source's position in it.
    loader: Catalog,
    index: usize,
}

impl SourcePool {
    /// An empty pool.
    pub fn new() -> Arc<Self> {
        Arc::new(SourcePool {
            entries: Mutex::new(HashMap::new()),
            changes: watch::Sender::new(0),
            loads: AtomicU64::new(0),
            round: AtomicU64::new(0),
        })
    }

    /// How many shared sources the pool holds.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// True when the pool holds no source.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times a shared source was listed and read (first loads and
    /// refreshes), since the pool was made.
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// A counter that moves each time a [`SourcePool::refresh`] found a
    /// shared source changed: the catalogs over it should refresh then.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The current state of the shared source `key`, loaded by `catalog`
    /// (its source number `index`) if the pool has none yet. Concurrent
    /// first loads of one key run once.
    pub(crate) async fn state(&self, key: &Arc<str>, catalog: &Catalog, index: usize) -> Arc<SourceState> {
        let entry = {
            let mut entries = lock(&self.entries);
            let entry = entries.entry(Arc::clone(key)).or_insert_with(|| {
                Arc::new(Entry {
                    turn: tokio::sync::Mutex::new(()),
                    current: Mutex::new(None),
                    asked: AtomicU64::new(0),
                    started: AtomicU64::new(0),
                    finished: AtomicU64::new(0),
                })
            });
            // Under the map's lock, so a refresh never drops an entry
            // between this ask and its record.
            entry.asked.store(self.round.load(Ordering::Relaxed), Ordering::Relaxed);
            Arc::clone(entry)
        };
        if let Some(loaded) = lock(&entry.current).as_ref() {
            return Arc::clone(&loaded.state);
        }
        let _turn = entry.turn.lock().await;
        if let Some(loaded) = lock(&entry.current).as_ref() {
            return Arc::clone(&loaded.state);
        }
        let loader = catalog.without_pool();
        let state = Arc::new(loader.load_one_source(index, None).await);
        self.loads.fetch_add(1, Ordering::Relaxed);
        *lock(&entry.current) = Some(Loaded {
            state: Arc::clone(&state),
            loader,
            index,
        });
        state
    }

    /// Lists every shared source again, reading only what changed, and
    /// moves [`SourcePool::changes`] if any changed. A source no catalog
    /// asked for since the refresh before the last is dropped instead.
    pub async fn refresh(&self) {
        let round = self.round.fetch_add(1, Ordering::Relaxed) + 1;
        let entries: Vec<(Arc<str>, Arc<Entry>)> = lock(&self.entries)
            .iter()
            .map(|(k, e)| (Arc::clone(k), Arc::clone(e)))
            .collect();
        let mut changed = false;
        for (key, entry) in entries {
            if entry.asked.load(Ordering::Relaxed) + 2 < round {
                let mut entries = lock(&self.entries);
                if entry.asked.load(Ordering::Relaxed) + 2 < round {
                    entries.remove(&key);
                    continue;
                }
            }
            changed |= self.refresh_entry(&entry).await;
        }
        if changed {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Lists again the shared sources of one catalog (an explicit refresh
    /// of one tenant), and moves [`SourcePool::changes`] if any changed.
    /// Concurrent callers share listings: each waits for the one running
    /// when it arrived, then takes one that began after it arrived.
    pub async fn refresh_sources(&self, shared: &SharedSources) {
        let entries: Vec<Arc<Entry>> = {
            let map = lock(&self.entries);
            shared
                .keys()
                .iter()
                .flatten()
                .filter_map(|k| map.get(k).cloned())
                .collect()
        };
        let mut changed = false;
        for entry in entries {
            changed |= self.refresh_entry(&entry).await;
        }
        if changed {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Lists one source again, unless a listing that began after this call
    /// arrived has finished meanwhile. True when its state changed.
    async fn refresh_entry(&self, entry: &Entry) -> bool {
        let arrived = entry.started.load(Ordering::SeqCst);
        let _turn = entry.turn.lock().await;
        if entry.finished.load(Ordering::SeqCst) > arrived {
            return false;
        }
        let number = entry.started.fetch_add(1, Ordering::SeqCst) + 1;
        let Some(loaded) = lock(&entry.current).clone() else {
            return false;
        };
        let next = loaded.loader.load_one_source(loaded.index, Some(&loaded.state)).await;
        self.loads.fetch_add(1, Ordering::Relaxed);
        let changed = !next.same_as(&loaded.state);
        if changed {
            *lock(&entry.current) = Some(Loaded {
                state: Arc::new(next),
                ..loaded
            });
        }
        entry.finished.store(number, Ordering::SeqCst);
        changed
    }
}

#[async_trait::async_trait]
impl SharedStates for SourcePool {
    async fn state(&self, key: &Arc<str>, catalog: &Catalog, index: usize) -> Arc<SourceState> {
        SourcePool::state(self, key, catalog, index).await
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

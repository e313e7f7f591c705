//! The change journals the loaded tenants' mounts keep, each followed once
//! per server whatever the number of tenants over its store: one read of
//! its head per interval, and a refresh of the loaded tenants whose sources
//! it names.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use skillstore::backends::VPath;
use skillstore::changes::{Follower, JournalError, Poll, concerns};
use tokio_util::sync::CancellationToken;

use crate::tenant::Tenant;

/// How long a tenant's first load waits for the first look at a journal.
const FIRST_LOOK: Duration = Duration::from_secs(5);

/// One store's journal as this server follows it.
#[derive(Debug, Default)]
struct Followed {
    /// The tenants over the store, and their sources' paths in it.
    subscribers: Mutex<Vec<(Weak<Tenant>, Vec<VPath>)>>,
    /// True while the journal cannot be read or is refused.
    fallen_back: AtomicBool,
}

/// The journals followed, and what following them did.
#[derive(Debug)]
pub struct Feeds {
    interval: Duration,
    followed: Mutex<HashMap<String, Arc<Followed>>>,
    looks: AtomicU64,
    fallbacks: AtomicU64,
    refreshes: AtomicU64,
}

/// How the journals stand, for `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FeedStatus {
    /// Journals followed.
    pub following: usize,
    /// Journals that could not be read at their last look: their tenants
    /// are polled every `refresh_interval` until a look succeeds.
    pub fallen_back: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Feeds {
    /// No journal followed yet; each is read every `interval` once a
    /// tenant over it subscribes.
    pub fn new(interval: Duration) -> Arc<Self> {
        Arc::new(Feeds {
            interval,
            followed: Mutex::new(HashMap::new()),
            looks: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
        })
    }

    /// Subscribes `tenant` to the journals of its mounts, starting to
    /// follow a journal no tenant followed yet with a first look. Called
    /// before the tenant loads, so every write its load does not see is
    /// reported to it.
    pub async fn subscribe(self: &Arc<Self>, tenant: &Arc<Tenant>, shutdown: &CancellationToken) {
        for feed in tenant.change_feeds() {
            let store = feed.journal.store().to_owned();
            let paths: Vec<VPath> = feed.sources.iter().map(|(_, p)| p.clone()).collect();
            // Taken under the map's lock (as the loop's removal of an
            // unfollowed store is), so no subscriber joins a loop that ended.
            let (followed, new) = {
                let mut all = lock(&self.followed);
                let (followed, new) = match all.get(&store) {
                    Some(f) => (Arc::clone(f), false),
                    None => {
                        let f = Arc::new(Followed::default());
                        all.insert(store.clone(), Arc::clone(&f));
                        (f, true)
                    }
                };
                let mut subscribers = lock(&followed.subscribers);
                subscribers.retain(|(t, _)| t.strong_count() > 0);
                if !subscribers.iter().any(|(t, _)| t.as_ptr() == Arc::as_ptr(tenant)) {
                    subscribers.push((Arc::downgrade(tenant), paths));
                }
                drop(subscribers);
                (followed, new)
            };
            if new {
                let mut follower = Follower::new(feed.journal.clone());
                // A store out of reach does not hold the tenant's load: it
                // is polled until a look succeeds.
                let first = tokio::time::timeout(FIRST_LOOK, follower.poll())
                    .await
                    .unwrap_or_else(|_| Poll::Failed(JournalError::Slow));
                self.note(&followed, &first, follower.found_head());
                self.spawn(store, follower, followed, shutdown.clone());
            }
        }
    }

    /// True when every journal of `tenant`'s mounts is followed and was
    /// read at its last look, so its own poll may wait the longer interval.
    pub fn follows(&self, tenant: &Tenant) -> bool {
        let feeds = tenant.change_feeds();
        if feeds.is_empty() {
            return false;
        }
        let all = lock(&self.followed);
        feeds.iter().all(|feed| {
            all.get(feed.journal.store())
                .is_some_and(|f| !f.fallen_back.load(Ordering::Relaxed))
        })
    }

    /// How the journals stand.
    pub fn status(&self) -> FeedStatus {
        let all = lock(&self.followed);
        FeedStatus {
            following: all.len(),
            fallen_back: all.values().filter(|f| f.fallen_back.load(Ordering::Relaxed)).count(),
        }
    }

    /// The Prometheus lines of the journals.
    pub fn render(&self) -> String {
        let status = self.status();
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        let mut text = String::new();
        for (name, kind, help, value) in [
            (
                "skillstore_change_journals",
                "gauge",
                "Change journals followed.",
                status.following as u64,
            ),
            (
                "skillstore_change_journals_fallen_back",
                "gauge",
                "Change journals that could not be read at their last look (their tenants are polled).",
                status.fallen_back as u64,
            ),
            (
                "skillstore_change_journal_looks_total",
                "counter",
                "Reads of change journals' heads.",
                load(&self.looks),
            ),
            (
                "skillstore_change_journal_fallbacks_total",
                "counter",
                "Times a followed change journal could not be used and its tenants fell back to polling.",
                load(&self.fallbacks),
            ),
            (
                "skillstore_change_journal_refreshes_total",
                "counter",
                "Tenant refreshes a change journal asked for.",
                load(&self.refreshes),
            ),
        ] {
            text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"));
        }
        text
    }

    /// Notes whether a look could use the journal; says so when that
    /// changes.
    /// A store without a head (`found_head` false) has nothing to follow
    /// yet: its tenants poll until a writer makes one.
    fn note(&self, followed: &Followed, poll: &Poll, found_head: bool) {
        self.looks.fetch_add(1, Ordering::Relaxed);
        match poll {
            Poll::Failed(e) => {
                if !followed.fallen_back.swap(true, Ordering::Relaxed) {
                    self.fallbacks.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(kind = e.kind(), error = %e, "a change journal could not be used; its tenants fall back to polling");
                }
            }
            _ if !found_head => {
                if !followed.fallen_back.swap(true, Ordering::Relaxed) {
                    self.fallbacks.fetch_add(1, Ordering::Relaxed);
                    tracing::info!("a store has no change journal yet; its tenants poll until a write makes one");
                }
            }
            _ => {
                if followed.fallen_back.swap(false, Ordering::Relaxed) {
                    tracing::info!("a change journal can be used again; its tenants follow it");
                }
            }
        }
    }

    fn spawn(
        self: &Arc<Self>,
        store: String,
        mut follower: Follower,
        followed: Arc<Followed>,
        shutdown: CancellationToken,
    ) {
        let feeds = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(feeds.interval) => {}
                }
                let live: Vec<(Arc<Tenant>, Vec<VPath>)> = {
                    let mut subscribers = lock(&followed.subscribers);
                    subscribers.retain(|(t, _)| t.strong_count() > 0);
                    subscribers
                        .iter()
                        .filter_map(|(t, paths)| Some((t.upgrade()?, paths.clone())))
                        .collect()
                };
                if live.is_empty() {
                    let mut all = lock(&feeds.followed);
                    if lock(&followed.subscribers).is_empty() {
                        all.remove(&store);
                        break;
                    }
                    continue;
                }
                let poll = follower.poll().await;
                feeds.note(&followed, &poll, follower.found_head());
                let named: Vec<Arc<Tenant>> = match poll {
                    Poll::Changed(changed) => live
                        .into_iter()
                        .filter(|(_, paths)| paths.iter().any(|p| changed.iter().any(|c| concerns(c, p.as_str()))))
                        .map(|(t, _)| t)
                        .collect(),
                    // Only a first look that failed before leaves the
                    // baseline to the loop: what was written meanwhile is
                    // unknown.
                    Poll::Baseline => live.into_iter().map(|(t, _)| t).collect(),
                    Poll::Everything(why) => {
                        tracing::info!(reason = why, "every tenant over a change journal is refreshed");
                        live.into_iter().map(|(t, _)| t).collect()
                    }
                    _ => Vec::new(),
                };
                // An unloaded tenant is loaded again at its next request.
                let named: Vec<Arc<Tenant>> = named.into_iter().filter(|t| t.is_ready()).collect();
                feeds.refreshes.fetch_add(named.len() as u64, Ordering::Relaxed);
                futures::future::join_all(named.iter().map(|t| refresh(t))).await;
            }
        });
    }
}

/// Refreshes `tenant` as a request to `/v1/refresh` does: its shared
/// sources too when it may list them (once for every tenant over them),
/// then its own; concurrent calls share one refresh.
/// A tenant unloaded meanwhile is left unloaded (`None`): a signal is no
/// request, and loads only requests make.
pub async fn refresh(tenant: &Tenant) -> Option<crate::tenant::RefreshOutcome> {
    let namespace = tenant.namespace();
    if let Ok(namespace) = &namespace
        && let Some((pool, shared)) = namespace.shared_sources()
        && tenant.may_list_shared()
    {
        pool.refresh_sources(shared).await;
    }
    tenant.refresh_loaded().await
}

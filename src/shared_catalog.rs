//! A catalog shared by the readers and writers of one process.

use std::sync::{Arc, RwLock};

use crate::catalog::Catalog;
use crate::error::Result;

/// Where a [`SharedCatalog`] that follows moving references is loaded from
/// again at each refresh (a namespace with Git mounts on a branch).
#[async_trait::async_trait]
pub(crate) trait Origin: Send + Sync {
    /// This origin opened again (it may ask remotes: slow), or `None`,
    /// logged, when it cannot be.
    async fn reopened(&self) -> Option<Arc<dyn Origin>>;
    /// The catalog loaded from this origin.
    async fn load(&self) -> Catalog;
}

/// One process's current catalog: readers take cheap snapshots, writers
/// (a [`crate::SkillEditor`] given this handle) update it as soon as their
/// change lands, and [`SharedCatalog::refresh`] brings in changes made
/// elsewhere. Updates are applied one at a time, so none is lost. Cheap to
/// clone; clones share the catalog.
#[derive(Debug, Clone)]
pub struct SharedCatalog {
    current: Arc<RwLock<Arc<Catalog>>>,
    updates: Arc<tokio::sync::Mutex<()>>,
    /// What the catalog is loaded from, when a refresh opens it again
    /// ([`SharedCatalog::following`]).
    following: Option<Arc<tokio::sync::Mutex<Arc<dyn Origin>>>>,
}

impl std::fmt::Debug for dyn Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Origin")
    }
}

impl SharedCatalog {
    /// Shares `catalog`.
    pub fn new(catalog: Catalog) -> Self {
        SharedCatalog {
            current: Arc::new(RwLock::new(Arc::new(catalog))),
            updates: Arc::new(tokio::sync::Mutex::new(())),
            following: None,
        }
    }

    /// This shared catalog, refreshed by loading whole from `origin` opened
    /// again (see [`SharedCatalog::following`]).
    pub(crate) fn follow(mut self, origin: Arc<dyn Origin>) -> Self {
        self.following = Some(Arc::new(tokio::sync::Mutex::new(origin)));
        self
    }

    /// The catalog as of now. Later updates do not change a snapshot.
    pub fn snapshot(&self) -> Arc<Catalog> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Refreshes the catalog from storage (see [`Catalog::refresh`]).
    ///
    /// A catalog that follows its namespace's Git references is loaded
    /// whole from the namespace opened again, so a moved reference, an
    /// edited lock or `allowed_signers` file, and a remote gone or back
    /// are all seen. Asking the remotes happens before this refresh takes
    /// its turn with writers, so a slow remote never holds a write. When
    /// opening again fails (a lock the moved branch no longer matches, a
    /// reference the remote no longer has), the failure is logged and the
    /// catalog is refreshed at the commits it has.
    pub async fn refresh(&self) {
        let origin = match &self.following {
            Some(following) => Some(Arc::clone(&*following.lock().await)),
            None => None,
        };
        if let Some(following) = &self.following
            && let Some(origin) = origin
            && let Some(next) = origin.reopened().await
        {
            let _turn = self.updates.lock().await;
            self.replace(next.load().await);
            *following.lock().await = next;
            return;
        }
        let _turn = self.updates.lock().await;
        // An unchanged catalog stays the same snapshot, so whatever was
        // rendered from it stays too.
        if let Some(next) = self.snapshot().refresh_if_changed().await {
            self.replace(next);
        }
    }

    /// Reads one skill directory of one source again (see
    /// [`Catalog::reload_skill`]).
    pub async fn reload_skill(&self, source: &str, dir_name: &str) -> Result<()> {
        let _turn = self.updates.lock().await;
        let next = self.snapshot().reload_skill(source, dir_name).await?;
        self.replace(next);
        Ok(())
    }

    fn replace(&self, next: Catalog) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
    }
}

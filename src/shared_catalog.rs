//! A catalog shared by the readers and writers of one process.

use std::sync::{Arc, RwLock};

use crate::catalog::Catalog;
use crate::error::Result;
use crate::namespace::Namespace;

/// One process's current catalog: readers take cheap snapshots, writers
/// (a [`crate::SkillEditor`] given this handle) update it as soon as their
/// change lands, and [`SharedCatalog::refresh`] brings in changes made
/// elsewhere. Updates are applied one at a time, so none is lost. Cheap to
/// clone; clones share the catalog.
#[derive(Debug, Clone)]
pub struct SharedCatalog {
    current: Arc<RwLock<Arc<Catalog>>>,
    updates: Arc<tokio::sync::Mutex<()>>,
    /// The namespace the catalog is loaded from, when a refresh opens it
    /// again ([`SharedCatalog::following`]).
    following: Option<Arc<tokio::sync::Mutex<Namespace>>>,
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

    /// This shared catalog, loaded from `namespace`, following the
    /// references of its Git mounts: when `namespace` follows a branch, a
    /// tag or a remote's `HEAD`, each [`SharedCatalog::refresh`] opens it
    /// again ([`Namespace::reopen`], one request per such mount) and loads
    /// the catalog from the namespace opened again (its lock and
    /// signatures read again and checked as in any load). A long-running
    /// server, `sync --watch` or mount thus serves a moved branch at its
    /// next refresh.
    pub fn following(mut self, namespace: Namespace) -> Self {
        if namespace.follows_git_references() {
            self.following = Some(Arc::new(tokio::sync::Mutex::new(namespace)));
        }
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
        if let Some(following) = &self.following
            && let Some(next) = reopened(following).await
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

/// The namespace of `following` opened again, or `None` (logged) when it
/// cannot be.
async fn reopened(following: &tokio::sync::Mutex<Namespace>) -> Option<Namespace> {
    let current = following.lock().await.clone();
    let before = current.git_mounts().to_vec();
    let next = match tokio::task::spawn_blocking(move || current.reopen()).await {
        Ok(Ok(Some(next))) => next,
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the namespace could not be opened again to follow its Git references; refreshing at the commits it has");
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, "opening the namespace again failed");
            return None;
        }
    };
    for ((location, was), (_, now)) in before.iter().zip(next.git_mounts()) {
        if was != now {
            tracing::info!(%location, before = ?was, after = ?now, "a Git reference moved");
        }
    }
    Some(next)
}

//! A catalog shared by the readers and writers of one process.

use std::sync::{Arc, RwLock};

use crate::catalog::Catalog;
use crate::error::Result;

/// One process's current catalog: readers take cheap snapshots, writers
/// (a [`crate::SkillEditor`] given this handle) update it as soon as their
/// change lands, and [`SharedCatalog::refresh`] brings in changes made
/// elsewhere. Updates are applied one at a time, so none is lost. Cheap to
/// clone; clones share the catalog.
#[derive(Debug, Clone)]
pub struct SharedCatalog {
    current: Arc<RwLock<Arc<Catalog>>>,
    updates: Arc<tokio::sync::Mutex<()>>,
}

impl SharedCatalog {
    /// Shares `catalog`.
    pub fn new(catalog: Catalog) -> Self {
        SharedCatalog {
            current: Arc::new(RwLock::new(Arc::new(catalog))),
            updates: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The catalog as of now. Later updates do not change a snapshot.
    pub fn snapshot(&self) -> Arc<Catalog> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Refreshes the catalog from storage (see [`Catalog::refresh`]).
    pub async fn refresh(&self) {
        let _turn = self.updates.lock().await;
        let next = self.snapshot().refresh().await;
        self.replace(next);
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

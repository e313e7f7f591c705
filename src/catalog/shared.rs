//! Sources a catalog takes from elsewhere: loaded once per process and
//! shared with other catalogs (a [`crate::source_pool::SourcePool`]
//! installs them; the catalog knows only this interface).

use std::sync::Arc;

use super::{Catalog, SourceState};

/// Where the states of shared sources come from.
#[async_trait::async_trait]
pub(crate) trait SharedStates: Send + Sync + std::fmt::Debug {
    /// The current state of the shared source `key`, loaded by `catalog`
    /// (its source number `index`) when there is none yet.
    async fn state(&self, key: &Arc<str>, catalog: &Catalog, index: usize) -> Arc<SourceState>;
}

/// Which of a catalog's sources are shared, and where their states come
/// from.
#[derive(Debug, Clone)]
pub struct SharedSources {
    states: Arc<dyn SharedStates>,
    /// One per source, in the source list's order: the key of a shared
    /// source, `None` for one the catalog loads itself.
    keys: Vec<Option<Arc<str>>>,
}

impl SharedSources {
    /// `keys` (one per source, `None` for a source not shared), their
    /// states taken from `states`.
    pub(crate) fn new(states: Arc<dyn SharedStates>, keys: Vec<Option<Arc<str>>>) -> Self {
        SharedSources { states, keys }
    }

    /// One per source, in the source list's order: the key of a shared
    /// source, `None` for one the catalog loads itself.
    pub fn keys(&self) -> &[Option<Arc<str>>] {
        &self.keys
    }

    /// Where the states of shared sources come from, and the key of source
    /// `index`, when it is shared.
    pub(super) fn key(&self, index: usize) -> Option<(&dyn SharedStates, &Arc<str>)> {
        self.keys.get(index)?.as_ref().map(|k| (&*self.states, k))
    }
}

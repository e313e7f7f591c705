//! What a namespace gives what is built on it: the Git part of its lock,
//! a shared catalog that follows its Git references, and [`Config::open`].

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::integrity::Lock;
use crate::shared_catalog::{Origin, SharedCatalog};

use super::{Namespace, assemble};

// What a lock says of a namespace: its Git mounts' commits.
impl Lock {
    /// The lock of `namespace` and its loaded `catalog` now: every Git
    /// mount's commit and every enabled winner's digest. A Git mount whose
    /// remote could not be reached, or a skill that cannot be digested, is
    /// an error naming it.
    pub async fn of(namespace: &Namespace, catalog: &Catalog) -> Result<Lock> {
        let mut lock = Lock::git_of(namespace)?;
        lock.skills = Lock::for_catalog(catalog).await?.skills;
        Ok(lock)
    }

    /// The Git part of a lock of `namespace`.
    fn git_of(namespace: &Namespace) -> Result<Lock> {
        let mut git = Vec::new();
        for (location, commit) in namespace.git_mounts() {
            let commit = commit.clone().ok_or_else(|| {
                Error::Usage(format!(
                    "`{location}` could not be fetched, so there is no commit to lock"
                ))
            })?;
            git.push(crate::integrity::lock::LockedGit {
                location: location.to_string(),
                commit,
            });
        }
        git.sort();
        git.dedup();
        Ok(Lock {
            version: crate::integrity::lock::LOCK_VERSION,
            git,
            skills: None,
        })
    }

    /// Refuses, naming each, the Git mounts of `namespace` that resolved to
    /// another commit than this lock says, and those the lock does not
    /// hold.
    pub fn check_git(&self, namespace: &Namespace) -> Result<()> {
        let now = Lock::git_of(namespace)?;
        let mut problems = Vec::new();
        for entry in &now.git {
            match self.git.iter().find(|l| l.location == entry.location) {
                Some(locked) if locked.commit == entry.commit => {}
                Some(locked) => problems.push(format!(
                    "`{}` is at {}, the lock says {}",
                    entry.location, entry.commit, locked.commit
                )),
                None => problems.push(format!("`{}` is not in the lock", entry.location)),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "the Git sources do not match the lock: {}; run `skillstore lock` to accept them",
                problems.join("; ")
            )))
        }
    }
}

impl SharedCatalog {
    /// This shared catalog, loaded from `namespace`, following the
    /// references of its Git mounts: when `namespace` follows a branch, a
    /// tag or a remote's `HEAD`, each [`SharedCatalog::refresh`] opens it
    /// again ([`Namespace::reopen`], one request per such mount) and loads
    /// the catalog from the namespace opened again (its lock and
    /// signatures read again and checked as in any load). A long-running
    /// server, `sync --watch` or mount thus serves a moved branch at its
    /// next refresh.
    pub fn following(self, namespace: Namespace) -> Self {
        if namespace.follows_git_references() {
            self.follow(Arc::new(namespace))
        } else {
            self
        }
    }
}

#[async_trait::async_trait]
impl Origin for Namespace {
    async fn reopened(&self) -> Option<Arc<dyn Origin>> {
        reopened(self.clone())
            .await
            .map(|next| Arc::new(next) as Arc<dyn Origin>)
    }

    async fn load(&self) -> Catalog {
        Namespace::load(self).await
    }
}

/// The namespace of `following` opened again, or `None` (logged) when it
/// cannot be.
async fn reopened(current: Namespace) -> Option<Namespace> {
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

// Configuration is data; opening it is the namespace's job.
impl Config {
    /// Assembles the namespace: opens every mount (read-only), gives each
    /// writable source, and each source with a symlink policy of its own, a
    /// backend rooted at its own directory, refuses sources that alias one
    /// another with different writability, and builds the load and prompt
    /// options. Every front end calls this; it is the one place where
    /// locations become backends.
    pub fn open(&self) -> Result<Namespace> {
        assemble(self, self.writable_names()).map_err(|e| match (e, self.file()) {
            (Error::Config(m), Some(file)) if !m.starts_with(crate::config::GIVEN_MOUNT) => {
                Error::Config(format!("{}: {m}", file.display()))
            }
            (Error::Usage(m), Some(file)) if !m.starts_with(crate::config::GIVEN_MOUNT) => {
                Error::Usage(format!("{}: {m}", file.display()))
            }
            (e, _) => e,
        })
    }
}

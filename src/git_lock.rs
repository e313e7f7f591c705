//! A minimal lock of Git sources: each Git mount's location and the commit
//! it resolved to, written by `skillstore lock` and checked by `--locked`,
//! so a command refuses to run once a branch has moved.
//!
//! The file is JSON: `{"version": 1, "git": [{"location": ..., "commit":
//! ...}]}`, locations shown without credentials, sorted.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::namespace::Namespace;

/// The lock file's default name.
pub const LOCK_FILE: &str = "skillstore.lock";

/// The Git mounts of a namespace and their commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitLock {
    /// The format's version: 1.
    pub version: u32,
    /// One entry per Git mount, sorted by location.
    pub git: Vec<LockedGit>,
}

/// One Git mount, locked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedGit {
    /// The location as written (`git+URL[@REF]`), without credentials.
    pub location: String,
    /// The full commit id it resolved to.
    pub commit: String,
}

impl GitLock {
    /// The lock of `namespace` now. A Git mount whose remote could not be
    /// reached has no commit to lock: that is an error naming it.
    pub fn of(namespace: &Namespace) -> Result<GitLock> {
        let mut git = Vec::new();
        for (location, commit) in namespace.git_mounts() {
            let commit = commit.clone().ok_or_else(|| {
                Error::Usage(format!(
                    "`{location}` could not be fetched, so there is no commit to lock"
                ))
            })?;
            git.push(LockedGit {
                location: location.to_string(),
                commit,
            });
        }
        git.sort();
        git.dedup();
        Ok(GitLock { version: 1, git })
    }

    /// Parses a lock file's text.
    pub fn parse(text: &str) -> Result<GitLock> {
        let lock: GitLock =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("not a skillstore lock file: {e}")))?;
        if lock.version != 1 {
            return Err(Error::Config(format!("lock file version {} is not 1", lock.version)));
        }
        Ok(lock)
    }

    /// The file's text: pretty JSON and a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a lock serializes");
        text.push('\n');
        text
    }

    /// Refuses, naming each, the Git mounts of `namespace` that resolved to
    /// another commit than this lock says, and those the lock does not
    /// hold.
    pub fn check(&self, namespace: &Namespace) -> Result<()> {
        let now = GitLock::of(namespace)?;
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

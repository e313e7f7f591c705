//! The lock file: every enabled winner's name, source and digest, and
//! each Git mount's location and commit, so a namespace serves exactly
//! what was locked.
//!
//! The file is JSON, sorted and without timestamps so it diffs and merges
//! well:
//!
//! ```json
//! {
//!   "version": 2,
//!   "git": [{"location": "git+https://host/repo.git@main", "commit": "..."}],
//!   "skills": [{"name": "pdf", "source": "team", "digest": "sha256:...", "commit": "..."}]
//! }
//! ```
//!
//! A version 1 file (Git commits only, as written before skills were
//! locked) is still read, to be replaced: a namespace refuses to be held
//! to it, as it would pin no skill.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::config::Config;
use crate::error::{Error, Result};

/// The lock file's default name.
pub const LOCK_FILE: &str = "skillstore.lock";

/// The version this build writes.
pub const LOCK_VERSION: u32 = 2;

/// A lock: Git commits and skill digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The format's version: 2 (1 is read, for Git commits only).
    pub version: u32,
    /// One entry per Git mount, sorted by location.
    pub git: Vec<LockedGit>,
    /// One entry per enabled winner, sorted by name (absent in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<LockedSkill>>,
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

/// One skill, locked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSkill {
    /// The skill's name.
    pub name: String,
    /// The source it won in.
    pub source: String,
    /// Its skill digest ([`crate::integrity::digest`]).
    pub digest: String,
    /// The Git commit its source is read at, for a source in a Git mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Lock {
    /// A lock of `catalog`'s enabled winners alone (no Git mount). A skill
    /// that cannot be digested is an error naming it.
    pub async fn for_catalog(catalog: &Catalog) -> Result<Lock> {
        let digested = catalog.clone().with_digests().await;
        let mut skills = Vec::new();
        for skill in digested.enabled() {
            let digest = match &skill.digest {
                Some(digest) => digest.to_string(),
                None => {
                    let e = catalog.skill_digest(skill.name()).await.err();
                    let why = e.map_or_else(|| "no digest".to_owned(), |e| e.to_string());
                    return Err(Error::Usage(format!("cannot lock `{}`: {why}", skill.name())));
                }
            };
            skills.push(LockedSkill {
                name: skill.name().to_owned(),
                source: skill.source.clone(),
                digest,
                commit: skill.commit.as_deref().map(str::to_owned),
            });
        }
        skills.sort();
        Ok(Lock {
            version: LOCK_VERSION,
            git: Vec::new(),
            skills: Some(skills),
        })
    }

    /// Parses a lock file's text: version 2, or version 1 (Git commits
    /// only). Anything else is refused, naming the version.
    pub fn parse(text: &str) -> Result<Lock> {
        #[derive(Deserialize)]
        struct Head {
            version: u32,
        }
        let head: Head =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("not a skillstore lock file: {e}")))?;
        match head.version {
            1 | LOCK_VERSION => {}
            other => {
                return Err(Error::Config(format!(
                    "lock file version {other} is not one this build reads (1 or {LOCK_VERSION})"
                )));
            }
        }
        let lock: Lock =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("not a skillstore lock file: {e}")))?;
        if lock.version == 1 && lock.skills.is_some() {
            return Err(Error::Config("a version 1 lock file holds no `skills`".into()));
        }
        if lock.version == LOCK_VERSION && lock.skills.is_none() {
            return Err(Error::Config(format!(
                "a version {LOCK_VERSION} lock file holds `skills`"
            )));
        }
        // A merge that kept both sides' lines names a skill twice: which
        // digest holds is not for the reader to guess.
        let mut names: Vec<&str> = lock.skills.iter().flatten().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Config(format!(
                "the lock file names the skill `{}` more than once",
                twice[0].escape_debug()
            )));
        }
        Ok(lock)
    }

    /// The file's text: pretty JSON and a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a lock serializes");
        text.push('\n');
        text
    }

    /// The locked skills by name, when this lock pins skills (version 2).
    pub fn skills_by_name(&self) -> Option<BTreeMap<&str, &LockedSkill>> {
        self.skills
            .as_ref()
            .map(|skills| skills.iter().map(|s| (s.name.as_str(), s)).collect())
    }
}

/// What [`write_lock`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The lock the file held before, when it held one this build reads.
    pub previous: Option<Lock>,
    /// True when a file was there before (a lock this build reads or not).
    pub replaced: bool,
    /// True when the file was written (false: it already held this lock).
    pub changed: bool,
}

/// Writes `lock` to `path` as a new regular file put in place by a rename,
/// so a reader sees the old lock or the new one, never part of one. Not
/// written when `path` already holds exactly this lock. Refused, before
/// anything is written: a `path` that is a symbolic link (dangling or not),
/// not a regular file, over the lock size bound, or a file that is not a
/// skillstore lock of any version (another file is never overwritten).
pub fn write_lock(path: &Path, lock: &Lock) -> Result<Written> {
    let shown = path.display();
    let before = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(Error::Usage(format!(
                "{shown} is a symbolic link; a lock is written as a regular file: remove the link or name the file itself"
            )));
        }
        Ok(_) => Some(crate::location::read_local_text(path, MAX_LOCK_BYTES, "lock file")?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::Usage(format!("cannot look at {shown}: {e}"))),
    };
    if let Some(text) = &before
        && !is_any_lock(text)
    {
        return Err(Error::Usage(format!(
            "{shown} exists and is not a skillstore lock; remove it or write the lock elsewhere"
        )));
    }
    let text = lock.to_json();
    let previous = before.as_deref().and_then(|t| Lock::parse(t).ok());
    let changed = before.as_deref() != Some(text.as_str());
    if changed {
        replace_file(path, text.as_bytes()).map_err(|e| Error::Usage(format!("cannot write {shown}: {e}")))?;
    }
    Ok(Written {
        previous,
        replaced: before.is_some(),
        changed,
    })
}

/// The largest lock file read.
pub(crate) const MAX_LOCK_BYTES: u64 = 16 * 1024 * 1024;

/// True for the text of a skillstore lock of any version: a JSON object
/// with a numeric `version` and a `git` list (what every version has).
fn is_any_lock(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v["version"].is_u64() && v["git"].is_array())
}

/// `bytes` in a new file beside `path` (created exclusively, never through
/// a link), synced, then renamed over `path`.
fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    for attempt in 0u32..16 {
        let temp = dir.join(format!(".{name}.{}-{attempt}.tmp", std::process::id()));
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&temp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        return written;
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free temporary name beside it",
    ))
}

/// The lock file a configuration goes with, as `cargo` keeps `Cargo.lock`
/// beside `Cargo.toml`: its `lock:` (relative to the configuration's
/// directory), else [`LOCK_FILE`] beside the file it was loaded from, else
/// [`LOCK_FILE`] in the working directory (a configuration made of flags
/// alone).
pub fn lock_path(config: &Config) -> PathBuf {
    if let Some(named) = &config.lock {
        let named = Path::new(named);
        return if named.is_relative() {
            config.base().join(named)
        } else {
            named.to_path_buf()
        };
    }
    match config.file() {
        Some(_) => config.base().join(LOCK_FILE),
        None => PathBuf::from(LOCK_FILE),
    }
}

/// One difference between a lock and the one it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockChange {
    /// A skill the previous lock did not hold.
    Added(LockedSkill),
    /// A skill the previous lock held at another digest or in another
    /// source (or Git commit).
    Updated {
        /// The previous lock's entry.
        from: LockedSkill,
        /// The new entry.
        to: LockedSkill,
    },
    /// A skill the new lock no longer holds.
    Removed(LockedSkill),
    /// A Git mount the previous lock did not hold.
    GitAdded(LockedGit),
    /// A Git mount locked at another commit.
    GitUpdated {
        /// The previous lock's entry.
        from: LockedGit,
        /// The new entry.
        to: LockedGit,
    },
    /// A Git mount the new lock no longer holds.
    GitRemoved(LockedGit),
}

impl fmt::Display for LockChange {
    /// One line: `added NAME (SOURCE) DIGEST`, `updated NAME (SOURCE)
    /// DIGEST -> DIGEST` (`-> (SOURCE) DIGEST` when the source changed),
    /// `removed NAME (SOURCE) DIGEST`, and the
    /// same words with `git LOCATION COMMIT` for a Git mount.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn skill(s: &LockedSkill) -> String {
            format!("({}) {}", s.source, s.digest)
        }
        match self {
            LockChange::Added(s) => write!(f, "added {} {}", s.name, skill(s)),
            LockChange::Updated { from, to } if from.source == to.source => {
                write!(f, "updated {} {} -> {}", to.name, skill(from), to.digest)
            }
            LockChange::Updated { from, to } => {
                write!(f, "updated {} {} -> {}", to.name, skill(from), skill(to))
            }
            LockChange::Removed(s) => write!(f, "removed {} {}", s.name, skill(s)),
            LockChange::GitAdded(g) => write!(f, "added git {} {}", g.location, g.commit),
            LockChange::GitUpdated { from, to } => {
                write!(f, "updated git {} {} -> {}", to.location, from.commit, to.commit)
            }
            LockChange::GitRemoved(g) => write!(f, "removed git {} {}", g.location, g.commit),
        }
    }
}

impl Lock {
    /// What changed since `previous` (none: everything is added): Git
    /// mounts by location, then skills by name, each in sorted order. An
    /// unchanged entry yields nothing.
    pub fn changes_since(&self, previous: Option<&Lock>) -> Vec<LockChange> {
        let mut changes = Vec::new();
        let old_git: BTreeMap<&str, &LockedGit> = previous
            .map(|p| p.git.iter().map(|g| (g.location.as_str(), g)).collect())
            .unwrap_or_default();
        let new_git: BTreeMap<&str, &LockedGit> = self.git.iter().map(|g| (g.location.as_str(), g)).collect();
        diff(&old_git, &new_git, &mut changes, |change| match change {
            Diff::Added(g) => LockChange::GitAdded(g.clone()),
            Diff::Updated(from, to) => LockChange::GitUpdated {
                from: from.clone(),
                to: to.clone(),
            },
            Diff::Removed(g) => LockChange::GitRemoved(g.clone()),
        });
        let old_skills = previous.and_then(Lock::skills_by_name).unwrap_or_default();
        let new_skills = self.skills_by_name().unwrap_or_default();
        diff(&old_skills, &new_skills, &mut changes, |change| match change {
            Diff::Added(s) => LockChange::Added(s.clone()),
            Diff::Updated(from, to) => LockChange::Updated {
                from: from.clone(),
                to: to.clone(),
            },
            Diff::Removed(s) => LockChange::Removed(s.clone()),
        });
        changes
    }
}

enum Diff<'a, T> {
    Added(&'a T),
    Updated(&'a T, &'a T),
    Removed(&'a T),
}

fn diff<'a, T: PartialEq>(
    old: &BTreeMap<&str, &'a T>,
    new: &BTreeMap<&str, &'a T>,
    out: &mut Vec<LockChange>,
    change: impl Fn(Diff<'a, T>) -> LockChange,
) {
    let mut keys: Vec<&str> = old.keys().chain(new.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        match (old.get(key), new.get(key)) {
            (None, Some(n)) => out.push(change(Diff::Added(n))),
            (Some(o), None) => out.push(change(Diff::Removed(o))),
            (Some(o), Some(n)) if o != n => out.push(change(Diff::Updated(o, n))),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_one_is_read_and_others_refused() {
        let v1 = Lock::parse(r#"{"version": 1, "git": [{"location": "git+file:///r", "commit": "abc"}]}"#).unwrap();
        assert_eq!(v1.skills, None);
        assert_eq!(v1.git[0].commit, "abc");
        let err = Lock::parse(r#"{"version": 3, "git": []}"#).unwrap_err().to_string();
        assert!(err.contains("version 3"), "{err}");
        assert!(Lock::parse(r#"{"version": 2, "git": []}"#).is_err());
        let v2 = Lock::parse(
            r#"{"version": 2, "git": [], "skills": [{"name": "pdf", "source": "team", "digest": "sha256:00"}]}"#,
        )
        .unwrap();
        assert_eq!(v2.skills_by_name().unwrap()["pdf"].source, "team");
        assert_eq!(Lock::parse(&v2.to_json()).unwrap(), v2);
        let twice = Lock::parse(
            r#"{"version": 2, "git": [], "skills": [{"name": "pdf", "source": "team", "digest": "sha256:00"}, {"name": "pdf", "source": "team", "digest": "sha256:11"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(twice.contains("`pdf` more than once"), "{twice}");
    }

    #[test]
    fn changes_name_what_was_added_updated_and_removed() {
        let skill = |name: &str, digest: &str| LockedSkill {
            name: name.into(),
            source: "team".into(),
            digest: digest.into(),
            commit: None,
        };
        let lock = |skills: Vec<LockedSkill>| Lock {
            version: LOCK_VERSION,
            git: Vec::new(),
            skills: Some(skills),
        };
        let old = lock(vec![
            skill("a", "sha256:1"),
            skill("b", "sha256:2"),
            skill("c", "sha256:3"),
        ]);
        let new = lock(vec![
            skill("a", "sha256:1"),
            skill("b", "sha256:9"),
            skill("d", "sha256:4"),
        ]);
        let lines: Vec<String> = new.changes_since(Some(&old)).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "updated b (team) sha256:2 -> sha256:9",
                "removed c (team) sha256:3",
                "added d (team) sha256:4"
            ]
        );
        assert!(new.changes_since(Some(&new)).is_empty());
        assert_eq!(new.changes_since(None).len(), 3);
    }
}

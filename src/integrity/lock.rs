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
//! locked) is still read: it pins the Git mounts and no skill.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
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
}

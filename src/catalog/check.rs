//! The check a catalog runs on its winners after every load, refresh and
//! reload: an interface the namespace installs (the integrity policy: a
//! lock, signatures), so the catalog needs to know nothing of what is
//! checked, and the check changes nothing in the catalog itself.

use std::collections::HashMap;
use std::sync::Arc;

use skillstore_backends::{VPath, Version};

use super::Catalog;
use crate::diagnostic::Diagnostic;

/// What a check found for one winner that passed it.
#[derive(Debug, Clone, Default)]
pub struct Passed {
    /// Its digest, when the check computed one.
    pub digest: Option<String>,
    /// Who signed it, when its signature verified.
    pub signer: Option<String>,
    /// Each file the digest was computed from, the version it was read
    /// at and the SHA-256 of the bytes read, when the check computed the
    /// digest: the catalog holds every later read to these.
    pub files: Option<Vec<(VPath, Version, String)>>,
    /// What the catalog is to show of it, parsed from the SKILL.md bytes
    /// the digest was computed from, when that differs from what the load
    /// took (an index or cache entry that does not describe the file).
    pub shown: Option<Arc<crate::skill::SkillMetadata>>,
}

/// What a check decided for one winner: served with what it found, or
/// withheld with the diagnostic saying why (none for a winner withheld
/// silently, such as a disabled skill a lock does not hold).
pub type Verdict = std::result::Result<Passed, Option<Diagnostic>>;

/// A check of every winner, installed in [`super::LoadOptions::integrity`].
#[async_trait::async_trait]
pub trait WinnerCheck: Send + Sync + std::fmt::Debug {
    /// True when the check has anything to decide; an inactive check is
    /// not run.
    fn is_active(&self) -> bool;

    /// One verdict per winner of `catalog`, in the order of
    /// [`Catalog::skills`]. The check may read through the catalog
    /// (listings, digests, files); the catalog applies the verdicts.
    async fn verdicts(self: Arc<Self>, catalog: Arc<Catalog>) -> Vec<Verdict>;
}

impl Catalog {
    /// This catalog after the options' check: the winners that fail it
    /// withheld, each with its diagnostic; those that pass carry what it
    /// found, and their reads are held to the files it read.
    pub(super) async fn checked(self) -> Catalog {
        let check = match self.options.integrity.clone() {
            Some(check) if check.is_active() => check,
            _ => return self,
        };
        let catalog = Arc::new(self);
        let verdicts = check.verdicts(Arc::clone(&catalog)).await;
        // The check has finished and let every handle of the catalog go.
        let mut catalog = Arc::try_unwrap(catalog).unwrap_or_else(|shared| (*shared).clone());
        assert_eq!(verdicts.len(), catalog.skills.len(), "one verdict per winner");
        let mut passed = HashMap::with_capacity(verdicts.len());
        let mut refused = Vec::new();
        for (skill, verdict) in catalog.skills.iter().zip(verdicts) {
            match verdict {
                Ok(found) => {
                    passed.insert(skill.name().to_owned(), found);
                }
                Err(diagnostic) => refused.push((skill.name().to_owned(), diagnostic)),
            }
        }
        catalog.set_checked(passed);
        if refused.is_empty() {
            catalog
        } else {
            catalog.withhold(refused)
        }
    }
}

//! What a namespace checks before it serves a skill: its digest against a
//! lock. The check runs inside every load and refresh of a catalog
//! ([`crate::Catalog::load`], [`crate::Catalog::refresh`],
//! [`crate::Catalog::reload_skill`]), so every front end (command, server,
//! sync, mount, Python) serves only what passed it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;

use crate::catalog::Catalog;
use crate::diagnostic::{Diagnostic, DiagnosticKind, Severity};
use crate::integrity::lock::Lock;

/// How many skills are digested at once.
const PARALLEL: usize = 16;

/// The checks a namespace applies to every winner before serving it.
#[derive(Debug, Clone, Default)]
pub struct Integrity {
    /// The lock the winners must match (a version 1 lock pins no skill).
    pub lock: Option<Arc<Lock>>,
}

impl Integrity {
    /// True when some check needs a skill's digest.
    pub fn is_active(&self) -> bool {
        self.lock.as_ref().is_some_and(|l| l.skills.is_some())
    }

    /// `catalog` without the winners that fail a check, each replaced by an
    /// error diagnostic saying why (`not_locked`, `lock_mismatch`).
    pub(crate) async fn enforce(&self, catalog: Catalog) -> Catalog {
        let Some(locked) = self.lock.as_ref().and_then(|l| l.skills_by_name()) else {
            return catalog;
        };
        let skills: Vec<(String, String, skillstore_backends::VPath)> = catalog
            .skills()
            .iter()
            .map(|s| (s.name().to_owned(), s.source.clone(), s.path.clone()))
            .collect();
        let (catalog_ref, locked_ref) = (&catalog, &locked);
        let checks = futures::stream::iter(skills)
            .map(move |(name, source, path)| async move {
                let refuse = |kind, message: String| {
                    let d = Diagnostic::new(Severity::Error, kind, Some(&source), Some(&path), message);
                    Err((name.clone(), d))
                };
                let Some(entry) = locked_ref.get(name.as_str()) else {
                    return refuse(
                        DiagnosticKind::NotLocked,
                        "not in the lock file, so it is not served; run `skillstore lock` to accept it".into(),
                    );
                };
                match catalog_ref.skill_digest(&name).await {
                    Ok(found) if found.digest == entry.digest => Ok((name.clone(), found.digest)),
                    Ok(found) => refuse(
                        DiagnosticKind::LockMismatch,
                        format!(
                            "its digest is {}, the lock says {}; it is not served",
                            found.digest, entry.digest
                        ),
                    ),
                    Err(e) => refuse(
                        DiagnosticKind::LockMismatch,
                        format!("its digest cannot be computed ({e}); it is not served"),
                    ),
                }
            })
            .buffered(PARALLEL)
            .collect::<Vec<Result<(String, String), (String, Diagnostic)>>>()
            .await;
        let mut passed = HashMap::new();
        let mut refused = Vec::new();
        for check in checks {
            match check {
                Ok((name, digest)) => {
                    passed.insert(name, digest);
                }
                Err(no) => refused.push(no),
            }
        }
        let mut catalog = catalog;
        catalog.set_digests(&passed);
        if refused.is_empty() {
            catalog
        } else {
            catalog.withhold(refused)
        }
    }
}

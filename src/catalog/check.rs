//! The check a catalog runs on its winners after every load, refresh and
//! reload: an interface the namespace installs (the integrity policy: a
//! lock, signatures), so the catalog needs to know nothing of what is
//! checked, and the check changes nothing in the catalog itself.

use std::collections::HashMap;
use std::sync::Arc;

use super::merge::add_claims;
use super::read::served;
use super::types::{Catalog, NameIndex, Passed};
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::integrity::pin::Pins;
use crate::skill::Severity;

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
impl Catalog {
    /// This catalog without the named winners, each with its diagnostic
    /// when it has one: they are neither listed nor read, and what they
    /// shadowed stays shadowed (a withheld skill is never replaced by a
    /// lower layer's).
    pub(super) fn withhold(mut self, refused: Vec<(String, Option<Diagnostic>)>) -> Catalog {
        let names: std::collections::HashSet<String> = refused.iter().map(|(n, _)| n.clone()).collect();
        self.skills.retain(|s| !names.contains(s.name()));
        let mut index = NameIndex::with_capacity(self.skills.len());
        for at in 0..self.skills.len() {
            index.insert(&self.skills, at);
        }
        self.index = index;
        self.diagnostics.extend(refused.into_iter().filter_map(|(_, d)| d));
        self
    }

    /// The diagnostics of winners withheld by an integrity check (a lock):
    /// a command that serves this catalog exits 3 when there is one.
    pub fn withheld(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.kind.is_withheld())
    }

    /// Sets the digests and signers a check found, by winner name, and
    /// holds every read of a checked skill's files to the versions its
    /// digest was computed from ([`crate::integrity::pin`]).
    fn set_checked(&mut self, mut checked: HashMap<String, Passed>) {
        let files = checked.values().filter_map(|c| c.files.as_ref()).map(Vec::len).sum();
        let mut pins = Pins::with_capacity(checked.len(), files);
        let mut notes = Vec::new();
        for skill in &mut self.skills {
            if let Some(found) = checked.remove(skill.name()) {
                skill.digest = found.digest.as_deref().map(Arc::from);
                skill.signer = found.signer.as_deref().map(Arc::from);
                if let Some(files) = found.files {
                    pins.pin(skill.dir(), files);
                }
                if let Some(shown) = found.shown {
                    notes.push(Diagnostic::new(
                        Severity::Warning,
                        DiagnosticKind::IndexIgnored,
                        Some(&skill.source),
                        Some(&skill.path),
                        "an index or cache entry does not describe this SKILL.md; what is shown is read from the checked file",
                    ));
                    skill.metadata = shown;
                }
            }
        }
        self.diagnostics.extend(notes);
        add_claims(&mut pins, &self.states, &self.skills, &Pins::new());
        if !pins.is_empty() || pins.claims().next().is_some() {
            let pins = Arc::new(
                pins.forgetting_in(Arc::clone(&self.options.digests))
                    .checked_under(self.options.read_limit),
            );
            self.backend = served(&self.storage, Arc::clone(&pins));
            self.pins = pins;
        }
    }
}

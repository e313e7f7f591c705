//! Skill digests of winners, their listings batched and each file hashed
//! once per version.

use futures::StreamExt;
use std::sync::Arc;

use skillstore_backends::{ErrorKind, VPath};

use super::types::Catalog;
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::error::Result;
use crate::integrity::SkillDigest;
use crate::skill::Severity;
use crate::skill_files::{FileLimits, SkillFiles};

/// How many skills are digested at once.
pub(super) const DIGEST_PARALLEL: usize = 16;

impl Catalog {
    /// The skill digest of the winner `name` ([`crate::integrity::digest`]):
    /// its files listed as a confined read serves them, each hashed once
    /// per version (kept in [`LoadOptions::digests`]). Computed only when
    /// asked for.
    pub async fn skill_digest(&self, name: &str) -> Result<SkillDigest> {
        let listed = self.skill_files(name, FileLimits::default()).await?;
        self.options.digests.skill_digest(self.backend.as_ref(), &listed).await
    }

    /// [`Catalog::skill_digest`] of each of `names`, in order, their
    /// listings batched ([`crate::skill_files::list_many`]): what a check
    /// of thousands of skills uses.
    pub async fn skill_digests(&self, names: &[&str]) -> Vec<Result<SkillDigest>> {
        self.listed_digests(names)
            .await
            .into_iter()
            .map(|found| found.map(|(_, digest)| digest))
            .collect()
    }

    /// [`Catalog::skill_digests`], each digest with the listing it was
    /// computed over (the files of both in the same order).
    pub(crate) async fn listed_digests(&self, names: &[&str]) -> Vec<Result<(SkillFiles, SkillDigest)>> {
        let limits = FileLimits::default();
        let dirs: Vec<Result<VPath>> = names.iter().map(|n| self.skill(n).map(|s| s.dir())).collect();
        let found: Vec<VPath> = dirs.iter().filter_map(|d| d.as_ref().ok().cloned()).collect();
        let mut listed = crate::skill_files::list_many(self.backend.as_ref(), &found, self.options.read_limit, limits)
            .await
            .into_iter();
        let listings: Vec<Result<SkillFiles>> = dirs
            .into_iter()
            .map(|dir| {
                let dir = dir?;
                let listed = listed.next().expect("one listing per directory")?;
                self.unpinned_left_out(&dir, listed, &limits)
            })
            .collect();
        futures::stream::iter(listings.into_iter().map(|listed| self.digest_of(listed)))
            .buffered(DIGEST_PARALLEL)
            .collect()
            .await
    }

    pub(super) async fn digest_of(&self, listed: Result<SkillFiles>) -> Result<(SkillFiles, SkillDigest)> {
        let listed = listed?;
        let digests = &self.options.digests;
        let digest = digests.skill_digest(self.backend.as_ref(), &listed).await?;
        // A skill file hashed before (not read again) still holds the
        // entry the catalog showed it from to what its bytes were.
        for (file, digested) in listed.files.iter().zip(&digest.files) {
            if crate::skill::is_skill_file_name(&digested.relative)
                && let Some(version) = &digested.version
                && let Some(head) = digests.head(file.path.as_str(), version)
            {
                self.pins.check_claim(&file.path, version, &head);
            }
        }
        Ok((listed, digest))
    }

    /// This catalog with every winner's [`Skill::digest`] filled in (a
    /// skill that cannot be digested keeps none, with a warning). Files
    /// hashed before at the same version are not read again.
    pub async fn with_digests(mut self) -> Catalog {
        let names: Vec<String> = self
            .skills
            .iter()
            .filter(|s| s.digest.is_none())
            .map(|s| s.name().to_owned())
            .collect();
        let mut digests = self
            .skill_digests(&names.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .into_iter();
        let found: Vec<Option<Result<String>>> = self
            .skills
            .iter()
            .map(|s| {
                s.digest
                    .is_none()
                    .then(|| digests.next().expect("one digest per name").map(|d| d.digest))
            })
            .collect();
        let mut notes = Vec::new();
        for (skill, digest) in self.skills.iter_mut().zip(found) {
            let Some(digest) = digest else { continue };
            match digest {
                Ok(digest) => skill.digest = Some(Arc::from(digest)),
                Err(e) => notes.push(Diagnostic::new(
                    Severity::Warning,
                    match e.kind() {
                        crate::error::ErrorKind::Storage(kind) => DiagnosticKind::Storage(kind),
                        _ => DiagnosticKind::Storage(ErrorKind::Other),
                    },
                    Some(&skill.source),
                    Some(&skill.path),
                    format!("no digest: {e}"),
                )),
            }
        }
        self.diagnostics.extend(notes);
        self
    }
}

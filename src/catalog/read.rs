//! Reads of a winner's files (levels 2 and 3), confined to its directory
//! and held to what a check read; skills withdrawn when their files are
//! found changed.

use std::sync::Arc;

use bytes::Bytes;
use skillstore_backends::{ErrorKind, ReadOptions, SkillBackend, VPath};

use super::types::{Catalog, Skill};
use crate::error::{Error, Result};
use crate::integrity::pin::{PinnedBackend, Pins};
use crate::skill_files::{FileLimits, LeftOutKind, SkillFiles};

/// A file of `checked` (a checked skill's files, below `dir`) that
/// `listed` does not hold although its bounds would have listed it.
pub(super) fn lost_file<'a>(
    listed: &SkillFiles,
    dir: &VPath,
    checked: &'a [VPath],
    limits: &FileLimits,
) -> Option<&'a VPath> {
    if listed.truncated {
        return None;
    }
    let present: std::collections::HashSet<&VPath> = listed.files.iter().map(|f| &f.path).collect();
    let base = dir.segments().count() + 1;
    checked
        .iter()
        .find(|p| !present.contains(p) && p.segments().count().saturating_sub(base) <= limits.max_depth)
}

/// What a catalog over `storage` serves its skills through.
pub(super) fn served(storage: &Arc<dyn SkillBackend>, pins: Arc<Pins>) -> Arc<dyn SkillBackend> {
    Arc::new(PinnedBackend::new(Arc::clone(storage), pins))
}

/// The path of `relative` inside the skill's directory, or why not.
pub(super) fn resolve_inside(skill: &Skill, relative: &str) -> Result<VPath> {
    let refuse = |reason: String| Error::InvalidSkillPath {
        skill: skill.metadata.name.clone(),
        path: relative.escape_debug().to_string(),
        reason,
    };
    if relative.starts_with('/') {
        return Err(refuse("expected a path relative to the skill's directory".into()));
    }
    let path = skill.dir().join(relative).map_err(|e| refuse(e.to_string()))?;
    debug_assert!(path.starts_with(&skill.dir()));
    Ok(path)
}

impl Catalog {
    /// Level 2: the whole SKILL.md of the winning skill, read through the
    /// source that won, under the read limit.
    pub async fn read_skill(&self, name: &str) -> Result<Bytes> {
        let skill = self.skill(name)?;
        let options = ReadOptions::with_limit(self.options.read_limit).confined(skill.dir().segments().count());
        Ok(self.backend.read(&skill.path, options).await?.data)
    }

    /// A read of the file at `path` as a front end that names files by
    /// virtual path serves a checked namespace: `path` must lie in the
    /// directory of a served skill ([`Catalog::enabled`]), and is read
    /// confined to that directory through [`Catalog::backend`], under
    /// `limit` and the read limit. Any other path is not found, so no byte of a withheld,
    /// shadowed, disabled or withdrawn skill, and nothing outside the
    /// skills, is read this way.
    pub async fn read_served_path(&self, path: &VPath, limit: u64) -> Result<skillstore_backends::Blob> {
        let text = path.as_str();
        let owner = self.enabled().find(|skill| {
            let dir = skill.path.as_str().rsplit_once('/').map_or("", |(dir, _)| dir);
            text.len() > dir.len() + 1 && text.starts_with(dir) && text.as_bytes()[dir.len()] == b'/'
        });
        let Some(skill) = owner else {
            return Err(skillstore_backends::Error::at(ErrorKind::NotFound, path)
                .with_public_detail("not a file of a skill this catalog serves")
                .into());
        };
        let options =
            ReadOptions::with_limit(limit.min(self.options.read_limit)).confined(skill.dir().segments().count());
        Ok(self.backend.read(path, options).await?)
    }

    /// Level 3: a file inside the skill's directory, by a relative path
    /// such as `references/forms.md`. `..`, `.`, empty segments, absolute
    /// paths and anything else that could leave the directory are refused
    /// before any read.
    pub async fn read_file(&self, name: &str, relative: &str) -> Result<Bytes> {
        let skill = self.skill(name)?;
        let path = resolve_inside(skill, relative)?;
        // Confined: once links resolve, the read must still be inside the
        // skill's directory.
        let options = ReadOptions::with_limit(self.options.read_limit).confined(skill.dir().segments().count());
        Ok(self.backend.read(&path, options).await?.data)
    }

    /// The files of the skill `name`: exactly those a confined read of it
    /// ([`Catalog::read_file`]) serves, each with its size and version, and
    /// what was left out with why (see [`crate::skill_files`]). This is the
    /// one listing of a skill's files: manifests, digests and listings
    /// start here, and read the files with [`SkillFiles::read_options`].
    pub async fn skill_files(&self, name: &str, limits: FileLimits) -> Result<SkillFiles> {
        let skill = self.skill(name)?;
        let dir = skill.dir();
        let listed = crate::skill_files::list(self.backend.as_ref(), &dir, self.options.read_limit, limits).await?;
        self.unpinned_left_out(&dir, listed, &limits)
    }

    /// `listed` without the files added since the skill at `dir` was
    /// checked, when it is pinned: those are not files of it. A file
    /// checked that is gone, or no longer a file a confined read serves,
    /// refuses the listing: the skill cannot be handed on whole.
    ///
    /// A checked file listed at another version than its check's, or not
    /// listed at all, withdraws the skill ([`crate::integrity::pin`]): no
    /// file of it is read any more until a refresh checks it again.
    pub(super) fn unpinned_left_out(
        &self,
        dir: &VPath,
        mut listed: SkillFiles,
        limits: &FileLimits,
    ) -> Result<SkillFiles> {
        let Some(checked) = self.pins.files_of(dir) else {
            return Ok(listed);
        };
        let changed = |path: &VPath| {
            skillstore_backends::Error::at(ErrorKind::VersionConflict, path)
                .with_public_detail(crate::integrity::pin::CHANGED)
                .into()
        };
        if let Some(refused) = self.pins.withdrawn_refusal(dir) {
            return Err(refused.into());
        }
        listed.leave_out_where(|f| !self.pins.admits(&f.path), LeftOutKind::Changed, limits);
        for file in &listed.files {
            if let Some(version) = &file.version
                && self.pins.withdraw_if_changed(&file.path, version)
            {
                return Err(changed(&file.path));
            }
        }
        if let Some(lost) = lost_file(&listed, dir, checked, limits) {
            self.pins.withdraw(dir, lost);
            return Err(changed(lost));
        }
        Ok(listed)
    }

    /// True when the winner `name` passed a lock or signature check and
    /// has since been withdrawn: some read or listing found one of its
    /// checked files changed or gone, so none of its files is served until
    /// a refresh checks it again. A front end that lists skills from an
    /// earlier rendering leaves such a skill out.
    pub fn is_withdrawn(&self, name: &str) -> bool {
        self.withdrawn_refusal(name).is_some()
    }

    /// True when `path` lies in a checked skill withdrawn since its check
    /// ([`Catalog::is_withdrawn`]): a front end holding bytes of that skill
    /// read earlier (an open file) serves them no more.
    pub fn is_withdrawn_path(&self, path: &VPath) -> bool {
        self.pins.is_withdrawn_path(path)
    }

    /// Why the winner `name` is not served when it is withdrawn
    /// ([`Catalog::is_withdrawn`]): changed since its check, naming the
    /// file found changed or gone. `None` otherwise.
    pub fn withdrawn_refusal(&self, name: &str) -> Option<Error> {
        if self.pins.withdrawn_count() == 0 {
            return None;
        }
        let skill = self.get(name)?;
        self.pins.withdrawn_refusal(&skill.dir()).map(Error::from)
    }

    /// Makes sure the checked winner `name` is still whole before a front
    /// end answers for it from what it rendered earlier: its files are
    /// listed again (no file is read) and the skill is withdrawn, and this
    /// fails as changed, when one checked file is gone or listed at
    /// another version. Does nothing for a skill no check digested.
    pub async fn confirm_whole(&self, name: &str) -> Result<()> {
        let skill = self.skill(name)?;
        if self.pins.files_of(&skill.dir()).is_none() {
            return Ok(());
        }
        self.skill_files(name, FileLimits::default()).await.map(|_| ())
    }

    /// The number of skills this catalog has withdrawn so far (see
    /// [`Catalog::is_withdrawn`]). It only grows: a front end that renders
    /// listings from a catalog once renders them again when it moves.
    pub fn withdrawn_count(&self) -> usize {
        self.pins.withdrawn_count()
    }

    /// The files of the winner `name` that a lock or signature check read
    /// and digested, when one did: a front end that hands the skill on
    /// whole (a sync, an archive) serves it only when each of them reads
    /// at its checked version, and withholds it otherwise. `None` for a
    /// skill no check digested (or no winner of that name).
    pub fn checked_files(&self, name: &str) -> Option<&[VPath]> {
        let skill = self.get(name)?;
        self.pins.files_of(&skill.dir())
    }

    /// The relative paths of [`Catalog::skill_files`], at most `max_depth`
    /// directories deep and `max_files` in all; the second value is true
    /// when the listing was cut short.
    pub async fn list_files(&self, name: &str, max_depth: usize, max_files: usize) -> Result<(Vec<String>, bool)> {
        let files = self
            .skill_files(
                name,
                FileLimits {
                    max_depth,
                    max_files,
                    ..FileLimits::default()
                },
            )
            .await?;
        Ok((files.relatives(), files.truncated))
    }
}

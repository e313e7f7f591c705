//! Installing a skill archive through the editor, as one recorded change.

use skillstore_backends::ErrorKind;

use super::{SkillEditor, Step};
use crate::archive::{InstallOptions, SkillArchive};
use crate::catalog::SKILL_FILE;
use crate::edit::Change;
use crate::edit::history::Action;
use crate::error::{Error, Result};

impl SkillEditor {
    /// Installs the skill of `archive` into the source, as one
    /// [`Action::Install`] history entry.
    ///
    /// Every path of the archive obeys the rule a single write obeys:
    /// SKILL.md, or a supporting file (no hidden segment, bounded depth); an
    /// archive holding any other path (`.git/config`, `.history/x`) is
    /// refused whole with `invalid_path`.
    /// SKILL.md is validated strictly and each file goes through the content
    /// check before anything is written; SKILL.md is written last, so the
    /// skill appears only once complete. Each write is conditional on the
    /// version found, so a concurrent writer makes the install fail with
    /// `version_conflict` or `already_exists` rather than be overwritten.
    ///
    /// An install lands whole or not at all: when a write (or its history
    /// record) fails part-way, the files already written are put back as
    /// they were and no history entry is written.
    ///
    /// When the source already has the skill, the install fails with
    /// `already_exists` unless [`InstallOptions::replace`] is set; then the
    /// skill's files become exactly the archive's: files the archive lacks
    /// are removed (their content kept in the history), files with the same
    /// bytes are left alone.
    pub async fn install(&self, archive: &SkillArchive, options: InstallOptions) -> Result<Change> {
        self.install_as(archive, options, Action::Install).await
    }

    /// Copies the files of `archive` (another source's winner, read as a
    /// confined read serves it) into this source as a new skill, to be
    /// changed here: one [`Action::Override`] history entry, through every
    /// check [`SkillEditor::install`] applies. `already_exists` when the
    /// source already has the skill.
    pub async fn override_with(&self, archive: &SkillArchive) -> Result<Change> {
        self.install_as(archive, InstallOptions::default(), Action::Override)
            .await
    }

    /// True when the source holds the skill `name` (its SKILL.md).
    pub async fn holds(&self, name: &str) -> Result<bool> {
        match self.backend.stat(&self.file_path(name, SKILL_FILE)?).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn install_as(&self, archive: &SkillArchive, options: InstallOptions, action: Action) -> Result<Change> {
        let name = archive.name();
        for file in archive.files() {
            self.changed_path(name, &file.path)?;
        }
        let skill_md = self.file_path(name, SKILL_FILE)?;
        let exists = self.holds(name).await?;
        if exists && !options.replace {
            return Err(skillstore_backends::Error::at(ErrorKind::AlreadyExists, &skill_md)
                .with_detail("the source already has this skill; install with --replace (replace=true over HTTP) to overwrite it")
                .into());
        }
        let present = match self.files_of(name).await {
            Ok(files) => files,
            Err(Error::Backend(e)) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };

        let mut steps = Vec::new();
        for file in archive.files() {
            let current = self.current(&self.file_path(name, &file.path)?).await?;
            if current.as_ref().is_some_and(|(bytes, _)| *bytes == file.data) {
                continue;
            }
            let (previous, base) = current.map_or((None, None), |(b, v)| (Some(b), Some(v)));
            steps.push(Step {
                path: file.path.clone(),
                new: Some(file.data.clone()),
                base,
                previous,
            });
        }
        for relative in present {
            if archive.file(&relative).is_some() {
                continue;
            }
            if let Some((bytes, version)) = self.current(&self.file_path(name, &relative)?).await? {
                steps.push(Step {
                    path: relative,
                    new: None,
                    base: Some(version),
                    previous: Some(bytes),
                });
            }
        }
        self.apply(name, action, steps, None).await
    }
}

//! Writing skills: create, edit, patch, delete, and supporting files, each
//! change conditional on the version it was based on, checked before it is
//! written, and recorded in the skill's history and the source's audit log
//! ([`crate::audit`]).
//!
//! The audit log is checked before a byte is written (the storage can
//! append to it, its newest record can be read, the change's record fits),
//! and the record is appended once the files landed, before the history
//! entry: a change whose record cannot be appended is undone like one
//! whose history entry cannot, so no change stands unrecorded. When the
//! history entry fails after the record was appended, the record is
//! withdrawn with the files, unless another writer already chained a
//! record to it.
//!
//! A change never overwrites a version it did not read: every write is a
//! create-only or version-conditional put, so of two writers who read the
//! same version, one wins and the other gets
//! [`ErrorKind::VersionConflict`] (see [`SkillEditor::patch_with_retry`] for
//! a patch that tries again on the new version).

pub mod check;
pub mod history;
mod install;

use std::sync::Arc;

use bytes::Bytes;
use skillstore_backends::{
    ErrorKind, PutMode, ReadOptions, SkillBackend, SkillBackendExt, VPath, Version, WalkLimits, is_valid_segment,
};

use crate::error::{Error, Result};
use crate::shared_catalog::SharedCatalog;
use crate::skill::SKILL_FILE;
use crate::skill::{Strictness, parse_skill_md};
use crate::source::Source;
use check::{ContentCheck, DefaultContentCheck, PendingFile, Verdict};
use history::{Action, Content, FileChange, Record};

/// The most path segments a supporting file's relative path may have.
pub const MAX_SUPPORTING_DEPTH: usize = 16;

/// A find-and-replace on one file of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The file, relative to the skill's directory (`SKILL.md` by default).
    pub file: String,
    /// The exact text to find (not empty).
    pub find: String,
    /// What replaces each occurrence.
    pub replace: String,
    /// How many non-overlapping occurrences the file must hold; any other
    /// count refuses the patch.
    pub count: usize,
    /// Apply only to this version of the file.
    pub expected: Option<Version>,
}

impl Patch {
    /// Replaces the single occurrence of `find` in SKILL.md.
    pub fn new(find: impl Into<String>, replace: impl Into<String>) -> Self {
        Patch {
            file: SKILL_FILE.to_owned(),
            find: find.into(),
            replace: replace.into(),
            count: 1,
            expected: None,
        }
    }
}

/// A change that landed: its history record (with each file's previous and
/// new version) and the warnings the content check gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The record appended to the skill's history.
    pub record: Record,
    /// Warnings from the content check, one per file it warned on.
    pub warnings: Vec<String>,
}

impl Change {
    /// The new version of `file` (`SKILL.md`, `scripts/run.sh`), if the
    /// change wrote it.
    pub fn version_of(&self, file: &str) -> Option<&Version> {
        self.record
            .files
            .iter()
            .find(|f| f.path == file)
            .and_then(|f| f.new_version.as_ref())
    }
}

/// One file of a planned change.
struct Step {
    path: String,
    /// The new bytes, or `None` to remove the file.
    new: Option<Bytes>,
    /// The version the step is conditional on (`None`: the file must not
    /// exist).
    base: Option<Version>,
    previous: Option<Bytes>,
}

/// A file a change wrote, with what to put back if the change fails.
struct Landed {
    path: VPath,
    /// The bytes before the change (`None`: there was no file).
    previous: Option<Bytes>,
    /// The version the change wrote (`None`: it removed the file).
    written: Option<Version>,
}

/// Writes skills into one writable source, through any backend.
#[derive(Debug, Clone)]
pub struct SkillEditor {
    backend: Arc<dyn SkillBackend>,
    source: Source,
    author: String,
    check: Arc<dyn ContentCheck>,
    limit: u64,
    catalog: Option<SharedCatalog>,
    journal: Option<crate::changes::JournalWriter>,
}

impl SkillEditor {
    /// An editor of the skills of `source`, stored in `backend` (the
    /// namespace the source's path is in). Fails with
    /// [`Error::ReadOnlySource`] unless the source is writable.
    pub fn new(backend: Arc<dyn SkillBackend>, source: &Source) -> Result<Self> {
        if !source.is_writable() {
            return Err(Error::ReadOnlySource(source.name().to_owned()));
        }
        Ok(SkillEditor {
            backend,
            source: source.clone(),
            author: "unknown".to_owned(),
            check: Arc::new(DefaultContentCheck),
            limit: skillstore_backends::DEFAULT_READ_LIMIT,
            catalog: None,
            journal: None,
        })
    }

    /// Names the author recorded in history (default `unknown`).
    pub fn with_author(mut self, author: impl Into<String>) -> Self {
        self.author = author.into();
        self
    }

    /// Replaces the content check (default [`DefaultContentCheck`]).
    pub fn with_check(mut self, check: Arc<dyn ContentCheck>) -> Self {
        self.check = check;
        self
    }

    /// The largest file written or read, in bytes (default 10 MiB): a file
    /// that could not be read back is not written.
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.limit = limit;
        self
    }

    /// Updates `catalog` as soon as each change lands.
    pub fn with_catalog(mut self, catalog: SharedCatalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Records every change that wrote anything in `journal` (the change
    /// journal of the source's store), after the files landed.
    pub fn with_journal(mut self, journal: crate::changes::JournalWriter) -> Self {
        self.journal = Some(journal);
        self
    }

    /// The source written to.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Creates the skill `name` with this SKILL.md; fails with
    /// `already_exists` when the source has it.
    pub async fn create(&self, name: &str, skill_md: impl Into<Bytes>) -> Result<Change> {
        self.skill_dir(name)?;
        let step = Step {
            path: SKILL_FILE.to_owned(),
            new: Some(skill_md.into()),
            base: None,
            previous: None,
        };
        self.apply(name, Action::Create, vec![step], None).await
    }

    /// Replaces the SKILL.md of `name` whole, only at version `expected`
    /// when given.
    pub async fn edit(&self, name: &str, skill_md: impl Into<Bytes>, expected: Option<&Version>) -> Result<Change> {
        let (previous, version) = self.existing_skill_md(name).await?;
        self.expect(name, SKILL_FILE, expected, Some(&version))?;
        let step = Step {
            path: SKILL_FILE.to_owned(),
            new: Some(skill_md.into()),
            base: Some(version),
            previous: Some(previous),
        };
        self.apply(name, Action::Edit, vec![step], None).await
    }

    /// Applies a find-and-replace to one file of `name`.
    pub async fn patch(&self, name: &str, patch: &Patch) -> Result<Change> {
        if patch.find.is_empty() {
            return Err(Error::Usage("a patch needs text to find".into()));
        }
        let (previous, version) = if patch.file == SKILL_FILE {
            self.existing_skill_md(name).await?
        } else {
            self.supporting_path(name, &patch.file)?;
            self.require_skill(name).await?;
            let path = self.file_path(name, &patch.file)?;
            self.current(&path)
                .await?
                .ok_or_else(|| skillstore_backends::Error::at(ErrorKind::NotFound, &path))?
        };
        self.expect(name, &patch.file, patch.expected.as_ref(), Some(&version))?;
        let text = std::str::from_utf8(&previous).map_err(|_| {
            Error::Usage(format!(
                "`{}` in `{name}` is not UTF-8 text; it cannot be patched",
                patch.file
            ))
        })?;
        let found = text.matches(patch.find.as_str()).count();
        if found != patch.count {
            return Err(Error::PatchMismatch {
                skill: name.to_owned(),
                path: patch.file.clone(),
                expected: patch.count,
                found,
            });
        }
        let step = Step {
            path: patch.file.clone(),
            new: Some(Bytes::from(text.replace(patch.find.as_str(), &patch.replace))),
            base: Some(version),
            previous: Some(previous),
        };
        self.apply(name, Action::Patch, vec![step], None).await
    }

    /// Applies `patch`, and when another writer changed the file first,
    /// applies it again to the new version, up to `attempts` times. The
    /// patch's `expected` version is ignored: each attempt is conditional on
    /// the version it read.
    pub async fn patch_with_retry(&self, name: &str, patch: &Patch, attempts: u32) -> Result<Change> {
        let patch = Patch {
            expected: None,
            ..patch.clone()
        };
        let mut attempt = 0;
        loop {
            match self.patch(name, &patch).await {
                Err(Error::Backend(e)) if e.kind() == ErrorKind::VersionConflict && attempt + 1 < attempts => {
                    attempt += 1;
                    history::backoff(attempt).await;
                }
                other => return other,
            }
        }
    }

    /// Deletes the skill `name` from the source: SKILL.md first (so the
    /// skill leaves catalogs at once), then every other file. Each file's
    /// content goes into the history, so a rollback can restore it.
    pub async fn delete(&self, name: &str, expected: Option<&Version>) -> Result<Change> {
        let (skill_md, version) = self.existing_skill_md(name).await?;
        self.expect(name, SKILL_FILE, expected, Some(&version))?;
        let mut steps = vec![Step {
            path: SKILL_FILE.to_owned(),
            new: None,
            base: Some(version),
            previous: Some(skill_md),
        }];
        for relative in self.files_of(name).await? {
            if relative == SKILL_FILE {
                continue;
            }
            let path = self.file_path(name, &relative)?;
            if let Some((bytes, version)) = self.current(&path).await? {
                steps.push(Step {
                    path: relative,
                    new: None,
                    base: Some(version),
                    previous: Some(bytes),
                });
            }
        }
        self.apply(name, Action::Delete, steps, None).await
    }

    /// Writes a supporting file (`references/x.md`, `scripts/run.py`,
    /// `LICENSE.txt`: see [`SkillEditor::supporting_path`]) of an existing
    /// skill, only over version `expected` when given.
    pub async fn write_file(
        &self,
        name: &str,
        relative: &str,
        data: impl Into<Bytes>,
        expected: Option<&Version>,
    ) -> Result<Change> {
        self.supporting_path(name, relative)?;
        self.require_skill(name).await?;
        let current = self.current(&self.file_path(name, relative)?).await?;
        let (previous, base) = current.map_or((None, None), |(b, v)| (Some(b), Some(v)));
        self.expect(name, relative, expected, base.as_ref())?;
        let step = Step {
            path: relative.to_owned(),
            new: Some(data.into()),
            base,
            previous,
        };
        self.apply(name, Action::WriteFile, vec![step], None).await
    }

    /// Removes a supporting file of a skill, only at version `expected`
    /// when given.
    pub async fn remove_file(&self, name: &str, relative: &str, expected: Option<&Version>) -> Result<Change> {
        self.supporting_path(name, relative)?;
        let path = self.file_path(name, relative)?;
        let (previous, version) = self
            .current(&path)
            .await?
            .ok_or_else(|| skillstore_backends::Error::at(ErrorKind::NotFound, &path))?;
        self.expect(name, relative, expected, Some(&version))?;
        let step = Step {
            path: relative.to_owned(),
            new: None,
            base: Some(version),
            previous: Some(previous),
        };
        self.apply(name, Action::RemoveFile, vec![step], None).await
    }

    /// The history of `name`, oldest entry first.
    pub async fn history(&self, name: &str) -> Result<Vec<Record>> {
        self.skill_dir(name)?;
        history::read(&*self.backend, &self.history_path(name)?).await
    }

    /// The history of `name` as it may be shown to a reader: oldest entry
    /// first, without file contents or versions ([`history::read_entries`]).
    pub async fn history_entries(&self, name: &str) -> Result<Vec<history::HistoryEntry>> {
        self.skill_dir(name)?;
        history::read_entries(&*self.backend, &self.history_path(name)?).await
    }

    /// Restores every file the history of `name` mentions to what it was
    /// right after entry `id`: the bytes that entry (or the last one before
    /// it touching the file) left, or no file where there was none. The
    /// rollback is itself recorded.
    pub async fn rollback(&self, name: &str, id: u64) -> Result<Change> {
        let records = self.history(name).await?;
        if !records.iter().any(|r| r.id == id) {
            return Err(Error::History(format!("`{name}` has no history entry {id}")));
        }
        let mut paths: Vec<&str> = Vec::new();
        for change in records.iter().flat_map(|r| &r.files) {
            if !paths.contains(&change.path.as_str()) {
                paths.push(&change.path);
            }
        }
        // A rollback writes only where a change could; a history naming
        // anything else is refused whole.
        for relative in &paths {
            self.changed_path(name, relative)?;
            self.file_path(name, relative)?;
        }
        let mut steps = Vec::new();
        for relative in paths {
            let touching = records
                .iter()
                .filter_map(|r| r.files.iter().find(|f| f.path == relative).map(|f| (r.id, f)));
            let mut at_or_before = None;
            let mut first_after = None;
            for (entry, change) in touching {
                if entry <= id {
                    at_or_before = Some(change);
                } else if first_after.is_none() {
                    first_after = Some(change);
                }
            }
            let target = match (at_or_before, first_after) {
                (Some(change), _) => change.new.as_ref(),
                (None, Some(change)) => change.previous.as_ref(),
                (None, None) => continue,
            };
            let target = target.map(Content::to_bytes).transpose()?;
            let current = self.current(&self.file_path(name, relative)?).await?;
            if current.as_ref().map(|(b, _)| b) == target.as_ref() {
                continue;
            }
            let (previous, base) = current.map_or((None, None), |(b, v)| (Some(b), Some(v)));
            steps.push(Step {
                path: relative.to_owned(),
                new: target,
                base,
                previous,
            });
        }
        self.apply(name, Action::Rollback, steps, Some(id)).await
    }

    /// Checks, writes and records one change.
    async fn apply(
        &self,
        name: &str,
        action: Action,
        mut steps: Vec<Step>,
        rollback_to: Option<u64>,
    ) -> Result<Change> {
        let mut warnings = Vec::new();
        for step in &steps {
            let Some(data) = &step.new else { continue };
            if data.len() as u64 > self.limit {
                let path = self.file_path(name, &step.path)?;
                return Err(skillstore_backends::Error::too_large(&path, data.len() as u64, self.limit).into());
            }
            if step.path == SKILL_FILE {
                let parsed = parse_skill_md(data, Some(name), Strictness::Strict);
                if !parsed.is_valid() {
                    return Err(Error::InvalidSkill {
                        skill: name.to_owned(),
                        problems: parsed.problems,
                    });
                }
            }
            let pending = PendingFile {
                skill: name,
                path: &step.path,
                data,
            };
            match self.check.check(&pending) {
                Verdict::Allow => {}
                Verdict::Warn(reason) => warnings.push(reason),
                Verdict::Block(reason) => {
                    return Err(Error::ContentBlocked {
                        skill: name.to_owned(),
                        path: step.path.clone(),
                        reason,
                    });
                }
            }
        }
        // The skill appears only once complete and disappears first.
        steps.sort_by_key(|s| match (s.path == SKILL_FILE, s.new.is_some()) {
            (true, false) => 0,
            (false, _) => 1,
            (true, true) => 2,
        });

        // Everything that could refuse the record is checked before a byte
        // is written: a change is whole, record included, or not at all.
        let history_path = self.history_path(name)?;
        let mut record = Record {
            id: 0,
            time: history::now(),
            action,
            author: self.author.clone(),
            rollback_to,
            files: steps
                .iter()
                .map(|step| FileChange {
                    path: step.path.clone(),
                    previous_version: step.base.clone(),
                    new_version: None,
                    previous: step.previous.as_deref().map(Content::of),
                    new: step.new.as_deref().map(Content::of),
                })
                .collect(),
        };
        history::check_room(&*self.backend, &history_path, &record).await?;
        let mut entry = crate::audit::Entry::now(
            &self.author,
            action.as_str(),
            name,
            steps
                .iter()
                .map(|step| crate::audit::FileDigest::of(&step.path, step.previous.as_deref(), step.new.as_deref()))
                .collect(),
        );
        entry.rollback_to = rollback_to;
        let audit = self.audit_log()?;
        let tail = audit.prepare(&entry).await?;

        let mut landed = Vec::with_capacity(steps.len());
        let mut failure = None;
        for (step, change) in steps.iter().zip(&mut record.files) {
            let path = self.file_path(name, &step.path)?;
            let outcome = match (&step.new, &step.base) {
                (Some(data), base) => {
                    let mode = base.clone().map_or(PutMode::Create, PutMode::IfVersion);
                    self.backend.put(&path, data.clone(), mode).await.map(Some)
                }
                (None, Some(base)) => self.backend.delete_if_version(&path, base).await.map(|()| None),
                (None, None) => Ok(None),
            };
            match outcome {
                Ok(written) => {
                    change.new_version.clone_from(&written);
                    landed.push(Landed {
                        path,
                        previous: step.previous.clone(),
                        written,
                    });
                }
                Err(e) => {
                    failure = Some(Error::from(e));
                    break;
                }
            }
        }
        let skill_md = self.file_path(name, SKILL_FILE)?;
        let skill_md_written = landed.iter().any(|l| l.path == skill_md);
        let anything_written = !landed.is_empty();
        let outcome = match failure {
            Some(e) => Err(e),
            None => self.record(name, &audit, (&entry, tail), &history_path, record).await,
        };
        match outcome {
            Ok(record) => {
                let skill_md_now = steps
                    .iter()
                    .zip(&record.files)
                    .find(|(step, _)| step.path == SKILL_FILE)
                    .map(|(step, change)| step.new.clone().zip(change.new_version.clone()));
                self.after_change(name, skill_md_now).await;
                Ok(Change { record, warnings })
            }
            Err(e) => {
                let e = self.undo(landed, e).await;
                if anything_written {
                    let skill_md_now = match skill_md_written {
                        true => Some(self.current(&skill_md).await.ok().flatten()),
                        false => None,
                    };
                    self.after_change(name, skill_md_now).await;
                }
                Err(e)
            }
        }
    }

    /// Records a change whose files landed: its audit record, then its
    /// history entry. When the history entry fails, the audit record is
    /// withdrawn (the caller puts the files back), unless another writer
    /// already chained a record to it.
    async fn record(
        &self,
        name: &str,
        audit: &crate::audit::AuditLog,
        (entry, tail): (&crate::audit::Entry, crate::audit::Tail),
        history_path: &VPath,
        record: Record,
    ) -> Result<Record> {
        let appended = audit.append(entry, Some(tail)).await?;
        let failure = match history::append(&*self.backend, history_path, record).await {
            Ok(record) => return Ok(record),
            Err(e) => e,
        };
        let seq = appended.record.seq;
        match audit.withdraw(&appended).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    skill = name,
                    seq,
                    "a change was undone, but a later audit record follows its record, which stays"
                );
            }
            Err(e) => {
                tracing::warn!(skill = name, seq, error = %e, "a change was undone, but its audit record could not be removed");
            }
        }
        Err(failure)
    }

    /// Puts back, newest first, every file a failed change wrote, each
    /// conditional on the version the change left (so a later writer's
    /// change is never undone), and returns `cause`, saying which files
    /// could not be put back if any. An overwritten file is restored in
    /// place, or, when the storage is full, removed first and then
    /// recreated, which needs no more room than the change took.
    async fn undo(&self, landed: Vec<Landed>, cause: Error) -> Error {
        let mut stuck = Vec::new();
        for step in landed.into_iter().rev() {
            let restored = match (step.written, step.previous) {
                (Some(written), Some(previous)) => {
                    match self
                        .backend
                        .put(&step.path, previous.clone(), PutMode::IfVersion(written.clone()))
                        .await
                    {
                        Err(e) if e.kind() == ErrorKind::StorageFull => {
                            match self.backend.delete_if_version(&step.path, &written).await {
                                Ok(()) => self.backend.put(&step.path, previous, PutMode::Create).await.map(drop),
                                Err(e) => Err(e),
                            }
                        }
                        other => other.map(drop),
                    }
                }
                (Some(written), None) => self.backend.delete_if_version(&step.path, &written).await,
                (None, Some(previous)) => self.backend.put(&step.path, previous, PutMode::Create).await.map(drop),
                (None, None) => Ok(()),
            };
            if let Err(e) = restored {
                tracing::warn!(path = %step.path, error = %e, "a file of a failed change could not be put back");
                stuck.push(step.path.to_string());
            }
        }
        if stuck.is_empty() {
            return cause;
        }
        let note = format!(
            "the change failed part-way and these files could not be put back: {}",
            stuck.join(", ")
        );
        match cause {
            Error::Backend(e) => {
                let detail = e.detail().map_or_else(|| note.clone(), |d| format!("{d}; {note}"));
                Error::Backend(e.with_detail(detail))
            }
            Error::History(message) => Error::History(format!("{message}; {note}")),
            Error::Audit(message) => Error::Audit(format!("{message}; {note}")),
            other => {
                tracing::warn!(error = %other, "{note}");
                other
            }
        }
    }

    /// Tells the change journal (when there is one), the source's index
    /// (when `skill_md` says what the SKILL.md of `name` now is: its bytes
    /// and version, or `None` for no file) and the shared catalog that the
    /// skill changed.
    async fn after_change(&self, name: &str, skill_md: Option<Option<(Bytes, Version)>>) {
        if let Some(now) = skill_md
            && self.backend.capabilities_at(self.source.path()).deep_list
        {
            let entry = now.and_then(|(data, version)| crate::index::entry_for(name, &data, version));
            let change = (format!("{name}/{SKILL_FILE}"), entry);
            if let Err(e) = crate::index::update(&*self.backend, self.source.path(), &[change]).await {
                tracing::warn!(skill = name, error = %e, "the source's index could not take in a change; readers will read the skill");
            }
        }
        if let Some(journal) = &self.journal {
            journal.record().await;
        }
        if let Some(catalog) = &self.catalog
            && let Err(e) = catalog.reload_skill(self.source.name(), name).await
        {
            tracing::warn!(skill = name, error = %e, "the shared catalog could not take in a change");
        }
    }

    fn expect(&self, name: &str, relative: &str, expected: Option<&Version>, found: Option<&Version>) -> Result<()> {
        match expected {
            Some(expected) if !found.is_some_and(|found| found.same_as(expected)) => {
                let path = self.file_path(name, relative)?;
                Err(skillstore_backends::Error::version_conflict(&path, expected, found).into())
            }
            _ => Ok(()),
        }
    }

    /// The bytes and version of a file, or `None` when there is none.
    async fn current(&self, path: &VPath) -> Result<Option<(Bytes, Version)>> {
        match self.backend.read(path, ReadOptions::with_limit(self.limit)).await {
            Ok(blob) => Ok(Some((blob.data, blob.version))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn existing_skill_md(&self, name: &str) -> Result<(Bytes, Version)> {
        self.skill_dir(name)?;
        self.current(&self.file_path(name, SKILL_FILE)?)
            .await?
            .ok_or_else(|| self.not_in_source(name))
    }

    /// Fails unless the source holds the skill, with a stat, not a read.
    async fn require_skill(&self, name: &str) -> Result<()> {
        let found = match self.backend.stat(&self.file_path(name, SKILL_FILE)?).await {
            Ok(meta) => meta.kind == skillstore_backends::EntryKind::File,
            Err(e) if e.kind() == ErrorKind::NotFound => false,
            Err(e) => return Err(e.into()),
        };
        if found { Ok(()) } else { Err(self.not_in_source(name)) }
    }

    fn not_in_source(&self, name: &str) -> Error {
        Error::NotInSource {
            skill: name.to_owned(),
            source_name: self.source.name().to_owned(),
        }
    }

    /// Every file under the skill's directory, relative to it. The walk
    /// never descends into a directory link and is bounded; links are left
    /// out (the editor neither follows nor removes them).
    async fn files_of(&self, name: &str) -> Result<Vec<String>> {
        let root = self.skill_dir(name)?;
        let walked = self.backend.walk(&root, WalkLimits::default()).await?;
        if walked.truncated {
            return Err(Error::Usage(format!(
                "`{name}` holds more files than a change may touch ({})",
                WalkLimits::default().max_files
            )));
        }
        let mut files: Vec<String> = walked
            .files
            .into_iter()
            .filter(|f| !f.entry.symlink)
            .map(|f| f.relative)
            .collect();
        files.sort();
        Ok(files)
    }

    fn skill_dir(&self, name: &str) -> Result<VPath> {
        if !is_valid_segment(name) || name.starts_with('.') {
            return Err(Error::Usage(format!(
                "`{}` is not a skill directory name",
                name.escape_debug()
            )));
        }
        Ok(self.source.path().join(name)?)
    }

    fn file_path(&self, name: &str, relative: &str) -> Result<VPath> {
        Ok(self.skill_dir(name)?.join(relative)?)
    }

    /// The audit log of the source written to, which every change is
    /// recorded in.
    pub fn audit_log(&self) -> Result<crate::audit::AuditLog> {
        crate::audit::AuditLog::new(Arc::clone(&self.backend), self.source.path())
    }

    fn history_path(&self, name: &str) -> Result<VPath> {
        history::history_path(self.source.path(), name)
    }

    /// The rule for every path a change writes, installs included:
    /// SKILL.md, or a supporting file (see [`SkillEditor::supporting_path`]).
    fn changed_path(&self, name: &str, relative: &str) -> Result<()> {
        if relative == SKILL_FILE {
            return Ok(());
        }
        self.supporting_path(name, relative)
    }

    /// The rule for a supporting file: a relative path of valid segments
    /// (the `VPath` rules), at most [`MAX_SUPPORTING_DEPTH`] deep, that the
    /// content rule ([`crate::content`]) admits (no `.git` entry, no other
    /// hidden segment but the skill's signature `.skillstore/signature`),
    /// and not another
    /// spelling of SKILL.md at the top. Conventional places are
    /// `references/`, `scripts/` and `assets/`, but the specification lets
    /// a skill hold any other file (`LICENSE.txt`, `python/api.md`).
    fn supporting_path(&self, name: &str, relative: &str) -> Result<()> {
        let refuse = |reason: String| Error::InvalidSkillPath {
            skill: name.to_owned(),
            path: relative.escape_debug().to_string(),
            reason,
        };
        if relative.starts_with('/') {
            return Err(refuse("expected a path relative to the skill's directory".into()));
        }
        let path = VPath::root().join(relative).map_err(|e| refuse(e.to_string()))?;
        if let Some(refusal) = crate::content::refusal(relative) {
            return Err(refuse(refusal.describe().into()));
        }
        if path.segments().count() > MAX_SUPPORTING_DEPTH {
            return Err(refuse(format!("deeper than {MAX_SUPPORTING_DEPTH} segments")));
        }
        if path.segments().count() == 1 && relative.eq_ignore_ascii_case(SKILL_FILE) {
            return Err(refuse(format!(
                "{SKILL_FILE} is written through create or edit, in that spelling"
            )));
        }
        Ok(())
    }
}

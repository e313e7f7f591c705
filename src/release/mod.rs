//! Releases: immutable snapshots of a skill at a semantic version, named
//! pointers to them (channels), and the choice of one by an exact version,
//! a channel or a Cargo range.
//!
//! A release (`NAME@VERSION`) is made from the working copy of a skill in
//! a source, through the checks every write applies (strict validation of
//! SKILL.md, the content rule, the content check), and kept in that
//! source's storage ([`layout`]) as objects written once with create-only
//! puts and never rewritten: a release's bytes never change once made, and
//! of two writers racing for one version exactly one wins, the other gets
//! `already_exists`. The manifest is written last, so a release is visible
//! whole or not at all. Every read of a release's file is confined to its
//! directory, bounded, and checked against the SHA-256 its manifest holds.
//!
//! Channels (`latest`, moved by every release; `stable` and others, moved
//! by [`Releases::tag`]) and yanks live in one small file per skill moved
//! by conditional puts ([`channels`]); a yanked release stays readable by
//! its exact version and leaves every channel and range ([`select`]).

pub mod channels;
pub mod layout;
mod make;
pub mod manifest;
pub mod select;
pub mod selection;
pub mod served;
pub mod store;
pub mod version;

use std::sync::Arc;

use bytes::Bytes;
use skillstore_backends::SkillBackend;

pub use channels::Channels;
pub use layout::RELEASES_DIR;
pub use make::{Released, VERSION_KEY};
pub use manifest::{Manifest, ReleaseFile};
pub use selection::Selection;
pub use served::SelectedReleases;
pub use version::{LATEST, Selector, parse_version};

use crate::edit::check::{ContentCheck, DefaultContentCheck};
use crate::error::{Error, Result};
use crate::source::Source;

/// One release of a skill as [`Releases::versions`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseInfo {
    /// The release's manifest.
    pub manifest: Manifest,
    /// True when it is yanked.
    pub yanked: bool,
    /// The channels pointing to it, in name order.
    pub channels: Vec<String>,
}

/// The releases of the skills of one source: made, tagged, yanked, listed
/// and resolved through the source's backend.
#[derive(Debug, Clone)]
pub struct Releases {
    backend: Arc<dyn SkillBackend>,
    source: Source,
    author: String,
    check: Arc<dyn ContentCheck>,
    limit: u64,
    journal: Option<crate::changes::JournalWriter>,
}

impl Releases {
    /// The releases of `source`, stored in `backend` (the namespace the
    /// source's path is in). Reading needs nothing more; making, tagging and
    /// yanking fail with [`Error::ReadOnlySource`] unless the source is
    /// writable.
    pub fn new(backend: Arc<dyn SkillBackend>, source: &Source) -> Self {
        Releases {
            backend,
            source: source.clone(),
            author: "unknown".to_owned(),
            check: Arc::new(DefaultContentCheck),
            limit: skillstore_backends::DEFAULT_READ_LIMIT,
            journal: None,
        }
    }

    /// Records every release, tag and yank in `journal` (the change journal
    /// of the source's store) once it landed.
    pub fn with_journal(mut self, journal: crate::changes::JournalWriter) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Names the author a release records (default `unknown`).
    pub fn with_author(mut self, author: impl Into<String>) -> Self {
        self.author = author.into();
        self
    }

    /// Replaces the content check every released file passes (default
    /// [`DefaultContentCheck`], the editor's).
    pub fn with_check(mut self, check: Arc<dyn ContentCheck>) -> Self {
        self.check = check;
        self
    }

    /// The largest file read or released, in bytes (default 10 MiB).
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.limit = limit;
        self
    }

    /// The source whose releases these are.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Releases the working copy of `name` as `version` (a plain
    /// `MAJOR.MINOR.PATCH[-PRE]`), with `notes`. Refused with nothing
    /// written when the version is not greater than every earlier release of
    /// the skill (yanked ones included), when SKILL.md fails strict
    /// validation or its `metadata.version` names another version, or when
    /// the content check blocks a file; `already_exists` when the version
    /// was released before, or by a racing writer first. `latest` moves to
    /// the new release unless a greater one exists.
    pub async fn release(&self, name: &str, version: &str, notes: Option<&str>) -> Result<Released> {
        self.writable()?;
        let version = parse_version(version)?;
        let name = skill_name(name)?;
        let manifest = layout::manifest_path(self.source.path(), &name, &version)?;
        let channels = layout::channels_path(self.source.path(), &name)?;
        let audit = self.audit_prepared("release", &name, &[&manifest, &channels]).await?;
        let channels_before = self.bytes_of(&channels).await?;
        let made = make::release(make::Request {
            backend: &*self.backend,
            source: self.source.path(),
            name: &name,
            version: &version,
            notes,
            author: &self.author,
            check: &*self.check,
            limit: self.limit,
        })
        .await?;
        self.recorded().await;
        let files = [(&manifest, None), (&channels, channels_before)];
        self.audited(audit, &files).await?;
        Ok(made)
    }

    /// Points `channel` of `name` at the release `version`, which must exist
    /// and not be yanked; the move is a conditional put, tried again when
    /// another writer moved the channels first.
    pub async fn tag(&self, name: &str, channel: &str, version: &str) -> Result<Channels> {
        self.writable()?;
        let name = skill_name(name)?;
        version::check_channel(channel)?;
        let version = parse_version(version)?;
        self.require(&name, &version).await?;
        let path = layout::channels_path(self.source.path(), &name)?;
        let audit = self.audit_prepared("tag", &name, &[&path]).await?;
        let before = self.bytes_of(&path).await?;
        let channels = store::update_channels(&*self.backend, self.source.path(), &name, |c| {
            if c.yanked.contains(&version) {
                return Err(Error::ReleaseRefused(format!(
                    "`{name}@{version}` is yanked; a channel cannot point to it"
                )));
            }
            c.channels.insert(channel.to_owned(), version.clone());
            Ok(())
        })
        .await?;
        self.recorded().await;
        self.audited(audit, &[(&path, before)]).await?;
        Ok(channels)
    }

    /// Yanks the release `version` of `name`: it stays readable by its exact
    /// version, and leaves every channel and range; `latest` moves to the
    /// greatest release left. Yanking a yanked release changes nothing.
    pub async fn yank(&self, name: &str, version: &str) -> Result<Channels> {
        self.writable()?;
        let name = skill_name(name)?;
        let version = parse_version(version)?;
        self.require(&name, &version).await?;
        let existing = store::versions(&*self.backend, self.source.path(), &name).await?;
        let path = layout::channels_path(self.source.path(), &name)?;
        let audit = self.audit_prepared("yank", &name, &[&path]).await?;
        let before = self.bytes_of(&path).await?;
        let channels = store::update_channels(&*self.backend, self.source.path(), &name, |c| {
            c.yank(&version, &existing);
            Ok(())
        })
        .await?;
        self.recorded().await;
        self.audited(audit, &[(&path, before)]).await?;
        Ok(channels)
    }

    /// Every release of `name`, oldest version first, with whether it is
    /// yanked and the channels pointing to it. A skill never released has
    /// none.
    pub async fn versions(&self, name: &str) -> Result<Vec<ReleaseInfo>> {
        let name = skill_name(name)?;
        let (channels, _) = store::channels(&*self.backend, self.source.path(), &name).await?;
        let mut out = Vec::new();
        for version in store::versions(&*self.backend, self.source.path(), &name).await? {
            let Some(manifest) = store::manifest(&*self.backend, self.source.path(), &name, &version).await? else {
                continue;
            };
            out.push(ReleaseInfo {
                yanked: channels.yanked.contains(&version),
                channels: channels
                    .channels
                    .iter()
                    .filter(|(_, v)| **v == version)
                    .map(|(c, _)| c.clone())
                    .collect(),
                manifest,
            });
        }
        Ok(out)
    }

    /// The versions of `name` that were released (a manifest exists),
    /// ascending, yanked ones included; no manifest is read.
    pub async fn released_versions(&self, name: &str) -> Result<Vec<semver::Version>> {
        let name = skill_name(name)?;
        store::versions(&*self.backend, self.source.path(), &name).await
    }

    /// The channels, yanked versions and last release of `name`.
    pub async fn channels(&self, name: &str) -> Result<Channels> {
        let name = skill_name(name)?;
        Ok(store::channels(&*self.backend, self.source.path(), &name).await?.0)
    }

    /// The manifest of the release of `name` that `selector` picks
    /// ([`select::select`]), or `None` when none matches.
    pub async fn resolve(&self, name: &str, selector: &Selector) -> Result<Option<Manifest>> {
        let name = skill_name(name)?;
        let existing = store::versions(&*self.backend, self.source.path(), &name).await?;
        let (channels, _) = store::channels(&*self.backend, self.source.path(), &name).await?;
        match select::select(selector, &existing, &channels) {
            Some(version) => store::manifest(&*self.backend, self.source.path(), &name, &version).await,
            None => Ok(None),
        }
    }

    /// As [`Releases::resolve`], failing with [`Error::ReleaseNotFound`]
    /// when nothing matches.
    pub async fn require_resolved(&self, name: &str, selector: &Selector) -> Result<Manifest> {
        self.resolve(name, selector)
            .await?
            .ok_or_else(|| Error::ReleaseNotFound {
                skill: name.to_owned(),
                selector: selector.to_string(),
            })
    }

    /// The bytes of `relative` (`SKILL.md`, `scripts/run.sh`) in the release
    /// `manifest` describes: a confined, bounded read, refused unless the
    /// bytes are those the manifest hashed.
    pub async fn read_file(&self, manifest: &Manifest, relative: &str) -> Result<Bytes> {
        store::read_file(&*self.backend, self.source.path(), manifest, relative, self.limit).await
    }

    /// Before a release, tag or yank writes anything: the source's audit
    /// log checked as the editor checks it (a log that cannot be appended
    /// to refuses the change), with the entry to record once it landed.
    async fn audit_prepared(
        &self,
        action: &str,
        name: &str,
        paths: &[&skillstore_backends::VPath],
    ) -> Result<(crate::audit::AuditLog, crate::audit::Entry, crate::audit::Tail)> {
        let log = crate::audit::AuditLog::new(Arc::clone(&self.backend), self.source.path())?;
        let files = paths
            .iter()
            .map(|p| crate::audit::FileDigest::of(&self.relative(p), Some(b""), Some(b"")))
            .collect();
        let entry = crate::audit::Entry::now(&self.author, action, name, files);
        let tail = log.prepare(&entry).await?;
        Ok((log, entry, tail))
    }

    /// Appends the audit record of a release, tag or yank that landed: each
    /// file it wrote with the digest of its bytes before (as read before
    /// the change) and after (as stored now).
    async fn audited(
        &self,
        (log, mut entry, tail): (crate::audit::AuditLog, crate::audit::Entry, crate::audit::Tail),
        files: &[(&skillstore_backends::VPath, Option<Bytes>)],
    ) -> Result<()> {
        entry.files.clear();
        for (path, before) in files {
            let after = self.bytes_of(path).await?;
            entry.files.push(crate::audit::FileDigest::of(
                &self.relative(path),
                before.as_deref(),
                after.as_deref(),
            ));
        }
        log.append(&entry, Some(tail)).await?;
        Ok(())
    }

    /// The bytes of `path` now, or `None` when it does not exist.
    async fn bytes_of(&self, path: &skillstore_backends::VPath) -> Result<Option<Bytes>> {
        let options = skillstore_backends::ReadOptions {
            limit: self.limit,
            confinement: Some(self.source.path().segments().count()).filter(|&n| n > 0),
            ..Default::default()
        };
        match self.backend.read(path, options).await {
            Ok(blob) => Ok(Some(blob.data)),
            Err(e) if e.kind() == skillstore_backends::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `path` relative to the source's directory, as audit records name it.
    fn relative(&self, path: &skillstore_backends::VPath) -> String {
        path.as_str()
            .strip_prefix(self.source.path().as_str())
            .unwrap_or(path.as_str())
            .trim_start_matches('/')
            .to_owned()
    }

    /// Tells the change journal, when there is one, that the source changed.
    async fn recorded(&self) {
        if let Some(journal) = &self.journal {
            journal.record().await;
        }
    }

    fn writable(&self) -> Result<()> {
        if self.source.is_writable() {
            Ok(())
        } else {
            Err(Error::ReadOnlySource(self.source.name().to_owned()))
        }
    }

    async fn require(&self, name: &str, version: &semver::Version) -> Result<Manifest> {
        store::manifest(&*self.backend, self.source.path(), name, version)
            .await?
            .ok_or_else(|| Error::ReleaseNotFound {
                skill: name.to_owned(),
                selector: version.to_string(),
            })
    }
}

/// `name` when it may name a skill's directory (one path segment, not
/// hidden); [`Error::Usage`] otherwise.
fn skill_name(name: &str) -> Result<String> {
    if skillstore_backends::is_valid_segment(name) && !name.starts_with('.') {
        Ok(name.to_owned())
    } else {
        Err(Error::Usage(format!(
            "`{}` is not a skill directory name",
            name.escape_debug()
        )))
    }
}

#[cfg(test)]
mod tests;

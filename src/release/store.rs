//! Reading and moving what releases keep in storage: manifests, the
//! channels file, and the files of a release, each read through the
//! backend's guarded reads and checked against what the manifest says.

use bytes::Bytes;
use skillstore_backends::{EntryKind, ErrorKind, PutMode, ReadOptions, SkillBackend, VPath};

use super::channels::{Channels, MAX_CHANNELS_BYTES};
use super::layout;
use super::manifest::{MAX_MANIFEST_BYTES, Manifest};
use super::version::parse_version;
use crate::error::{Error, Result};
use crate::integrity::digest::sha256_hex;

/// How many times a channels update is tried when other writers move the
/// file first.
pub const CHANNEL_ATTEMPTS: u32 = 16;

/// The most releases of one skill listed.
pub const MAX_RELEASES: usize = 10_000;

/// The manifest of `name` at `version` in the source at `source`, or
/// `None` when there is no such release.
pub async fn manifest(
    backend: &dyn SkillBackend,
    source: &VPath,
    name: &str,
    version: &semver::Version,
) -> Result<Option<Manifest>> {
    let path = layout::manifest_path(source, name, version)?;
    match backend.read(&path, ReadOptions::with_limit(MAX_MANIFEST_BYTES)).await {
        Ok(blob) => Manifest::parse(&blob.data, name, version).map(Some),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The versions of `name` that have a manifest, ascending. Names beside
/// them that are not `VERSION.json` for a release version are ignored.
pub async fn versions(backend: &dyn SkillBackend, source: &VPath, name: &str) -> Result<Vec<semver::Version>> {
    let dir = layout::skill_dir(source, name)?;
    let entries = match backend.list(&dir).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut found: Vec<semver::Version> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::File && !e.symlink)
        .filter_map(|e| e.name.strip_suffix(".json"))
        .filter_map(|v| parse_version(v).ok())
        .collect();
    if found.len() > MAX_RELEASES {
        return Err(Error::ReleaseRefused(format!(
            "`{name}` has more than {MAX_RELEASES} releases"
        )));
    }
    found.sort();
    Ok(found)
}

/// The channels of `name` and the version of their file, or empty channels
/// and `None` when there is no file yet.
pub async fn channels(
    backend: &dyn SkillBackend,
    source: &VPath,
    name: &str,
) -> Result<(Channels, Option<skillstore_backends::Version>)> {
    let path = layout::channels_path(source, name)?;
    match backend.read(&path, ReadOptions::with_limit(MAX_CHANNELS_BYTES)).await {
        Ok(blob) => Ok((Channels::parse(&blob.data, name)?, Some(blob.version))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok((Channels::default(), None)),
        Err(e) => Err(e.into()),
    }
}

/// Applies `change` to the channels of `name` and writes them, conditional
/// on the version read (created when there was no file), reading and
/// applying again when another writer moved them first, up to
/// [`CHANNEL_ATTEMPTS`] times. A refusal by `change` writes nothing.
pub async fn update_channels(
    backend: &dyn SkillBackend,
    source: &VPath,
    name: &str,
    mut change: impl FnMut(&mut Channels) -> Result<()>,
) -> Result<Channels> {
    let path = layout::channels_path(source, name)?;
    let mut attempt = 0;
    loop {
        let (mut current, version) = channels(backend, source, name).await?;
        change(&mut current)?;
        let mode = version.map_or(PutMode::Create, PutMode::IfVersion);
        match backend.put(&path, Bytes::from(current.to_bytes()), mode).await {
            Ok(_) => return Ok(current),
            Err(e)
                if matches!(e.kind(), ErrorKind::VersionConflict | ErrorKind::AlreadyExists)
                    && attempt + 1 < CHANNEL_ATTEMPTS =>
            {
                attempt += 1;
                crate::edit::history::backoff(attempt).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The bytes of `relative` in the release `manifest` describes, read
/// confined to the release's files directory under `limit` bytes, and
/// refused unless they are the bytes the manifest hashed.
pub async fn read_file(
    backend: &dyn SkillBackend,
    source: &VPath,
    manifest: &Manifest,
    relative: &str,
    limit: u64,
) -> Result<Bytes> {
    let Some(file) = manifest.file(relative) else {
        return Err(Error::InvalidSkillPath {
            skill: format!("{}@{}", manifest.skill, manifest.version),
            path: relative.escape_debug().to_string(),
            reason: "the release holds no such file".into(),
        });
    };
    let dir = layout::files_dir(source, &manifest.skill, &manifest.semver(), &manifest.files_id)?;
    let path = dir.join(&file.path)?;
    let options = ReadOptions::with_limit(limit).confined(dir.segments().count());
    let blob = backend.read(&path, options).await?;
    if blob.data.len() as u64 != file.size || sha256_hex(&blob.data) != file.sha256 {
        return Err(Error::ReleaseRefused(format!(
            "`{}` of `{}@{}` is not the file released: its bytes changed in storage",
            file.path, manifest.skill, manifest.version
        )));
    }
    Ok(blob.data)
}

//! Making a release from a skill's working copy: the files a confined read
//! serves, through the checks every write applies, copied with create-only
//! puts into a directory of their own, then the manifest, then the
//! channels.

use bytes::Bytes;
use skillstore_backends::{ErrorKind, PutMode, SkillBackend, VPath};

use super::layout;
use super::manifest::{FORMAT, Manifest, ReleaseFile};
use super::store;
use crate::edit::check::{ContentCheck, PendingFile, Verdict};
use crate::error::{Error, Result};
use crate::integrity::digest::sha256_hex;
use crate::skill::{SKILL_FILE, Strictness, parse_skill_md};
use crate::skill_files::FileLimits;

/// The frontmatter key that, when present, must name the version released.
pub const VERSION_KEY: &str = "version";

/// How many files are read at once.
const READ_BATCH: usize = 16;

/// A release that was made, and the content check's warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// The manifest written.
    pub manifest: Manifest,
    /// Warnings: the content check's, one per file it warned on, and one
    /// when the channels could not be moved after the release was made.
    pub warnings: Vec<String>,
}

/// What a release is made from and by whom.
pub struct Request<'a> {
    /// The storage of the source.
    pub backend: &'a dyn SkillBackend,
    /// The source's directory.
    pub source: &'a VPath,
    /// The skill.
    pub name: &'a str,
    /// The version, parsed.
    pub version: &'a semver::Version,
    /// Release notes.
    pub notes: Option<&'a str>,
    /// Who releases.
    pub author: &'a str,
    /// The check every file passes.
    pub check: &'a dyn ContentCheck,
    /// The largest file read or written.
    pub limit: u64,
}

/// Makes the release `request` describes. See [`super::Releases::release`].
pub async fn release(request: Request<'_>) -> Result<Released> {
    let Request {
        backend,
        source,
        name,
        version,
        notes,
        author,
        check,
        limit,
    } = request;
    let manifest_path = layout::manifest_path(source, name, version)?;
    let existing = store::versions(backend, source, name).await?;
    if existing.contains(version) {
        return Err(exists(&manifest_path, name, version));
    }
    let (channels, _) = store::channels(backend, source, name).await?;
    if let Some(last) = existing.iter().max().into_iter().chain(channels.last.as_ref()).max()
        && version <= last
    {
        return Err(Error::ReleaseRefused(format!(
            "`{name}@{version}` is not greater than the last release of `{name}`, {last}"
        )));
    }

    let files = working_copy(backend, source, name, limit).await?;
    let mut warnings = Vec::new();
    for (relative, data) in &files {
        if relative == SKILL_FILE {
            check_skill_md(name, version, data)?;
        }
        match check.check(&PendingFile {
            skill: name,
            path: relative,
            data,
        }) {
            Verdict::Allow => {}
            Verdict::Warn(reason) => warnings.push(reason),
            Verdict::Block(reason) => {
                return Err(Error::ContentBlocked {
                    skill: name.to_owned(),
                    path: relative.clone(),
                    reason,
                });
            }
        }
    }
    let mut listed: Vec<ReleaseFile> = files
        .iter()
        .map(|(path, data)| ReleaseFile {
            path: path.clone(),
            sha256: sha256_hex(data),
            size: data.len() as u64,
        })
        .collect();
    listed.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let id = layout::fresh_id(name, version);
    let mut manifest = Manifest {
        format: FORMAT,
        skill: name.to_owned(),
        version: version.to_string(),
        digest: String::new(),
        author: author.to_owned(),
        time: crate::edit::history::now(),
        notes: notes.map(str::to_owned),
        files_id: id.clone(),
        files: listed,
    };
    manifest.digest = manifest.files_digest();

    let dir = layout::files_dir(source, name, version, &id)?;
    let mut written = Vec::with_capacity(files.len());
    for (relative, data) in files {
        let path = dir.join(&relative)?;
        if let Err(e) = backend.put(&path, data, PutMode::Create).await {
            discard(backend, &written).await;
            return Err(e.into());
        }
        written.push(path);
    }
    let bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::ReleaseRefused(e.to_string()))?;
    match backend.put(&manifest_path, Bytes::from(bytes), PutMode::Create).await {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            discard(backend, &written).await;
            return Err(exists(&manifest_path, name, version));
        }
        Err(e) => {
            discard(backend, &written).await;
            return Err(e.into());
        }
    }
    let moved = store::update_channels(backend, source, name, |c| {
        c.released(version);
        Ok(())
    })
    .await;
    if let Err(e) = moved {
        tracing::warn!(skill = name, %version, error = %e, "a release was made but its channels did not move");
        warnings.push(format!(
            "`{name}@{version}` was released, but its channels could not be moved ({e}); `skill tag {name} latest {version}` moves `latest`"
        ));
    }
    Ok(Released { manifest, warnings })
}

fn exists(path: &VPath, name: &str, version: &semver::Version) -> Error {
    skillstore_backends::Error::at(ErrorKind::AlreadyExists, path)
        .with_detail(format!(
            "`{name}@{version}` is already released; a release is never made twice"
        ))
        .into()
}

/// Every file of the working copy of `name`, as a confined read serves it,
/// with its bytes.
async fn working_copy(
    backend: &dyn SkillBackend,
    source: &VPath,
    name: &str,
    limit: u64,
) -> Result<Vec<(String, Bytes)>> {
    if !skillstore_backends::is_valid_segment(name) || name.starts_with('.') {
        return Err(Error::Usage(format!(
            "`{}` is not a skill directory name",
            name.escape_debug()
        )));
    }
    let skill_dir = source.join(name)?;
    let listed = match crate::skill_files::list(backend, &skill_dir, limit, FileLimits::default()).await {
        Ok(listed) => listed,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_here(name)),
        Err(e) => return Err(e.into()),
    };
    if listed.truncated {
        return Err(Error::ReleaseRefused(format!(
            "`{name}` holds more files than a release may ({})",
            FileLimits::default().max_files
        )));
    }
    if !listed.files.iter().any(|f| f.relative == SKILL_FILE) {
        return Err(not_here(name));
    }
    let read = listed.read_options();
    let mut files = Vec::with_capacity(listed.files.len());
    for chunk in listed.files.chunks(READ_BATCH) {
        let paths: Vec<VPath> = chunk.iter().map(|f| f.path.clone()).collect();
        for (file, blob) in chunk.iter().zip(backend.read_many(&paths, read).await) {
            files.push((file.relative.clone(), blob?.data));
        }
    }
    Ok(files)
}

fn not_here(name: &str) -> Error {
    Error::ReleaseRefused(format!("the source holds no skill `{name}` to release"))
}

/// SKILL.md passes strict validation, and its `metadata.version`, when
/// present, names `version`.
fn check_skill_md(name: &str, version: &semver::Version, data: &[u8]) -> Result<()> {
    let parsed = parse_skill_md(data, Some(name), Strictness::Strict);
    if !parsed.is_valid() {
        return Err(Error::InvalidSkill {
            skill: name.to_owned(),
            problems: parsed.problems,
        });
    }
    let declared = parsed.skill.as_ref().and_then(|s| s.metadata.get(VERSION_KEY));
    if let Some(declared) = declared
        && declared.trim() != version.to_string()
    {
        return Err(Error::ReleaseRefused(format!(
            "the SKILL.md of `{name}` says `metadata.version: {}`, not {version}",
            declared.escape_debug()
        )));
    }
    Ok(())
}

/// Removes, best effort, the files a failed attempt wrote into its own
/// directory (no manifest names them).
async fn discard(backend: &dyn SkillBackend, written: &[VPath]) {
    for path in written.iter().rev() {
        if let Err(e) = backend.delete(path).await {
            tracing::debug!(%path, error = %e, "a file of a failed release attempt was left");
        }
    }
}

//! A release's manifest (`VERSION.json`): what the release is, written once
//! and never again.
//!
//! ```json
//! {"format": 1, "skill": "pdf", "version": "1.2.0", "digest": "sha256:...",
//!  "author": "ana", "time": "2026-01-02T03:04:05.000Z", "notes": "...",
//!  "files_id": "0123456789abcdef",
//!  "files": [{"path": "SKILL.md", "sha256": "...", "size": 120}]}
//! ```
//!
//! A manifest read back is refused whole ([`Manifest::parse`]) unless it
//! names the skill and version its place says, its files directory is a
//! well-formed id, every file's path is one the content rule admits, and
//! its digest is the digest of its files: a planted or edited manifest can
//! neither point outside its release nor disagree with itself.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::integrity::digest::digest_lines;

/// The manifest format written.
pub const FORMAT: u32 = 1;

/// The largest manifest read, in bytes (4 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;

/// One file of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseFile {
    /// The path relative to the skill's directory.
    pub path: String,
    /// The lowercase hex SHA-256 of its bytes.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
}

/// What a release is: its skill, version, digest, author, time, notes and
/// files. Every field is fixed when the release is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The manifest format (1).
    pub format: u32,
    /// The skill's name.
    pub skill: String,
    /// The version, as [`super::version::parse_version`] accepts it.
    pub version: String,
    /// The skill digest of the files (`sha256:` and 64 hex digits), the
    /// same digest the working copy had when released.
    pub digest: String,
    /// Who made the release.
    pub author: String,
    /// When, RFC 3339 in UTC.
    pub time: String,
    /// The release notes, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// The name of the directory, beside the manifest, holding the files.
    pub files_id: String,
    /// Every file, sorted by path bytes.
    pub files: Vec<ReleaseFile>,
}

impl Manifest {
    /// The file at `path` (relative to the skill's directory), if the
    /// release holds it.
    pub fn file(&self, path: &str) -> Option<&ReleaseFile> {
        self.files.iter().find(|f| f.path == path)
    }

    /// The version, parsed.
    pub fn semver(&self) -> semver::Version {
        // `parse` checked it; a manifest built here holds a parsed one.
        semver::Version::parse(&self.version).unwrap_or_else(|_| semver::Version::new(0, 0, 0))
    }

    /// Reads a manifest from `bytes`, found at the place of `skill` at
    /// `version`, refusing it whole (with [`Error::ReleaseRefused`]) unless
    /// every rule in the module's description holds.
    pub fn parse(bytes: &[u8], skill: &str, version: &semver::Version) -> Result<Manifest> {
        let refuse =
            |why: String| Error::ReleaseRefused(format!("the manifest of `{skill}@{version}` is refused: {why}"));
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| refuse(e.to_string()))?;
        if manifest.format != FORMAT {
            return Err(refuse(format!("format {} is not {FORMAT}", manifest.format)));
        }
        if manifest.skill != skill || manifest.version != version.to_string() {
            return Err(refuse("it names another release".into()));
        }
        if !super::layout::is_id(&manifest.files_id) {
            return Err(refuse("its files directory is not a release id".into()));
        }
        let mut previous: Option<&str> = None;
        for file in &manifest.files {
            let bad_path = file.path.starts_with('/')
                || skillstore_backends::VPath::root().join(&file.path).is_err()
                || crate::content::refusal(&file.path).is_some();
            if bad_path {
                return Err(refuse(format!(
                    "`{}` is not a path a skill may hold",
                    file.path.escape_debug()
                )));
            }
            let hex = file.sha256.len() == 64 && file.sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            if !hex {
                return Err(refuse(format!("`{}` has no SHA-256", file.path.escape_debug())));
            }
            if previous.is_some_and(|p| p.as_bytes() >= file.path.as_bytes()) {
                return Err(refuse("its files are not sorted, or one is named twice".into()));
            }
            previous = Some(&file.path);
        }
        if manifest.file(crate::skill::SKILL_FILE).is_none() {
            return Err(refuse("it holds no SKILL.md".into()));
        }
        if manifest.digest != manifest.files_digest() {
            return Err(refuse("its digest is not the digest of its files".into()));
        }
        Ok(manifest)
    }

    /// The skill digest of [`Manifest::files`].
    pub fn files_digest(&self) -> String {
        digest_lines(self.files.iter().map(|f| (f.path.as_str(), f.sha256.as_str())))
    }
}

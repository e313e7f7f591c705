//! A skill's manifest for the MCP Skills extension: its frontmatter as
//! JSON and every file with its `sha256:` digest and size. The files are
//! those [`skillstore::Catalog::skill_files`] lists (exactly what a
//! confined read of the skill serves), and every digest comes from that
//! same confined read. Digests are kept in the tenant's
//! [`crate::digest::DigestCache`]: a file is read and hashed only when it
//! shows a version not seen before. A file that cannot be read is left out
//! of the manifest with its kind; it never fails the skill or the page.

use std::sync::Arc;

use skillstore::backends::ErrorKind;
use skillstore::{Catalog, FileLimits, LeftOut, LeftOutKind, SKILL_FILE, Skill};

use crate::digest::DigestCache;

/// How far a manifest lists a skill's files.
const LIMITS: FileLimits = FileLimits {
    max_depth: 32,
    max_files: 10_000,
    max_reported: 100,
};

/// One file of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The path relative to the skill's directory.
    pub relative: String,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    /// The size in bytes.
    pub size: u64,
}

/// A skill's frontmatter and files.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The SKILL.md frontmatter as written, as JSON.
    pub frontmatter: serde_json::Map<String, serde_json::Value>,
    /// Every file a confined read of the skill serves, SKILL.md included,
    /// in listing order.
    pub files: Vec<FileEntry>,
    /// What the skill's directory holds that is not among `files`, with
    /// why (at most [`FileLimits::max_reported`] of them).
    pub left_out: Vec<LeftOut>,
    /// True when the listing was cut short at its file count bound.
    pub truncated: bool,
    /// The skill digest ([`skillstore::integrity::digest_lines`]) over
    /// `files`, when every listed file was digested and nothing was cut
    /// short: the digest [`Catalog::skill_digest`] gives, from this one
    /// listing.
    pub digest: Option<String>,
}

/// Builds the manifest of `skill` from `catalog`'s namespace.
pub async fn build(
    digests: &DigestCache,
    catalog: &Catalog,
    skill: &Skill,
) -> Result<Arc<Manifest>, skillstore::Error> {
    let listed = catalog.skill_files(skill.name(), LIMITS).await?;
    let backend = catalog.backend();
    let read = listed.read_options();
    let mut files = Vec::with_capacity(listed.files.len());
    let mut left_out = listed.left_out.clone();
    let mut frontmatter = None;
    for file in &listed.files {
        let path = file.path.as_str();
        let is_skill_md = file.relative == SKILL_FILE;
        let cached = file.version.as_ref().and_then(|v| {
            let digest = digests.get(path, v)?;
            if is_skill_md {
                frontmatter = Some(digests.frontmatter(path, v)?);
            }
            Some(digest)
        });
        let (digest, size) = match cached {
            Some(hit) => hit,
            None => match backend.read(&file.path, read).await {
                Ok(blob) => {
                    if is_skill_md {
                        let fm = Arc::new(frontmatter_of(&blob.data));
                        digests.keep_frontmatter(path, &blob.version, Arc::clone(&fm));
                        frontmatter = Some(fm);
                    }
                    digests.compute(path, &blob.version, &blob.data)
                }
                Err(e) => {
                    if left_out.len() < LIMITS.max_reported {
                        left_out.push(LeftOut {
                            relative: file.relative.clone(),
                            kind: LeftOutKind::Storage(e.kind()),
                        });
                    }
                    if e.kind() == ErrorKind::Unavailable {
                        tracing::debug!(path = %file.path, error = ?e, "cannot read a file for its digest");
                    }
                    continue;
                }
            },
        };
        files.push(FileEntry {
            relative: file.relative.clone(),
            digest,
            size,
        });
    }
    let frontmatter = match frontmatter {
        Some(fm) => (*fm).clone(),
        None => match catalog.read_skill(skill.name()).await {
            Ok(bytes) => frontmatter_of(&bytes),
            Err(_) => serde_json::Map::new(),
        },
    };
    let whole = !listed.truncated && files.len() == listed.files.len();
    let digest = whole.then(|| {
        skillstore::integrity::digest_lines(files.iter().map(|f| {
            (
                f.relative.as_str(),
                f.digest.strip_prefix("sha256:").unwrap_or(&f.digest),
            )
        }))
    });
    Ok(Arc::new(Manifest {
        frontmatter,
        files,
        left_out,
        truncated: listed.truncated,
        digest,
    }))
}

/// The YAML frontmatter of a SKILL.md as a JSON object (empty when there
/// is none or it does not parse: the catalog has already reported that).
pub fn frontmatter_of(bytes: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return serde_json::Map::new();
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return serde_json::Map::new();
    };
    let mut end = None;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            end = Some(offset);
            break;
        }
        offset += line.len();
    }
    let Some(end) = end else {
        return serde_json::Map::new();
    };
    match serde_yaml::from_str::<serde_json::Value>(&rest[..end]) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_is_the_yaml_as_json() {
        let fm = frontmatter_of(
            b"---\nname: pdf\ndescription: Read PDFs.\nmetadata:\n  version: \"2\"\nallowed-tools: [Read]\n---\nBody\n",
        );
        assert_eq!(
            serde_json::Value::Object(fm),
            serde_json::json!({"name": "pdf", "description": "Read PDFs.", "metadata": {"version": "2"}, "allowed-tools": ["Read"]})
        );
        assert!(frontmatter_of(b"no frontmatter").is_empty());
    }
}

//! A skill's manifest for the MCP Skills extension: its frontmatter as
//! JSON and every file with its `sha256:` digest and size. Digests come
//! from the tenant's [`crate::digest::DigestCache`]: a file is read and
//! hashed only when the backend reports a version not seen before.

use std::sync::Arc;

use skillstore::backends::{ReadOptions, VPath};
use skillstore::{Catalog, SKILL_FILE, Skill};

use crate::tenant::Tenant;

/// The most files a manifest lists, and how deep it looks.
const MAX_FILES: usize = 10_000;
const MAX_DEPTH: usize = 32;

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
    /// Every file of the skill, SKILL.md included, in listing order.
    pub files: Vec<FileEntry>,
}

/// Builds the manifest of `skill` from `catalog`'s namespace.
pub async fn build(tenant: &Tenant, catalog: &Catalog, skill: &Skill) -> Result<Arc<Manifest>, skillstore::Error> {
    let (relatives, _) = catalog.list_files(skill.name(), MAX_DEPTH, MAX_FILES).await?;
    let dir = skill.dir();
    let paths: Vec<VPath> = relatives.iter().map(|r| dir.join(r)).collect::<Result<_, _>>()?;
    let backend = catalog.backend();
    let limit = tenant.namespace().load_options().read_limit;
    let stats = backend.stat_many(&paths).await;
    let mut files = Vec::with_capacity(paths.len());
    let mut frontmatter = None;
    for ((relative, path), stat) in relatives.into_iter().zip(&paths).zip(stats) {
        let version = stat?.version;
        let is_skill_md = relative == SKILL_FILE;
        let cached = version.as_ref().and_then(|v| {
            let digest = tenant.digests.get(path.as_str(), v)?;
            if is_skill_md {
                let fm = tenant.digests.frontmatter(path.as_str(), v)?;
                frontmatter = Some(fm);
            }
            Some(digest)
        });
        let (digest, size) = match cached {
            Some(hit) => hit,
            None => {
                let blob = backend.read(path, ReadOptions::with_limit(limit)).await?;
                if is_skill_md {
                    let fm = Arc::new(frontmatter_of(&blob.data));
                    tenant
                        .digests
                        .keep_frontmatter(path.as_str(), &blob.version, Arc::clone(&fm));
                    frontmatter = Some(fm);
                }
                tenant.digests.compute(path.as_str(), &blob.version, &blob.data)
            }
        };
        files.push(FileEntry { relative, digest, size });
    }
    let frontmatter = match frontmatter {
        Some(fm) => (*fm).clone(),
        None => frontmatter_of(&catalog.read_skill(skill.name()).await?),
    };
    Ok(Arc::new(Manifest { frontmatter, files }))
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

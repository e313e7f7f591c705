//! A tenant's winners published for Agent Skills discovery (RFC 8615
//! well-known URIs, index schema 0.2.0): the index and the artifact of
//! every entry.
//!
//! One entry per enabled winner whose name follows the specification's
//! naming rule (other names are left out: clients skip them) and whose
//! description is not empty. A skill that is only `SKILL.md` is served as
//! `type: skill-md` (the file's bytes); any other as `type: archive`, a
//! rooted zip ([`skillstore::pack_rooted`]: `SKILL.md` at the archive's
//! root) of exactly the files a confined read of the skill serves
//! ([`skillstore::Catalog::skill_files`]). Each entry's `digest` is the
//! `sha256:` of the very bytes its `url` serves. URLs are relative to the
//! index (`NAME/SKILL.md`, `NAME.zip`), so the same index is right at the
//! root and under a tenant's prefix.
//!
//! Artifacts are built once per skill version: a skill's files, their
//! versions and sizes make its fingerprint, and an artifact is rebuilt
//! only when that changes. Packing is deterministic, so a rebuilt
//! artifact of unchanged files has the same digest.
//!
//! A skill served from a source several tenants share
//! ([`skillstore::source_pool`]) is built once for all of them: its
//! artifact is found by the shared source's key, its name and its
//! fingerprint in one process-wide table, which holds artifacts weakly (an
//! artifact goes when no tenant's index holds it). A fingerprint is only
//! ever compared within one storage (one tenant's, or one shared source's),
//! where a path's version names its bytes, so a table entry is never
//! another storage's skill.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use serde::Serialize;
use skillstore::{ArchiveFile, ArchiveLimits, Catalog, FileLimits, SKILL_FILE, Skill};

use crate::tenant::Rendered;

/// The `$schema` of the index served.
pub const SCHEMA_V2: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";

/// The longest description an entry carries, counted as the `skills`
/// command counts it (UTF-16 code units); longer ones are cut.
pub const MAX_DESCRIPTION: usize = 1024;

/// How far a skill's files are listed for its archive.
/// The most bytes a skill's files may hold to be served as an artifact
/// (what a reader takes for one archive).
pub const MAX_ARTIFACT_INPUT_BYTES: u64 = 64 * 1024 * 1024;

const LIMITS: FileLimits = FileLimits {
    max_depth: 32,
    max_files: 4096,
    max_reported: 16,
};

/// Skills whose artifacts are built at once.
const PARALLEL: usize = 8;

/// How an artifact is distributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactType {
    /// The skill's `SKILL.md`, alone.
    SkillMd,
    /// A rooted zip of the skill's files.
    Archive,
}

/// One artifact: its bytes and their digest.
#[derive(Debug)]
pub struct Artifact {
    /// How it is distributed.
    pub kind: ArtifactType,
    /// The bytes served at its URL.
    pub bytes: Bytes,
    /// `sha256:` and the 64 lowercase hex digits of `bytes`.
    pub digest: String,
}

impl Artifact {
    fn new(kind: ArtifactType, bytes: Bytes) -> Self {
        let digest = format!("sha256:{}", crate::digest::sha256_hex(&bytes));
        Artifact { kind, bytes, digest }
    }

    /// The strong entity tag: the hex digest, quoted.
    pub fn etag(&self) -> String {
        format!("\"{}\"", &self.digest["sha256:".len()..])
    }

    /// The content type it is served with.
    pub fn content_type(&self) -> &'static str {
        match self.kind {
            ArtifactType::SkillMd => "text/markdown; charset=utf-8",
            ArtifactType::Archive => "application/zip",
        }
    }
}

/// The index of one catalog snapshot and every artifact it names.
#[derive(Debug)]
pub struct Published {
    /// `index.json`, rendered.
    pub index: Rendered,
    artifacts: HashMap<String, Arc<Artifact>>,
}

impl Published {
    /// The artifact of the entry `name`, if the index has one.
    pub fn artifact(&self, name: &str) -> Option<&Arc<Artifact>> {
        self.artifacts.get(name)
    }
}

/// Artifacts of shared sources' skills: (shared source's key, skill name,
/// fingerprint) -> the artifact, while some tenant holds it.
type SharedTable = HashMap<(Arc<str>, String, u64), std::sync::Weak<Artifact>>;

static SHARED: std::sync::LazyLock<Mutex<SharedTable>> = std::sync::LazyLock::new(Mutex::default);

/// The process-wide table of shared sources' artifacts.
fn shared_table() -> std::sync::MutexGuard<'static, SharedTable> {
    SHARED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Artifacts by skill name, with the fingerprint they were built from.
#[derive(Debug, Default)]
pub struct ArtifactCache {
    /// The key of each shared source, by source name.
    shared: HashMap<String, Arc<str>>,
    by_name: Mutex<HashMap<String, (u64, Arc<Artifact>)>>,
    /// Skills left out, by the fingerprint they were left out at: not
    /// read and packed again until they change.
    refused: Mutex<HashMap<String, u64>>,
}

impl ArtifactCache {
    /// A cache for one load of a tenant whose sources named in `shared`
    /// (source name -> shared source's key) are shared with other tenants.
    pub fn new(shared: HashMap<String, Arc<str>>) -> Self {
        ArtifactCache {
            shared,
            ..ArtifactCache::default()
        }
    }

    fn get(&self, skill: &Skill, fingerprint: u64) -> Option<Arc<Artifact>> {
        let name = skill.name();
        let map = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        let own = map
            .get(name)
            .filter(|(f, _)| *f == fingerprint)
            .map(|(_, a)| Arc::clone(a));
        drop(map);
        if own.is_some() {
            return own;
        }
        let key = self.shared.get(&skill.source)?;
        let hit = shared_table()
            .get(&(Arc::clone(key), name.to_owned(), fingerprint))?
            .upgrade()?;
        self.keep_own(name, fingerprint, &hit);
        Some(hit)
    }

    fn keep(&self, skill: &Skill, fingerprint: u64, artifact: &Arc<Artifact>) {
        self.keep_own(skill.name(), fingerprint, artifact);
        if let Some(key) = self.shared.get(&skill.source) {
            let mut table = shared_table();
            // Dead entries are dropped as the table doubles, so it stays
            // within twice what tenants hold.
            if table.len() >= 1024 && table.len().is_power_of_two() {
                table.retain(|_, artifact| artifact.strong_count() > 0);
            }
            table.insert(
                (Arc::clone(key), skill.name().to_owned(), fingerprint),
                Arc::downgrade(artifact),
            );
        }
    }

    fn keep_own(&self, name: &str, fingerprint: u64, artifact: &Arc<Artifact>) {
        let mut map = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(name.to_owned(), (fingerprint, Arc::clone(artifact)));
    }

    /// Drops every artifact not named in `names`.
    fn retain(&self, names: &HashMap<String, Arc<Artifact>>) {
        let mut map = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|name, _| names.contains_key(name));
    }

    fn is_refused(&self, name: &str, fingerprint: u64) -> bool {
        let map = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        map.get(name) == Some(&fingerprint)
    }

    fn refuse(&self, name: &str, fingerprint: u64) {
        let mut map = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(name.to_owned(), fingerprint);
    }
}

use skillstore::backends::is_index_name;

/// `text` cut to at most [`MAX_DESCRIPTION`] UTF-16 code units, on a
/// character boundary.
pub fn cap_description(text: &str) -> &str {
    let mut units = 0;
    for (at, c) in text.char_indices() {
        units += c.len_utf16();
        if units > MAX_DESCRIPTION {
            return &text[..at];
        }
    }
    text
}

/// One entry of the index as written.
#[derive(Serialize)]
struct IndexEntry<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: ArtifactType,
    description: &'a str,
    url: String,
    digest: &'a str,
}

/// Builds the index of `catalog`'s enabled winners, reusing `cache`'s
/// artifacts of unchanged skills. A skill whose files cannot all be
/// listed or read is left out of the index (and logged), never served
/// in part.
pub async fn publish(catalog: &Catalog, cache: &ArtifactCache) -> Published {
    let candidates: Vec<Skill> = catalog
        .enabled()
        .filter(|skill| {
            let keep = is_index_name(skill.name()) && !skill.metadata.description.trim().is_empty();
            if !keep {
                tracing::debug!(skill = %skill.name(), "left out of the discovery index: its name or description does not qualify");
            }
            keep
        })
        .cloned()
        .collect();
    let built: Vec<Option<Arc<Artifact>>> = futures::stream::iter(candidates.clone())
        .map(|skill| {
            let catalog = catalog.clone();
            async move { artifact(&catalog, cache, &skill).await }
        })
        .buffered(PARALLEL)
        .collect()
        .await;
    let mut entries = Vec::with_capacity(candidates.len());
    let mut artifacts = HashMap::with_capacity(candidates.len());
    for (skill, artifact) in candidates.iter().zip(built) {
        let Some(artifact) = artifact else { continue };
        artifacts.insert(skill.name().to_owned(), Arc::clone(&artifact));
        entries.push((skill, artifact));
    }
    cache.retain(&artifacts);
    let listed: Vec<IndexEntry<'_>> = entries
        .iter()
        .map(|(skill, artifact)| IndexEntry {
            name: skill.name(),
            kind: artifact.kind,
            description: cap_description(&skill.metadata.description),
            url: match artifact.kind {
                ArtifactType::SkillMd => format!("{}/{SKILL_FILE}", skill.name()),
                ArtifactType::Archive => format!("{}.zip", skill.name()),
            },
            digest: &artifact.digest,
        })
        .collect();
    let mut body = serde_json::to_vec_pretty(&serde_json::json!({
        "$schema": SCHEMA_V2,
        "skills": listed,
    }))
    .expect("an index serializes");
    body.push(b'\n');
    Published {
        index: Rendered::new(body),
        artifacts,
    }
}

/// The artifact of `skill`, from the cache when its files are unchanged.
async fn artifact(catalog: &Catalog, cache: &ArtifactCache, skill: &Skill) -> Option<Arc<Artifact>> {
    let name = skill.name();
    let listed = match catalog.skill_files(name, LIMITS).await {
        Ok(listed) if !listed.truncated => listed,
        Ok(_) => {
            tracing::warn!(skill = %name, "left out of the discovery index: more files than an archive holds");
            return None;
        }
        Err(e) => {
            tracing::warn!(skill = %name, error = %e, "left out of the discovery index: its files cannot be listed");
            return None;
        }
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    skill.path.as_str().hash(&mut hasher);
    let mut versioned = true;
    for file in &listed.files {
        file.relative.hash(&mut hasher);
        file.size.hash(&mut hasher);
        match &file.version {
            Some(v) => v.as_str().hash(&mut hasher),
            None => versioned = false,
        }
    }
    let fingerprint = hasher.finish();
    if versioned && let Some(hit) = cache.get(skill, fingerprint) {
        return Some(hit);
    }
    if versioned && cache.is_refused(name, fingerprint) {
        return None;
    }
    let refuse = || {
        if versioned {
            cache.refuse(name, fingerprint);
        }
        None
    };
    // The bytes read before packing are bounded by the sizes listed: a
    // skill of many files under the read limit is left out, not held.
    let total: u64 = listed.files.iter().map(|f| f.size).sum();
    if total > MAX_ARTIFACT_INPUT_BYTES {
        tracing::warn!(skill = %name, bytes = total, "left out of the discovery index: its files hold more than an artifact may");
        return refuse();
    }
    let read = listed.read_options();
    let backend = catalog.backend();
    let mut files = Vec::with_capacity(listed.files.len());
    let mut as_listed = versioned;
    for file in &listed.files {
        match backend.read(&file.path, read).await {
            Ok(blob) => {
                // A file changed since it was listed: this artifact is
                // served, but not kept under the listed versions.
                as_listed &= file.version.as_ref() == Some(&blob.version);
                files.push(ArchiveFile {
                    path: file.relative.clone(),
                    data: blob.data,
                })
            }
            Err(e) => {
                tracing::warn!(skill = %name, file = %file.relative, error = ?e, "left out of the discovery index: a file cannot be read");
                return None;
            }
        }
    }
    let artifact = match files.as_slice() {
        [only] if only.path == SKILL_FILE => Artifact::new(ArtifactType::SkillMd, only.data.clone()),
        _ => {
            // Packing compresses and checks every byte: off the async runtime.
            let owned = name.to_owned();
            let packed =
                tokio::task::spawn_blocking(move || skillstore::pack_rooted(&owned, &files, &ArchiveLimits::default()))
                    .await;
            match packed {
                Ok(Ok(bytes)) => Artifact::new(ArtifactType::Archive, Bytes::from(bytes)),
                Ok(Err(e)) => {
                    tracing::warn!(skill = %name, error = %e, "left out of the discovery index: cannot be packed");
                    return refuse();
                }
                Err(e) => {
                    tracing::warn!(skill = %name, error = %e, "left out of the discovery index: packing stopped");
                    return None;
                }
            }
        }
    };
    let artifact = Arc::new(artifact);
    if as_listed {
        cache.keep(skill, fingerprint, &artifact);
    }
    Some(artifact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_specification() {
        for good in ["a", "pdf", "pdf-2", "a1-b2-c3", &"x".repeat(64)] {
            assert!(is_index_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", "ü", &"x".repeat(65)] {
            assert!(!is_index_name(bad), "{bad}");
        }
    }

    #[test]
    fn descriptions_are_cut_in_utf16_units_on_character_boundaries() {
        let short = "x".repeat(1024);
        assert_eq!(cap_description(&short), short);
        assert_eq!(cap_description(&"x".repeat(1025)).len(), 1024);
        // One astral character is two UTF-16 units: 511 of them and a half
        // would be 1024 + 1.
        let astral = "𝄞".repeat(513);
        let cut = cap_description(&astral);
        assert_eq!(cut.chars().count(), 512);
        assert_eq!(cut.encode_utf16().count(), 1024);
    }
}

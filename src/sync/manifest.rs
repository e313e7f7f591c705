//! What one generation of a synced tree holds, as the sync that wrote it
//! recorded it: every skill, the source version and SHA-256 of every file,
//! what was refused, and the identity (inode, size, mode, change time) of
//! every file and directory written. A tree on disk is recognized as a
//! generation only by matching these records, never by where it is or by
//! its directory's inode alone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest format written by this version: skill directories are
/// switched one by one inside `DIR`, and each one's birth is recorded.
pub(crate) const FORMAT: u32 = 3;

/// The format of the version that replaced `DIR` whole; its manifests are
/// read so that its generation is taken over skill by skill.
pub(crate) const FORMAT_WHOLE: u32 = 2;

/// One generation's contents, keyed by skill name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) format: u32,
    /// The generation's identifier: unique, and ordered by creation time.
    pub(crate) id: String,
    /// Whether the generation was written with `keep_modes`.
    pub(crate) keep_modes: bool,
    pub(crate) skills: BTreeMap<String, SkillRecord>,
    /// Every directory written, by path relative to the generation's root
    /// (`""` is the root), with its inode.
    pub(crate) dirs: BTreeMap<String, u64>,
    /// When the root directory was made, where the filesystem records it:
    /// a directory made later on the same inode is not the root.
    #[serde(default)]
    pub(crate) root_birth: Option<(i64, u32)>,
    /// When each skill's directory was made, where the filesystem records
    /// it: a directory made later on the same inode is not the skill's.
    #[serde(default)]
    pub(crate) births: BTreeMap<String, (i64, u32)>,
}

/// One skill of a generation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SkillRecord {
    /// The source it won from.
    pub(crate) source: String,
    /// Its directory in the namespace.
    pub(crate) dir: String,
    /// Its files by relative path.
    pub(crate) files: BTreeMap<String, FileRecord>,
    /// Files listed but refused when read, by relative path, with the kind.
    #[serde(default)]
    pub(crate) refused: BTreeMap<String, String>,
}

impl SkillRecord {
    /// The skill digest ([`crate::integrity::digest`]) of the files this
    /// generation holds for the skill, from their recorded hashes; `None`
    /// when a hash does not decode.
    pub(crate) fn digest(&self) -> Option<String> {
        let mut lines = Vec::with_capacity(self.files.len());
        for (relative, file) in &self.files {
            let raw = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(&file.sha256)
                .ok()?;
            lines.push((relative.as_str(), crate::integrity::digest::hex(&raw)));
        }
        Some(crate::integrity::digest::digest_lines(
            lines.iter().map(|(relative, hex)| (*relative, hex.as_str())),
        ))
    }
}

/// One file of a generation: the source's version of the bytes, their
/// digest, and the local file they were written to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileRecord {
    pub(crate) version: String,
    pub(crate) size: u64,
    pub(crate) mode: u32,
    pub(crate) ino: u64,
    /// The change time after the last link was made or removed by sync.
    pub(crate) ctime: (i64, i64),
    /// SHA-256 of the bytes, base64.
    pub(crate) sha256: String,
}

impl Manifest {
    /// An empty manifest of the current format with a new identifier.
    pub(crate) fn new(keep_modes: bool) -> Self {
        Manifest {
            format: FORMAT,
            id: new_id(),
            keep_modes,
            skills: BTreeMap::new(),
            dirs: BTreeMap::new(),
            root_birth: None,
            births: BTreeMap::new(),
        }
    }

    /// The record of the file at `local` (`NAME/RELPATH`).
    pub(crate) fn file(&self, local: &str) -> Option<&FileRecord> {
        let (name, relative) = local.split_once('/')?;
        self.skills.get(name)?.files.get(relative)
    }

    /// The record of the file at `local`, to update.
    pub(crate) fn file_mut(&mut self, local: &str) -> Option<&mut FileRecord> {
        let (name, relative) = local.split_once('/')?;
        self.skills.get_mut(name)?.files.get_mut(relative)
    }

    /// Every file as `(NAME/RELPATH, record)`.
    pub(crate) fn files(&self) -> impl Iterator<Item = (String, &FileRecord)> {
        self.skills
            .iter()
            .flat_map(|(name, skill)| skill.files.iter().map(move |(rel, r)| (format!("{name}/{rel}"), r)))
    }

    /// How many files the generation holds.
    pub(crate) fn file_count(&self) -> usize {
        self.skills.values().map(|s| s.files.len()).sum()
    }
}

/// The base64 SHA-256 of `bytes`, as a manifest records it.
pub(crate) fn digest(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(bytes))
}

/// A new generation identifier (see [`Manifest::new`]).
pub(crate) fn fresh_id() -> String {
    new_id()
}

/// A new generation identifier: the time in nanoseconds, the process and
/// a counter, fixed-width hex so that names sort by creation.
fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{nanos:016x}-{:08x}-{:04x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}

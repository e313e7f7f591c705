//! What one generation of a synced tree holds: every skill, every file's
//! source version, and the identity of the file written for it, so that the
//! next sync can reuse files whose version has not changed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The manifest format written by this version.
pub(crate) const FORMAT: u32 = 1;

/// One generation's contents, keyed by skill name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) format: u32,
    /// Whether the generation was written with `keep_modes`.
    pub(crate) keep_modes: bool,
    pub(crate) skills: BTreeMap<String, SkillRecord>,
}

/// One skill of a generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SkillRecord {
    /// The source it won from.
    pub(crate) source: String,
    /// Its directory in the namespace.
    pub(crate) dir: String,
    /// Its files by relative path.
    pub(crate) files: BTreeMap<String, FileRecord>,
}

/// One file of a generation: the source's version of the bytes, and the
/// local file they were written to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileRecord {
    pub(crate) version: String,
    pub(crate) size: u64,
    pub(crate) mode: u32,
    pub(crate) ino: u64,
    pub(crate) mtime: (i64, i64),
}

impl Manifest {
    /// An empty manifest of the current format.
    pub(crate) fn new(keep_modes: bool) -> Self {
        Manifest {
            format: FORMAT,
            keep_modes,
            skills: BTreeMap::new(),
        }
    }
}

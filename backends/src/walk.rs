//! [`SkillBackendExt::walk`](crate::SkillBackendExt::walk): every file
//! under a directory, within limits, never through a directory link.

use crate::backend::{Entry, EntryKind, SkillBackend};
use crate::error::{ErrorKind, Result};
use crate::vpath::VPath;

/// The bounds of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkLimits {
    /// How many directory levels below the walked one are entered: 0 lists
    /// the walked directory only.
    pub max_depth: usize,
    /// The most files returned; the walk stops there and says it was cut
    /// short.
    pub max_files: usize,
}

impl Default for WalkLimits {
    /// 32 levels and 100,000 files.
    fn default() -> Self {
        WalkLimits {
            max_depth: 32,
            max_files: 100_000,
        }
    }
}

/// What a walk found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Walk {
    /// The files, in the order met (names sorted within each directory,
    /// each directory's files before its subdirectories' files). A link to
    /// a file is a file here, with [`Entry::symlink`] set.
    pub files: Vec<WalkedFile>,
    /// What the walk did not enter or return, with why.
    pub passed_over: Vec<PassedOver>,
    /// True when [`WalkLimits::max_files`] stopped the walk.
    pub truncated: bool,
}

/// One file of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkedFile {
    /// The file's full path.
    pub path: VPath,
    /// The path below the walked directory, `/`-separated
    /// (`references/a.md`).
    pub relative: String,
    /// The file as its directory's listing gave it.
    pub entry: Entry,
}

/// Something a walk passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedOver {
    /// Its full path.
    pub path: VPath,
    /// Why it was passed over.
    pub reason: PassReason,
}

/// Why a walk passed something over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PassReason {
    /// A symbolic link to a directory: never descended into, so a link
    /// such as `up -> ..` cannot make a walk loop.
    DirectoryLink,
    /// A symbolic link the backend's policy does not resolve (out of the
    /// root, refused, dangling or looping).
    UnresolvedLink,
    /// Neither a file nor a directory: a FIFO, socket or device.
    Special,
    /// A directory below [`WalkLimits::max_depth`].
    TooDeep,
    /// A directory that could not be listed, with the error's kind.
    Unlisted(ErrorKind),
}

/// Walks `dir` on `backend`. Listing `dir` itself must succeed; a
/// subdirectory that cannot be listed is passed over.
pub(crate) async fn walk<B: SkillBackend + ?Sized>(backend: &B, dir: &VPath, limits: WalkLimits) -> Result<Walk> {
    let mut walk = Walk::default();
    // Directories still to list, deepest-last so the walk is depth first:
    // (path, relative path, depth).
    let mut pending: Vec<(VPath, String, usize)> = vec![(dir.clone(), String::new(), 0)];
    let mut first = true;
    while let Some((current, relative, depth)) = pending.pop() {
        let mut entries = match backend.list(&current).await {
            Ok(entries) => entries,
            Err(e) if first => return Err(e),
            Err(e) => {
                walk.passed_over.push(PassedOver {
                    path: current,
                    reason: PassReason::Unlisted(e.kind()),
                });
                continue;
            }
        };
        first = false;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subdirs = Vec::new();
        for entry in entries {
            let path = current.join(&entry.name)?;
            let below = if relative.is_empty() {
                entry.name.clone()
            } else {
                format!("{relative}/{}", entry.name)
            };
            let passed = match (entry.kind, entry.symlink) {
                (EntryKind::File, _) => {
                    if walk.files.len() == limits.max_files {
                        walk.truncated = true;
                        return Ok(walk);
                    }
                    walk.files.push(WalkedFile {
                        path,
                        relative: below,
                        entry,
                    });
                    continue;
                }
                (EntryKind::Dir, true) => PassReason::DirectoryLink,
                (EntryKind::Dir, false) if depth < limits.max_depth => {
                    subdirs.push((path, below, depth + 1));
                    continue;
                }
                (EntryKind::Dir, false) => PassReason::TooDeep,
                (EntryKind::Other, true) => PassReason::UnresolvedLink,
                (EntryKind::Other, false) => PassReason::Special,
            };
            walk.passed_over.push(PassedOver { path, reason: passed });
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(walk)
}

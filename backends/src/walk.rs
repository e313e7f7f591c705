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
    /// `Some(keep)`: a directory whose name starts with `.` is not entered,
    /// but for one named `keep`, and is passed over as
    /// [`PassReason::Hidden`]; so a skill's `.git/objects` costs one entry,
    /// not a share of [`WalkLimits::max_files`]. `None` (the default)
    /// enters every directory.
    pub skip_hidden_dirs: Option<&'static str>,
}

impl Default for WalkLimits {
    /// 32 levels and 100,000 files.
    fn default() -> Self {
        WalkLimits {
            max_depth: 32,
            max_files: 100_000,
            skip_hidden_dirs: None,
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
    /// A directory whose name starts with `.`, not entered
    /// ([`WalkLimits::skip_hidden_dirs`]).
    Hidden,
}

/// Walks `dir` on `backend`. Listing `dir` itself must succeed; a
/// subdirectory that cannot be listed is passed over.
pub(crate) async fn walk<B: SkillBackend + ?Sized>(backend: &B, dir: &VPath, limits: WalkLimits) -> Result<Walk> {
    let mut walks = walk_many(backend, std::slice::from_ref(dir), limits).await;
    walks.pop().expect("one walk per directory")
}

/// Walks each of `dirs` as [`walk`] does, listing the next directory of
/// every unfinished walk in one [`SkillBackend::list_many`] batch at a
/// time, so a thousand small skills cost a few batches, not a thousand
/// listings each. Results come in the order of `dirs`.
pub(crate) async fn walk_many<B: SkillBackend + ?Sized>(
    backend: &B,
    dirs: &[VPath],
    limits: WalkLimits,
) -> Vec<Result<Walk>> {
    let mut walks: Vec<Walking> = dirs.iter().map(|d| Walking::new(d.clone())).collect();
    let batch = backend.preferred_batch().max(1);
    loop {
        let next: Vec<(usize, VPath)> = walks
            .iter()
            .enumerate()
            .filter_map(|(i, w)| w.next_dir().map(|d| (i, d.clone())))
            .collect();
        if next.is_empty() {
            break;
        }
        let paths: Vec<VPath> = next.iter().map(|(_, d)| d.clone()).collect();
        let chunks = paths.chunks(batch).map(|chunk| async move {
            let mut listed = backend.list_many(chunk).await;
            // A batch that lost answers must not leave a walk waiting.
            listed.resize_with(chunk.len(), || {
                Err(crate::error::Error::new(ErrorKind::Other).with_detail("a batch listing lost an answer"))
            });
            listed
        });
        let listed = futures::future::join_all(chunks).await.into_iter().flatten();
        for ((i, _), entries) in next.into_iter().zip(listed) {
            walks[i].take(entries, limits);
        }
    }
    walks.into_iter().map(Walking::finish).collect()
}

/// One walk in progress: what is found so far and the directories still
/// to list, deepest-last so the walk is depth first.
struct Walking {
    walk: Walk,
    /// (path, relative path, depth).
    pending: Vec<(VPath, String, usize)>,
    first: bool,
    failed: Option<crate::error::Error>,
}

impl Walking {
    fn new(dir: VPath) -> Self {
        Walking {
            walk: Walk::default(),
            pending: vec![(dir, String::new(), 0)],
            first: true,
            failed: None,
        }
    }

    /// The directory to list next, if the walk goes on.
    fn next_dir(&self) -> Option<&VPath> {
        if self.failed.is_some() || self.walk.truncated {
            return None;
        }
        self.pending.last().map(|(dir, _, _)| dir)
    }

    /// Takes the listing of [`Walking::next_dir`].
    fn take(&mut self, listed: Result<Vec<Entry>>, limits: WalkLimits) {
        let Some((current, relative, depth)) = self.pending.pop() else {
            return;
        };
        let mut entries = match listed {
            Ok(entries) => entries,
            Err(e) if self.first => {
                self.failed = Some(e);
                return;
            }
            Err(e) => {
                self.walk.passed_over.push(PassedOver {
                    path: current,
                    reason: PassReason::Unlisted(e.kind()),
                });
                return;
            }
        };
        self.first = false;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subdirs = Vec::new();
        for entry in entries {
            let path = match current.join(&entry.name) {
                Ok(path) => path,
                Err(e) => {
                    self.failed = Some(e);
                    return;
                }
            };
            let below = if relative.is_empty() {
                entry.name.clone()
            } else {
                format!("{relative}/{}", entry.name)
            };
            let passed = match (entry.kind, entry.symlink) {
                (EntryKind::File, _) => {
                    if self.walk.files.len() == limits.max_files {
                        self.walk.truncated = true;
                        return;
                    }
                    self.walk.files.push(WalkedFile {
                        path,
                        relative: below,
                        entry,
                    });
                    continue;
                }
                (EntryKind::Dir, true) => PassReason::DirectoryLink,
                (EntryKind::Dir, false)
                    if limits
                        .skip_hidden_dirs
                        .is_some_and(|keep| entry.name.starts_with('.') && entry.name != keep) =>
                {
                    PassReason::Hidden
                }
                (EntryKind::Dir, false) if depth < limits.max_depth => {
                    subdirs.push((path, below, depth + 1));
                    continue;
                }
                (EntryKind::Dir, false) => PassReason::TooDeep,
                (EntryKind::Other, true) => PassReason::UnresolvedLink,
                (EntryKind::Other, false) => PassReason::Special,
            };
            self.walk.passed_over.push(PassedOver { path, reason: passed });
        }
        self.pending.extend(subdirs.into_iter().rev());
    }

    fn finish(self) -> Result<Walk> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(self.walk),
        }
    }
}

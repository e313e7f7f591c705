//! [`GitBackend`]: one commit of a local Git repository, read from its
//! object database, with no checkout.
//!
//! Paths are resolved in the commit's tree ([`tree`]). Versions are blob
//! ids, so the same file has the same version in every clone. A read takes
//! the blob's size from its object header and refuses an object over the
//! limit before inflating it, then checks the inflated bytes against that
//! size again. Links (mode `120000`) are followed by the [`SymlinkPolicy`],
//! always inside the tree; submodules are listed as
//! [`EntryKind::Other`] and never entered; a Git LFS pointer is listed as
//! [`EntryKind::Other`] too and refused ([`ErrorKind::NotRegularFile`])
//! rather than served as if it were the file. Writes are refused with
//! [`ErrorKind::ReadOnly`].

mod cache;
pub(crate) mod tree;

pub use cache::{GitCache, Resolution};

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind as Mode;

use crate::backend::{
    Blob, Capabilities, DeepFile, DeepLimits, DeepListing, Entry, EntryKind, Listing, Metadata, ReadOptions,
    SkillBackend, Version,
};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::SymlinkPolicy;
use crate::vpath::{VPath, is_valid_segment};

/// True for `.git` in any case: a name Git never checks out, so a tree
/// holding one (whose hooks and config would run in the tree it lands in)
/// is never listed, read or synced from.
pub(crate) fn is_git_dir_name(name: &gix::bstr::BStr) -> bool {
    name.eq_ignore_ascii_case(b".git")
}
use tree::{LargeTrees, Node, Trees, odb_error, submodule};

/// A tree entry's name as a path segment, when it can be one and is not a
/// `.git` directory.
fn servable_name(name: &gix::bstr::BStr) -> Option<&str> {
    name.to_str()
        .ok()
        .filter(|name| is_valid_segment(name) && !is_git_dir_name(name.as_bytes().as_bstr()))
}

/// How a Git LFS pointer file starts (the LFS specification's first line).
const LFS_POINTER: &[u8] = b"version https://git-lfs.github.com/spec/";

/// The object cache of each repository handle.
const OBJECT_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// Handles kept for reuse at most (one per blocking task that ran at once).
const MAX_IDLE_HANDLES: usize = 8;

/// The largest blob checked for being an LFS pointer (pointers are small).
const LFS_POINTER_MAX: usize = 1024;

/// The tree of one commit of a local Git repository (bare or not), as a
/// read-only [`SkillBackend`].
///
/// Cheap to clone; clones share the open repository. Every call reads the
/// object database only: nothing is checked out, nothing is written.
#[derive(Clone)]
pub struct GitBackend {
    inner: Arc<Inner>,
}

struct Inner {
    repo: gix::ThreadSafeRepository,
    /// The repository's directory, as it was opened.
    git_dir: std::path::PathBuf,
    /// Handles kept between calls with their object and pack caches, so
    /// the trees above a path are inflated once rather than at every call.
    handles: std::sync::Mutex<Vec<gix::Repository>>,
    /// Large trees indexed by name, shared by every call.
    large_trees: LargeTrees,
    commit: ObjectId,
    tree: ObjectId,
    policy: SymlinkPolicy,
}

impl std::fmt::Debug for GitBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitBackend")
            .field("commit", &self.inner.commit.to_string())
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl GitBackend {
    /// Opens the repository at `git_dir` (a bare repository, or a `.git`
    /// directory) at `rev`: a full commit id, a branch, a tag or `HEAD`,
    /// resolved once to a commit that the backend then serves for its
    /// whole life. The repository is opened without the user's or the
    /// system's Git configuration. Errors say which revision failed and
    /// never the host path.
    pub fn open(git_dir: &Path, rev: &str, policy: SymlinkPolicy) -> Result<Self> {
        let options = gix::open::Options::isolated();
        let repo = gix::ThreadSafeRepository::open_opts(git_dir, options).map_err(|e| {
            Error::new(ErrorKind::NotFound)
                .with_detail("no Git repository there")
                .with_source(e)
        })?;
        let local = repo.to_thread_local();
        let unknown = |e: Box<dyn std::error::Error + Send + Sync>| {
            Error::new(ErrorKind::NotFound)
                .with_detail(format!("no commit `{}` in the repository", escape(rev)))
                .with_source(e)
        };
        let commit = if crate::remote::is_full_commit_id(rev) {
            let id = ObjectId::from_hex(rev.as_bytes()).map_err(|e| unknown(e.into()))?;
            local
                .find_object(id)
                .map_err(|e| unknown(e.into()))?
                .peel_to_commit()
                .map_err(|e| unknown(e.into()))?
        } else {
            local
                .find_reference(rev)
                .map_err(|e| unknown(e.into()))?
                .peel_to_commit()
                .map_err(|e| unknown(e.into()))?
        };
        let tree = commit.tree_id().map_err(|e| unknown(e.into()))?.detach();
        Ok(GitBackend {
            inner: Arc::new(Inner {
                commit: commit.id,
                tree,
                policy,
                repo,
                git_dir: git_dir.to_owned(),
                handles: std::sync::Mutex::new(Vec::new()),
                large_trees: LargeTrees::default(),
            }),
        })
    }

    /// The full id of the commit served, in hexadecimal.
    pub fn commit(&self) -> String {
        self.inner.commit.to_string()
    }

    /// The symlink policy links in the tree are followed by.
    pub fn policy(&self) -> SymlinkPolicy {
        self.inner.policy
    }

    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Inner) -> Result<T> + Send + 'static) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner)).await.map_err(|e| {
            Error::new(ErrorKind::Other)
                .with_detail("a Git task failed")
                .with_source(e)
        })?
    }
}

/// A revision as safe to show: control characters escaped.
fn escape(rev: &str) -> String {
    rev.escape_debug().to_string()
}

impl Inner {
    fn with_trees<T>(&self, f: impl FnOnce(&Trees<'_>) -> Result<T>) -> Result<T> {
        let pooled = self.handles.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let repo = pooled.unwrap_or_else(|| {
            let mut repo = self.repo.to_thread_local();
            repo.object_cache_size(Some(OBJECT_CACHE_BYTES));
            repo
        });
        let result = f(&Trees {
            repo: &repo,
            policy: self.policy,
            large: &self.large_trees,
        });
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        if handles.len() < MAX_IDLE_HANDLES {
            handles.push(repo);
        }
        result
    }

    fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        self.with_trees(|trees| {
            let root = match trees.resolve(self.tree, dir, None, true)? {
                Node::Tree(id) => id,
                Node::Submodule(_) => return Err(submodule(dir)),
                Node::Blob(_) | Node::Link(_) => return Err(Error::at(ErrorKind::NotADirectory, dir)),
            };
            let by_directory = |path: &VPath, what: &str| {
                Err(Error::at(ErrorKind::Unsupported, path).with_detail(format!("{what}: listed by directory")))
            };
            let mut listing = DeepListing::default();
            // Trees may repeat one subtree under many names: entries of
            // trees are counted too, so a small repository cannot make the
            // walk visit its subtree a billion times.
            let mut visited = 0usize;
            let budget = limits.max_files.saturating_mul(2);
            let mut pending = vec![(root, dir.clone(), String::new())];
            while let Some((tree, here, prefix)) = pending.pop() {
                let entries = trees.entries(tree, &here)?;
                // An empty tree is a directory a checkout makes and a list
                // of files cannot show (a SKILL.md that is one is refused
                // by a read, not passed over).
                if entries.is_empty() && !prefix.is_empty() {
                    return by_directory(&here, "an empty directory");
                }
                visited += entries.len();
                if visited > budget {
                    listing.truncated = true;
                    return Ok(listing);
                }
                for (name, mode, id) in entries {
                    let name = match servable_name(name.as_bstr()) {
                        Some(name) => name,
                        None => {
                            return Err(Error::at(ErrorKind::InvalidPath, &here)
                                .with_detail("a name below it cannot be a path"));
                        }
                    };
                    let path = here.join(name)?;
                    let relative = if prefix.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{prefix}/{name}")
                    };
                    match mode {
                        Mode::Tree => pending.push((id, path, relative)),
                        Mode::Blob | Mode::BlobExecutable => {
                            let size = trees.size(id, &path)?;
                            if is_lfs_pointer(trees, id, size, &path)? {
                                return by_directory(&path, "a Git LFS pointer");
                            }
                            if listing.files.len() >= limits.max_files {
                                listing.truncated = true;
                                return Ok(listing);
                            }
                            listing.files.push(DeepFile {
                                relative,
                                size: Some(size),
                                version: Some(version(id)),
                            });
                        }
                        Mode::Link => return by_directory(&path, "a link"),
                        Mode::Commit => return by_directory(&path, "a submodule"),
                    }
                }
            }
            Ok(listing)
        })
    }

    fn list(&self, dir: &VPath) -> Result<Listing> {
        self.with_trees(|trees| {
            let tree = match trees.resolve(self.tree, dir, None, true)? {
                Node::Tree(id) => id,
                Node::Submodule(_) => return Err(submodule(dir)),
                Node::Blob(_) | Node::Link(_) => return Err(Error::at(ErrorKind::NotADirectory, dir)),
            };
            let mut listing = Listing::default();
            for (name, mode, id) in trees.entries(tree, dir)? {
                let name = match servable_name(name.as_bstr()) {
                    Some(name) => name.to_owned(),
                    None => {
                        listing
                            .invalid
                            .push(String::from_utf8_lossy(&name).escape_debug().to_string());
                        continue;
                    }
                };
                let path = dir.join(&name)?;
                let entry = match mode {
                    Mode::Tree => entry(name, EntryKind::Dir, None, false),
                    Mode::Blob | Mode::BlobExecutable => {
                        let size = trees.size(id, &path)?;
                        if is_lfs_pointer(trees, id, size, &path)? {
                            entry(name, EntryKind::Other, None, false)
                        } else {
                            file_entry(name, id, size, false)
                        }
                    }
                    Mode::Commit => entry(name, EntryKind::Other, None, false),
                    Mode::Link => match trees.resolve(self.tree, &path, None, true) {
                        Ok(Node::Tree(_)) => entry(name, EntryKind::Dir, None, true),
                        Ok(Node::Blob(target)) => {
                            let size = trees.size(target, &path)?;
                            if is_lfs_pointer(trees, target, size, &path)? {
                                entry(name, EntryKind::Other, None, true)
                            } else {
                                file_entry(name, target, size, true)
                            }
                        }
                        Ok(Node::Link(_) | Node::Submodule(_)) | Err(_) => entry(name, EntryKind::Other, None, true),
                    },
                };
                listing.entries.push(entry);
            }
            Ok(listing)
        })
    }

    fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.with_trees(|trees| {
            Ok(match trees.resolve(self.tree, path, None, true)? {
                Node::Tree(_) => Metadata {
                    kind: EntryKind::Dir,
                    size: None,
                    version: None,
                },
                Node::Blob(id) => {
                    let size = trees.size(id, path)?;
                    if is_lfs_pointer(trees, id, size, path)? {
                        Metadata {
                            kind: EntryKind::Other,
                            size: None,
                            version: None,
                        }
                    } else {
                        Metadata {
                            kind: EntryKind::File,
                            size: Some(size),
                            version: Some(version(id)),
                        }
                    }
                }
                Node::Link(_) | Node::Submodule(_) => Metadata {
                    kind: EntryKind::Other,
                    size: None,
                    version: None,
                },
            })
        })
    }

    fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        let confined = options.confining_dir(path)?.map(|dir| dir.segments().count());
        self.with_trees(|trees| {
            let id = match trees.resolve(self.tree, path, confined, true)? {
                Node::Blob(id) => id,
                Node::Tree(_) => return Err(Error::at(ErrorKind::IsADirectory, path)),
                Node::Link(_) | Node::Submodule(_) => {
                    return Err(Error::at(ErrorKind::NotRegularFile, path).with_detail("a submodule"));
                }
            };
            let size = trees.size(id, path)?;
            if size > options.limit {
                return Err(Error::too_large(path, size, options.limit));
            }
            let object = trees.repo.find_object(id).map_err(|e| odb_error(path, e))?;
            let data = object.detach().data;
            if data.len() as u64 != size {
                return Err(Error::at(ErrorKind::Other, path).with_detail(format!(
                    "the Git object inflated to {} bytes, not the {size} its header says",
                    data.len()
                )));
            }
            if looks_like_lfs_pointer(&data) {
                return Err(Error::at(ErrorKind::NotRegularFile, path)
                    .with_detail("a Git LFS pointer; LFS content is not fetched"));
            }
            let mut data = Bytes::from(data);
            data.truncate(options.wanted(size) as usize);
            Ok(Blob {
                data,
                size,
                version: version(id),
            })
        })
    }
}

/// True for a blob whose bytes are a Git LFS pointer (read only when its
/// size is one a pointer can have).
fn is_lfs_pointer(trees: &Trees<'_>, id: ObjectId, size: u64, path: &VPath) -> Result<bool> {
    if size < LFS_POINTER.len() as u64 || size > LFS_POINTER_MAX as u64 {
        return Ok(false);
    }
    let object = trees.repo.find_object(id).map_err(|e| odb_error(path, e))?;
    Ok(looks_like_lfs_pointer(&object.data))
}

fn looks_like_lfs_pointer(data: &[u8]) -> bool {
    data.len() <= LFS_POINTER_MAX && data.starts_with(LFS_POINTER)
}

fn entry(name: String, kind: EntryKind, size: Option<u64>, symlink: bool) -> Entry {
    Entry {
        name,
        kind,
        size,
        version: None,
        symlink,
    }
}

fn file_entry(name: String, id: ObjectId, size: u64, symlink: bool) -> Entry {
    Entry {
        version: Some(version(id)),
        ..entry(name, EntryKind::File, Some(size), symlink)
    }
}

/// A blob's version: its object id in hexadecimal.
fn version(id: ObjectId) -> Version {
    Version::new(id.to_string())
}

#[async_trait]
impl SkillBackend for GitBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            symlinks: true,
            ..Capabilities::READ_ONLY
        }
        .with_deep_list(true)
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        Ok(self.list_detailed(dir).await?.entries)
    }

    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        let dir = dir.clone();
        self.blocking(move |inner| inner.list(&dir)).await
    }

    /// One walk of the trees below `dir` in the object database (no
    /// request, no blob inflated but the few small enough to be LFS
    /// pointers). A tree holding a link, a submodule, an LFS pointer or a
    /// name no path can hold fails it, so the catalog lists that tree by
    /// directory and applies the rules for those there.
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        let dir = dir.clone();
        self.blocking(move |inner| inner.list_deep(&dir, limits)).await
    }

    /// `git:` with the repository and the directory. Versions are blob ids,
    /// so a file whose version is unchanged holds the same bytes in every
    /// commit: what was read at one commit serves the next.
    fn location_id(&self, dir: &VPath) -> Option<String> {
        Some(format!("git:{}:{dir}", self.inner.git_dir.display()))
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        let path = path.clone();
        self.blocking(move |inner| inner.stat(&path)).await
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        let path = path.clone();
        self.blocking(move |inner| inner.read(&path, options)).await
    }

    /// One blocking task for the whole batch.
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        let paths = paths.to_vec();
        let count = paths.len();
        let done = self
            .blocking(move |inner| Ok(paths.iter().map(|p| inner.read(p, options)).collect::<Vec<_>>()))
            .await;
        crate::backend::batch_answers(done, count, "a Git task")
    }

    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        let paths = paths.to_vec();
        let count = paths.len();
        let done = self
            .blocking(move |inner| Ok(paths.iter().map(|p| inner.stat(p)).collect::<Vec<_>>()))
            .await;
        crate::backend::batch_answers(done, count, "a Git task")
    }

    fn preferred_batch(&self) -> usize {
        64
    }
}

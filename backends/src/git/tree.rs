//! Paths resolved inside one commit's tree, read from the object database.
//!
//! A resolution walks the trees from the root, one segment at a time. A
//! link (mode `120000`) is read (its target is a small blob) and its
//! segments are walked from the link's directory: `..` steps back up the
//! trees walked so far and never past the floor (the root, or the
//! directory a read is confined to), so no link leads anywhere but into
//! the same tree. An absolute target leads out of the tree. A submodule
//! (mode `160000`) is never entered: its commit is not in this repository.

use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind as Mode;

use crate::error::{Error, ErrorKind, Result};
use crate::fs::SymlinkPolicy;
use crate::vpath::VPath;

/// The most links one resolution follows before it is a loop.
pub(super) const MAX_LINKS: usize = 40;

/// The largest link target read: longer ones are refused, never inflated.
const MAX_LINK_TARGET: u64 = 4096;

/// What a path names in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    /// A directory.
    Tree(ObjectId),
    /// A regular file (executable or not).
    Blob(ObjectId),
    /// A symbolic link, not followed (only as a last segment, when asked).
    Link(ObjectId),
    /// A submodule's commit: never entered.
    Submodule(ObjectId),
}

/// One segment still to walk, and whether a link's target put it there.
struct Pending {
    name: BString,
    from_link: bool,
}

/// Resolves paths in one repository.
pub(super) struct Trees<'r> {
    pub(super) repo: &'r gix::Repository,
    pub(super) policy: SymlinkPolicy,
    pub(super) large: &'r LargeTrees,
}

/// The entries of a tree by name.
type TreeIndex = std::collections::HashMap<BString, (Mode, ObjectId)>;

/// Trees above [`LARGE_TREE_BYTES`] indexed by name, kept between calls
/// (a tree's id names its content, so an index never goes stale): a
/// source directory of 30,000 skills is then scanned once, not once per
/// skill. At most [`MAX_LARGE_TREES`] are kept.
#[derive(Default)]
pub(super) struct LargeTrees(std::sync::Mutex<Vec<(ObjectId, std::sync::Arc<TreeIndex>)>>);

/// A tree this large (about 300 entries) is indexed rather than scanned.
const LARGE_TREE_BYTES: usize = 16 * 1024;

/// The most large-tree indexes kept.
const MAX_LARGE_TREES: usize = 8;

impl LargeTrees {
    fn get(&self, tree: ObjectId) -> Option<std::sync::Arc<TreeIndex>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().find(|(id, _)| *id == tree).map(|(_, index)| index.clone())
    }

    fn keep(&self, tree: ObjectId, index: std::sync::Arc<TreeIndex>) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MAX_LARGE_TREES {
            kept.remove(0);
        }
        kept.push((tree, index));
    }
}

impl Trees<'_> {
    /// The entry `name` of tree `tree`, if any: the first of that name, as
    /// a scan of the tree finds it.
    pub(super) fn entry(&self, tree: ObjectId, name: &BStr, path: &VPath) -> Result<Option<(Mode, ObjectId)>> {
        if let Some(index) = self.large.get(tree) {
            return Ok(index.get(name).copied());
        }
        let object = self.repo.find_object(tree).map_err(|e| odb_error(path, e))?;
        let entries = gix::objs::TreeRefIter::from_bytes(&object.data, self.repo.object_hash());
        if object.data.len() > LARGE_TREE_BYTES {
            let mut index = TreeIndex::new();
            for entry in entries {
                let entry = entry.map_err(|e| corrupt(path, e))?;
                index
                    .entry(entry.filename.to_owned())
                    .or_insert((entry.mode.kind(), entry.oid.to_owned()));
            }
            let found = index.get(name).copied();
            self.large.keep(tree, std::sync::Arc::new(index));
            return Ok(found);
        }
        for entry in entries {
            let entry = entry.map_err(|e| corrupt(path, e))?;
            if entry.filename == name {
                return Ok(Some((entry.mode.kind(), entry.oid.to_owned())));
            }
        }
        Ok(None)
    }

    /// Every entry of tree `tree`: name, mode and id.
    pub(super) fn entries(&self, tree: ObjectId, path: &VPath) -> Result<Vec<(BString, Mode, ObjectId)>> {
        let object = self.repo.find_object(tree).map_err(|e| odb_error(path, e))?;
        gix::objs::TreeRefIter::from_bytes(&object.data, self.repo.object_hash())
            .map(|entry| {
                let entry = entry.map_err(|e| corrupt(path, e))?;
                Ok((entry.filename.to_owned(), entry.mode.kind(), entry.oid.to_owned()))
            })
            .collect()
    }

    /// The size of object `id` from its header, without inflating it.
    pub(super) fn size(&self, id: ObjectId, path: &VPath) -> Result<u64> {
        let header = self.repo.find_header(id).map_err(|e| odb_error(path, e))?;
        Ok(header.size())
    }

    /// Resolves `path` from `root`. Every link on the way is followed under
    /// the policy; the last one too when `follow_last`. With `confined`, the
    /// first `confined` segments name a directory the rest must stay
    /// beneath once links are resolved.
    pub(super) fn resolve(
        &self,
        root: ObjectId,
        path: &VPath,
        confined: Option<usize>,
        follow_last: bool,
    ) -> Result<Node> {
        let mut stack = vec![root];
        let mut segments: Vec<&str> = path.segments().collect();
        let mut floor = 1;
        if let Some(depth) = confined.filter(|d| *d > 0) {
            let rest = segments.split_off(depth);
            let queue = segments.iter().map(|s| pending(s)).collect();
            match self.walk(&mut stack, 1, queue, path, true)? {
                // The walk leaves the directory on top of the stack.
                Node::Tree(_) => {}
                Node::Blob(_) | Node::Link(_) => return Err(Error::at(ErrorKind::NotADirectory, path)),
                Node::Submodule(_) => return Err(submodule(path)),
            }
            floor = stack.len();
            segments = rest;
        }
        let queue = segments.iter().map(|s| pending(s)).collect();
        self.walk(&mut stack, floor, queue, path, follow_last)
    }

    /// Walks `queue` from the top of `stack`, never popping below `floor`
    /// entries. On return the stack holds the trees down to the node's
    /// parent, plus the node itself when it is a tree.
    fn walk(
        &self,
        stack: &mut Vec<ObjectId>,
        floor: usize,
        mut queue: std::collections::VecDeque<Pending>,
        path: &VPath,
        follow_last: bool,
    ) -> Result<Node> {
        let mut links = 0;
        let mut last = Node::Tree(*stack.last().expect("the root is on the stack"));
        while let Some(segment) = queue.pop_front() {
            let name = segment.name.as_bstr();
            if name.is_empty() || name == "." {
                continue;
            }
            if name == ".." {
                if stack.len() <= floor {
                    return Err(Error::at(ErrorKind::SymlinkEscape, path).with_detail("the link leads out of the tree"));
                }
                stack.pop();
                last = Node::Tree(*stack.last().expect("above the floor"));
                continue;
            }
            if segment.from_link && name.first() == Some(&b'.') {
                // A link never leads to a hidden name (`notes.txt -> .env`):
                // what a skill may not hold by name it may not hold through
                // a link either.
                return Err(Error::at(ErrorKind::SymlinkRefused, path)
                    .with_public_detail("a link to a hidden name (`.env`, `.git`) is not followed"));
            }
            if super::is_git_dir_name(name) {
                // Never served, as `git` itself never checks one out: a
                // synced `.git/` would run its hooks and config.
                return Err(Error::at(ErrorKind::NotFound, path).with_detail("a `.git` entry is not served"));
            }
            let parent = *stack.last().expect("the root is on the stack");
            if !matches!(last, Node::Tree(_)) {
                return Err(Error::at(ErrorKind::NotADirectory, path));
            }
            let Some((mode, id)) = self.entry(parent, name, path)? else {
                let kind = if segment.from_link {
                    ErrorKind::DanglingSymlink
                } else {
                    ErrorKind::NotFound
                };
                return Err(Error::at(kind, path));
            };
            let is_last = queue.is_empty();
            match mode {
                Mode::Tree => {
                    stack.push(id);
                    last = Node::Tree(id);
                }
                Mode::Blob | Mode::BlobExecutable if is_last => return Ok(Node::Blob(id)),
                Mode::Blob | Mode::BlobExecutable => return Err(Error::at(ErrorKind::NotADirectory, path)),
                Mode::Commit if is_last => return Ok(Node::Submodule(id)),
                Mode::Commit => return Err(submodule(path)),
                Mode::Link if is_last && !follow_last => return Ok(Node::Link(id)),
                Mode::Link => {
                    if self.policy == SymlinkPolicy::Deny {
                        return Err(Error::at(ErrorKind::SymlinkRefused, path));
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Error::at(ErrorKind::SymlinkLoop, path));
                    }
                    let target = self.link_target(id, path)?;
                    if target.starts_with(b"/") {
                        return Err(Error::at(ErrorKind::SymlinkEscape, path).with_detail("an absolute link"));
                    }
                    let parts: Vec<&[u8]> = target.split_str("/").collect();
                    for part in parts.into_iter().rev() {
                        queue.push_front(Pending {
                            name: part.into(),
                            from_link: true,
                        });
                    }
                    last = Node::Tree(parent);
                }
            }
        }
        Ok(last)
    }

    /// The target of the link blob `id`, bounded.
    pub(super) fn link_target(&self, id: ObjectId, path: &VPath) -> Result<BString> {
        let size = self.size(id, path)?;
        if size > MAX_LINK_TARGET {
            return Err(Error::at(ErrorKind::SymlinkLoop, path).with_detail("a link target longer than 4096 bytes"));
        }
        let object = self.repo.find_object(id).map_err(|e| odb_error(path, e))?;
        Ok(object.data.as_slice().into())
    }
}

fn pending(segment: &str) -> Pending {
    Pending {
        name: segment.into(),
        from_link: false,
    }
}

/// The error for a path through a submodule, which is never entered: its
/// tree is in another repository (`unsupported`, so a skill directory that
/// is a submodule is reported rather than passed over as no skill).
pub(super) fn submodule(path: &VPath) -> Error {
    Error::at(ErrorKind::Unsupported, path).with_detail("a submodule, which is not followed")
}

/// An object the database could not give: missing (a shallow or partial
/// repository) or unreadable.
pub(super) fn odb_error(path: &VPath, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::at(ErrorKind::Other, path)
        .with_detail("the Git object could not be read")
        .with_source(e)
}

/// A tree that does not decode.
fn corrupt(path: &VPath, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::at(ErrorKind::Other, path)
        .with_detail("a Git tree that does not decode")
        .with_source(e)
}

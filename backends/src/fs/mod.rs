//! [`FsBackend`]: a local directory, confined beneath its root handle.
//!
//! The root is canonicalized and opened once. Every later open resolves a
//! path relative to that handle, by a [`PathResolver`]: on Linux one
//! `openat2(2)` whose `RESOLVE_*` flags make the kernel refuse what the
//! [`SymlinkPolicy`] refuses, elsewhere (or when asked) one `openat(2)` with
//! `O_NOFOLLOW` per component, judging each link here. Either way there is
//! no window between checking a path and opening it.
//!
//! Reads follow links by the policy, and a confined read
//! ([`ReadOptions::confinement`]) stays beneath the directory it names.
//! Writes and deletes never follow a link at any component, whatever the
//! policy ([`ErrorKind::WriteThroughSymlink`]). Files are opened
//! non-blocking (a FIFO is refused, never waited on), and type and size
//! come from `fstat` on the opened handle.

#[cfg(target_os = "linux")]
mod kernel;
mod listings;
mod portable;
mod resolve;

use std::ffi::CStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use rustix::fs::{AtFlags, Dir, FileType, FlockOperation, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

use crate::backend::{
    Blob, Capabilities, Entry, EntryKind, Metadata, PutMode, ReadOptions, SkillBackend, Version, grew_past_limit,
};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::{MAX_PATH_BYTES, VPath, is_valid_segment};
pub use resolve::PathResolver;
use resolve::{LOOKUP, Links, open_beneath};

/// How [`FsBackend`] treats symbolic links, on every path component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SymlinkPolicy {
    /// Refuse every symbolic link ([`ErrorKind::SymlinkRefused`]).
    Deny,
    /// Follow a link only while its target stays inside the root; a link
    /// that leads out (including any absolute link) is
    /// [`ErrorKind::SymlinkEscape`]. The default.
    #[default]
    WithinRoot,
    /// Follow every link, wherever it leads. For trusted local directories
    /// only: the other guards (size, file type) still apply.
    Follow,
}

impl SymlinkPolicy {
    /// How a read resolves from the root.
    fn links(self) -> Links {
        match self {
            SymlinkPolicy::Deny => Links::Refuse,
            SymlinkPolicy::WithinRoot => Links::Beneath,
            SymlinkPolicy::Follow => Links::Follow,
        }
    }

    /// How a confined read resolves beneath its directory: links stay
    /// beneath it, even under [`SymlinkPolicy::Follow`].
    fn confined_links(self) -> Links {
        match self {
            SymlinkPolicy::Deny => Links::Refuse,
            SymlinkPolicy::WithinRoot | SymlinkPolicy::Follow => Links::Beneath,
        }
    }
}

impl SymlinkPolicy {
    /// How much a policy lets links do: `deny` < `within_root` < `follow`.
    fn looseness(self) -> u8 {
        match self {
            SymlinkPolicy::Deny => 0,
            SymlinkPolicy::WithinRoot => 1,
            SymlinkPolicy::Follow => 2,
        }
    }

    /// The name used in configuration files: `deny`, `within_root` or
    /// `follow`.
    pub fn as_str(self) -> &'static str {
        match self {
            SymlinkPolicy::Deny => "deny",
            SymlinkPolicy::WithinRoot => "within_root",
            SymlinkPolicy::Follow => "follow",
        }
    }
}

impl std::fmt::Display for SymlinkPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SymlinkPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "deny" => Ok(SymlinkPolicy::Deny),
            "within_root" | "within-root" => Ok(SymlinkPolicy::WithinRoot),
            "follow" => Ok(SymlinkPolicy::Follow),
            other => Err(Error::new(ErrorKind::Other).with_detail(format!(
                "unknown symlink policy `{other}`; expected deny, within_root or follow"
            ))),
        }
    }
}

/// A directory on the local filesystem, seen as a [`SkillBackend`].
///
/// Cheap to clone; clones share the open root handle.
#[derive(Clone)]
pub struct FsBackend {
    inner: Arc<Inner>,
    writable: bool,
}

struct Inner {
    root: OwnedFd,
    policy: SymlinkPolicy,
    resolver: PathResolver,
    /// The entries of directories unchanged since they were read.
    listings: listings::Listings,
}

impl std::fmt::Debug for FsBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsBackend")
            .field("policy", &self.inner.policy)
            .field("resolver", &self.inner.resolver)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

/// Batched reads whose cap is at most this go through one reused buffer.
const SHARED_BUFFER_CAP: u64 = 64 * 1024;

impl FsBackend {
    /// Opens `root` (canonicalized once, here) with the default
    /// [`SymlinkPolicy::WithinRoot`], writable.
    pub fn new(root: impl AsRef<Path>) -> Result<Self> {
        Self::with_policy(root, SymlinkPolicy::default())
    }

    /// Opens `root` with the given symlink policy, writable.
    pub fn with_policy(root: impl AsRef<Path>, policy: SymlinkPolicy) -> Result<Self> {
        Self::with_resolver(root, policy, PathResolver::default())
    }

    /// How many handles share this backend's open directory (clones
    /// count; a cache that holds one can tell when it is the only holder).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The device and inode of the directory this backend opened; `None`
    /// when it cannot be looked at.
    pub fn root_identity(&self) -> Option<(u64, u64)> {
        let opened = rustix::fs::fstat(&self.inner.root).ok()?;
        Some((opened.st_dev, opened.st_ino))
    }

    /// True when `path` is, right now, the directory this backend opened:
    /// the same device and inode. False when it was replaced or removed
    /// since, or cannot be looked at.
    pub fn is_rooted_at(&self, path: impl AsRef<Path>) -> bool {
        let (Ok(opened), Ok(now)) = (rustix::fs::fstat(&self.inner.root), rustix::fs::stat(path.as_ref())) else {
            return false;
        };
        opened.st_dev == now.st_dev && opened.st_ino == now.st_ino
    }

    /// Opens `root` with the given symlink policy and path resolver,
    /// writable. [`PathResolver::Openat2`] is [`ErrorKind::Unsupported`]
    /// off Linux.
    pub fn with_resolver(root: impl AsRef<Path>, policy: SymlinkPolicy, resolver: PathResolver) -> Result<Self> {
        if resolver == PathResolver::Openat2 && !cfg!(target_os = "linux") {
            return Err(Error::new(ErrorKind::Unsupported).with_detail("openat2 is Linux only"));
        }
        let root = root.as_ref();
        let canonical = std::fs::canonicalize(root).map_err(|e| root_error(e.kind()).with_source(e))?;
        let fd = rustix::fs::open(&canonical, LOOKUP | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| root_error(std::io::Error::from(e).kind()).with_source(std::io::Error::from(e)))?;
        Ok(FsBackend {
            inner: Arc::new(Inner {
                root: fd,
                policy,
                resolver,
                listings: listings::Listings::default(),
            }),
            writable: true,
        })
    }

    /// The same directory, refusing `put` and `delete`.
    pub fn read_only(mut self) -> Self {
        self.writable = false;
        self
    }

    /// The symlink policy in force.
    pub fn policy(&self) -> SymlinkPolicy {
        self.inner.policy
    }

    /// The path resolver in use.
    pub fn resolver(&self) -> PathResolver {
        self.inner.resolver
    }

    /// A backend rooted at the directory `dir` of this one, with `policy`
    /// inside it. The way to `dir` is resolved under this backend's own
    /// policy, exactly as a read would be (nothing is canonicalized first),
    /// so a `dir` that is a link out of this root is refused. `policy` may
    /// only narrow this backend's (`follow` > `within_root` > `deny`): a
    /// looser one is [`ErrorKind::InvalidPath`]. The new backend uses the
    /// same resolver, and is writable only if this one is.
    pub fn subdir(&self, dir: &VPath, policy: SymlinkPolicy) -> Result<FsBackend> {
        if policy.looseness() > self.inner.policy.looseness() {
            return Err(Error::at(ErrorKind::InvalidPath, dir).with_detail(format!(
                "the symlink policy `{policy}` is looser than the `{}` of the directory above it",
                self.inner.policy
            )));
        }
        let root = self.inner.open(dir, LOOKUP | OFlags::DIRECTORY)?;
        Ok(FsBackend {
            inner: Arc::new(Inner {
                root,
                policy,
                resolver: self.inner.resolver,
                listings: listings::Listings::default(),
            }),
            writable: self.writable,
        })
    }

    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Inner) -> Result<T> + Send + 'static) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner)).await.map_err(|e| {
            Error::new(ErrorKind::Other)
                .with_detail("a filesystem task failed")
                .with_source(e)
        })?
    }

    fn check_writable(&self, path: &VPath) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::at(ErrorKind::ReadOnly, path).with_detail("this directory is opened read-only"))
        }
    }
}

fn root_error(kind: std::io::ErrorKind) -> Error {
    let kind = match kind {
        std::io::ErrorKind::NotFound => ErrorKind::NotFound,
        std::io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        std::io::ErrorKind::NotADirectory => ErrorKind::NotADirectory,
        _ => ErrorKind::Other,
    };
    Error::new(kind).with_detail("cannot open the backend's root directory")
}

/// The path handed to the kernel: relative to the root handle.
fn relative(path: &VPath) -> &str {
    if path.is_root() { "." } else { path.relative_str() }
}

/// Why a path is being resolved, which decides what a refusal is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// A read, stat or listing, under the policy.
    Read,
    /// A write or delete, which never follows a link.
    Write,
}

impl Inner {
    /// Opens `relative` beneath `base` with `links`.
    fn open_raw_at(
        &self,
        base: BorrowedFd<'_>,
        path: &VPath,
        flags: OFlags,
        links: Links,
    ) -> std::result::Result<OwnedFd, Errno> {
        open_beneath(self.resolver, base, relative(path), flags, links)
    }

    /// Opens `path` beneath the root under the policy.
    fn open_raw(&self, path: &VPath, flags: OFlags) -> std::result::Result<OwnedFd, Errno> {
        self.open_raw_at(self.root.as_fd(), path, flags, self.policy.links())
    }

    /// Opens `path` beneath the root under the policy, for reading.
    fn open(&self, path: &VPath, flags: OFlags) -> Result<OwnedFd> {
        self.open_raw(path, flags)
            .map_err(|errno| self.open_error(errno, path, Purpose::Read))
    }

    /// Opens `path` beneath the root following no link, for writing.
    fn open_for_write(&self, path: &VPath, flags: OFlags) -> Result<OwnedFd> {
        self.open_raw_at(self.root.as_fd(), path, flags, Links::Refuse)
            .map_err(|errno| self.open_error(errno, path, Purpose::Write))
    }

    /// Opens `path` for a read with `options`: beneath the root under the
    /// policy, or, when confined, beneath the confining directory (itself
    /// reached under the policy), leaving which is
    /// [`ErrorKind::SymlinkEscape`].
    fn open_confined(&self, path: &VPath, flags: OFlags, options: ReadOptions) -> Result<OwnedFd> {
        let Some(dir) = options.confining_dir(path)? else {
            return self.open(path, flags);
        };
        let below = path.strip_prefix(&dir).expect("the confining directory is an ancestor");
        let links = self.policy.confined_links();
        // A path with no link on it cannot leave the directory: one open
        // settles the common case, and only a path holding a link pays for
        // opening the directory first.
        match self.open_raw_at(self.root.as_fd(), path, flags, Links::Refuse) {
            Err(Errno::LOOP) => {}
            other => return other.map_err(|errno| self.open_error(errno, path, Purpose::Read)),
        }
        let base = if dir.is_root() {
            None
        } else {
            Some(self.open(&dir, LOOKUP | OFlags::DIRECTORY)?)
        };
        let base_fd = base.as_ref().map_or(self.root.as_fd(), |b| b.as_fd());
        let fd = self
            .open_raw_at(base_fd, &below, flags, links)
            .map_err(|errno| self.open_error(errno, path, Purpose::Read))?;
        if leads_to_hidden(base_fd, fd.as_fd()) {
            return Err(Error::at(ErrorKind::SymlinkRefused, path)
                .with_public_detail("a link to a hidden name (`.env`, `.git`) is not followed"));
        }
        Ok(fd)
    }

    /// Turns a resolution failure into the error kind the contract names.
    fn open_error(&self, errno: Errno, path: &VPath, purpose: Purpose) -> Error {
        let kind = match errno {
            Errno::NOENT => self.classify_missing(path),
            Errno::LOOP | Errno::XDEV if purpose == Purpose::Write => ErrorKind::WriteThroughSymlink,
            Errno::LOOP if self.policy == SymlinkPolicy::Deny => ErrorKind::SymlinkRefused,
            Errno::LOOP => ErrorKind::SymlinkLoop,
            Errno::XDEV => ErrorKind::SymlinkEscape,
            Errno::NOTDIR => ErrorKind::NotADirectory,
            Errno::ISDIR => ErrorKind::IsADirectory,
            Errno::ACCESS | Errno::PERM => ErrorKind::PermissionDenied,
            Errno::NAMETOOLONG => ErrorKind::InvalidPath,
            Errno::NXIO | Errno::OPNOTSUPP => ErrorKind::NotRegularFile,
            Errno::NOSYS => ErrorKind::Unsupported,
            Errno::NOSPC | Errno::DQUOT => ErrorKind::StorageFull,
            Errno::AGAIN | Errno::MFILE | Errno::NFILE | Errno::NOMEM | Errno::INTR => ErrorKind::Unavailable,
            _ => ErrorKind::Other,
        };
        Error::at(kind, path).with_source(std::io::Error::from(errno))
    }

    /// After `ENOENT`: was the missing piece a symbolic link pointing at
    /// nothing, or plainly absent? Walks up to the deepest existing parent
    /// and looks at the next component without following it.
    fn classify_missing(&self, path: &VPath) -> ErrorKind {
        let mut candidate = path.clone();
        while let Some(parent) = candidate.parent() {
            match self.open_raw(&parent, LOOKUP | OFlags::DIRECTORY) {
                Ok(dir) => {
                    let name = candidate.file_name().unwrap_or(".");
                    return match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                            ErrorKind::DanglingSymlink
                        }
                        _ => ErrorKind::NotFound,
                    };
                }
                Err(Errno::NOENT) => candidate = parent,
                Err(_) => return ErrorKind::NotFound,
            }
        }
        ErrorKind::NotFound
    }

    /// Opens `path` for reading and applies the type and size guards to
    /// the opened handle.
    fn open_regular(&self, path: &VPath, options: ReadOptions) -> Result<(File, Stat)> {
        let fd = self.open_confined(path, OFlags::RDONLY | OFlags::NONBLOCK, options)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| io_error(e, path))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Error::at(ErrorKind::IsADirectory, path)),
            other => {
                return Err(Error::at(ErrorKind::NotRegularFile, path).with_detail(format!("{other:?}")));
            }
        }
        let size = st.st_size.max(0) as u64;
        if size > options.limit {
            return Err(Error::too_large(path, size, options.limit));
        }
        Ok((File::from(fd), st))
    }

    fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        let (mut file, st) = self.open_regular(path, options)?;
        let size = st.st_size.max(0) as u64;
        let cap = read_cap(options);
        let mut data = Vec::with_capacity(options.wanted(size).min(cap) as usize);
        let version = read_settled(&mut file, st, path, |file| {
            data.clear();
            file.take(cap).read_to_end(&mut data).map(|_| ())
        })?;
        let read = data.len() as u64;
        let size = checked_size(path, options, size, read)?;
        Ok(Blob {
            data: Bytes::from(data),
            size,
            version,
        })
    }

    /// Reads prefixes of several files into one buffer, packed one after
    /// the other; each blob is a slice of it, so a batch costs one
    /// allocation however many files it holds.
    fn read_prefixes(&self, paths: &[VPath], options: ReadOptions, cap: usize) -> Vec<Result<Blob>> {
        let mut packed = Vec::with_capacity(cap * paths.len());
        let spans: Vec<_> = paths
            .iter()
            .map(|path| {
                let (mut file, st) = self.open_regular(path, options)?;
                let start = packed.len();
                let version = read_settled(&mut file, st, path, |file| {
                    packed.truncate(start);
                    file.take(cap as u64).read_to_end(&mut packed).map(|_| ())
                });
                let version = match version {
                    Ok(version) => version,
                    Err(e) => {
                        packed.truncate(start);
                        return Err(e);
                    }
                };
                let read = packed.len() - start;
                let size = checked_size(path, options, st.st_size.max(0) as u64, read as u64)?;
                Ok((start, read, size, version))
            })
            .collect();
        let packed = Bytes::from(packed);
        spans
            .into_iter()
            .map(|span| {
                span.map(|(start, len, size, version)| Blob {
                    data: packed.slice(start..start + len),
                    size,
                    version,
                })
            })
            .collect()
    }

    fn stat(&self, path: &VPath) -> Result<Metadata> {
        let fd = match self.open(path, LOOKUP) {
            // Without O_PATH, a socket or device may refuse to be opened.
            Err(e) if e.kind() == ErrorKind::NotRegularFile => {
                return Ok(Metadata {
                    kind: EntryKind::Other,
                    size: None,
                    version: None,
                });
            }
            other => other?,
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| io_error(e, path))?;
        Ok(metadata(&st))
    }

    fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        // A handle to look up and stat beneath (`O_PATH` on Linux): enough
        // when the directory is unchanged since it was last read, whose
        // names and types are then known, and only what each entry is now
        // is asked.
        let fd = self.open(dir, LOOKUP | OFlags::DIRECTORY)?;
        let version = listings::DirVersion::of(&rustix::fs::fstat(&fd).map_err(|e| io_error(e, dir))?);
        if let Some(names) = self.listings.get(relative(dir), &version) {
            return self.entries(
                dir,
                fd.as_fd(),
                names.iter().map(|(name, kind)| (name.as_c_str(), *kind)),
            );
        }
        // Otherwise the directory itself is opened for reading through that
        // handle (its path is not resolved again).
        let readable = if cfg!(target_os = "linux") {
            rustix::fs::openat(
                &fd,
                c".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|errno| self.open_error(errno, dir, Purpose::Read))?
        } else {
            fd
        };
        let mut listing = Dir::new(readable).map_err(|e| io_error(e, dir))?;
        let mut names = Vec::new();
        while let Some(item) = listing.read() {
            let item = item.map_err(|e| io_error(e, dir))?;
            let raw = item.file_name();
            if raw == c"." || raw == c".." {
                continue;
            }
            names.push((raw.to_owned(), item.file_type()));
        }
        let names: listings::Names = names.into();
        let entries = self.entries(
            dir,
            listing.fd().map_err(|e| io_error(e, dir))?,
            names.iter().map(|(name, kind)| (name.as_c_str(), *kind)),
        )?;
        self.listings.keep(relative(dir), version, names);
        Ok(entries)
    }

    /// The entries of `dir` (open as `fd`) named by `names` with the type
    /// its listing gave each: a file's size and version from a `stat` now,
    /// a link resolved now under the policy.
    fn entries<'a>(
        &self,
        dir: &VPath,
        fd: BorrowedFd<'_>,
        names: impl Iterator<Item = (&'a CStr, FileType)>,
    ) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for (raw, kind) in names {
            let Some(name) = child_name(raw, dir) else { continue };
            let child = || dir.join(name).expect("checked by child_name");
            let (meta, symlink) = match kind {
                FileType::Directory => (
                    Metadata {
                        kind: EntryKind::Dir,
                        size: None,
                        version: None,
                    },
                    false,
                ),
                FileType::Symlink => (self.resolve_link(&child()), true),
                _ => match rustix::fs::statat(fd, raw, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                        (self.resolve_link(&child()), true)
                    }
                    Ok(st) => (metadata(&st), false),
                    // Removed since the directory was read.
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(io_error(e, &child())),
                },
            };
            entries.push(Entry {
                name: name.to_owned(),
                kind: meta.kind,
                size: meta.size,
                version: meta.version,
                symlink,
            });
        }
        Ok(entries)
    }

    /// What a link in a listing leads to under the policy; a link the policy
    /// will not resolve is listed as [`EntryKind::Other`], and reading
    /// through it gives the precise error.
    fn resolve_link(&self, link: &VPath) -> Metadata {
        match self.stat(link) {
            Ok(meta) => meta,
            Err(_) => Metadata {
                kind: EntryKind::Other,
                size: None,
                version: None,
            },
        }
    }

    /// Opens the directory `dir` for a write, creating it and its parents
    /// as needed; a link at any component is refused.
    fn ensure_dir(&self, dir: &VPath) -> Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        match self.open_raw_at(self.root.as_fd(), dir, flags, Links::Refuse) {
            Ok(fd) => Ok(fd),
            Err(Errno::NOENT) if !dir.is_root() => {
                let parent = dir.parent().expect("not the root");
                let parent_fd = self.ensure_dir(&parent)?;
                let name = dir.file_name().expect("not the root");
                match rustix::fs::mkdirat(&parent_fd, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(self.open_error(e, dir, Purpose::Write)),
                }
                self.open_for_write(dir, flags)
            }
            Err(e) => Err(self.open_error(e, dir, Purpose::Write)),
        }
    }

    fn put(&self, path: &VPath, data: &[u8], mode: &PutMode) -> Result<Version> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        };
        let dir = self.ensure_dir(&parent)?;
        let tmp = temp_name(name);
        let file = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| io_error(e, path))?;
        let written = write_and_sync(file, data).map_err(|e| file_error(e, path));
        let result = written.and_then(|st| {
            // Writers of one directory take turns: the condition check and
            // the rename are one step for every writer using this lock.
            let _lock = DirLock::exclusive(&dir, path)?;
            self.check_put_condition(&dir, name, path, mode)?;
            let flags = if *mode == PutMode::Create {
                RenameFlags::NOREPLACE
            } else {
                RenameFlags::empty()
            };
            match rustix::fs::renameat_with(&dir, tmp.as_str(), &dir, name, flags) {
                // A rename moves the file's change time, which is part of
                // its version: the version is the file's as it now stands
                // (no writer of this backend can replace it under the lock).
                Ok(()) => Ok(rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|now| if now.st_ino == st.st_ino { now } else { st })
                    .map(|st| fingerprint(&st))
                    .map_err(|e| io_error(e, path))?),
                Err(Errno::EXIST) => Err(Error::at(ErrorKind::AlreadyExists, path)),
                Err(Errno::ISDIR) => Err(Error::at(ErrorKind::IsADirectory, path)),
                Err(e) => Err(io_error(e, path)),
            }
        });
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        }
        result
    }

    fn check_put_condition(&self, dir: &OwnedFd, name: &str, path: &VPath, mode: &PutMode) -> Result<()> {
        let current = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some(st),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(io_error(e, path)),
        };
        if let Some(st) = &current {
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => return Err(Error::at(ErrorKind::IsADirectory, path)),
                FileType::Symlink => return Err(Error::at(ErrorKind::WriteThroughSymlink, path)),
                _ => {}
            }
        }
        match (mode, current) {
            (PutMode::Overwrite, _) | (PutMode::Create, None) => Ok(()),
            (PutMode::Create, Some(_)) => Err(Error::at(ErrorKind::AlreadyExists, path)),
            (PutMode::IfVersion(expected), Some(st))
                if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && fingerprint(&st) == *expected =>
            {
                Ok(())
            }
            (PutMode::IfVersion(expected), found) => Err(Error::version_conflict(
                path,
                expected,
                found.map(|st| fingerprint(&st)).as_ref(),
            )),
        }
    }

    /// Deletes `path`; with `expected`, only while the file's fingerprint
    /// is that version (checked under the directory lock writers take).
    fn delete(&self, path: &VPath, expected: Option<&Version>) -> Result<()> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        };
        let dir = match self.open_for_write(&parent, OFlags::RDONLY | OFlags::DIRECTORY) {
            Err(e) if e.kind() == ErrorKind::NotFound && expected.is_some() => {
                return Err(Error::version_conflict(path, expected.expect("checked"), None));
            }
            other => other?,
        };
        {
            let _lock = DirLock::exclusive(&dir, path)?;
            match (rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW), expected) {
                (Ok(st), _) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                    return Err(Error::at(ErrorKind::IsADirectory, path));
                }
                (Ok(st), _) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    return Err(Error::at(ErrorKind::WriteThroughSymlink, path));
                }
                (Ok(st), Some(expected)) if fingerprint(&st) != *expected => {
                    return Err(Error::version_conflict(path, expected, Some(&fingerprint(&st))));
                }
                (Ok(_), _) => {}
                (Err(Errno::NOENT), Some(expected)) => return Err(Error::version_conflict(path, expected, None)),
                (Err(e), _) => return Err(self.open_error(e, path, Purpose::Write)),
            }
            rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| self.open_error(e, path, Purpose::Write))?;
        }
        self.prune_empty_parents(parent);
        Ok(())
    }

    /// Removes directories left empty by a delete, so that, as in the other
    /// backends, a directory exists only while something is under it.
    fn prune_empty_parents(&self, mut dir: VPath) {
        while let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
            let Ok(parent_fd) = self.open_raw_at(self.root.as_fd(), &parent, LOOKUP | OFlags::DIRECTORY, Links::Refuse)
            else {
                return;
            };
            if rustix::fs::unlinkat(&parent_fd, name, AtFlags::REMOVEDIR).is_err() {
                return;
            }
            dir = parent;
        }
    }
}

/// An exclusive `flock` on a directory, released when dropped (or by the
/// kernel if the process dies).
struct DirLock<'a>(&'a OwnedFd);

impl<'a> DirLock<'a> {
    fn exclusive(dir: &'a OwnedFd, path: &VPath) -> Result<Self> {
        rustix::fs::flock(dir, FlockOperation::LockExclusive).map_err(|e| io_error(e, path))?;
        Ok(DirLock(dir))
    }
}

impl Drop for DirLock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0.as_fd(), FlockOperation::Unlock);
    }
}

/// The most bytes a read takes: the prefix, and never more than one byte
/// past the limit, so a file that grows after its `fstat` cannot slip by.
fn read_cap(options: ReadOptions) -> u64 {
    options.prefix.unwrap_or(u64::MAX).min(options.limit.saturating_add(1))
}

/// How many times a read is made again when the file changed under it.
const SETTLE_ATTEMPTS: usize = 3;

/// Runs `read_all` over `file` from its start until the file's version
/// after the read equals its version before (`before` is the `fstat`
/// taken at open), and returns that version: the bytes read were not
/// rewritten in place while they were read, so they are the content of
/// the version returned. A file that keeps changing is a
/// [`ErrorKind::VersionConflict`] after [`SETTLE_ATTEMPTS`] reads.
fn read_settled(
    file: &mut File,
    mut before: Stat,
    path: &VPath,
    mut read_all: impl FnMut(&mut File) -> std::io::Result<()>,
) -> Result<Version> {
    use std::io::{Seek, SeekFrom};
    for attempt in 0..SETTLE_ATTEMPTS {
        if attempt > 0 {
            file.seek(SeekFrom::Start(0)).map_err(|e| file_error(e, path))?;
        }
        read_all(file).map_err(|e| file_error(e, path))?;
        let after = rustix::fs::fstat(&*file).map_err(|e| io_error(e, path))?;
        let version = fingerprint(&before);
        if version == fingerprint(&after) {
            return Ok(version);
        }
        before = after;
    }
    Err(Error::at(ErrorKind::VersionConflict, path).with_detail("the file kept changing while it was read"))
}

/// The whole size to report once `read` bytes were read from a file that
/// `fstat` said held `size`, or the error if it grew past the limit.
fn checked_size(path: &VPath, options: ReadOptions, size: u64, read: u64) -> Result<u64> {
    if read > options.limit {
        return Err(grew_past_limit(path, options.limit));
    }
    // End of file came before the cap: what was read is the whole file.
    let reached_end = options.prefix.is_none_or(|p| read < p);
    Ok(if reached_end { read } else { size.max(read) })
}

fn write_and_sync(fd: OwnedFd, data: &[u8]) -> std::io::Result<Stat> {
    let mut file = File::from(fd);
    file.write_all(data)?;
    file.sync_all()?;
    Ok(rustix::fs::fstat(&file)?)
}

fn temp_name(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".{name}.{}-{n}.skillstore-tmp", std::process::id())
}

/// A child name usable as a [`VPath`] segment; other names (not UTF-8, or
/// holding characters `VPath` refuses) cannot be addressed and are skipped.
fn child_name<'a>(raw: &'a CStr, dir: &VPath) -> Option<&'a str> {
    let name = raw.to_str().ok()?;
    if is_valid_segment(name) && dir.as_str().len() + 1 + name.len() <= MAX_PATH_BYTES {
        Some(name)
    } else {
        tracing::debug!(dir = %dir, "skipping an entry whose name is not a valid path segment");
        None
    }
}

fn metadata(st: &Stat) -> Metadata {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Metadata {
            kind: EntryKind::File,
            size: Some(st.st_size.max(0) as u64),
            version: Some(fingerprint(st)),
        },
        FileType::Directory => Metadata {
            kind: EntryKind::Dir,
            size: None,
            version: None,
        },
        _ => Metadata {
            kind: EntryKind::Other,
            size: None,
            version: None,
        },
    }
}

/// A file's version: device, inode, size, modification time and change
/// time. Writes made through this backend replace the inode, so they always
/// change it; a rewrite in place that keeps the size and sets the old
/// modification time back still moves the change time, which no caller can
/// set.
// The `Stat` fields' integer types differ between platforms.
#[allow(clippy::unnecessary_cast)]
fn fingerprint(st: &Stat) -> Version {
    let mut text = String::with_capacity(64);
    for (i, part) in [
        st.st_dev as u64,
        st.st_ino as u64,
        st.st_size as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec as u64,
        st.st_ctime as u64,
        st.st_ctime_nsec as u64,
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            text.push('.');
        }
        push_hex(&mut text, part);
    }
    Version::new(text)
}

fn push_hex(text: &mut String, mut value: u64) {
    let mut digits = [0u8; 16];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b"0123456789abcdef"[(value & 0xf) as usize];
        value >>= 4;
        if value == 0 {
            break;
        }
    }
    text.push_str(std::str::from_utf8(&digits[start..]).expect("hex digits are ASCII"));
}

fn io_error(errno: Errno, path: &VPath) -> Error {
    Error::at(errno_kind(errno), path).with_source(std::io::Error::from(errno))
}

/// The kind of a failed filesystem call other than a path resolution.
fn errno_kind(errno: Errno) -> ErrorKind {
    match errno {
        Errno::ACCESS | Errno::PERM | Errno::ROFS => ErrorKind::PermissionDenied,
        Errno::NOENT => ErrorKind::NotFound,
        Errno::NOTDIR => ErrorKind::NotADirectory,
        Errno::ISDIR => ErrorKind::IsADirectory,
        Errno::AGAIN | Errno::INTR | Errno::MFILE | Errno::NFILE | Errno::NOMEM => ErrorKind::Unavailable,
        Errno::NOSPC | Errno::DQUOT => ErrorKind::StorageFull,
        _ => ErrorKind::Other,
    }
}

/// An `io::Error` from reading or writing an open file, by its errno where
/// it has one.
fn file_error(err: std::io::Error, path: &VPath) -> Error {
    let kind = err
        .raw_os_error()
        .map_or(ErrorKind::Other, |code| errno_kind(Errno::from_raw_os_error(code)));
    Error::at(kind, path).with_source(err)
}

#[async_trait]
impl SkillBackend for FsBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write: self.writable,
            create_only: self.writable,
            if_version: self.writable,
            if_version_delete: self.writable,
            symlinks: true,
            deep_list: false,
        }
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        let dir = dir.clone();
        self.blocking(move |inner| inner.list(&dir)).await
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        let path = path.clone();
        self.blocking(move |inner| inner.stat(&path)).await
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        let path = path.clone();
        self.blocking(move |inner| inner.read(&path, options)).await
    }

    fn preferred_batch(&self) -> usize {
        64
    }

    /// One blocking task for the whole batch rather than one per file;
    /// short prefixes are read through one reused buffer.
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        let paths = paths.to_vec();
        let count = paths.len();
        let cap = read_cap(options);
        let done = self
            .blocking(move |inner| {
                Ok(if cap <= SHARED_BUFFER_CAP && paths.len() > 1 {
                    inner.read_prefixes(&paths, options, cap as usize)
                } else {
                    paths.iter().map(|p| inner.read(p, options)).collect()
                })
            })
            .await;
        crate::backend::batch_answers(done, count, "a filesystem task")
    }

    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        let paths = paths.to_vec();
        let count = paths.len();
        let done = self
            .blocking(move |inner| Ok(paths.iter().map(|p| inner.stat(p)).collect::<Vec<_>>()))
            .await;
        crate::backend::batch_answers(done, count, "a filesystem task")
    }

    /// One blocking task for the whole batch rather than one per directory.
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        let dirs = dirs.to_vec();
        let count = dirs.len();
        let done = self
            .blocking(move |inner| Ok(dirs.iter().map(|d| inner.list(d)).collect::<Vec<_>>()))
            .await;
        crate::backend::batch_answers(done, count, "a filesystem task")
    }

    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.check_writable(path)?;
        let path = path.clone();
        self.blocking(move |inner| inner.put(&path, &data, &mode)).await
    }

    async fn delete(&self, path: &VPath) -> Result<()> {
        self.check_writable(path)?;
        let path = path.clone();
        self.blocking(move |inner| inner.delete(&path, None)).await
    }

    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        self.check_writable(path)?;
        let path = path.clone();
        let expected = expected.clone();
        self.blocking(move |inner| inner.delete(&path, Some(&expected))).await
    }
}

/// True when `file`, opened through a link beneath `base`, lies at a
/// hidden name below it (a segment starting with `.`): a confined read
/// follows no link to what a skill may not hold by name (`notes.txt ->
/// .env`, `gitlink -> .git`). Where the opened paths cannot be told
/// (no `/proc`), nothing is refused by this rule.
fn leads_to_hidden(base: BorrowedFd<'_>, file: BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    let path_of = |fd: BorrowedFd<'_>| std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok();
    let (Some(base), Some(file)) = (path_of(base), path_of(file)) else {
        return false;
    };
    file.strip_prefix(&base).is_ok_and(|below| {
        below
            .components()
            .any(|c| c.as_os_str().as_encoded_bytes().first() == Some(&b'.'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_or_quota_is_storage_full_not_permission_denied() {
        let path = VPath::new("/team/x/SKILL.md").unwrap();
        for errno in [Errno::NOSPC, Errno::DQUOT] {
            assert_eq!(errno_kind(errno), ErrorKind::StorageFull, "{errno:?}");
            assert_eq!(io_error(errno, &path).kind(), ErrorKind::StorageFull);
            let io = std::io::Error::from_raw_os_error(errno.raw_os_error());
            assert_eq!(file_error(io, &path).kind(), ErrorKind::StorageFull);
        }
        assert_eq!(ErrorKind::StorageFull.as_str(), "storage_full");
        assert_eq!(errno_kind(Errno::ACCESS), ErrorKind::PermissionDenied);
        assert_eq!(errno_kind(Errno::ROFS), ErrorKind::PermissionDenied);
    }

    /// The entries `inner` lists in `dir`: name, kind, link, version.
    fn listed(backend: &FsBackend, dir: &VPath) -> Vec<(String, EntryKind, bool, Option<Version>)> {
        let mut entries: Vec<_> = backend
            .inner
            .list(dir)
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind, e.symlink, e.version))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries
    }

    #[test]
    fn a_directory_is_listed_as_it_is_now_after_its_entries_were_kept() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("d");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a.md"), b"aaaa").unwrap();
        std::fs::write(d.join("gone.md"), b"x").unwrap();
        let backend = FsBackend::new(root.path()).unwrap();
        let dir = VPath::new("/d").unwrap();
        // Settled: its entries are kept at this listing.
        std::thread::sleep(listings::SETTLED + std::time::Duration::from_millis(200));
        let before = listed(&backend, &dir);
        let st = rustix::fs::stat(&d).unwrap();
        assert!(
            backend
                .inner
                .listings
                .get("d", &listings::DirVersion::of(&st))
                .is_some(),
            "a settled directory's entries are kept"
        );
        // A file rewritten in place leaves the directory as it was: its
        // entry is kept, and its version is asked again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(d.join("a.md"), b"bbbb").unwrap();
        let rewritten = listed(&backend, &dir);
        assert_eq!(rewritten.len(), before.len());
        assert_ne!(rewritten[0].3, before[0].3, "the version is the file's now");
        assert_eq!(rewritten, listed(&FsBackend::new(root.path()).unwrap(), &dir));
        // Added, removed, a directory replaced by a file, a link: the
        // directory changed, so it is read again.
        std::fs::write(d.join("b.md"), b"b").unwrap();
        std::fs::remove_file(d.join("gone.md")).unwrap();
        std::fs::remove_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub"), b"now a file").unwrap();
        std::os::unix::fs::symlink("a.md", d.join("link.md")).unwrap();
        let after = listed(&backend, &dir);
        assert_eq!(after, listed(&FsBackend::new(root.path()).unwrap(), &dir));
        let names: Vec<(&str, EntryKind, bool)> = after.iter().map(|e| (e.0.as_str(), e.1, e.2)).collect();
        assert_eq!(
            names,
            [
                ("a.md", EntryKind::File, false),
                ("b.md", EntryKind::File, false),
                ("link.md", EntryKind::File, true),
                ("sub", EntryKind::File, false),
            ]
        );
    }

    /// A file in a fresh directory, created long enough ago that a change
    /// now moves its change time even where timestamps are coarse.
    fn settled_file(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, File, Stat) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.md");
        std::fs::write(&path, content).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let file = File::open(&path).unwrap();
        let st = rustix::fs::fstat(&file).unwrap();
        (dir, path, file, st)
    }

    fn rewrite_in_place(path: &std::path::Path, content: &[u8]) {
        let mut writer = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        writer.write_all(content).unwrap();
    }

    #[test]
    fn a_file_rewritten_in_place_during_a_read_is_read_again() {
        let (_dir, path, mut file, st) = settled_file(b"AAAA");
        let vpath = VPath::new("/big.md").unwrap();
        let mut data = Vec::new();
        let mut reads = 0;
        let version = read_settled(&mut file, st, &vpath, |file| {
            data.clear();
            file.read_to_end(&mut data)?;
            reads += 1;
            if reads == 1 {
                // The same size, in place, after the first read took the old bytes.
                rewrite_in_place(&path, b"BBBB");
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(reads, 2);
        assert_eq!(data, b"BBBB");
        let now = rustix::fs::fstat(&file).unwrap();
        assert_eq!(
            version,
            fingerprint(&now),
            "the version is the one the bytes were read at"
        );
        assert_ne!(version, fingerprint(&st));
    }

    #[test]
    fn a_file_that_keeps_changing_while_read_is_refused() {
        let (_dir, path, mut file, st) = settled_file(b"AAAA");
        let vpath = VPath::new("/big.md").unwrap();
        let mut round = 0u8;
        let refused = read_settled(&mut file, st, &vpath, |file| {
            let mut data = Vec::new();
            file.read_to_end(&mut data)?;
            round += 1;
            std::thread::sleep(std::time::Duration::from_millis(20));
            rewrite_in_place(&path, &[b'a' + round; 4]);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::VersionConflict);
        assert_eq!(usize::from(round), SETTLE_ATTEMPTS);
    }
}

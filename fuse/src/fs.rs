//! The FUSE operations: names resolved against the current catalog,
//! directories listed through the backend, files read whole on open.
//!
//! A request that needs nothing but the catalog (the root, the skill
//! directories' names and attributes, reads of open files) is answered on
//! the request thread. One that may call a backend is admitted for its
//! skill's source and handed to the Tokio runtime, and the request thread
//! goes on at once: no request thread ever waits on a backend.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};
use skillstore::SharedCatalog;
use skillstore::backends::{EntryKind, ErrorKind, ReadOptions, VPath, Version, is_valid_segment};

use crate::MountOptions;
use crate::cache::{BlobCache, Full, Reservation};
use crate::limits::SourceLimits;

/// The longest name shown, in bytes.
const MAX_NAME_BYTES: usize = 255;

/// What the filesystem shares with its mount handle.
pub(crate) struct Inner {
    catalog: SharedCatalog,
    pub(crate) options: MountOptions,
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
    cache: Mutex<BlobCache>,
    limits: SourceLimits,
    uid: u32,
    gid: u32,
    mounted_at: SystemTime,
}

#[derive(Default)]
struct State {
    /// Inode numbers by path below the mount point ("" is the root, 1).
    inodes: HashMap<String, u64>,
    /// Paths by inode number minus one.
    paths: Vec<String>,
    /// What each directory showed since the last refresh, by virtual
    /// path.
    listings: HashMap<VPath, Arc<Vec<Child>>>,
    /// Open files by handle.
    handles: HashMap<u64, OpenFile>,
    next_handle: u64,
    /// Paths whose last request ran past the deadline, and when: for one
    /// more deadline they answer `EIO` at once, so readers the kernel
    /// queues behind one lookup of a stalled path do not each wait a whole
    /// deadline in turn. At most [`MAX_STALLED`] are kept.
    stalled: HashMap<String, Instant>,
}

/// The most stalled paths remembered; past it the oldest half is dropped.
const MAX_STALLED: usize = 4096;

/// An open file: the version read, whose bytes the cache holds for it.
struct OpenFile {
    path: VPath,
    version: Version,
    data: Bytes,
    /// The skill's name when a lock or signature check pinned it at open:
    /// the handle reads only while the current catalog still serves that
    /// skill, checked and not withdrawn.
    checked: Option<String>,
}

/// A child of a directory of the tree.
#[derive(Debug, Clone)]
struct Child {
    name: String,
    dir: bool,
    size: Option<u64>,
    version: Option<Version>,
    /// When its directory was listed.
    listed_at: Instant,
}

/// Where a path of the tree leads in the namespace.
struct Resolved {
    /// The skill's directory.
    skill_dir: VPath,
    /// The path itself.
    path: VPath,
    /// How many levels below the skill's directory.
    depth: usize,
    /// The label of the skill's source, whose limits its backend calls
    /// count against.
    source: String,
}

/// Bytes a read under way may take, given back to the cache unless the
/// read ends and takes them: a read dropped at its deadline leaks nothing.
struct Reserved<'a> {
    cache: &'a Mutex<BlobCache>,
    reservation: Option<Reservation>,
}

impl Reserved<'_> {
    fn take(mut self) -> Reservation {
        self.reservation.take().expect("taken once")
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).cancel(reservation);
        }
    }
}

impl Inner {
    pub(crate) fn new(catalog: SharedCatalog, options: MountOptions, runtime: tokio::runtime::Handle) -> Self {
        let cache = BlobCache::new(
            options
                .cache_bytes
                .max(usize::try_from(options.read_limit).unwrap_or(usize::MAX)),
        );
        let mut state = State {
            next_handle: 1,
            ..State::default()
        };
        state.inodes.insert(String::new(), 1);
        state.paths.push(String::new());
        Inner {
            catalog,
            runtime,
            state: Mutex::new(state),
            cache: Mutex::new(cache),
            limits: SourceLimits::new(options.source_concurrency, options.source_queue),
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            mounted_at: SystemTime::now(),
            options,
        }
    }

    /// Refreshes the catalog and forgets the listings made before.
    pub(crate) async fn refresh(&self) {
        self.catalog.refresh().await;
        self.state().listings.clear();
    }

    /// Runs one backend call of `source` once the source has a turn free:
    /// at most [`MountOptions::source_concurrency`] of one source's calls
    /// run at once, and waiting for a turn never holds up another source.
    /// The request's deadline ends the wait and the call alike.
    async fn call<T>(&self, source: &str, call: impl Future<Output = Result<T, Errno>>) -> Result<T, Errno> {
        let _turn = self.limits.turn(source).await;
        call.await
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn path_of(&self, ino: INodeNo) -> Option<String> {
        let index = u64::from(ino).checked_sub(1)? as usize;
        self.state().paths.get(index).cloned()
    }

    fn inode_of(&self, path: &str) -> INodeNo {
        let mut state = self.state();
        if let Some(&ino) = state.inodes.get(path) {
            return INodeNo(ino);
        }
        state.paths.push(path.to_owned());
        let ino = state.paths.len() as u64;
        state.inodes.insert(path.to_owned(), ino);
        INodeNo(ino)
    }

    /// The namespace path of `local` (`NAME/REL`), through the current
    /// winner of `NAME`.
    fn resolve(&self, local: &str) -> Result<Resolved, Errno> {
        let (name, rest) = local.split_once('/').unwrap_or((local, ""));
        let catalog = self.catalog.snapshot();
        let skill = catalog
            .get(name)
            .filter(|s| self.options.all_skills || s.enabled)
            .ok_or(Errno::ENOENT)?;
        // A checked skill found changed or incomplete since its check:
        // nothing of it, kept copies and listings included, until a refresh.
        if catalog.is_withdrawn(name) {
            return Err(Errno::EIO);
        }
        let skill_dir = skill.dir();
        let source = skill.source.clone();
        if rest.is_empty() {
            return Ok(Resolved {
                path: skill_dir.clone(),
                skill_dir,
                depth: 0,
                source,
            });
        }
        // What the content rule refuses is no part of the skill: not even
        // a directory to look up (the reserved directory holds the
        // signature).
        if rest != skillstore::content::RESERVED_DIR && skillstore::content::refusal(rest).is_some() {
            return Err(Errno::ENOENT);
        }
        let path = skill_dir.join(rest).map_err(|_| Errno::ENOENT)?;
        Ok(Resolved {
            skill_dir,
            path,
            depth: rest.split('/').count(),
            source,
        })
    }

    /// True when the current catalog still serves the checked skill
    /// `name`, at the directory holding `path`, and has not withdrawn it.
    fn still_checked(&self, name: &str, path: &VPath) -> bool {
        let catalog = self.catalog.snapshot();
        catalog
            .served_skill(name, self.options.all_skills)
            .is_some_and(|s| path.starts_with(&s.dir()))
            && catalog.checked_files(name).is_some()
    }

    /// The skill directories: the root's children, from the catalog alone.
    fn root_children(&self) -> Vec<Child> {
        let catalog = self.catalog.snapshot();
        let listed_at = Instant::now();
        catalog
            .served(self.options.all_skills)
            .filter_map(|s| skillstore::sync::dir_name(s.name()))
            .take(self.options.max_entries)
            .map(|name| Child {
                name: name.to_owned(),
                dir: true,
                size: None,
                version: None,
                listed_at,
            })
            .collect()
    }

    /// The children of the directory `local`.
    async fn children(&self, local: &str) -> Result<Vec<Child>, Errno> {
        if local.is_empty() {
            return Ok(self.root_children());
        }
        let resolved = self.resolve(local)?;
        if resolved.depth > self.options.max_depth {
            return Err(Errno::ENOENT);
        }
        if let Some(children) = self.state().listings.get(&resolved.path) {
            return Ok(children.as_ref().clone());
        }
        let catalog = self.catalog.snapshot();
        let name = local.split_once('/').map_or(local, |(name, _)| name);
        if catalog.checked_files(name).is_some() {
            let children = self.checked_children(&catalog, name, &resolved).await?;
            self.state()
                .listings
                .insert(resolved.path.clone(), Arc::new(children.clone()));
            return Ok(children);
        }
        let backend = Arc::clone(catalog.backend());
        let confined = ReadOptions {
            prefix: Some(0),
            ..ReadOptions::with_limit(self.options.read_limit).confined(resolved.skill_dir.segments().count())
        };
        let listed_at = Instant::now();
        let children = self
            .call(&resolved.source, async {
                let mut entries = backend.list(&resolved.path).await.map_err(|e| errno(&e))?;
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                let mut children = Vec::new();
                for e in entries.into_iter().filter(|e| shown(&e.name)) {
                    if children.len() == self.options.max_entries {
                        break;
                    }
                    // Nothing the content rule refuses is listed; the
                    // reserved directory is, for the signature it holds.
                    if let Ok(path) = resolved.path.join(&e.name)
                        && let Some(relative) = path.strip_prefix(&resolved.skill_dir)
                        && relative.relative_str() != skillstore::content::RESERVED_DIR
                        && skillstore::skill_files::is_foreign(relative.relative_str())
                    {
                        continue;
                    }
                    let dir = match (e.kind, e.symlink) {
                        (EntryKind::File, _) if e.size.is_some_and(|size| size > self.options.read_limit) => continue,
                        // A link to a file is shown only when a read through it
                        // stays inside the skill.
                        (EntryKind::File, true) => {
                            let Ok(path) = resolved.path.join(&e.name) else {
                                continue;
                            };
                            if backend.read(&path, confined).await.is_err() {
                                continue;
                            }
                            false
                        }
                        (EntryKind::File, false) => false,
                        (EntryKind::Dir, false) if resolved.depth < self.options.max_depth => true,
                        // Directory links, special files and links the policy
                        // does not resolve are not shown.
                        _ => continue,
                    };
                    children.push(Child {
                        name: e.name,
                        dir,
                        size: e.size,
                        version: e.version,
                        listed_at,
                    });
                }
                Ok::<_, Errno>(children)
            })
            .await?;
        self.state()
            .listings
            .insert(resolved.path.clone(), Arc::new(children.clone()));
        Ok(children)
    }

    /// The children of `resolved` in the skill `name`, which a lock or
    /// signature check digested: exactly the checked files still there at
    /// their checked versions, and no skill at all (EIO) once one of them
    /// is missing or changed, as a sync or an archive hands it on.
    async fn checked_children(
        &self,
        catalog: &skillstore::Catalog,
        name: &str,
        resolved: &Resolved,
    ) -> Result<Vec<Child>, Errno> {
        let listed_at = Instant::now();
        let files = self
            .call(&resolved.source, async {
                catalog
                    .skill_files(name, skillstore::skill_files::FileLimits::default())
                    .await
                    .map_err(|e| {
                        tracing::debug!(error = %e, skill = name, "a checked skill cannot be listed whole");
                        Errno::EIO
                    })
            })
            .await?;
        let below = resolved
            .path
            .strip_prefix(&resolved.skill_dir)
            .map(|r| r.relative_str().to_owned())
            .unwrap_or_default();
        let mut children: Vec<Child> = Vec::new();
        for file in &files.files {
            let rest = if below.is_empty() {
                file.relative.as_str()
            } else {
                match file
                    .relative
                    .strip_prefix(below.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                {
                    Some(rest) => rest,
                    None => continue,
                }
            };
            if skillstore::skill_files::is_foreign(&file.relative) || !shown(rest.split('/').next().unwrap_or("")) {
                continue;
            }
            let child = match rest.split_once('/') {
                None => Child {
                    name: rest.to_owned(),
                    dir: false,
                    size: Some(file.size),
                    version: file.version.clone(),
                    listed_at,
                },
                Some((dir, _)) if resolved.depth < self.options.max_depth => Child {
                    name: dir.to_owned(),
                    dir: true,
                    size: None,
                    version: None,
                    listed_at,
                },
                Some(_) => continue,
            };
            if !children.iter().any(|c| c.name == child.name) {
                if children.len() == self.options.max_entries {
                    break;
                }
                children.push(child);
            }
        }
        children.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(children)
    }

    /// `local` as its parent's listing shows it.
    async fn child(&self, local: &str) -> Result<Child, Errno> {
        let (parent, name) = local.rsplit_once('/').unwrap_or(("", local));
        self.children(parent)
            .await?
            .into_iter()
            .find(|c| c.name == name)
            .ok_or(Errno::ENOENT)
    }

    fn attr(&self, ino: INodeNo, child: &Child) -> FileAttr {
        let size = child.size.unwrap_or(0);
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind: if child.dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if child.dir { 0o555 } else { 0o444 },
            nlink: if child.dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The attributes of the root or of a skill directory (`local` holds
    /// no `/`), from the catalog alone.
    fn top_attr_of(&self, ino: INodeNo, local: &str) -> Result<FileAttr, Errno> {
        let child = if local.is_empty() {
            Child {
                name: String::new(),
                dir: true,
                size: None,
                version: None,
                listed_at: Instant::now(),
            }
        } else {
            self.root_children()
                .into_iter()
                .find(|c| c.name == local)
                .ok_or(Errno::ENOENT)?
        };
        Ok(self.attr(ino, &child))
    }

    /// The attributes of `local`, its size taken from a stat when the
    /// listing gave none.
    async fn attr_of(&self, ino: INodeNo, local: &str) -> Result<FileAttr, Errno> {
        if !local.contains('/') {
            return self.top_attr_of(ino, local);
        }
        let mut child = self.child(local).await?;
        if !child.dir && child.size.is_none() {
            let resolved = self.resolve(local)?;
            let backend = Arc::clone(self.catalog.snapshot().backend());
            let meta = self
                .call(&resolved.source, async {
                    backend.stat(&resolved.path).await.map_err(|e| errno(&e))
                })
                .await?;
            child.size = meta.size;
        }
        Ok(self.attr(ino, &child))
    }

    /// Opens the whole file `local`: the cache's copy when it holds the
    /// listed version (or one read since the listing), otherwise read
    /// through the backend, confined to its skill, and kept. `ENFILE` when
    /// the files held open fill the cache's budget. Returns the file and
    /// the size its listing gave.
    /// The bytes are reserved only once the source has a turn, so the reads
    /// a stalled source holds reserve at most
    /// [`MountOptions::source_concurrency`] files' worth.
    async fn open_file(&self, local: &str) -> Result<(OpenFile, Option<u64>), Errno> {
        let child = self.child(local).await?;
        if child.dir {
            return Err(Errno::EISDIR);
        }
        let resolved = self.resolve(local)?;
        let name = local.split_once('/').map_or(local, |(name, _)| name);
        let checked = self
            .catalog
            .snapshot()
            .checked_files(name)
            .is_some()
            .then(|| name.to_owned());
        let kept = self
            .cache()
            .open(&resolved.path, child.version.as_ref(), child.listed_at);
        if let Some((version, data)) = kept {
            let file = OpenFile {
                path: resolved.path,
                version,
                data,
                checked,
            };
            return Ok((file, child.size));
        }
        let limit = self.options.read_limit;
        let expected = child.size.filter(|&size| size <= limit).unwrap_or(limit);
        let backend = Arc::clone(self.catalog.snapshot().backend());
        let options = ReadOptions::with_limit(limit).confined(resolved.skill_dir.segments().count());
        let turn = self.limits.turn(&resolved.source).await;
        let reserved = Reserved {
            cache: &self.cache,
            reservation: Some(
                self.cache()
                    .reserve(usize::try_from(expected).unwrap_or(usize::MAX))
                    .map_err(|Full| Errno::ENFILE)?,
            ),
        };
        let blob = backend.read(&resolved.path, options).await.map_err(|e| errno(&e))?;
        drop(turn);
        let reservation = reserved.take();
        let data = self
            .cache()
            .insert_open(&resolved.path, blob.version.clone(), blob.data, reservation)
            .map_err(|Full| Errno::ENFILE)?;
        let file = OpenFile {
            path: resolved.path,
            version: blob.version,
            data,
            checked,
        };
        Ok((file, child.size))
    }

    fn cache(&self) -> MutexGuard<'_, BlobCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// True for a name the tree shows.
fn shown(name: &str) -> bool {
    is_valid_segment(name) && name.len() <= MAX_NAME_BYTES
}

/// The `errno` a reader sees for a backend error; logged with its virtual
/// path.
fn errno(e: &skillstore::backends::Error) -> Errno {
    tracing::debug!(error = %e, "a read through the skills mount failed");
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::DanglingSymlink => Errno::ENOENT,
        ErrorKind::NotADirectory => Errno::ENOTDIR,
        ErrorKind::IsADirectory => Errno::EISDIR,
        ErrorKind::TooLarge => Errno::EFBIG,
        ErrorKind::InvalidPath => Errno::ENAMETOOLONG,
        ErrorKind::SymlinkLoop => Errno::ELOOP,
        ErrorKind::PermissionDenied
        | ErrorKind::NotRegularFile
        | ErrorKind::SymlinkRefused
        | ErrorKind::SymlinkEscape => Errno::EACCES,
        ErrorKind::Unavailable => Errno::EAGAIN,
        _ => Errno::EIO,
    }
}

/// The filesystem handed to `fuser`.
pub(crate) struct SkillsFs {
    inner: Arc<Inner>,
}

impl SkillsFs {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        SkillsFs { inner }
    }

    /// Serves a request about `local` off the request thread: admitted for
    /// its skill's source (`EIO` at once when as many of that source's
    /// requests as [`MountOptions::source_concurrency`] plus
    /// [`MountOptions::source_queue`] are under way already), run on the
    /// runtime, and answered `EIO` once it has taken longer than
    /// [`MountOptions::request_timeout`]. `answer` is called exactly once.
    fn spawn<T, F>(
        &self,
        local: String,
        what: &'static str,
        work: impl FnOnce(Arc<Inner>, String) -> F + Send + 'static,
        answer: impl FnOnce(Result<T, Errno>) + Send + 'static,
    ) where
        T: Send + 'static,
        F: Future<Output = Result<T, Errno>> + Send + 'static,
    {
        let inner = &self.inner;
        let source = match inner.resolve(&local) {
            Ok(resolved) => resolved.source,
            Err(e) => return answer(Err(e)),
        };
        let timeout = inner.options.request_timeout;
        {
            let mut state = inner.state();
            if let Some(&since) = state.stalled.get(&local) {
                if since.elapsed() < timeout {
                    return answer(Err(Errno::EIO));
                }
                state.stalled.remove(&local);
            }
        }
        let Some(admission) = inner.limits.admit(&source) else {
            // A flood would flood the log too: the timeouts of the requests
            // holding the source are warned of.
            tracing::debug!(
                what,
                source,
                "too many requests wait on this source already; the reader gets EIO"
            );
            return answer(Err(Errno::EIO));
        };
        let worker = Arc::clone(inner);
        inner.runtime.spawn(async move {
            let marker = Arc::clone(&worker);
            let result = match tokio::time::timeout(timeout, work(worker, local.clone())).await {
                Ok(result) => result,
                Err(_) => {
                    let mut state = marker.state();
                    if state.stalled.len() >= MAX_STALLED {
                        let mut ages: Vec<Instant> = state.stalled.values().copied().collect();
                        ages.sort();
                        let cut = ages[ages.len() / 2];
                        state.stalled.retain(|_, since| *since > cut);
                    }
                    state.stalled.insert(local, Instant::now());
                    drop(state);
                    tracing::warn!(
                        what,
                        source,
                        ?timeout,
                        "the source did not answer in time; the reader gets EIO"
                    );
                    Err(Errno::EIO)
                }
            };
            drop(admission);
            answer(result);
        });
    }
}

/// `parent/name` below the mount point.
fn local_of(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

impl Filesystem for SkillsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Lookups and listings of one directory may then wait on the
        // backend side by side, as those of different directories do.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS) {
            tracing::debug!(?missing, "the kernel serializes the operations of one directory");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let inner = &self.inner;
        let local = inner.path_of(parent).ok_or(Errno::ENOENT).and_then(|parent| {
            let name = name.to_str().filter(|n| shown(n)).ok_or(Errno::ENOENT)?;
            Ok(local_of(&parent, name))
        });
        let local = match local {
            Ok(local) => local,
            Err(e) => return reply.error(e),
        };
        let ttl = inner.options.attr_ttl;
        // Only a name that exists is given an inode, so probing names does
        // not grow the table.
        if !local.contains('/') {
            return match inner.top_attr_of(INodeNo(0), &local) {
                Ok(mut attr) => {
                    attr.ino = inner.inode_of(&local);
                    reply.entry(&ttl, &attr, Generation(0));
                }
                Err(e) => reply.error(e),
            };
        }
        self.spawn(
            local,
            "lookup",
            |inner, local| async move {
                let mut attr = inner.attr_of(INodeNo(0), &local).await?;
                attr.ino = inner.inode_of(&local);
                Ok(attr)
            },
            move |result| match result {
                Ok(attr) => reply.entry(&ttl, &attr, Generation(0)),
                Err(e) => reply.error(e),
            },
        );
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let inner = &self.inner;
        let Some(local) = inner.path_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let ttl = inner.options.attr_ttl;
        if !local.contains('/') {
            return match inner.top_attr_of(ino, &local) {
                Ok(attr) => reply.attr(&ttl, &attr),
                Err(e) => reply.error(e),
            };
        }
        self.spawn(
            local,
            "getattr",
            move |inner, local| async move { inner.attr_of(ino, &local).await },
            move |result| match result {
                Ok(attr) => reply.attr(&ttl, &attr),
                Err(e) => reply.error(e),
            },
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != fuser::OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        let Some(local) = self.inner.path_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if !local.contains('/') {
            return reply.error(Errno::EISDIR);
        }
        self.spawn(
            local,
            "open",
            |inner, local| async move {
                let (file, listed_size) = inner.open_file(&local).await?;
                // When the bytes differ in length from what the listing
                // said, the kernel must not trust the size it was given.
                // A checked skill's file is read through this process
                // every time, so a withdrawal reaches handles already open.
                let flags = if listed_size == Some(file.data.len() as u64) && file.checked.is_none() {
                    FopenFlags::empty()
                } else {
                    FopenFlags::FOPEN_DIRECT_IO
                };
                let mut state = inner.state();
                let handle = state.next_handle;
                state.next_handle += 1;
                state.handles.insert(handle, file);
                Ok((handle, flags))
            },
            move |result| match result {
                Ok((handle, flags)) => reply.opened(FileHandle(handle), flags),
                Err(e) => reply.error(e),
            },
        );
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let file = self
            .inner
            .state()
            .handles
            .get(&u64::from(fh))
            .map(|f| (f.path.clone(), f.checked.clone(), f.data.clone()));
        match file {
            // Opened while its skill was checked: nothing more of it once
            // the skill is withdrawn, or withheld by a refresh since.
            Some((path, Some(name), _)) if !self.inner.still_checked(&name, &path) => reply.error(Errno::EIO),
            Some((_, _, data)) => {
                let start = (offset as usize).min(data.len());
                let end = start.saturating_add(size as usize).min(data.len());
                reply.data(&data[start..end]);
            }
            None => reply.error(Errno::EBADF),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let closed = self.inner.state().handles.remove(&u64::from(fh));
        if let Some(file) = closed {
            self.inner.cache().release(&file.path, &file.version);
        }
        reply.ok();
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, reply: ReplyDirectory) {
        let inner = &self.inner;
        let Some(local) = inner.path_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if local.is_empty() {
            let children = inner.root_children();
            return list(inner, ino, &local, children, offset, reply);
        }
        self.spawn(
            local,
            "readdir",
            |inner, local| async move {
                let children = inner.children(&local).await?;
                Ok((inner, local, children))
            },
            move |result| match result {
                Ok((inner, local, children)) => list(&inner, ino, &local, children, offset, reply),
                Err(e) => reply.error(e),
            },
        );
    }
}

/// Answers a `readdir` of `local` (inode `ino`) from `offset` on.
fn list(inner: &Inner, ino: INodeNo, local: &str, children: Vec<Child>, offset: u64, mut reply: ReplyDirectory) {
    let parent = match local.rsplit_once('/') {
        Some((parent, _)) => inner.inode_of(parent),
        None if local.is_empty() => ino,
        None => INodeNo(1),
    };
    let mut entries = vec![
        (ino, FileType::Directory, ".".to_owned()),
        (parent, FileType::Directory, "..".to_owned()),
    ];
    for child in children {
        let path = local_of(local, &child.name);
        let kind = if child.dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        };
        entries.push((inner.inode_of(&path), kind, child.name));
    }
    for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
        if reply.add(ino, (i + 1) as u64, kind, name) {
            break;
        }
    }
    reply.ok();
}

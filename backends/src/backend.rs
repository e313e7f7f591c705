//! The [`SkillBackend`] trait and the values it speaks in.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;
use crate::walk::{Walk, WalkLimits};

/// The default read limit: 10 MiB (10,485,760 bytes).
pub const DEFAULT_READ_LIMIT: u64 = 10 * 1024 * 1024;

/// An opaque version of one object: an ETag, a content counter or a file
/// fingerprint. Two reads that return equal versions returned equal bytes;
/// a write changes the version.
/// Cloning is cheap (a reference count).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Version(Arc<str>);

impl Version {
    /// Wraps a backend's version string.
    pub fn new(v: impl Into<String>) -> Self {
        Version(Arc::from(v.into()))
    }

    /// The version string as the backend gave it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when both name the same version, with or without the double
    /// quotes an ETag carries: `"7c61..."` and `7c61...` are one version,
    /// so a version copied from any output may be given back either way.
    pub fn same_as(&self, other: &Version) -> bool {
        unquoted(&self.0) == unquoted(&other.0)
    }
}

fn unquoted(v: &str) -> &str {
    v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v)
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({:?})", self.0)
    }
}

/// What a path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    /// A regular file (or an object).
    File,
    /// A directory (or a common key prefix).
    Dir,
    /// Anything else: a FIFO, socket or device, or a symbolic link the
    /// backend's policy does not let it resolve.
    Other,
}

/// What a backend knows of one path without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// File, directory or other.
    pub kind: EntryKind,
    /// The size in bytes, for files where known.
    pub size: Option<u64>,
    /// The version, for files where known.
    pub version: Option<Version>,
}

/// One child of a listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The child's name: one path segment.
    pub name: String,
    /// File, directory or other.
    pub kind: EntryKind,
    /// The size in bytes, for files where the listing gives it.
    pub size: Option<u64>,
    /// The version, for files where the listing gives it.
    pub version: Option<Version>,
    /// True when the child is a symbolic link; `kind` then says what it
    /// leads to under the backend's policy ([`EntryKind::Other`] when the
    /// policy does not resolve it). A walk never descends into a directory
    /// link. Always false for backends without links.
    pub symlink: bool,
}

impl Entry {
    /// The entry's metadata.
    pub fn metadata(&self) -> Metadata {
        Metadata {
            kind: self.kind,
            size: self.size,
            version: self.version.clone(),
        }
    }
}

/// A directory's listing with the names that could not be listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The children a [`VPath`] can name, as [`SkillBackend::list`] gives
    /// them.
    pub entries: Vec<Entry>,
    /// The children no [`VPath`] can name, relative to the listed directory
    /// and escaped for display (`evil\u{7f}`, `a//b`): safe to show, never
    /// to use as a path.
    pub invalid: Vec<String>,
}

/// How to read one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// The largest object that may be read, in bytes (inclusive). A larger
    /// object is refused with [`ErrorKind::TooLarge`] before its bytes are
    /// held, even when only a prefix is asked for.
    pub limit: u64,
    /// Return at most this many bytes from the start of the object.
    pub prefix: Option<u64>,
    /// The directory the read must stay beneath once every link is
    /// resolved, as the number of leading segments of the read path that
    /// name it: `Some(2)` for `/team/pdf/references/a.md` keeps the read
    /// inside `/team/pdf`. `None` is the backend's root (under its own
    /// symlink policy). A link leading out of the directory is
    /// [`ErrorKind::SymlinkEscape`] (or [`ErrorKind::SymlinkRefused`] where
    /// links are refused); a confinement that is not a proper ancestor of
    /// the path is [`ErrorKind::InvalidPath`]. Backends without links hold
    /// to it by the path alone.
    pub confinement: Option<usize>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            limit: DEFAULT_READ_LIMIT,
            prefix: None,
            confinement: None,
        }
    }
}

impl ReadOptions {
    /// Whole-object reads with the given limit.
    pub fn with_limit(limit: u64) -> Self {
        ReadOptions {
            limit,
            ..Self::default()
        }
    }

    /// Reads at most `len` bytes from the start, under the default limit.
    pub fn prefix(len: u64) -> Self {
        ReadOptions {
            prefix: Some(len),
            ..Self::default()
        }
    }

    /// The same options, confined to the directory named by the first
    /// `segments` segments of each path read (see
    /// [`ReadOptions::confinement`]).
    pub fn confined(self, segments: usize) -> Self {
        ReadOptions {
            confinement: Some(segments),
            ..self
        }
    }

    /// How many bytes to return for an object of `size` bytes.
    pub fn wanted(&self, size: u64) -> u64 {
        self.prefix.map_or(size, |p| p.min(size))
    }

    /// The directory a read of `path` must stay beneath, or `None` when
    /// unconfined. A confinement of as many segments as `path` has, or
    /// more, is [`ErrorKind::InvalidPath`].
    pub fn confining_dir(&self, path: &VPath) -> Result<Option<VPath>> {
        let Some(segments) = self.confinement else {
            return Ok(None);
        };
        let depth = path.segments().count();
        if segments >= depth {
            return Err(Error::at(ErrorKind::InvalidPath, path).with_detail(format!(
                "confined to {segments} leading segments, but the path has {depth}"
            )));
        }
        let mut dir = VPath::root();
        for segment in path.segments().take(segments) {
            dir = dir.join(segment)?;
        }
        Ok(Some(dir))
    }

    /// These options for a backend mounted `depth` segments below the root
    /// of the namespace: a confinement at or above the mount point becomes
    /// the mounted backend's root.
    pub fn below_mount(self, depth: usize) -> Self {
        ReadOptions {
            confinement: self.confinement.map(|n| n.saturating_sub(depth)),
            ..self
        }
    }
}

/// The bytes of one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The bytes read: the whole object, or its prefix.
    pub data: Bytes,
    /// The whole object's size in bytes.
    pub size: u64,
    /// The object's version when read.
    pub version: Version,
}

impl Blob {
    /// True when `data` holds the whole object.
    pub fn is_complete(&self) -> bool {
        self.data.len() as u64 == self.size
    }
}

/// The condition a write is made under.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PutMode {
    /// Replace whatever is there.
    #[default]
    Overwrite,
    /// Fail with [`ErrorKind::AlreadyExists`] if the object exists.
    Create,
    /// Replace only the given version; fail with
    /// [`ErrorKind::VersionConflict`] otherwise (also when nothing exists).
    IfVersion(Version),
}

/// What a backend supports, declared up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// `put` and `delete` are available.
    pub write: bool,
    /// `put` honours [`PutMode::Create`] atomically.
    pub create_only: bool,
    /// `put` honours [`PutMode::IfVersion`] atomically.
    pub if_version: bool,
    /// [`SkillBackend::delete_if_version`] checks and deletes in one atomic
    /// step (otherwise a write landing between its check and its delete is
    /// lost).
    pub if_version_delete: bool,
    /// The backend can hold symbolic links (and applies a symlink policy).
    pub symlinks: bool,
    /// [`SkillBackend::list_deep`] lists every file below a directory, with
    /// sizes and versions, in pages of many keys (about one request per
    /// 1,000 files) rather than one listing per directory.
    pub deep_list: bool,
}

impl Capabilities {
    /// A read-only backend.
    pub const READ_ONLY: Capabilities = Capabilities {
        write: false,
        create_only: false,
        if_version: false,
        if_version_delete: false,
        symlinks: false,
        deep_list: false,
    };

    /// A backend with atomic conditional writes, a checked (not atomic)
    /// conditional delete, and no symbolic links.
    pub const READ_WRITE: Capabilities = Capabilities {
        write: true,
        create_only: true,
        if_version: true,
        if_version_delete: false,
        symlinks: false,
        deep_list: false,
    };

    /// These capabilities with [`Capabilities::deep_list`] set to `on`.
    pub const fn with_deep_list(self, on: bool) -> Capabilities {
        Capabilities { deep_list: on, ..self }
    }
}

/// How far a [`SkillBackend::list_deep`] may go before it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeepLimits {
    /// The most files listed; past it the listing is cut short.
    pub max_files: usize,
    /// Once more than 2,000 files are listed, the listing is cut short when
    /// it holds more than this many files per immediate subdirectory seen
    /// so far (a tree of large skills is cheaper to list by directory).
    /// Backends that list directory by directory may ignore it.
    pub max_files_per_dir: usize,
    /// Immediate subdirectories left out: none of their files is listed or
    /// counted against the limits above (a store's own bookkeeping beside
    /// the skills: history, audit records, releases).
    pub skip: &'static [&'static str],
}

impl DeepLimits {
    /// True when `relative` (a listed file's path) lies in a directory
    /// [`DeepLimits::skip`] leaves out.
    pub fn skips(&self, relative: &str) -> bool {
        relative
            .split_once('/')
            .is_some_and(|(top, _)| self.skip.contains(&top))
    }
}

impl Default for DeepLimits {
    /// 25,000 files, 16 per subdirectory, nothing skipped.
    fn default() -> Self {
        DeepLimits {
            max_files: 25_000,
            max_files_per_dir: 16,
            skip: &[],
        }
    }
}

/// One file of a [`DeepListing`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeepFile {
    /// The path below the listed directory, `/`-separated
    /// (`pdf/SKILL.md`); every segment is one a [`VPath`] can hold.
    pub relative: String,
    /// The size in bytes, where the listing gives it.
    pub size: Option<u64>,
    /// The version, where the listing gives it: the same version a read of
    /// the file reports.
    pub version: Option<Version>,
}

/// Every file below a directory, as [`SkillBackend::list_deep`] gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeepListing {
    /// The files, in no promised order.
    pub files: Vec<DeepFile>,
    /// True when [`DeepLimits`] stopped the listing: `files` is then only
    /// part of what is there and must not be taken for the whole.
    pub truncated: bool,
}

impl DeepListing {
    /// The files of a walk, leaving out links.
    pub(crate) fn from_walk(walk: Walk) -> DeepListing {
        let files = walk
            .files
            .into_iter()
            .filter(|f| !f.entry.symlink)
            .map(|f| DeepFile {
                relative: f.relative,
                size: f.entry.size,
                version: f.entry.version,
            })
            .collect();
        DeepListing {
            files,
            truncated: walk.truncated,
        }
    }
}

/// Bytes at virtual paths, with the read guards applied on every call.
///
/// Every implementation guarantees, for `read`:
/// - it reads only inside its own root (paths are [`VPath`]s; no other door);
/// - it refuses an object larger than [`ReadOptions::limit`] before holding
///   its bytes, and never returns more than the limit even if the object
///   grows while being read;
/// - it reads only regular files.
///
/// Paths are relative to the backend's own root: `/x/SKILL.md` in a backend
/// rooted at some directory is that directory's `x/SKILL.md`.
#[async_trait]
pub trait SkillBackend: Send + Sync + fmt::Debug {
    /// What this backend supports.
    fn capabilities(&self) -> Capabilities;

    /// The immediate children of `dir`, in no promised order.
    /// Errors: [`ErrorKind::NotFound`], [`ErrorKind::NotADirectory`].
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>>;

    /// [`SkillBackend::list`], plus the names under `dir` that no [`VPath`]
    /// can hold (an object key with a control character, an empty or `..`
    /// segment), which `list` leaves out. One odd name never hides the
    /// valid entries beside it. The default lists and reports nothing odd.
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        Ok(Listing {
            entries: self.list(dir).await?,
            invalid: Vec::new(),
        })
    }

    /// Every regular file below `dir`, at any depth, with its size and
    /// version, within `limits`. Where [`Capabilities::deep_list`] is set
    /// this is one paginated stream of keys; the default walks directory by
    /// directory (one listing each), never into a directory link, and
    /// leaves out links and anything a walk passes over. A listing that
    /// meets a name no [`VPath`] can hold fails with
    /// [`ErrorKind::InvalidPath`] rather than drop it silently: the caller
    /// lists by directory instead.
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        let walk = crate::walk::walk(
            self,
            dir,
            WalkLimits {
                max_files: limits.max_files,
                ..WalkLimits::default()
            },
        )
        .await?;
        let mut listing = DeepListing::from_walk(walk);
        listing.files.retain(|f| !limits.skips(&f.relative));
        Ok(listing)
    }

    /// The capabilities that hold at `path`: a namespace joining several
    /// backends answers with those of the one serving it. The default is
    /// [`SkillBackend::capabilities`].
    fn capabilities_at(&self, path: &VPath) -> Capabilities {
        let _ = path;
        self.capabilities()
    }

    /// A stable name for where the objects under `dir` are kept (for an
    /// object store: its endpoint, region, bucket and key), for caches
    /// kept outside the backend: two directories with equal identities
    /// hold the same objects, and versions are only compared between equal
    /// identities. `None` (the default) when the backend cannot name it,
    /// and then nothing is cached for it.
    fn location_id(&self, dir: &VPath) -> Option<String> {
        let _ = dir;
        None
    }

    /// What `path` is, without reading it.
    async fn stat(&self, path: &VPath) -> Result<Metadata>;

    /// Reads one regular file under the guards described on the trait.
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob>;

    /// Writes one file, creating parent directories as needed, and returns
    /// the new version. The write is atomic: readers see the old bytes or
    /// the new ones, never a mix.
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        let _ = (data, mode);
        Err(Error::at(ErrorKind::ReadOnly, path).with_detail("this backend is read-only"))
    }

    /// Deletes one file. Deleting nothing is [`ErrorKind::NotFound`].
    async fn delete(&self, path: &VPath) -> Result<()> {
        Err(Error::at(ErrorKind::ReadOnly, path).with_detail("this backend is read-only"))
    }

    /// Deletes one file only while its version is `expected`; otherwise
    /// [`ErrorKind::VersionConflict`], also when nothing is there. Atomic
    /// where [`Capabilities::if_version_delete`] says so; the default checks
    /// the version with a stat, then deletes.
    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        let found = match self.stat(path).await {
            Ok(meta) => meta.version,
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if found.as_ref() != Some(expected) {
            return Err(Error::version_conflict(path, expected, found.as_ref()));
        }
        self.delete(path).await
    }

    /// How many paths a [`SkillBackend::read_many`] or
    /// [`SkillBackend::stat_many`] call should carry for this backend to
    /// serve them well: large where a batch costs one handoff to a thread,
    /// small where each path is a network request.
    fn preferred_batch(&self) -> usize {
        16
    }

    /// Reads several files under the same guards as [`SkillBackend::read`];
    /// results come in the order of `paths`. The default issues the reads
    /// concurrently; a backend may serve a batch more cheaply.
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        futures::future::join_all(paths.iter().map(|p| self.read(p, options))).await
    }

    /// Stats several paths; results come in the order of `paths`.
    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        futures::future::join_all(paths.iter().map(|p| self.stat(p))).await
    }

    /// Lists several directories as [`SkillBackend::list`] lists each;
    /// results come in the order of `dirs`. The default issues the listings
    /// concurrently; a backend may serve a batch more cheaply (the
    /// filesystem lists a batch in one blocking task).
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        futures::future::join_all(dirs.iter().map(|d| self.list(d))).await
    }
}

#[async_trait]
impl<T: SkillBackend + ?Sized> SkillBackend for Arc<T> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        (**self).list(dir).await
    }
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        (**self).list_detailed(dir).await
    }
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        (**self).list_deep(dir, limits).await
    }
    fn capabilities_at(&self, path: &VPath) -> Capabilities {
        (**self).capabilities_at(path)
    }
    fn location_id(&self, dir: &VPath) -> Option<String> {
        (**self).location_id(dir)
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        (**self).stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        (**self).read(path, options).await
    }
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        (**self).put(path, data, mode).await
    }
    async fn delete(&self, path: &VPath) -> Result<()> {
        (**self).delete(path).await
    }
    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        (**self).delete_if_version(path, expected).await
    }
    fn preferred_batch(&self) -> usize {
        (**self).preferred_batch()
    }
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        (**self).read_many(paths, options).await
    }
    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        (**self).stat_many(paths).await
    }
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        (**self).list_many(dirs).await
    }
}

/// Conveniences over [`SkillBackend`], available on every backend.
#[async_trait]
pub trait SkillBackendExt: SkillBackend {
    /// Reads a whole file under the default 10 MiB limit.
    async fn read_all(&self, path: &VPath) -> Result<Bytes> {
        Ok(self.read(path, ReadOptions::default()).await?.data)
    }

    /// Reads a whole file as UTF-8 under the default limit.
    async fn read_to_string(&self, path: &VPath) -> Result<String> {
        let data = self.read_all(path).await?;
        String::from_utf8(data.to_vec()).map_err(|e| {
            Error::at(ErrorKind::Other, path)
                .with_detail("the file is not valid UTF-8")
                .with_source(e)
        })
    }

    /// True when something exists at `path`.
    async fn exists(&self, path: &VPath) -> Result<bool> {
        match self.stat(path).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every file under `dir`, depth first, within `limits`. It never
    /// descends into a symbolic link to a directory (so `up -> ..` cannot
    /// make it loop), and reports what it passed over: directory links,
    /// unresolved links, special files, directories past the depth limit,
    /// subdirectories it could not list. Listing `dir` itself must succeed.
    async fn walk(&self, dir: &VPath, limits: WalkLimits) -> Result<Walk> {
        crate::walk::walk(self, dir, limits).await
    }

    /// Walks each of `dirs` as [`SkillBackendExt::walk`] does, with the
    /// next directory of every unfinished walk listed in one
    /// [`SkillBackend::list_many`] batch; results come in the order of
    /// `dirs`.
    async fn walk_many(&self, dirs: &[VPath], limits: WalkLimits) -> Vec<Result<Walk>> {
        crate::walk::walk_many(self, dirs, limits).await
    }
}

impl<T: SkillBackend + ?Sized> SkillBackendExt for T {}

impl Error {
    /// The [`ErrorKind::TooLarge`] error every backend returns for an object
    /// of `size` bytes over `limit`.
    pub fn too_large(path: &VPath, size: u64, limit: u64) -> Error {
        Error::at(ErrorKind::TooLarge, path).with_detail(format!("{size} bytes; the limit is {limit}"))
    }

    /// The [`ErrorKind::VersionConflict`] error of a conditional write or
    /// delete that found `found` (or nothing) instead of `expected`.
    pub fn version_conflict(path: &VPath, expected: &Version, found: Option<&Version>) -> Error {
        let found = found.map_or_else(|| "nothing".to_owned(), |v| v.to_string());
        Error::at(ErrorKind::VersionConflict, path).with_detail(format!("expected version {expected}, found {found}"))
    }
}

/// The answers of a batch run as one task: each one's own, or, when the
/// task itself failed, that failure for every path of the batch (`what`
/// names the task in the detail).
#[cfg(any(feature = "fs", feature = "git"))]
pub(crate) fn batch_answers<T>(done: Result<Vec<Result<T>>>, count: usize, what: &str) -> Vec<Result<T>> {
    done.unwrap_or_else(|e| {
        (0..count)
            .map(|_| Err(Error::new(e.kind()).with_detail(format!("{what} failed"))))
            .collect()
    })
}

/// The error for an object that grew past the limit while being read.
#[cfg(any(feature = "fs", feature = "object-store"))]
pub(crate) fn grew_past_limit(path: &VPath, limit: u64) -> Error {
    Error::at(ErrorKind::TooLarge, path).with_detail(format!("grew past the limit of {limit} bytes while being read"))
}

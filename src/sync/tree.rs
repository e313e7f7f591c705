//! The synced directory on disk: the live generation at `DIR`, and beside
//! it a state directory `.NAME.skillstore` holding the lock, the manifest
//! of the live generation, generations being built, and the generation
//! last replaced.
//!
//! A generation is built in the state directory and switched in with one
//! `renameat2` (`RENAME_EXCHANGE` when a generation is live, otherwise
//! `RENAME_NOREPLACE`), so a path resolved under `DIR` sees one generation
//! whole. The generation replaced stays in the state directory until the
//! next switch, so a reader that opened it before the switch can finish; it
//! is removed then. A manifest is named by the device and inode of the
//! generation it describes, so it moves with the switch without being
//! renamed, and a crash anywhere leaves the live generation described.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{FlockOperation, RenameFlags};
use skillstore_backends::ErrorKind;

use super::manifest::{FORMAT, FileRecord, Manifest};
use crate::error::{Error, Result};

/// Mode of every directory written.
const DIR_MODE: u32 = 0o755;

/// What `DIR` holds before a sync.
#[derive(Debug)]
pub(crate) enum Live {
    /// Nothing: the first sync creates it.
    Absent,
    /// An empty directory no sync wrote: replaced like a generation.
    Empty,
    /// A generation this module wrote, with its manifest.
    Ours(Manifest),
}

/// A locked sync target.
#[derive(Debug)]
pub(crate) struct Target {
    live: PathBuf,
    state: PathBuf,
    /// Holds the lock while the target is open.
    _lock: File,
}

impl Target {
    /// Opens the state directory beside `dir` (creating it) and takes the
    /// target's lock, without waiting: two syncs of one directory never
    /// interleave.
    pub(crate) fn open(dir: &Path) -> Result<Target> {
        let name = match dir.file_name() {
            Some(name) if !dir.ends_with("..") => name.to_owned(),
            _ => {
                return Err(Error::Usage(
                    "the sync target must name a directory to create or replace".into(),
                ));
            }
        };
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut state_name = OsString::from(".");
        state_name.push(&name);
        state_name.push(".skillstore");
        let state = parent.join(state_name);
        if fs::symlink_metadata(&state).is_err() && holds_files(dir) {
            // Refused before anything is written beside it.
            return Err(foreign());
        }
        match fs::create_dir(&state) {
            Ok(()) => fs::set_permissions(&state, fs::Permissions::from_mode(0o700))
                .map_err(|e| io_error("cannot set up the sync state", e))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error("cannot create the sync state beside the target", e)),
        }
        let meta = fs::symlink_metadata(&state).map_err(|e| io_error("cannot read the sync state", e))?;
        if !meta.is_dir() {
            return Err(Error::Usage(
                "the sync state beside the target is not a directory; remove it first".into(),
            ));
        }
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .mode(0o600)
            .open(state.join("lock"))
            .map_err(|e| io_error("cannot open the sync lock", e))?;
        rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(|e| {
            if e == rustix::io::Errno::WOULDBLOCK {
                Error::Usage("another sync of this directory is running".into())
            } else {
                io_error("cannot lock the sync target", e.into())
            }
        })?;
        let target = Target {
            live: dir.to_path_buf(),
            state,
            _lock: lock,
        };
        target.remove_stale_builds();
        Ok(target)
    }

    /// The live generation's path.
    pub(crate) fn live_path(&self) -> &Path {
        &self.live
    }

    /// What `DIR` holds now. A directory that is neither a generation of
    /// this target nor empty is refused: a sync never replaces files it did
    /// not write.
    pub(crate) fn live(&self) -> Result<Live> {
        let meta = match fs::symlink_metadata(&self.live) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Live::Absent),
            Err(e) => return Err(io_error("cannot look at the sync target", e)),
        };
        if !meta.is_dir() {
            return Err(Error::Usage(
                "the sync target exists and is not a directory; refusing to replace it".into(),
            ));
        }
        match fs::read(self.manifest_path(meta.dev(), meta.ino())) {
            Ok(bytes) => match serde_json::from_slice::<Manifest>(&bytes) {
                Ok(manifest) if manifest.format == FORMAT => Ok(Live::Ours(manifest)),
                // An unreadable manifest only costs reuse: rebuild everything.
                _ => Ok(Live::Ours(Manifest::default())),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut entries = fs::read_dir(&self.live).map_err(|e| io_error("cannot list the sync target", e))?;
                if entries.next().is_none() {
                    Ok(Live::Empty)
                } else {
                    Err(foreign())
                }
            }
            Err(e) => Err(io_error("cannot read the sync manifest", e)),
        }
    }

    /// A new, empty generation in the state directory.
    pub(crate) fn build(&self) -> Result<Build> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "build-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = self.state.join(name);
        create_dir(&path).map_err(|e| io_error("cannot create a new generation", e))?;
        Ok(Build {
            root: path,
            dirs: HashSet::new(),
            switched: false,
        })
    }

    /// Records `manifest` for `build` and switches it in as the live
    /// generation in one step; the generation it replaces is kept until the
    /// next switch, and older ones are removed.
    pub(crate) fn switch(&self, mut build: Build, manifest: &Manifest, live: &Live) -> Result<()> {
        let meta = fs::symlink_metadata(&build.root).map_err(|e| io_error("cannot read the new generation", e))?;
        let manifest_path = self.manifest_path(meta.dev(), meta.ino());
        let text = serde_json::to_vec(manifest).expect("a manifest serializes");
        write_replacing(&manifest_path, &text).map_err(|e| io_error("cannot write the sync manifest", e))?;

        let flags = match live {
            Live::Absent => RenameFlags::NOREPLACE,
            Live::Empty | Live::Ours(_) => RenameFlags::EXCHANGE,
        };
        rustix::fs::renameat_with(rustix::fs::CWD, &build.root, rustix::fs::CWD, &self.live, flags).map_err(|e| {
            let _ = fs::remove_file(&manifest_path);
            match e {
                rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS => {
                    Error::Backend(skillstore_backends::Error::new(ErrorKind::Unsupported).with_detail(
                        "the filesystem of the sync target cannot exchange directories atomically (renameat2)",
                    ))
                }
                rustix::io::Errno::EXIST if flags == RenameFlags::NOREPLACE => {
                    Error::Usage("the sync target appeared while the generation was built; sync again".into())
                }
                other => io_error("cannot switch in the new generation", other.into()),
            }
        })?;
        build.switched = true;

        // The old generation now sits where the new one was built.
        let retired = self.state.join("retired");
        if matches!(live, Live::Absent) {
            return self.remove_manifests_except(&manifest_path);
        }
        remove_tree(&retired);
        if fs::rename(&build.root, &retired).is_err() {
            remove_tree(&build.root);
        }
        self.remove_manifests_except(&manifest_path)
    }

    fn manifest_path(&self, dev: u64, ino: u64) -> PathBuf {
        self.state.join(format!("manifest-{dev:x}-{ino:x}.json"))
    }

    fn remove_manifests_except(&self, keep: &Path) -> Result<()> {
        let entries = fs::read_dir(&self.state).map_err(|e| io_error("cannot list the sync state", e))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            if starts_with(&name, "manifest-") && entry.path() != keep {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Removes generations whose build was interrupted.
    fn remove_stale_builds(&self) {
        if let Ok(entries) = fs::read_dir(&self.state) {
            for entry in entries.flatten() {
                if starts_with(&entry.file_name(), "build-") {
                    remove_tree(&entry.path());
                }
            }
        }
    }
}

/// A generation being built. Removed when dropped before its switch, so a
/// failed or cancelled sync leaves nothing behind.
#[derive(Debug)]
pub(crate) struct Build {
    root: PathBuf,
    dirs: HashSet<String>,
    switched: bool,
}

/// Where a written or linked file ended up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written {
    pub(crate) ino: u64,
    pub(crate) mtime: (i64, i64),
}

impl Build {
    /// Creates the directory `relative` (and its parents) in the generation.
    fn ensure_dir(&mut self, relative: &str) -> Result<()> {
        if relative.is_empty() || self.dirs.contains(relative) {
            return Ok(());
        }
        if let Some((parent, _)) = relative.rsplit_once('/') {
            self.ensure_dir(parent)?;
        }
        create_dir(&self.root.join(relative)).map_err(|e| io_error(&format!("cannot create `{relative}`"), e))?;
        self.dirs.insert(relative.to_owned());
        Ok(())
    }

    /// Creates the directory of a skill with no files yet.
    pub(crate) fn skill_dir(&mut self, name: &str) -> Result<()> {
        self.ensure_dir(name)
    }

    /// Writes a new file at `relative` (segments checked by the caller)
    /// with exactly `mode`.
    pub(crate) fn write(&mut self, relative: &str, data: &[u8], mode: u32) -> Result<Written> {
        if let Some((parent, _)) = relative.rsplit_once('/') {
            self.ensure_dir(parent)?;
        }
        let what = || format!("cannot write `{relative}`");
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .mode(mode)
            .open(self.root.join(relative))
            .map_err(|e| io_error(&what(), e))?;
        file.write_all(data).map_err(|e| io_error(&what(), e))?;
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|e| io_error(&what(), e))?;
        let meta = file.metadata().map_err(|e| io_error(&what(), e))?;
        Ok(written(&meta))
    }

    /// Hard-links `relative` from the live generation when the file there
    /// is still the one `record` describes (a regular file with the same
    /// inode, size, mode and modification time). `None` when it is not, or
    /// the link cannot be made; the caller then reads the source.
    pub(crate) fn link_from(&mut self, live: &Path, relative: &str, record: &FileRecord) -> Option<Written> {
        let from = live.join(relative);
        let meta = fs::symlink_metadata(&from).ok()?;
        if !unchanged(&meta, record) {
            return None;
        }
        if let Some((parent, _)) = relative.rsplit_once('/') {
            self.ensure_dir(parent).ok()?;
        }
        fs::hard_link(&from, self.root.join(relative)).ok()?;
        Some(written(&meta))
    }

    /// Removes a skill's directory from the generation.
    pub(crate) fn remove_skill(&mut self, name: &str) {
        remove_tree(&self.root.join(name));
        self.dirs.retain(|d| d != name && !d.starts_with(&format!("{name}/")));
    }
}

impl Drop for Build {
    fn drop(&mut self) {
        if !self.switched {
            remove_tree(&self.root);
        }
    }
}

/// True when the file at `meta` is still the one `record` describes.
fn unchanged(meta: &fs::Metadata, record: &FileRecord) -> bool {
    meta.file_type().is_file()
        && meta.ino() == record.ino
        && meta.len() == record.size
        && meta.mode() & 0o7777 == record.mode
        && (meta.mtime(), meta.mtime_nsec()) == record.mtime
}

/// True when the file at `relative` in the live generation at `live` is
/// still the one `record` describes.
pub(crate) fn live_matches(live: &Path, relative: &str, record: &FileRecord) -> bool {
    fs::symlink_metadata(live.join(relative)).is_ok_and(|meta| unchanged(&meta, record))
}

fn written(meta: &fs::Metadata) -> Written {
    Written {
        ino: meta.ino(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
    }
}

fn create_dir(path: &Path) -> io::Result<()> {
    fs::create_dir(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
}

fn write_replacing(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(data)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

/// Removes a directory tree this module wrote; never follows a link
/// (`remove_dir_all` removes links, not their targets).
fn remove_tree(path: &Path) {
    match fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(error = %e, "cannot remove an old generation"),
    }
}

/// True when `dir` is something other than an empty directory.
fn holds_files(dir: &Path) -> bool {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some()),
        Ok(_) => true,
        Err(_) => false,
    }
}

fn foreign() -> Error {
    Error::Usage(
        "the sync target holds files no sync wrote; refusing to replace it (remove it, or sync to a new directory)"
            .into(),
    )
}

fn starts_with(name: &OsStr, prefix: &str) -> bool {
    name.to_str().is_some_and(|n| n.starts_with(prefix))
}

/// A local I/O failure as an error naming no host path.
pub(crate) fn io_error(what: &str, e: io::Error) -> Error {
    let kind = match e.raw_os_error() {
        Some(code) if code == rustix::io::Errno::NOSPC.raw_os_error() => ErrorKind::StorageFull,
        Some(code) if code == rustix::io::Errno::DQUOT.raw_os_error() => ErrorKind::StorageFull,
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            io::ErrorKind::NotFound => ErrorKind::NotFound,
            _ => ErrorKind::Other,
        },
    };
    let detail = format!("{what}: {}", io::Error::from(e.kind()));
    Error::Backend(skillstore_backends::Error::new(kind).with_detail(detail).with_source(e))
}

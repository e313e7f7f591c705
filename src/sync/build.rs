//! A generation being built in the state directory. Every directory and
//! file is created relative to handles opened without following links,
//! with exactly the modes asked for (whatever the umask); a file reused
//! from the live generation is hard-linked only when it is still the one
//! recorded.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::io::{self, Write};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::fsx::{birth, ctime, ino, io_error, kind, mode, open_dir, open_path, remove_all, size, stat_at};
use super::manifest::FileRecord;
use super::state::State;
use crate::error::Result;

/// Mode of every directory written.
const DIR_MODE: u32 = 0o755;

/// Directory handles kept open at once; past it they are opened again.
const CACHED_DIRS: usize = 128;

/// Where a written or linked file ended up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written {
    pub(crate) ino: u64,
    pub(crate) ctime: (i64, i64),
}

/// A generation being built. Removed when dropped before its switch, so a
/// failed or cancelled sync leaves nothing behind.
#[derive(Debug)]
pub(crate) struct Build<'s> {
    state: &'s State,
    name: String,
    root: OwnedFd,
    dirs: BTreeMap<String, u64>,
    births: BTreeMap<String, (i64, u32)>,
    cache: HashMap<String, OwnedFd>,
    switched: bool,
}

impl<'s> Build<'s> {
    /// A new, empty generation `build-ID` in the state directory.
    pub(crate) fn new(state: &'s State, id: &str) -> Result<Build<'s>> {
        let name = format!("build-{id}");
        let what = "cannot create a new generation";
        rustix::fs::mkdirat(state.fd(), name.as_str(), Mode::from_raw_mode(DIR_MODE))
            .map_err(|e| io_error(what, e.into()))?;
        let root = open_dir(state.fd(), &name).map_err(|e| io_error(what, e))?;
        rustix::fs::fchmod(&root, Mode::from_raw_mode(DIR_MODE)).map_err(|e| io_error(what, e.into()))?;
        let st = rustix::fs::fstat(&root).map_err(|e| io_error(what, e.into()))?;
        Ok(Build {
            state,
            name,
            root,
            dirs: BTreeMap::from([(String::new(), ino(&st))]),
            births: BTreeMap::new(),
            cache: HashMap::new(),
            switched: false,
        })
    }

    /// The generation's name in the state directory.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The generation's root.
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Every directory written, with its inode (`""` is the root).
    pub(crate) fn dirs(&self) -> &BTreeMap<String, u64> {
        &self.dirs
    }

    /// When each skill directory was made, where the filesystem says.
    pub(crate) fn births(&self) -> &BTreeMap<String, (i64, u32)> {
        &self.births
    }

    /// Marks the generation as switched in (or its tree as holding what
    /// must not be removed whole): it is no longer removed when dropped.
    pub(crate) fn keep(&mut self) {
        self.switched = true;
    }

    /// Undoes [`Build::keep`]: the tree holds only what this build wrote
    /// again, and is removed when dropped.
    pub(crate) fn discard(&mut self) {
        self.switched = false;
    }

    /// Creates the directory `relative` and its parents, and returns it.
    pub(crate) fn dir(&mut self, relative: &str) -> Result<BorrowedFd<'_>> {
        self.ensure(relative)
            .map_err(|e| io_error(&format!("cannot create `{relative}`"), e))?;
        Ok(self.cache[relative].as_fd())
    }

    fn ensure(&mut self, relative: &str) -> io::Result<()> {
        if self.cache.contains_key(relative) {
            return Ok(());
        }
        if self.cache.len() >= CACHED_DIRS {
            self.cache.clear();
        }
        if relative.is_empty() {
            let fd = open_dir(self.root.as_fd(), ".")?;
            self.cache.insert(String::new(), fd);
            return Ok(());
        }
        if self.dirs.contains_key(relative) {
            let fd = open_path(self.root.as_fd(), relative)?;
            self.cache.insert(relative.to_owned(), fd);
            return Ok(());
        }
        let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
        self.ensure(parent)?;
        let up = self.cache[parent].as_fd();
        rustix::fs::mkdirat(up, name, Mode::from_raw_mode(DIR_MODE))?;
        let fd = open_dir(up, name)?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))?;
        self.dirs.insert(relative.to_owned(), ino(&rustix::fs::fstat(&fd)?));
        if parent.is_empty()
            && let Some(made) = birth(fd.as_fd())
        {
            self.births.insert(relative.to_owned(), made);
        }
        self.cache.insert(relative.to_owned(), fd);
        Ok(())
    }

    /// Writes a new file at `relative` (segments checked by the caller)
    /// with exactly `mode`.
    pub(crate) fn write(&mut self, relative: &str, data: &[u8], mode: u32) -> Result<Written> {
        let what = || format!("cannot write `{relative}`");
        let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
        let dir = self.dir(parent)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = (|| -> io::Result<Written> {
            let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(mode))?;
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(data)?;
            let st = rustix::fs::fstat(&file)?;
            Ok(Written {
                ino: ino(&st),
                ctime: ctime(&st),
            })
        })();
        written.map_err(|e| io_error(&what(), e))
    }

    /// Hard-links `relative` from the live tree at `live` when the file
    /// there is still the inode `record` describes (the caller checked its
    /// bytes). `None` when it is not, or the link cannot be made; the
    /// caller then reads the source.
    pub(crate) fn link_from(&mut self, live: BorrowedFd<'_>, relative: &str, record: &FileRecord) -> Option<Written> {
        let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
        let from = open_path(live, parent).ok()?;
        let to = self.dir(parent).ok()?;
        rustix::fs::linkat(&from, name, to, name, AtFlags::empty()).ok()?;
        let st = stat_at(to, name).ok()?;
        if kind(&st) == FileType::RegularFile
            && ino(&st) == record.ino
            && size(&st) == record.size
            && mode(&st) == record.mode
        {
            return Some(Written {
                ino: ino(&st),
                ctime: ctime(&st),
            });
        }
        // Swapped since it was checked: not the file recorded.
        let _ = rustix::fs::unlinkat(to, name, AtFlags::empty());
        None
    }

    /// Removes a skill's directory from the generation.
    pub(crate) fn remove_skill(&mut self, name: &str) {
        self.cache.clear();
        let below = format!("{name}/");
        if let Err(e) = remove_all(self.root.as_fd(), OsStr::new(name)) {
            tracing::warn!(error = %e, "cannot remove a skill from a new generation");
        }
        self.dirs.retain(|d, _| d != name && !d.starts_with(&below));
        self.births.remove(name);
    }
}

impl Drop for Build<'_> {
    fn drop(&mut self) {
        if !self.switched {
            self.state.remove_unseen(&self.name);
        }
    }
}

//! Directory handles for the synced tree and its state: every path is
//! opened one component at a time, relative to a handle opened earlier,
//! never following a link, so a component swapped for a link cannot carry
//! a write or a removal anywhere else.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat, StatxFlags};
use skillstore_backends::ErrorKind;

use crate::error::Error;

/// Opens the directory `name` in `at`, refusing a link or anything else.
pub(crate) fn open_dir(at: BorrowedFd<'_>, name: impl AsRef<OsStr>) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(at, name.as_ref(), flags, Mode::empty())?)
}

/// Opens the directory at `relative` (segments separated by `/`, none of
/// them a link) below `root`.
pub(crate) fn open_path(root: BorrowedFd<'_>, relative: &str) -> io::Result<OwnedFd> {
    let mut current = open_dir(root, ".")?;
    for segment in relative.split('/').filter(|s| !s.is_empty()) {
        current = open_dir(current.as_fd(), segment)?;
    }
    Ok(current)
}

/// `lstat` of `name` in `at`.
pub(crate) fn stat_at(at: BorrowedFd<'_>, name: impl AsRef<OsStr>) -> io::Result<Stat> {
    Ok(rustix::fs::statat(at, name.as_ref(), AtFlags::SYMLINK_NOFOLLOW)?)
}

/// The names in the directory `dir` (without `.` and `..`).
pub(crate) fn names(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let mut out = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push(OsStr::from_bytes(name).to_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// The file type of a `stat`.
pub(crate) fn kind(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

/// The inode number of a `stat`.
// The `Stat` fields' integer types differ between platforms.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn ino(st: &Stat) -> u64 {
    st.st_ino as u64
}

/// The size of a `stat`, in bytes.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn size(st: &Stat) -> u64 {
    st.st_size.max(0) as u64
}

/// The permission bits of a `stat`.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn mode(st: &Stat) -> u32 {
    st.st_mode as u32 & 0o7777
}

/// The change time of a `stat`: set by the kernel on every change to the
/// file, and unlike the modification time never set by a writer.
// The `Stat` fields' integer types differ between platforms.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn ctime(st: &Stat) -> (i64, i64) {
    (st.st_ctime as i64, st.st_ctime_nsec as i64)
}

/// When the directory or file `fd` was made, where the filesystem
/// records it.
pub(crate) fn birth(fd: BorrowedFd<'_>) -> Option<(i64, u32)> {
    let st = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::BTIME).ok()?;
    (st.stx_mask & StatxFlags::BTIME.bits() != 0).then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec))
}

/// True when `fd` (with `st` its `stat`) is the root directory `manifest`
/// recorded: the same inode, made at the same time where the filesystem
/// says when, and owned by this process's user.
pub(crate) fn is_root(fd: BorrowedFd<'_>, st: &Stat, manifest: &super::manifest::Manifest) -> bool {
    manifest.dirs.get("") == Some(&ino(st))
        && st.st_uid == rustix::process::geteuid().as_raw()
        && (manifest.root_birth.is_none() || birth(fd) == manifest.root_birth)
}

/// Removes `name` in `at` and everything below it, never following a link
/// (a link is removed, not its target). Only for trees no one but this
/// process ever saw: a build that was never switched in.
pub(crate) fn remove_all(at: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    match stat_at(at, name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(st) if kind(&st) != FileType::Directory => {
            return Ok(rustix::fs::unlinkat(at, name, AtFlags::empty())?);
        }
        Ok(_) => {}
    }
    let dir = open_dir(at, name)?;
    for child in names(dir.as_fd())? {
        remove_all(dir.as_fd(), &child)?;
    }
    drop(dir);
    Ok(rustix::fs::unlinkat(at, name, AtFlags::REMOVEDIR)?)
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

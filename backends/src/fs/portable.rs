//! The portable resolver: one `openat(2)` with `O_NOFOLLOW` per component.
//!
//! The walk holds a handle for every directory it has entered below the
//! starting one. A component that is a link is never opened through: its
//! target is read with `readlinkat` and put in front of the components still
//! to walk, so it is judged by the same rule as the rest of the path. `..`
//! drops the last handle held; with none left it would leave the starting
//! directory, which is `EXDEV`.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::resolve::{LOOKUP, Links};

/// The most links one resolution follows, as Linux allows.
const MAX_LINKS: usize = 40;

/// How often a link replaced by something else while being read is looked
/// at again before giving up.
const RETRIES: usize = 16;

pub(super) fn open(base: BorrowedFd<'_>, relative: &str, flags: OFlags, links: Links) -> Result<OwnedFd, Errno> {
    if links == Links::Follow {
        // Everything is followed: the kernel's own walk is the rule.
        return rustix::fs::openat(base, relative, flags, Mode::empty());
    }
    let mut held: Vec<OwnedFd> = Vec::new();
    let mut pending: VecDeque<OsString> = components(relative.as_bytes()).collect();
    let mut followed = 0;
    let mut retries = 0;
    loop {
        let current = held.last().map_or(base, |fd| fd.as_fd());
        let Some(name) = pending.pop_front() else {
            return rustix::fs::openat(current, ".", flags, Mode::empty());
        };
        if name.as_bytes() == b".." {
            if held.pop().is_none() {
                return Err(Errno::XDEV);
            }
            continue;
        }
        let last = pending.is_empty();
        let step = if last {
            flags | OFlags::NOFOLLOW
        } else {
            LOOKUP | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        };
        match rustix::fs::openat(current, name.as_os_str(), step, Mode::empty()) {
            // With O_PATH, O_NOFOLLOW opens a link itself.
            Ok(fd) if may_open_links(step) && is_symlink(&fd) => {}
            Ok(fd) if last => return Ok(fd),
            Ok(fd) => {
                held.push(fd);
                continue;
            }
            // A link refused by O_NOFOLLOW: ELOOP, EMLINK on some systems,
            // or ENOTDIR where O_DIRECTORY is judged first.
            Err(e @ (Errno::LOOP | Errno::MLINK | Errno::NOTDIR)) if !link_at(current, &name) => return Err(e),
            Err(Errno::LOOP | Errno::MLINK | Errno::NOTDIR) => {}
            Err(e) => return Err(e),
        }
        // `name` is a link.
        if links == Links::Refuse {
            return Err(Errno::LOOP);
        }
        followed += 1;
        if followed > MAX_LINKS {
            return Err(Errno::LOOP);
        }
        let target = match rustix::fs::readlinkat(current, name.as_os_str(), Vec::new()) {
            Ok(target) => target,
            // Replaced by something that is not a link since it was opened:
            // look at the component again.
            Err(Errno::INVAL) if retries < RETRIES => {
                retries += 1;
                followed -= 1;
                pending.push_front(name);
                continue;
            }
            Err(e) => return Err(e),
        };
        let target = target.as_bytes();
        if target.starts_with(b"/") {
            return Err(Errno::XDEV);
        }
        if target.is_empty() {
            return Err(Errno::NOENT);
        }
        for part in components(target).collect::<Vec<_>>().into_iter().rev() {
            pending.push_front(part);
        }
    }
}

/// The components of a relative path, without empty and `.` ones.
fn components(path: &[u8]) -> impl Iterator<Item = OsString> + '_ {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(|c| OsStr::from_bytes(c).to_owned())
}

/// True when an open with `flags` and `O_NOFOLLOW` opens a link itself
/// rather than failing (`O_PATH`).
#[cfg(target_os = "linux")]
fn may_open_links(flags: OFlags) -> bool {
    flags.contains(OFlags::PATH)
}

#[cfg(not(target_os = "linux"))]
fn may_open_links(_flags: OFlags) -> bool {
    false
}

fn is_symlink(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

fn link_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

//! Opening a relative path beneath a directory handle, by one of two
//! resolvers that agree on what they refuse and on the errno they say it
//! with:
//!
//! - `ELOOP`: a link met where links are refused, or too many links;
//! - `EXDEV`: a link (or `..`) that would leave the starting directory;
//! - `ENOENT`, `ENOTDIR` and the rest as `openat(2)` gives them.

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::OFlags;
use rustix::io::Errno;

#[cfg(target_os = "linux")]
use super::kernel;
use super::portable;

/// How one resolution treats symbolic links, on every component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Links {
    /// Any link is `ELOOP`.
    Refuse,
    /// Links are followed while every step stays beneath the starting
    /// directory; leaving it (an absolute link, a `..` past it) is `EXDEV`.
    Beneath,
    /// Links are followed wherever they lead.
    Follow,
}

/// Which resolver [`super::FsBackend`] confines its paths with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathResolver {
    /// One `openat2(2)` call per path, with `RESOLVE_*` flags: the kernel
    /// walks the path and refuses what the rule refuses (Linux 5.6 and
    /// later only). The default on Linux.
    Openat2,
    /// One `openat(2)` with `O_NOFOLLOW` per component, from directory
    /// handles held along the way; each link is read and judged here, and
    /// `..` returns to the handle held for the parent, never past the
    /// starting directory. Portable to every Unix; the default elsewhere.
    /// A directory renamed out of the tree while a path below it is being
    /// resolved is the one race it cannot see.
    PerComponent,
}

impl Default for PathResolver {
    fn default() -> Self {
        if cfg!(target_os = "linux") {
            PathResolver::Openat2
        } else {
            PathResolver::PerComponent
        }
    }
}

/// The flags that open a handle only to look up what is beneath it or to
/// `fstat` it (`O_PATH` where the system has it).
#[cfg(target_os = "linux")]
pub(super) const LOOKUP: OFlags = OFlags::PATH;
#[cfg(not(target_os = "linux"))]
pub(super) const LOOKUP: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

#[cfg(target_os = "linux")]
fn is_lookup_only(flags: OFlags) -> bool {
    flags.contains(OFlags::PATH)
}

#[cfg(not(target_os = "linux"))]
fn is_lookup_only(_flags: OFlags) -> bool {
    false
}

/// Opens `relative` (`.` for `base` itself; no empty segments) beneath
/// `base` with `flags`, treating links by `links`.
pub(super) fn open_beneath(
    resolver: PathResolver,
    base: BorrowedFd<'_>,
    relative: &str,
    flags: OFlags,
    links: Links,
) -> Result<OwnedFd, Errno> {
    let flags = if is_lookup_only(flags) {
        // O_PATH admits only a few other flags.
        flags | OFlags::CLOEXEC
    } else {
        flags | OFlags::CLOEXEC | OFlags::NOCTTY
    };
    match resolver {
        #[cfg(target_os = "linux")]
        PathResolver::Openat2 => kernel::open(base, relative, flags, links),
        #[cfg(not(target_os = "linux"))]
        PathResolver::Openat2 => Err(Errno::NOSYS),
        PathResolver::PerComponent => portable::open(base, relative, flags, links),
    }
}

//! The Linux resolver: `openat2(2)` with `RESOLVE_*` flags.

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::resolve::Links;

/// How many times an `openat2` that the kernel asks to retry (`EAGAIN`, a
/// concurrent rename) is tried before giving up.
const OPEN_RETRIES: usize = 16;

fn resolve_flags(links: Links) -> ResolveFlags {
    match links {
        Links::Refuse => ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        Links::Beneath => ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        Links::Follow => ResolveFlags::empty(),
    }
}

pub(super) fn open(base: BorrowedFd<'_>, relative: &str, flags: OFlags, links: Links) -> Result<OwnedFd, Errno> {
    let resolve = resolve_flags(links);
    let mut attempts = 0;
    loop {
        match rustix::fs::openat2(base, relative, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) if attempts < OPEN_RETRIES => attempts += 1,
            other => return other,
        }
    }
}

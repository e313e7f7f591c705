//! The synced directory `DIR` and its state directory `.NAME.skillstore`
//! beside it: opened once as handles, checked, locked, and classified.
//!
//! The state directory holds the lock, one manifest per generation
//! (`manifest-ID.json`), generations being built (`build-ID`), the
//! generation last replaced (`retired-ID`, kept until the next switch so a
//! reader that opened it can finish) and trees kept because they hold
//! files sync did not write (`kept-ID`). It must be a directory made by
//! the caller and private to it (no group or other permission bits):
//! state someone else could have made or changed is refused, since a
//! forged manifest would make sync take a user's files for its own.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::path::Path;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, RenameFlags, StatxAttributes, StatxFlags};
use skillstore_backends::ErrorKind;

use super::fsx::{birth, io_error, is_root, kind, names, open_dir, remove_all, stat_at};
use super::manifest::{FORMAT, Manifest};
use super::survey::{Known, Survey, remove_owned, survey};
use crate::error::{Error, Result};

/// What `DIR` holds before a sync.
#[derive(Debug)]
pub(crate) enum Live {
    /// Nothing: the first sync creates it.
    Absent,
    /// An empty directory of the caller's that no sync wrote: replaced
    /// like a generation, and removed later only while still empty. The
    /// manifest describes just that directory.
    Empty { root: OwnedFd, manifest: Manifest },
    /// A generation this module wrote, with how it compares with its
    /// manifest now (nothing foreign; files may have been changed or
    /// removed).
    Ours {
        root: OwnedFd,
        manifest: Manifest,
        survey: Survey,
    },
}

impl Live {
    /// The live tree's handle and manifest, unless `DIR` is absent.
    pub(crate) fn tree(&self) -> Option<(BorrowedFd<'_>, &Manifest)> {
        match self {
            Live::Absent => None,
            Live::Empty { root, manifest } | Live::Ours { root, manifest, .. } => Some((root.as_fd(), manifest)),
        }
    }
}

/// A locked sync target: handles on `DIR`'s parent and the state directory.
#[derive(Debug)]
pub(crate) struct State {
    parent: OwnedFd,
    target: OsString,
    dir: OwnedFd,
    /// The state directory's name, for messages.
    shown: String,
    /// Holds the lock while the target is open.
    _lock: SyncLock,
}

/// The target's lock, released explicitly when dropped: a process spawned
/// by another thread may briefly share the open file description (until
/// its exec closes it), and only an explicit unlock frees the lock for the
/// next sync at once.
#[derive(Debug)]
struct SyncLock(OwnedFd);

impl Drop for SyncLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, FlockOperation::Unlock);
    }
}

impl State {
    /// Opens `dir`'s parent and the state directory beside `dir` (creating
    /// it, private, when absent) and takes the target's lock without
    /// waiting: two syncs of one directory never interleave. Refused,
    /// before anything is written: a target that is not a directory or is
    /// a mount point, state that is not a private directory of the caller,
    /// a lock that is not a regular file of the caller's, and (when there
    /// is no state yet) a target holding anything.
    pub(crate) fn open(dir: &Path) -> Result<State> {
        let (parent, target) = split(dir)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let parent = rustix::fs::open(parent, flags, Mode::empty()).map_err(|e| {
            let what = format!(
                "cannot open {}, the directory that holds the sync target (sync makes the target, not the directories above it)",
                parent.display()
            );
            io_error(&what, e.into())
        })?;
        check_target(parent.as_fd(), &target)?;

        let mut state_name = OsString::from(".");
        state_name.push(&target);
        state_name.push(".skillstore");
        let shown = state_name.to_string_lossy().escape_debug().to_string();
        let dir = match open_dir(parent.as_fd(), &state_name) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Ok(root) = open_dir(parent.as_fd(), &target) {
                    let found = names(root.as_fd()).map_err(|e| io_error("cannot list the sync target", e))?;
                    if !found.is_empty() {
                        return Err(foreign(&top_level(&found)));
                    }
                }
                match rustix::fs::mkdirat(parent.as_fd(), &state_name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(io_error("cannot create the sync state beside the target", e.into())),
                }
                open_dir(parent.as_fd(), &state_name).map_err(|e| state_refused(&shown, e))?
            }
            Err(e) => return Err(state_refused(&shown, e)),
        };
        let st = rustix::fs::fstat(&dir).map_err(|e| io_error("cannot read the sync state", e.into()))?;
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me || st.st_mode & 0o077 != 0 {
            return Err(Error::Usage(format!(
                "the sync state beside the target (`{shown}`) was not made by this user, or others may change it \
                 (it must be private, mode 0700); refusing to use it: remove it if no sync of yours made it"
            )));
        }
        let lock = open_lock(dir.as_fd(), me)?;
        Ok(State {
            parent,
            target,
            dir,
            shown,
            _lock: lock,
        })
    }

    /// The state directory.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// A path inside the state directory as shown in reports.
    pub(crate) fn shown(&self, name: &str) -> String {
        format!("{}/{name}", self.shown)
    }

    /// What `DIR` holds, recognized against `manifests` (newest first).
    /// Refused: a target holding anything no sync wrote (named in the
    /// message), and an empty directory of another user.
    pub(crate) fn live(&self, manifests: &[Manifest]) -> Result<Live> {
        let root = match open_dir(self.parent.as_fd(), &self.target) {
            Ok(root) => root,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Live::Absent),
            Err(e) if is_not_a_directory(&e) => return Err(not_a_directory()),
            Err(e) => return Err(io_error("cannot open the sync target", e)),
        };
        check_target(self.parent.as_fd(), &self.target)?;
        let st = rustix::fs::fstat(&root).map_err(|e| io_error("cannot read the sync target", e.into()))?;
        let known = Known::of(manifests);
        let mut best: Option<(usize, Survey)> = None;
        let mut refusal: Option<Survey> = None;
        for (i, manifest) in manifests.iter().enumerate() {
            if !is_root(root.as_fd(), &st, manifest) {
                continue;
            }
            let found =
                survey(root.as_fd(), manifest, &known).map_err(|e| io_error("cannot read the sync target", e))?;
            if !found.is_own() {
                refusal.get_or_insert(found);
            } else if best.as_ref().is_none_or(|(_, b)| found.intact.len() > b.intact.len()) {
                best = Some((i, found));
            }
        }
        if let Some((i, survey)) = best {
            return Ok(Live::Ours {
                root,
                manifest: manifests[i].clone(),
                survey,
            });
        }
        if let Some(found) = refusal {
            return Err(foreign(&found.foreign_list()));
        }
        let found = names(root.as_fd()).map_err(|e| io_error("cannot list the sync target", e))?;
        if !found.is_empty() {
            return Err(foreign(&top_level(&found)));
        }
        if st.st_uid != rustix::process::geteuid().as_raw() {
            return Err(Error::Usage(
                "the sync target is an empty directory of another user; a sync only replaces its caller's".into(),
            ));
        }
        let mut manifest = Manifest::new(false);
        manifest.dirs.insert(String::new(), super::fsx::ino(&st));
        manifest.root_birth = birth(root.as_fd());
        Ok(Live::Empty { root, manifest })
    }

    /// Every readable manifest in the state, newest first.
    pub(crate) fn manifests(&self) -> Result<Vec<Manifest>> {
        let mut out = Vec::new();
        for name in names(self.fd()).map_err(|e| io_error("cannot list the sync state", e))? {
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("manifest-"))
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            // One that cannot be read only costs reuse: its tree is then
            // nobody's, and kept.
            if let Some(manifest) = self.read_manifest(&name)
                && manifest.id == id
            {
                out.push(manifest);
            }
        }
        out.sort_by(|a, b| b.id.cmp(&a.id));
        Ok(out)
    }

    fn read_manifest(&self, name: &OsStr) -> Option<Manifest> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(self.fd(), name, flags, Mode::empty()).ok()?;
        if kind(&rustix::fs::fstat(&fd).ok()?) != FileType::RegularFile {
            return None;
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes).ok()?;
        serde_json::from_slice::<Manifest>(&bytes)
            .ok()
            .filter(|m| m.format == FORMAT)
    }

    /// Writes `manifest` whole under its name (a temporary file, synced,
    /// then renamed over it).
    pub(crate) fn write_manifest(&self, manifest: &Manifest) -> Result<()> {
        let name = format!("manifest-{}.json", manifest.id);
        let temporary = format!("{name}.tmp");
        let text = serde_json::to_vec(manifest).expect("a manifest serializes");
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = (|| -> io::Result<()> {
            let fd = rustix::fs::openat(self.fd(), temporary.as_str(), flags, Mode::from_raw_mode(0o600))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(&text)?;
            file.sync_all()?;
            rustix::fs::renameat(self.fd(), temporary.as_str(), self.fd(), name.as_str())?;
            Ok(())
        })();
        written.map_err(|e| io_error("cannot write the sync manifest", e))
    }

    /// Removes the manifest `id`, if there.
    pub(crate) fn remove_manifest(&self, id: &str) {
        let _ = rustix::fs::unlinkat(self.fd(), format!("manifest-{id}.json").as_str(), AtFlags::empty());
    }

    /// The identifiers of the trees named `PREFIXID` in the state.
    pub(crate) fn trees(&self, prefix: &str) -> Result<Vec<String>> {
        let found = names(self.fd()).map_err(|e| io_error("cannot list the sync state", e))?;
        let mut ids: Vec<String> = found
            .iter()
            .filter_map(|n| n.to_str()?.strip_prefix(prefix).map(str::to_owned))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Renames the tree `from` to `to` in the state, never over anything.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat_with(
            self.fd(),
            from,
            self.fd(),
            to,
            RenameFlags::NOREPLACE,
        )?)
    }

    /// Removes what sync wrote of the state's tree `name`, as `manifest`
    /// records it; a tree that keeps anything is renamed `kept-ID`, and its
    /// shown name returned. Also returns the inodes unlinked.
    pub(crate) fn remove_tree(
        &self,
        name: &str,
        manifest: Option<&Manifest>,
        known: &Known,
        id: &str,
    ) -> (Option<String>, std::collections::HashSet<u64>) {
        let removal = match manifest {
            Some(manifest) => remove_owned(self.fd(), OsStr::new(name), manifest, known),
            None => Ok(Default::default()),
        };
        let (complete, unlinked) = match removal {
            Ok(removal) => (removal.complete, removal.unlinked),
            Err(e) => {
                tracing::warn!(error = %e, "cannot remove an old generation");
                (false, Default::default())
            }
        };
        if complete {
            return (None, unlinked);
        }
        let kept = format!("kept-{id}");
        match self.rename(name, &kept) {
            Ok(()) => (Some(self.shown(&kept)), unlinked),
            Err(_) => (Some(self.shown(name)), unlinked),
        }
    }

    /// Removes a tree no one but this process ever saw (a build that was
    /// never switched in and has no manifest).
    pub(crate) fn remove_unseen(&self, name: &str) {
        if let Err(e) = remove_all(self.fd(), OsStr::new(name)) {
            tracing::warn!(error = %e, "cannot remove an interrupted build");
        }
    }

    /// Puts the state's tree `build` where `DIR` is: exchanged with the
    /// live tree, or moved into place when there is none.
    pub(crate) fn switch(&self, build: &str, exchange: bool) -> Result<()> {
        let flags = if exchange {
            RenameFlags::EXCHANGE
        } else {
            RenameFlags::NOREPLACE
        };
        rustix::fs::renameat_with(self.fd(), build, self.parent.as_fd(), &self.target, flags).map_err(|e| match e {
            rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS => {
                Error::Backend(skillstore_backends::Error::new(ErrorKind::Unsupported).with_detail(
                    "the filesystem of the sync target cannot exchange directories atomically (renameat2)",
                ))
            }
            rustix::io::Errno::BUSY => mount_point(),
            rustix::io::Errno::EXIST if !exchange => {
                Error::Usage("the sync target appeared while the generation was built; nothing was switched".into())
            }
            rustix::io::Errno::NOENT if exchange => {
                Error::Usage("the sync target was removed while the generation was built; nothing was switched".into())
            }
            other => io_error("cannot switch in the new generation", other.into()),
        })
    }

    /// Opens the state's tree `name`.
    pub(crate) fn open_tree(&self, name: &str) -> io::Result<OwnedFd> {
        open_dir(self.fd(), name)
    }

    /// Every kept tree, as shown in reports.
    pub(crate) fn kept(&self) -> Result<Vec<String>> {
        Ok(self
            .trees("kept-")?
            .into_iter()
            .map(|id| self.shown(&format!("kept-{id}")))
            .collect())
    }
}

/// The parent directory and the name of a sync target.
fn split(dir: &Path) -> Result<(&Path, OsString)> {
    let name = match dir.file_name() {
        Some(name) if !dir.ends_with("..") => name.to_owned(),
        _ => {
            return Err(Error::Usage(
                "the sync target must name a directory to create or replace".into(),
            ));
        }
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// Refuses a target that is not a directory, or is a mount point (a
/// switch replaces the directory, which a mount point cannot be; a bind
/// mount of it would keep showing the generation it was made on).
fn check_target(parent: BorrowedFd<'_>, target: &OsStr) -> Result<()> {
    let flags = AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT;
    match rustix::fs::statx(parent, target, flags, StatxFlags::BASIC_STATS) {
        Ok(st) => {
            if FileType::from_raw_mode(u32::from(st.stx_mode)) != FileType::Directory {
                return Err(not_a_directory());
            }
            if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
                && st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)
            {
                return Err(mount_point());
            }
            Ok(())
        }
        Err(rustix::io::Errno::NOENT) => Ok(()),
        // No statx: compare devices, which finds mounts of other filesystems.
        Err(rustix::io::Errno::NOSYS) => match stat_at(parent, target) {
            Ok(st) if kind(&st) != FileType::Directory => Err(not_a_directory()),
            Ok(st) => match rustix::fs::fstat(parent) {
                Ok(up) if up.st_dev != st.st_dev => Err(mount_point()),
                _ => Ok(()),
            },
            Err(_) => Ok(()),
        },
        Err(e) => Err(io_error("cannot look at the sync target", e.into())),
    }
}

/// Opens the lock without following a link or waiting, and takes it.
fn open_lock(state: BorrowedFd<'_>, me: u32) -> Result<SyncLock> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let not_a_lock = || {
        Error::Usage(
            "the sync lock in the sync state is not a regular file of this user; refusing to use the state".into(),
        )
    };
    let lock = match rustix::fs::openat(state, "lock", flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::ISDIR | rustix::io::Errno::NXIO) => return Err(not_a_lock()),
        Err(e) => return Err(io_error("cannot open the sync lock", e.into())),
    };
    let st = rustix::fs::fstat(&lock).map_err(|e| io_error("cannot open the sync lock", e.into()))?;
    if kind(&st) != FileType::RegularFile || st.st_uid != me {
        return Err(not_a_lock());
    }
    rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(|e| {
        if e == rustix::io::Errno::WOULDBLOCK {
            Error::Usage("another sync of this directory is running".into())
        } else {
            io_error("cannot lock the sync target", e.into())
        }
    })?;
    Ok(SyncLock(lock))
}

fn state_refused(shown: &str, e: io::Error) -> Error {
    if is_not_a_directory(&e) {
        Error::Usage(format!(
            "the sync state beside the target (`{shown}`) is not a directory; refusing to use it"
        ))
    } else {
        io_error("cannot open the sync state beside the target", e)
    }
}

fn is_not_a_directory(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::NOTDIR.raw_os_error() || code == rustix::io::Errno::LOOP.raw_os_error()
    )
}

fn not_a_directory() -> Error {
    Error::Usage("the sync target exists and is not a directory; refusing to replace it".into())
}

fn mount_point() -> Error {
    Error::Usage(
        "the sync target is a mount point; a sync replaces the directory whole, which a mount point cannot be: \
         sync to a directory inside it, or mount the directory holding the target instead"
            .into(),
    )
}

/// The error for a target holding what no sync wrote, naming it.
pub(crate) fn foreign(list: &str) -> Error {
    Error::Usage(format!(
        "the sync target holds files no sync wrote ({list}); a sync never moves or removes them: \
         move them out, or sync to a new directory"
    ))
}

/// Top-level names for a message.
fn top_level(found: &[OsString]) -> String {
    let survey = Survey {
        foreign_count: found.len(),
        foreign: found
            .iter()
            .take(20)
            .map(|n| n.to_string_lossy().escape_debug().to_string())
            .collect(),
        ..Survey::default()
    };
    survey.foreign_list()
}

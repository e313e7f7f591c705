//! The synced directory `DIR` and its private state: opened once as
//! handles, checked, locked, and what `DIR` holds recognized skill by
//! skill.
//!
//! `DIR` is never moved or replaced: each skill directory in it is switched
//! with one `renameat2`. The state sits where it shares `DIR`'s
//! filesystem: beside `DIR` as `.NAME.skillstore`, or, when `DIR` is a
//! mount point (a volume's root), inside it as `..skillstore`. It holds
//! the lock, one manifest per generation (`manifest-ID.json`), generations
//! being built (`build-ID`), the skill directories last replaced
//! (`retired-ID`, kept until the next switch so a reader that opened them
//! can finish) and trees kept because they hold files sync did not write
//! (`kept-ID`). It must be a directory made by the caller and private to
//! it (no group or other permission bits): state someone else could have
//! made or changed is refused, since a forged manifest would make sync
//! take a user's files for its own.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, RenameFlags, StatxAttributes, StatxFlags};
use skillstore_backends::ErrorKind;

use super::fsx::{io_error, kind, names, open_dir, remove_all, stat_at};
use super::manifest::{FORMAT, FORMAT_WHOLE, Manifest};
use super::survey::{Known, Survey, is_skill_dir, remove_owned, remove_skills, survey_live};
use crate::error::{Error, Result};

/// The state's name inside a `DIR` that is a mount point.
pub(crate) const INSIDE: &str = "..skillstore";

/// What `DIR` holds before a sync: the skill directories an earlier sync
/// wrote, recognized against the manifests, and how they compare with
/// them (nothing foreign inside them; files may have been changed or
/// removed). Anything else at its top level is the user's and is left
/// alone.
#[derive(Debug)]
pub(crate) struct Live {
    /// The skills found, with their records (from whichever manifest
    /// recognized each directory); the identifier is the manifest's when
    /// one manifest describes them all ([`Live::single`]).
    pub(crate) manifest: Manifest,
    /// How they compare with their records.
    pub(crate) survey: Survey,
    /// Whether their files were written with `keep_modes`, when all were
    /// written alike.
    pub(crate) keep_modes: Option<bool>,
    /// True when one manifest describes exactly the skills found.
    pub(crate) single: bool,
}

/// A locked sync target: handles on `DIR` and the state directory.
#[derive(Debug)]
pub(crate) struct State {
    root: OwnedFd,
    path: PathBuf,
    dir: OwnedFd,
    /// The state's name in `DIR`, when it is inside it.
    inside: Option<OsString>,
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
    /// Opens `DIR` (creating it when absent, in a directory that must
    /// exist) and the state (creating it, private, when absent), and takes
    /// the target's lock without waiting: two syncs of one directory never
    /// interleave. `DIR` may be a mount point and may hold files of its
    /// own. Refused, before anything is written: a target that is not a
    /// directory (a link to one included), state that is not a private
    /// directory of the caller, and a lock that is not a regular file of
    /// the caller's.
    pub(crate) fn open(dir: &Path) -> Result<State> {
        let (parent_path, target) = split(dir)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let parent = rustix::fs::open(parent_path, flags, Mode::empty()).map_err(|e| {
            let what = format!(
                "cannot open {}, the directory that holds the sync target (sync makes the target, not the directories above it)",
                parent_path.display()
            );
            io_error(&what, e.into())
        })?;
        if !check_target(parent.as_fd(), &target)? {
            match rustix::fs::mkdirat(parent.as_fd(), &target, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io_error("cannot create the sync target", e.into())),
            }
        }
        let root = match open_dir(parent.as_fd(), &target) {
            Ok(root) => root,
            Err(e) if is_not_a_directory(&e) => return Err(not_a_directory()),
            Err(e) => return Err(io_error("cannot open the sync target", e)),
        };
        let (holder, state_name, inside) = if is_mount_root(root.as_fd(), parent.as_fd()) {
            (root.as_fd(), OsString::from(INSIDE), Some(OsString::from(INSIDE)))
        } else {
            let mut name = OsString::from(".");
            name.push(&target);
            name.push(".skillstore");
            (parent.as_fd(), name, None)
        };
        let shown = match &inside {
            Some(name) => format!("{}/{}", target.to_string_lossy().escape_debug(), name.to_string_lossy()),
            None => state_name.to_string_lossy().escape_debug().to_string(),
        };
        let state = match open_dir(holder, &state_name) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match rustix::fs::mkdirat(holder, &state_name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(io_error("cannot create the sync state", e.into())),
                }
                open_dir(holder, &state_name).map_err(|e| state_refused(&shown, e))?
            }
            Err(e) => return Err(state_refused(&shown, e)),
        };
        let st = rustix::fs::fstat(&state).map_err(|e| io_error("cannot read the sync state", e.into()))?;
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me || st.st_mode & 0o077 != 0 {
            return Err(Error::Usage(format!(
                "the sync state (`{shown}`) was not made by this user, or others may change it \
                 (it must be private, mode 0700); refusing to use it: remove it if no sync of yours made it"
            )));
        }
        let lock = open_lock(state.as_fd(), me)?;
        Ok(State {
            root,
            path: dir.to_path_buf(),
            dir: state,
            inside,
            shown,
            _lock: lock,
        })
    }

    /// `DIR`.
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Refuses to switch when the path of `DIR` no longer names the
    /// directory this sync opened (moved aside or replaced meanwhile).
    pub(crate) fn check_in_place(&self) -> Result<()> {
        let moved = || {
            Error::Usage(
                "the sync target was moved or replaced while the generation was built; nothing was switched".into(),
            )
        };
        let now = rustix::fs::statx(
            rustix::fs::CWD,
            &self.path,
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::BASIC_STATS,
        )
        .map_err(|_| moved())?;
        let held = rustix::fs::fstat(&self.root).map_err(|e| io_error("cannot read the sync target", e.into()))?;
        #[allow(clippy::unnecessary_cast)]
        let same = now.stx_ino == held.st_ino as u64
            && rustix::fs::makedev(now.stx_dev_major, now.stx_dev_minor) == held.st_dev as u64;
        if same { Ok(()) } else { Err(moved()) }
    }

    /// The skill directories of `DIR` an earlier sync wrote, recognized
    /// against `manifests` (newest first). Refused: a skill directory
    /// holding anything no sync wrote (named in the message).
    pub(crate) fn live(&self, manifests: &[Manifest]) -> Result<Live> {
        let found = names(self.root()).map_err(|e| io_error("cannot list the sync target", e))?;
        let mut composite = Manifest::new(false);
        composite.id = String::new();
        let mut from: BTreeSet<&str> = BTreeSet::new();
        let mut modes: BTreeSet<bool> = BTreeSet::new();
        for name in &found {
            if Some(name) == self.inside.as_ref() {
                continue;
            }
            let Some(skill) = name.to_str() else { continue };
            let Ok(st) = stat_at(self.root(), name) else { continue };
            let Some(manifest) = manifests.iter().find(|m| is_skill_dir(self.root(), skill, &st, m)) else {
                continue;
            };
            composite
                .skills
                .insert(skill.to_owned(), manifest.skills[skill].clone());
            let below = format!("{skill}/");
            for (dir, ino) in &manifest.dirs {
                if dir == skill || dir.starts_with(&below) {
                    composite.dirs.insert(dir.clone(), *ino);
                }
            }
            if let Some(birth) = manifest.births.get(skill) {
                composite.births.insert(skill.to_owned(), *birth);
            }
            from.insert(&manifest.id);
            modes.insert(manifest.keep_modes);
        }
        let known = Known::of(manifests);
        let survey = survey_live(self.root(), &composite, &known, self.inside.as_deref())
            .map_err(|e| io_error("cannot read the sync target", e))?;
        if survey.foreign_count > 0 {
            return Err(foreign(&survey.foreign_list()));
        }
        // One manifest describes them all: the one every directory came
        // from, or for no skills at all one of an empty generation (a
        // retired generation's manifest always has skills).
        let whole = match from.len() {
            0 => manifests.iter().find(|m| m.skills.is_empty()),
            1 => manifests
                .iter()
                .find(|m| from.contains(m.id.as_str()) && m.skills.keys().eq(composite.skills.keys())),
            _ => None,
        };
        let single = whole.is_some();
        let keep_modes = match whole {
            Some(m) => Some(m.keep_modes),
            None if modes.len() == 1 => modes.first().copied(),
            None => None,
        };
        if let Some(m) = whole {
            composite.id = m.id.clone();
        }
        composite.keep_modes = keep_modes.unwrap_or(false);
        Ok(Live {
            manifest: composite,
            survey,
            keep_modes,
            single,
        })
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

    /// The state directory.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// A path inside the state directory as shown in reports.
    pub(crate) fn shown(&self, name: &str) -> String {
        format!("{}/{name}", self.shown)
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
            .filter(|m| m.format == FORMAT || m.format == FORMAT_WHOLE)
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

    /// Removes what sync wrote of the state's tree `name`: a whole
    /// generation of the earlier layout as its manifest records it, or
    /// skill directories as the manifests in `manifests` record them; a
    /// tree that keeps anything is renamed `kept-ID`, and its shown name
    /// returned. Also returns the inodes unlinked.
    pub(crate) fn remove_tree(
        &self,
        name: &str,
        manifest: Option<&Manifest>,
        manifests: &[Manifest],
        known: &Known,
        id: &str,
    ) -> (Option<String>, std::collections::HashSet<u64>) {
        let removal = match manifest {
            Some(manifest) if manifest.format == FORMAT_WHOLE => {
                remove_owned(self.fd(), OsStr::new(name), manifest, known)
            }
            Some(_) => remove_skills(self.fd(), OsStr::new(name), manifests, known),
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

    /// Moves the skill directory `name` of the state's tree `tree` into
    /// `DIR`: exchanged with `DIR/name` in one step, or put where nothing
    /// is (never over anything).
    pub(crate) fn swap_in(&self, tree: BorrowedFd<'_>, name: &str, exchange: bool) -> Result<()> {
        let flags = if exchange {
            RenameFlags::EXCHANGE
        } else {
            RenameFlags::NOREPLACE
        };
        rustix::fs::renameat_with(tree, name, self.root(), name, flags).map_err(|e| switch_error(e, name, exchange))
    }

    /// Moves the skill directory `DIR/name` into the state's tree `tree`.
    pub(crate) fn move_out(&self, tree: BorrowedFd<'_>, name: &str) -> Result<()> {
        rustix::fs::renameat_with(self.root(), name, tree, name, RenameFlags::NOREPLACE)
            .map_err(|e| switch_error(e, name, true))
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

/// True when the target exists (then it is a directory); refuses a file,
/// a link or anything else in its place.
fn check_target(parent: BorrowedFd<'_>, target: &OsStr) -> Result<bool> {
    match stat_at(parent, target) {
        Ok(st) if kind(&st) == FileType::Directory => Ok(true),
        Ok(_) => Err(not_a_directory()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("cannot look at the sync target", e)),
    }
}

/// True when `root` is the root of a mount (a volume's root, a bind
/// mount): nothing can be renamed into or out of it from beside it.
fn is_mount_root(root: BorrowedFd<'_>, parent: BorrowedFd<'_>) -> bool {
    match rustix::fs::statx(root, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS) {
        Ok(st) if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) => {
            st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)
        }
        // No statx, or no answer: compare devices, which finds mounts of
        // other filesystems.
        _ => match (rustix::fs::fstat(root), rustix::fs::fstat(parent)) {
            (Ok(st), Ok(up)) => st.st_dev != up.st_dev,
            _ => false,
        },
    }
}

fn switch_error(e: rustix::io::Errno, name: &str, exchange: bool) -> Error {
    let name = name.escape_debug();
    match e {
        rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS => Error::Backend(
            skillstore_backends::Error::new(ErrorKind::Unsupported)
                .with_detail("the filesystem of the sync target cannot exchange directories atomically (renameat2)"),
        ),
        rustix::io::Errno::BUSY => Error::Usage(format!(
            "`{name}` in the sync target is a mount point; a sync switches skill directories, which a mount point \
             cannot be: nothing was switched"
        )),
        rustix::io::Errno::EXIST | rustix::io::Errno::NOTEMPTY if !exchange => Error::Usage(format!(
            "`{name}` appeared in the sync target while the generation was built; nothing was switched"
        )),
        rustix::io::Errno::NOENT => Error::Usage(format!(
            "`{name}` was removed from the sync target while the generation was built; nothing was switched"
        )),
        other => io_error("cannot switch in the new generation", other.into()),
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
            "the sync state (`{shown}`) is not a directory; refusing to use it"
        ))
    } else {
        io_error("cannot open the sync state", e)
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

/// The error for a target holding what no sync wrote, naming it.
pub(crate) fn foreign(list: &str) -> Error {
    Error::Usage(format!(
        "a skill directory of the sync target holds files no sync wrote ({list}); a sync never moves or \
         removes them: move them out, or sync to a new directory"
    ))
}

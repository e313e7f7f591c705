//! A tree on disk compared with a manifest: which files are still exactly
//! what sync wrote, which were changed since, and what sync never wrote;
//! and removal of a tree that takes only what sync wrote.
//!
//! A file is the one written when its inode, size and mode match the
//! record and its change time does too (no writer can set a change time),
//! or, when only the change time moved (sync's own links do that), when
//! its bytes still have the recorded SHA-256.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{self, Read};

use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

use super::fsx::{ctime, ino, is_root, kind, mode, names, open_dir, open_path, size, stat_at};
use super::manifest::{FileRecord, Manifest, digest};

/// The most paths a survey names; the rest are counted.
const NAMED: usize = 20;

/// Deeper than any tree a sync writes (its depth limit is lower).
const MAX_DEPTH: usize = 64;

/// A file's identity besides its inode: size, mode, change time.
type Identity = (u64, u32, (i64, i64));

/// Identities of files recorded by other manifests: a file linked into a
/// later generation carries that generation's change time.
#[derive(Debug, Default)]
pub(crate) struct Known(HashMap<u64, Vec<Identity>>);

impl Known {
    /// Every file identity of `manifests`.
    pub(crate) fn of<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Known {
        let mut known = Known::default();
        for manifest in manifests {
            for (_, record) in manifest.files() {
                known
                    .0
                    .entry(record.ino)
                    .or_default()
                    .push((record.size, record.mode, record.ctime));
            }
        }
        known
    }

    fn contains(&self, st: &Stat) -> bool {
        let id = (size(st), mode(st), ctime(st));
        self.0.get(&ino(st)).is_some_and(|ids| ids.contains(&id))
    }
}

/// How a tree compares with a manifest.
#[derive(Debug, Default)]
pub(crate) struct Survey {
    /// The tree's root is the directory the manifest recorded.
    pub(crate) root_matches: bool,
    /// Up to [`NAMED`] paths sync never wrote (relative, escaped).
    pub(crate) foreign: Vec<String>,
    /// How many there are in all.
    pub(crate) foreign_count: usize,
    /// Files (`NAME/RELPATH`) at a path sync wrote whose bytes or identity
    /// changed since.
    pub(crate) altered: Vec<String>,
    /// Files still exactly as written.
    pub(crate) intact: HashSet<String>,
    /// Intact files whose change time moved, with the new one.
    pub(crate) refreshed: Vec<(String, (i64, i64))>,
}

impl Survey {
    /// True when the tree holds nothing sync did not write.
    pub(crate) fn is_own(&self) -> bool {
        self.root_matches && self.foreign_count == 0
    }

    /// True when the tree is exactly the generation: nothing foreign,
    /// changed or missing.
    pub(crate) fn is_whole(&self, manifest: &Manifest) -> bool {
        self.is_own() && self.altered.is_empty() && self.intact.len() == manifest.file_count()
    }

    /// The foreign paths as one line for a message.
    pub(crate) fn foreign_list(&self) -> String {
        let mut text: Vec<String> = self.foreign.iter().map(|p| format!("`{p}`")).collect();
        if self.foreign_count > self.foreign.len() {
            text.push(format!("and {} more", self.foreign_count - self.foreign.len()));
        }
        text.join(", ")
    }

    fn foreign(&mut self, path: String) {
        if self.foreign.len() < NAMED {
            self.foreign.push(path);
        }
        self.foreign_count += 1;
    }
}

/// Compares the tree at `root` with `manifest`.
pub(crate) fn survey(root: BorrowedFd<'_>, manifest: &Manifest, known: &Known) -> io::Result<Survey> {
    let st = rustix::fs::fstat(root)?;
    let mut survey = Survey {
        root_matches: is_root(root, &st, manifest),
        ..Survey::default()
    };
    visit(root, "", 0, manifest, known, &mut survey)?;
    Ok(survey)
}

/// Compares the skill directories of `DIR` (at `root`) that `manifest`
/// records with it. `DIR` itself is nobody's in particular: what else its
/// top level holds (the user's files, the state named `skip`) is left out
/// of the survey, never counted as foreign.
pub(crate) fn survey_live(
    root: BorrowedFd<'_>,
    manifest: &Manifest,
    known: &Known,
    skip: Option<&OsStr>,
) -> io::Result<Survey> {
    let mut survey = Survey {
        root_matches: true,
        ..Survey::default()
    };
    for name in names(root)? {
        if Some(name.as_os_str()) == skip {
            continue;
        }
        let Some(relative) = name.to_str() else { continue };
        if !manifest.skills.contains_key(relative) {
            continue;
        }
        let st = match stat_at(root, &name) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if kind(&st) != FileType::Directory || manifest.dirs.get(relative) != Some(&ino(&st)) {
            continue;
        }
        let sub = open_dir(root, &name)?;
        visit(sub.as_fd(), relative, 1, manifest, known, &mut survey)?;
    }
    Ok(survey)
}

/// True when the directory `name` in `at` (with `st` its `lstat`) is the
/// skill directory `name` that `manifest` recorded: the same inode, made
/// at the same time where the filesystem says when, and this user's.
pub(crate) fn is_skill_dir(at: BorrowedFd<'_>, name: &str, st: &Stat, manifest: &Manifest) -> bool {
    kind(st) == FileType::Directory
        && manifest.skills.contains_key(name)
        && manifest.dirs.get(name) == Some(&ino(st))
        && st.st_uid == rustix::process::geteuid().as_raw()
        && manifest.births.get(name).is_none_or(|b| birth_at(at, name) == Some(*b))
}

/// Removes from the state's tree `name` in `at` (a directory only sync
/// writes into) every skill directory some manifest recorded, as far as
/// each is still what that manifest recorded, and the tree once empty.
pub(crate) fn remove_skills(
    at: BorrowedFd<'_>,
    name: &OsStr,
    manifests: &[Manifest],
    known: &Known,
) -> io::Result<Removal> {
    let mut removal = Removal {
        complete: true,
        ..Removal::default()
    };
    let dir = match open_dir(at, name) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removal),
        Err(e) => return Err(e),
    };
    for entry in names(dir.as_fd())? {
        let st = match stat_at(dir.as_fd(), &entry) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let owner = entry
            .to_str()
            .and_then(|skill| manifests.iter().find(|m| is_skill_dir(dir.as_fd(), skill, &st, m)));
        let (Some(skill), Some(manifest)) = (entry.to_str(), owner) else {
            removal.complete = false;
            continue;
        };
        let sub = open_dir(dir.as_fd(), &entry)?;
        remove_below(sub.as_fd(), skill, 1, manifest, known, &mut removal)?;
        drop(sub);
        remove_dir(dir.as_fd(), &entry, &mut removal)?;
    }
    drop(dir);
    remove_dir(at, name, &mut removal)?;
    Ok(removal)
}

fn birth_at(at: BorrowedFd<'_>, name: &str) -> Option<(i64, u32)> {
    let flags = AtFlags::SYMLINK_NOFOLLOW;
    let st = rustix::fs::statx(at, name, flags, rustix::fs::StatxFlags::BTIME).ok()?;
    (st.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0).then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec))
}

fn visit(
    dir: BorrowedFd<'_>,
    prefix: &str,
    depth: usize,
    manifest: &Manifest,
    known: &Known,
    survey: &mut Survey,
) -> io::Result<()> {
    for name in names(dir)? {
        let shown = join(prefix, &name.to_string_lossy().escape_debug().to_string());
        let Some(relative) = name.to_str().map(|n| join(prefix, n)) else {
            survey.foreign(shown);
            continue;
        };
        let st = match stat_at(dir, &name) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        match kind(&st) {
            FileType::Directory if depth < MAX_DEPTH && manifest.dirs.get(&relative) == Some(&ino(&st)) => {
                let sub = open_dir(dir, &name)?;
                visit(sub.as_fd(), &relative, depth + 1, manifest, known, survey)?;
            }
            FileType::RegularFile => match manifest.file(&relative) {
                Some(record) => match check(dir, &name, &st, record, known)? {
                    Check::Same => {
                        survey.intact.insert(relative);
                    }
                    Check::SameBytes => {
                        survey.refreshed.push((relative.clone(), ctime(&st)));
                        survey.intact.insert(relative);
                    }
                    Check::Differs => survey.altered.push(relative),
                },
                None => survey.foreign(shown),
            },
            _ => survey.foreign(shown),
        }
    }
    Ok(())
}

/// What a file at a recorded path is.
#[derive(Debug, PartialEq, Eq)]
enum Check {
    /// Untouched since recorded.
    Same,
    /// Only its change time moved; its bytes are the recorded ones.
    SameBytes,
    /// Not the file written, or not its bytes.
    Differs,
}

fn check(dir: BorrowedFd<'_>, name: &OsStr, st: &Stat, record: &FileRecord, known: &Known) -> io::Result<Check> {
    if ino(st) != record.ino || size(st) != record.size || mode(st) != record.mode {
        return Ok(Check::Differs);
    }
    if ctime(st) == record.ctime || known.contains(st) {
        return Ok(Check::Same);
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(Check::Differs),
        Err(e) => return Err(e.into()),
    };
    if rustix::fs::fstat(&fd)?.st_ino != st.st_ino {
        return Ok(Check::Differs);
    }
    let mut bytes = Vec::with_capacity(record.size as usize);
    std::fs::File::from(fd).take(record.size + 1).read_to_end(&mut bytes)?;
    Ok(
        if bytes.len() as u64 == record.size && digest(&bytes) == record.sha256 {
            Check::SameBytes
        } else {
            Check::Differs
        },
    )
}

/// What [`remove_owned`] did.
#[derive(Debug, Default)]
pub(crate) struct Removal {
    /// The whole tree is gone.
    pub(crate) complete: bool,
    /// Inodes of the files unlinked (their change time moved).
    pub(crate) unlinked: HashSet<u64>,
}

/// Removes from the tree `name` in `at` every file and directory that is
/// still what `manifest` recorded, and the tree itself once empty. Anything
/// else stays where it is, with the directories holding it.
pub(crate) fn remove_owned(
    at: BorrowedFd<'_>,
    name: &OsStr,
    manifest: &Manifest,
    known: &Known,
) -> io::Result<Removal> {
    let mut removal = Removal {
        complete: true,
        ..Removal::default()
    };
    let st = match stat_at(at, name) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removal),
        Err(e) => return Err(e),
    };
    if kind(&st) != FileType::Directory {
        removal.complete = false;
        return Ok(removal);
    }
    let dir = open_dir(at, name)?;
    if !is_root(dir.as_fd(), &rustix::fs::fstat(&dir)?, manifest) {
        removal.complete = false;
        return Ok(removal);
    }
    remove_below(dir.as_fd(), "", 0, manifest, known, &mut removal)?;
    drop(dir);
    remove_dir(at, name, &mut removal)?;
    Ok(removal)
}

fn remove_below(
    dir: BorrowedFd<'_>,
    prefix: &str,
    depth: usize,
    manifest: &Manifest,
    known: &Known,
    removal: &mut Removal,
) -> io::Result<()> {
    for name in names(dir)? {
        let Some(relative) = name.to_str().map(|n| join(prefix, n)) else {
            removal.complete = false;
            continue;
        };
        let st = match stat_at(dir, &name) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        match kind(&st) {
            FileType::Directory if depth < MAX_DEPTH && manifest.dirs.get(&relative) == Some(&ino(&st)) => {
                let sub = open_dir(dir, &name)?;
                remove_below(sub.as_fd(), &relative, depth + 1, manifest, known, removal)?;
                drop(sub);
                remove_dir(dir, &name, removal)?;
            }
            FileType::RegularFile
                if manifest
                    .file(&relative)
                    .is_some_and(|record| check(dir, &name, &st, record, known).is_ok_and(|c| c != Check::Differs)) =>
            {
                rustix::fs::unlinkat(dir, &name, AtFlags::empty())?;
                removal.unlinked.insert(ino(&st));
            }
            _ => removal.complete = false,
        }
    }
    Ok(())
}

fn remove_dir(at: BorrowedFd<'_>, name: &OsStr, removal: &mut Removal) -> io::Result<()> {
    match rustix::fs::unlinkat(at, name, AtFlags::REMOVEDIR) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => {
            removal.complete = false;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Takes the change time of every file of `manifest` whose inode is in
/// `unlinked` from the tree at `root` (sync removed another link to it).
/// True when a record changed.
pub(crate) fn refresh(root: BorrowedFd<'_>, manifest: &mut Manifest, unlinked: &HashSet<u64>) -> bool {
    let touched: Vec<String> = manifest
        .files()
        .filter(|(_, r)| unlinked.contains(&r.ino))
        .map(|(local, _)| local)
        .collect();
    let mut changed = false;
    for local in touched {
        let (parent, file) = local.rsplit_once('/').expect("NAME/RELPATH");
        let Ok(st) = open_path(root, parent).and_then(|dir| stat_at(dir.as_fd(), file)) else {
            continue;
        };
        let record = manifest.file_mut(&local).expect("listed above");
        if ino(&st) == record.ino && size(&st) == record.size && mode(&st) == record.mode {
            changed |= record.ctime != ctime(&st);
            record.ctime = ctime(&st);
        }
    }
    changed
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

//! The files of one skill: exactly the files a confined read of that skill
//! serves, and what was left out, with why.
//!
//! This is the one walk of a skill's files. Manifests, `show`, tool
//! listings and digests all start here (through
//! [`Catalog::skill_files`](crate::Catalog::skill_files)), so what a front
//! end lists is what it would serve:
//!
//! - the walk never descends a directory link (the backend's bounded walk,
//!   [`SkillBackendExt::walk`]), so `a -> .` lists nothing twice;
//! - a link to a file is kept only if a read confined to the skill's
//!   directory accepts it (probed with a zero-byte confined read, which the
//!   backend refuses exactly as it would refuse the whole read);
//! - a file over the read limit, a FIFO, socket or device, and anything
//!   below the depth bound are left out;
//! - the walk stops at a count bound and says so.
//!
//! - what the content rule ([`crate::content`]) refuses is part of no
//!   skill anywhere (not listed, read, synced, packed or installed): a
//!   `.git` entry in any case, any other hidden path, and anything below
//!   `.skillstore/` but the signature; a hidden directory is not entered.
//!
//! Every file left out is reported with its path relative to the skill's
//! directory and a stable kind ([`LeftOutKind::as_str`]), so each front end
//! can turn it into a diagnostic. One refused file never fails the listing:
//! only a skill directory that cannot be listed at all does.

use serde::Serialize;
use skillstore_backends::{
    ErrorKind as StorageKind, PassReason, ReadOptions, SkillBackend, SkillBackendExt, VPath, Version, Walk, WalkLimits,
    WalkedFile,
};

use crate::content::{ContentRefusal, RESERVED_DIR};
use crate::diagnostic::{Diagnostic, Severity};

/// True when `relative`, a path relative to a skill's directory, is not
/// part of the skill by the content rule ([`crate::content::refusal`]): a
/// `.git` entry, another hidden path, or a path below `.skillstore/` other
/// than the signature. Such a path is not a file of the skill on any
/// channel: it is not listed ([`list`]), a confined read of it through a
/// catalog is not found, it is not synced or packed, and an archive
/// holding it is refused.
pub fn is_foreign(relative: &str) -> bool {
    crate::content::refusal(relative).is_some()
}

/// The bounds of a listing of a skill's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// How many directory levels below the skill's directory are entered.
    pub max_depth: usize,
    /// The most files listed; past it the listing is cut short.
    pub max_files: usize,
    /// The most files left out that are reported one by one; past it they
    /// are only counted.
    pub max_reported: usize,
}

impl Default for FileLimits {
    /// 32 levels, 10,000 files, 1,000 reported left out.
    fn default() -> Self {
        FileLimits {
            max_depth: 32,
            max_files: 10_000,
            max_reported: 1_000,
        }
    }
}

/// One file a confined read of the skill serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// The path relative to the skill's directory (`references/a.md`).
    pub relative: String,
    /// The full virtual path.
    pub path: VPath,
    /// The size in bytes, at most the read limit.
    pub size: u64,
    /// The version the listing or the confined probe reported, when known.
    pub version: Option<Version>,
}

/// Why a file or directory of a skill is not among its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeftOutKind {
    /// A link to a directory: never descended (`directory_link`).
    DirectoryLink,
    /// A link the backend's policy does not resolve (`unresolved_link`).
    UnresolvedLink,
    /// A FIFO, socket or device (`special_file`).
    SpecialFile,
    /// A directory below the depth bound (`too_deep`).
    TooDeep,
    /// Below `.skillstore/` and not the skill's signature ([`is_foreign`]):
    /// not a file of the skill (`reserved`).
    Reserved,
    /// A `.git` entry, in any case (`git_entry`; [`crate::content`]).
    GitEntry,
    /// Another hidden path (`hidden_path`; [`crate::content`]).
    Hidden,
    /// Not among the files a lock or signature check of the skill
    /// digested: added since (`changed_since_checked`).
    Changed,
    /// The storage refused it: a confined read or a listing failed with
    /// this kind (`symlink_escape`, `too_large`, `permission_denied`, ...).
    Storage(StorageKind),
}

impl LeftOutKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            LeftOutKind::DirectoryLink => "directory_link",
            LeftOutKind::UnresolvedLink => "unresolved_link",
            LeftOutKind::SpecialFile => "special_file",
            LeftOutKind::TooDeep => "too_deep",
            LeftOutKind::Changed => "changed_since_checked",
            LeftOutKind::Reserved => "reserved",
            LeftOutKind::GitEntry => "git_entry",
            LeftOutKind::Hidden => "hidden_path",
            LeftOutKind::Storage(kind) => kind.as_str(),
        }
    }

    /// A sentence for a person.
    pub fn describe(self) -> &'static str {
        match self {
            LeftOutKind::DirectoryLink => "a link to a directory is not followed",
            LeftOutKind::UnresolvedLink => "a link the storage policy does not resolve",
            LeftOutKind::SpecialFile => "not a regular file",
            LeftOutKind::TooDeep => "below the deepest level listed",
            LeftOutKind::Reserved => ContentRefusal::Reserved.describe(),
            LeftOutKind::GitEntry => ContentRefusal::GitEntry.describe(),
            LeftOutKind::Hidden => ContentRefusal::Hidden.describe(),
            LeftOutKind::Changed => "added since the skill's lock or signature was checked; refresh to check it again",
            LeftOutKind::Storage(kind) => kind.describe(),
        }
    }
}

impl From<ContentRefusal> for LeftOutKind {
    fn from(refusal: ContentRefusal) -> Self {
        match refusal {
            ContentRefusal::GitEntry => LeftOutKind::GitEntry,
            ContentRefusal::Hidden => LeftOutKind::Hidden,
            ContentRefusal::Reserved => LeftOutKind::Reserved,
        }
    }
}

impl Serialize for LeftOutKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Something of the skill's directory that is not among its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// The path relative to the skill's directory.
    pub relative: String,
    /// Why.
    pub kind: LeftOutKind,
}

/// A skill's files, as [`list`] found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFiles {
    /// The skill's directory.
    pub dir: VPath,
    /// The files a confined read serves, in walk order: names sorted within
    /// a directory, a directory's files before its subdirectories'.
    pub files: Vec<SkillFile>,
    /// What was left out, at most [`FileLimits::max_reported`] of them.
    pub left_out: Vec<LeftOut>,
    /// How many were left out in all (more than `left_out.len()` when the
    /// report was cut).
    pub left_out_count: usize,
    /// True when [`FileLimits::max_files`] cut the listing short.
    pub truncated: bool,
    read: ReadOptions,
}

impl SkillFiles {
    /// The read every listed file was admitted by (confined to the skill's
    /// directory, under the read limit): read the files with these options
    /// to digest or serve exactly what was listed.
    pub fn read_options(&self) -> ReadOptions {
        self.read
    }

    /// The files' relative paths, in order.
    pub fn relatives(&self) -> Vec<String> {
        self.files.iter().map(|f| f.relative.clone()).collect()
    }

    /// One warning per reported file left out, naming its virtual path and
    /// kind, for `source`.
    pub fn diagnostics(&self, source: &str) -> Vec<Diagnostic> {
        self.left_out
            .iter()
            .map(|l| {
                let path = self.dir.join(&l.relative).ok();
                Diagnostic::new(
                    Severity::Warning,
                    l.kind,
                    Some(source),
                    path.as_ref(),
                    format!("left out of the skill's files: {}", l.kind.describe()),
                )
            })
            .collect()
    }

    /// This listing as [`list`] under the narrower `limits` would give it,
    /// when that is certain without walking again: nothing was cut short,
    /// every file and every file left out is reported and lies within
    /// `limits.max_depth` directories, and there are at most
    /// `limits.max_files` of them. `None` otherwise (list again). One
    /// difference is accepted: a directory below `limits.max_depth` that
    /// holds no file at any depth, which the narrower walk would report as
    /// too deep, is not reported (it leaves no file out).
    pub fn narrowed(&self, limits: FileLimits) -> Option<SkillFiles> {
        let depth = |relative: &str| relative.matches('/').count();
        let within = !self.truncated
            && self.left_out_count == self.left_out.len()
            && self.files.len() + self.left_out_count <= limits.max_files
            && self.files.iter().all(|f| depth(&f.relative) <= limits.max_depth)
            && self
                .left_out
                .iter()
                .all(|l| l.kind != LeftOutKind::TooDeep && depth(&l.relative) <= limits.max_depth);
        within.then(|| {
            let mut narrowed = self.clone();
            narrowed.left_out.truncate(limits.max_reported);
            narrowed
        })
    }

    /// Moves the files `unwanted` picks to the files left out, as `kind`.
    pub(crate) fn leave_out_where(
        &mut self,
        mut unwanted: impl FnMut(&SkillFile) -> bool,
        kind: LeftOutKind,
        limits: &FileLimits,
    ) {
        let files = std::mem::take(&mut self.files);
        for file in files {
            if unwanted(&file) {
                self.leave_out(file.relative, kind, limits);
            } else {
                self.files.push(file);
            }
        }
    }

    fn leave_out(&mut self, relative: String, kind: LeftOutKind, limits: &FileLimits) {
        self.left_out_count += 1;
        if self.left_out.len() < limits.max_reported {
            self.left_out.push(LeftOut { relative, kind });
        }
    }
}

/// Lists the files of the skill whose directory is `dir` on `backend`:
/// exactly those a read confined to `dir`, under `read_limit` bytes, would
/// serve, within `limits`. Fails only when `dir` itself cannot be listed.
pub async fn list(
    backend: &dyn SkillBackend,
    dir: &VPath,
    read_limit: u64,
    limits: FileLimits,
) -> skillstore_backends::Result<SkillFiles> {
    let mut listed = list_many(backend, std::slice::from_ref(dir), read_limit, limits).await;
    listed.pop().expect("one listing per directory")
}

/// [`list`] for each of `dirs`, their walks batched
/// ([`SkillBackendExt::walk_many`]): what a load that checks thousands of
/// skills uses. Results come in the order of `dirs`.
pub async fn list_many(
    backend: &dyn SkillBackend,
    dirs: &[VPath],
    read_limit: u64,
    limits: FileLimits,
) -> Vec<skillstore_backends::Result<SkillFiles>> {
    let walks = backend
        .walk_many(
            dirs,
            WalkLimits {
                max_depth: limits.max_depth,
                max_files: limits.max_files,
                skip_hidden_dirs: Some(RESERVED_DIR),
            },
        )
        .await;
    let mut listed = Vec::with_capacity(dirs.len());
    for (dir, walk) in dirs.iter().zip(walks) {
        listed.push(match walk {
            Ok(walk) => Ok(from_walk(backend, dir, walk, read_limit, &limits).await),
            Err(e) => Err(e),
        });
    }
    listed
}

/// The skill's files from the walk of its directory, links and files
/// without a size probed.
async fn from_walk(
    backend: &dyn SkillBackend,
    dir: &VPath,
    walk: Walk,
    read_limit: u64,
    limits: &FileLimits,
) -> SkillFiles {
    let read = ReadOptions::with_limit(read_limit).confined(dir.segments().count());
    let mut out = SkillFiles {
        dir: dir.clone(),
        files: Vec::with_capacity(walk.files.len()),
        left_out: Vec::new(),
        left_out_count: 0,
        truncated: walk.truncated,
        read,
    };
    for passed in walk.passed_over {
        let relative = relative_to(dir, &passed.path);
        let kind = match passed.reason {
            PassReason::Hidden => crate::content::refusal(&relative).map_or(LeftOutKind::Hidden, LeftOutKind::from),
            PassReason::DirectoryLink => LeftOutKind::DirectoryLink,
            PassReason::UnresolvedLink => LeftOutKind::UnresolvedLink,
            PassReason::Special => LeftOutKind::SpecialFile,
            PassReason::TooDeep => LeftOutKind::TooDeep,
            PassReason::Unlisted(kind) => LeftOutKind::Storage(kind),
            _ => LeftOutKind::Storage(StorageKind::Other),
        };
        out.leave_out(relative, kind, limits);
    }
    // A link, or a file whose listing gave no size, is probed with a
    // zero-byte read under the same confinement and limit: the backend
    // refuses it exactly as it would refuse the whole read.
    let probe: Vec<VPath> = walk
        .files
        .iter()
        .filter(|f| needs_probe(f) && !is_foreign(&f.relative))
        .map(|f| f.path.clone())
        .collect();
    let mut probed = if probe.is_empty() {
        Vec::new()
    } else {
        backend
            .read_many(
                &probe,
                ReadOptions {
                    prefix: Some(0),
                    ..read
                },
            )
            .await
    }
    .into_iter();
    for file in walk.files {
        if let Some(refusal) = crate::content::refusal(&file.relative) {
            out.leave_out(file.relative, refusal.into(), limits);
            continue;
        }
        let (size, version) = if needs_probe(&file) {
            match probed.next() {
                Some(Ok(blob)) => (blob.size, Some(blob.version)),
                Some(Err(e)) => {
                    out.leave_out(file.relative, LeftOutKind::Storage(e.kind()), limits);
                    continue;
                }
                None => {
                    out.leave_out(file.relative, LeftOutKind::Storage(StorageKind::Other), limits);
                    continue;
                }
            }
        } else {
            (file.entry.size.unwrap_or_default(), file.entry.version)
        };
        if size > read_limit {
            out.leave_out(file.relative, LeftOutKind::Storage(StorageKind::TooLarge), limits);
            continue;
        }
        out.files.push(SkillFile {
            relative: file.relative,
            path: file.path,
            size,
            version,
        });
    }
    out
}

fn needs_probe(file: &WalkedFile) -> bool {
    file.entry.symlink || file.entry.size.is_none()
}

fn relative_to(dir: &VPath, path: &VPath) -> String {
    path.as_str().strip_prefix(dir.as_str()).map_or_else(
        || path.as_str().to_owned(),
        |rest| rest.trim_start_matches('/').to_owned(),
    )
}

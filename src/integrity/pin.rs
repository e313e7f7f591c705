//! The reads a catalog serves: held to the versions a check saw, and
//! never of a path that belongs to no skill.
//!
//! When a skill passes a lock or signature check, the check read each of
//! its files at some version and computed the digest from those bytes.
//! [`Pins`] records, per checked skill, each file's path and that version;
//! [`PinnedBackend`] wraps the namespace's backend so that every read of a
//! file of a checked skill returns bytes only when the version the read
//! itself returns is the one the digest was computed from. A file changed,
//! added or removed since the check is refused
//! ([`ErrorKind::VersionConflict`], or [`ErrorKind::NotFound`] for one
//! removed) until a refresh checks the skill again.
//!
//! A checked skill is served whole or not at all. Once any read or listing
//! finds one of its checked files changed, gone or no longer a regular
//! file, the skill is *withdrawn*: from then on every read of any of its
//! files, those still as checked included, is refused as changed, and
//! [`Pins::withdrawn_count`] moves so that a front end renders its
//! listings again without it. A client holding an earlier listing thus
//! cannot assemble part of a skill once the loss is known; a loss nobody
//! has read or listed yet is found at the next listing of the skill or
//! the next refresh (which checks the skill again and withholds it).
//!
//! A confined read (one that names the skill's directory) of a path below
//! the skill's `.skillstore/` other than its signature is not found
//! ([`crate::skill_files::is_foreign`]), whatever the checks.
//!
//! A skill whose frontmatter a catalog took from an index or cache entry
//! rather than from its file is *claimed* ([`Pins::claim`]): whenever its
//! skill file is read whole at the entry's version (a level-2 read, a
//! digest) and those bytes do not hold the entry's YAML or do not hash to
//! its `sha256`, the skill is withdrawn as above (the read that found it
//! is answered with the file's true bytes), and the bytes' frontmatter is
//! kept in [`crate::integrity::FileDigests`], so the next load or refresh
//! takes neither that entry nor what it showed.
//!
//! Every front end reads through [`crate::Catalog::backend`], so all of
//! them inherit these rules.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use skillstore_backends::{Blob, Error, ErrorKind, Layered, ReadOptions, Result, SkillBackend, VPath, Version};

/// The public sentence of a read refused because the skill changed.
pub const CHANGED: &str =
    "the skill changed since its lock or signature was checked; refresh to check it again before it is served";

/// The stable kind of a refusal because a skill changed since its check,
/// for front ends that name it apart from a failed precondition
/// (`version_conflict`, a stale `If-Match`).
pub const CHANGED_KIND: &str = "changed_since_checked";

/// True when `err` refused a read (or a whole skill) because the skill
/// changed since its lock or signature was checked: the state changed
/// under the caller, who did not state a precondition; a refresh checks it
/// again.
pub fn is_changed(err: &crate::Error) -> bool {
    matches!(err, crate::Error::Backend(e)
        if e.kind() == ErrorKind::VersionConflict && e.public_detail() == Some(CHANGED))
}

/// The file versions each checked skill was digested at, and the checked
/// skills withdrawn since because one of those files changed or went.
#[derive(Debug)]
pub struct Pins {
    /// Each pinned skill's directory and its checked files.
    dirs: HashMap<VPath, Vec<VPath>>,
    files: HashMap<VPath, Pin>,
    /// The directories of the skills withdrawn, each with the checked
    /// file found changed or gone; `withdrawn_count` (their number) spares
    /// every read the lock while there is none.
    withdrawn: Mutex<HashMap<VPath, VPath>>,
    withdrawn_count: AtomicUsize,
    /// The file hashes the check was computed through, to forget a hash
    /// found wrong for its version.
    digests: Option<Arc<crate::integrity::FileDigests>>,
    /// The read limit the check read every checked file under.
    read_limit: u64,
    /// What index or cache entries claim of skill files, by file.
    claims: HashMap<VPath, Claim>,
    /// The directories of the claimed skills.
    claimed: std::collections::HashSet<VPath>,
}

/// What an index or cache entry a catalog showed a skill from claims of
/// its skill file ([`Pins::claim`]).
#[derive(Debug, Clone)]
pub struct Claim {
    /// The skill's directory.
    pub dir: VPath,
    /// The file's version the entry was taken for.
    pub version: Version,
    /// The SHA-256 (lowercase hex) the entry names, if any.
    pub sha256: Option<String>,
    /// The frontmatter's YAML the entry gives.
    pub yaml: Arc<str>,
}

impl Claim {
    /// True when `data`, the whole file at the claimed version, holds the
    /// claimed frontmatter and, when a hash is claimed, has that hash.
    fn holds(&self, data: &[u8]) -> bool {
        matches!(crate::skill::scan(data, true), crate::skill::Scan::Yaml(yaml) if *yaml == *self.yaml)
            && self
                .sha256
                .as_deref()
                .is_none_or(|h| crate::integrity::digest::sha256_hex(data) == h)
    }

    /// True when `head`, what the bytes of the claimed version were found
    /// to hold when hashed, is what the claim says.
    pub fn agrees_with(&self, head: &crate::integrity::HashedHead) -> bool {
        head.yaml.as_deref() == Some(&*self.yaml) && self.sha256.as_deref().is_none_or(|h| head.sha256 == h)
    }
}

impl Default for Pins {
    fn default() -> Self {
        Pins {
            dirs: HashMap::new(),
            files: HashMap::new(),
            withdrawn: Mutex::new(HashMap::new()),
            withdrawn_count: AtomicUsize::new(0),
            digests: None,
            read_limit: skillstore_backends::DEFAULT_READ_LIMIT,
            claims: HashMap::new(),
            claimed: std::collections::HashSet::new(),
        }
    }
}

impl Pins {
    /// No skill pinned.
    pub fn new() -> Self {
        Pins::default()
    }

    /// No skill pinned, with room for `skills` skills of `files` files in
    /// all.
    pub fn with_capacity(skills: usize, files: usize) -> Self {
        let mut pins = Pins::default();
        pins.dirs.reserve(skills);
        pins.files.reserve(files);
        pins
    }

    /// These pins, forgetting in `digests` a file's hash that a whole read
    /// finds wrong for its version, so that the next check reads the file
    /// again instead of passing it on the hash kept for that version.
    pub fn forgetting_in(mut self, digests: Arc<crate::integrity::FileDigests>) -> Self {
        self.digests = Some(digests);
        self
    }

    /// These pins, for a check that read every file under `limit`: a
    /// checked file a read under at least that limit finds too large has
    /// grown since, and withdraws its skill (a read's own lower limit does
    /// not).
    pub fn checked_under(mut self, limit: u64) -> Self {
        self.read_limit = limit;
        self
    }

    /// Withdraws the pinned skill whose directory is `dir`: one of its
    /// checked files was found changed or gone, so none of its files is
    /// served any more; `cause` is the file found changed or gone (or the
    /// directory itself). Does nothing for a directory not pinned; moves
    /// [`Pins::withdrawn_count`] the first time a skill is withdrawn.
    pub fn withdraw(&self, dir: &VPath, cause: &VPath) {
        if !self.dirs.contains_key(dir) && !self.claimed.contains(dir) {
            return;
        }
        let newly = {
            let mut withdrawn = self.withdrawn.lock().unwrap_or_else(|e| e.into_inner());
            match withdrawn.entry(dir.clone()) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(cause.clone());
                    true
                }
            }
        };
        if newly {
            self.withdrawn_count.fetch_add(1, Ordering::AcqRel);
            tracing::warn!(skill = %dir, file = %cause, "a checked skill lost or changed a checked file; none of its files is served until a refresh checks it again");
        }
    }

    /// True when the skill whose directory is `dir` has been withdrawn.
    pub fn is_withdrawn(&self, dir: &VPath) -> bool {
        self.withdrawn_count.load(Ordering::Acquire) > 0
            && self
                .withdrawn
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(dir)
    }

    /// The refusal of every read and listing of the withdrawn skill whose
    /// directory is `dir`, naming the file found changed or gone; `None`
    /// while the skill is not withdrawn.
    pub fn withdrawn_refusal(&self, dir: &VPath) -> Option<Error> {
        if self.withdrawn_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let withdrawn = self.withdrawn.lock().unwrap_or_else(|e| e.into_inner());
        let cause = withdrawn.get(dir)?;
        Some(Error::at(ErrorKind::VersionConflict, cause).with_public_detail(CHANGED))
    }

    /// The number of skills withdrawn so far: it only grows, so a front
    /// end that renders listings once renders them again when it moves.
    pub fn withdrawn_count(&self) -> usize {
        self.withdrawn_count.load(Ordering::Acquire)
    }

    /// Pins the skill whose directory is `dir` to `files`: each a path
    /// below `dir`, the version its digested bytes were read at, and the
    /// SHA-256 (lowercase hex) of those bytes. Only those files are served
    /// from `dir` afterwards, and a whole read of one is served only when
    /// its bytes still have that hash, whatever the version says.
    pub fn pin(&mut self, dir: VPath, files: impl IntoIterator<Item = (VPath, Version, String)>) {
        let checked = self.dirs.entry(dir).or_default();
        for (path, version, sha256) in files {
            checked.push(path.clone());
            self.files.insert(path, Pin { version, sha256 });
        }
    }

    /// Records that what the catalog shows of the skill at `dir` was taken
    /// from an entry (index or local cache) for its skill file `file`
    /// rather than read from the file: a whole read of `file` at that
    /// claim's version whose bytes the claim does not describe withdraws
    /// the skill.
    pub fn claim(&mut self, file: VPath, claim: Claim) {
        self.claimed.insert(claim.dir.clone());
        self.claims.insert(file, claim);
    }

    /// The claims recorded, by skill file.
    pub fn claims(&self) -> impl Iterator<Item = (&VPath, &Claim)> {
        self.claims.iter()
    }

    /// Checks the claim on the skill file `path` against `head`, what its
    /// bytes at `version` held when they were hashed (a digest that did
    /// not read them again): the skill is withdrawn when they disagree.
    /// Returns true when it was.
    pub fn check_claim(&self, path: &VPath, version: &Version, head: &crate::integrity::HashedHead) -> bool {
        match self.claims.get(path) {
            Some(claim) if claim.version.same_as(version) && !claim.agrees_with(head) => {
                self.withdraw_claimed(&claim.dir, path);
                true
            }
            _ => false,
        }
    }

    fn withdraw_claimed(&self, dir: &VPath, path: &VPath) {
        tracing::warn!(skill = %dir, file = %path, "an index or cache entry does not describe the file it names; the skill is withdrawn until a refresh reads the file");
        self.withdraw(dir, path);
    }

    /// A whole read of a claimed skill file: when its bytes are not what
    /// the claim says, they are kept as what that version holds and the
    /// skill is withdrawn.
    fn check_read(&self, path: &VPath, blob: &Blob) {
        let Some(claim) = self.claims.get(path) else { return };
        if blob.data.len() as u64 != blob.size || !claim.version.same_as(&blob.version) || claim.holds(&blob.data) {
            return;
        }
        if let Some(digests) = &self.digests {
            digests.compute(path.as_str(), &blob.version, &blob.data);
        }
        self.withdraw_claimed(&claim.dir, path);
    }

    /// The withdrawn skill directory (pinned or claimed) holding `path`.
    fn withdrawn_holding(&self, path: &VPath) -> Option<VPath> {
        if self.withdrawn_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let withdrawn = self.withdrawn.lock().unwrap_or_else(|e| e.into_inner());
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| !d.is_root()) {
            if withdrawn.contains_key(&d) {
                return Some(d);
            }
            dir = d.parent();
        }
        None
    }

    /// True when `path` lies in a withdrawn skill, pinned or claimed.
    pub fn is_withdrawn_path(&self, path: &VPath) -> bool {
        self.withdrawn_holding(path).is_some()
    }

    /// True when no skill is pinned.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// True when the skill whose directory is `dir` is pinned.
    pub fn holds(&self, dir: &VPath) -> bool {
        self.dirs.contains_key(dir)
    }

    /// The files checked of the skill whose directory is `dir`, when it is
    /// pinned: the skill is served whole only when each of them reads at
    /// its pinned version.
    pub fn files_of(&self, dir: &VPath) -> Option<&[VPath]> {
        self.dirs.get(dir).map(Vec::as_slice)
    }

    /// The pinned skill directory holding `path`, when there is one.
    pub fn skill_of(&self, path: &VPath) -> Option<&VPath> {
        if self.dirs.is_empty() {
            return None;
        }
        // Each ancestor is a prefix of the path's text ending before a `/`.
        let text = path.as_str();
        let mut end = text.len();
        while let Some(slash) = text[..end].rfind('/') {
            if slash == 0 {
                return None;
            }
            if let Some((found, _)) = self.dirs.get_key_value(&text[..slash]) {
                return Some(found);
            }
            end = slash;
        }
        None
    }

    /// True when `path` is a file of a pinned skill, or of no pinned skill.
    pub fn admits(&self, path: &VPath) -> bool {
        self.skill_of(path).is_none() || self.files.contains_key(path)
    }

    /// The refusal of a read of `path` when it lies in a withdrawn skill.
    fn in_withdrawn(&self, path: &VPath) -> Option<Error> {
        if self.withdrawn_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.withdrawn_refusal(&self.withdrawn_holding(path)?)
    }

    /// Why a read of `path` may not be served before it is made: it lies
    /// in a pinned skill and was not among the files checked.
    fn refuse_before(&self, path: &VPath) -> Option<Error> {
        (!self.admits(path)).then(|| Error::at(ErrorKind::VersionConflict, path).with_public_detail(CHANGED))
    }

    /// Withdraws the skill of the checked file `path` when `listed` (the
    /// version a listing or stat shows for it) is not its pinned version.
    /// Returns true when it did.
    pub fn withdraw_if_changed(&self, path: &VPath, listed: &Version) -> bool {
        match self.files.get(path) {
            Some(pinned) if !pinned.version.same_as(listed) => {
                if let Some(dir) = self.skill_of(path) {
                    self.withdraw(dir, path);
                }
                true
            }
            _ => false,
        }
    }

    /// `read` of `path` as it may be served: refused when `path` lies in
    /// a pinned skill and the read's version is not the pinned one, or
    /// (for a whole read) its bytes do not have the checked hash. A checked
    /// file read at another version or with other bytes, or found gone or
    /// no longer a regular file, withdraws its skill.
    fn after(&self, path: &VPath, read: Result<Blob>, limit: u64) -> Result<Blob> {
        let blob = match read {
            Ok(blob) => blob,
            Err(e) => {
                let grown = e.kind() == ErrorKind::TooLarge && limit >= self.read_limit;
                if self.files.contains_key(path)
                    && (lost(e.kind()) || grown)
                    && let Some(dir) = self.skill_of(path)
                {
                    self.withdraw(dir, path);
                }
                return Err(e);
            }
        };
        if let Some(refused) = self.in_withdrawn(path) {
            return Err(refused);
        }
        if !self.claims.is_empty() {
            self.check_read(path, &blob);
        }
        match self.files.get(path) {
            Some(pinned) if !pinned.admits(&blob) => {
                if pinned.version.same_as(&blob.version)
                    && let Some(digests) = &self.digests
                {
                    digests.forget(path.as_str(), &blob.version);
                }
                if let Some(dir) = self.skill_of(path) {
                    self.withdraw(dir, path);
                }
                Err(Error::at(ErrorKind::VersionConflict, path).with_public_detail(CHANGED))
            }
            Some(_) => Ok(blob),
            None if self.skill_of(path).is_some() => {
                Err(Error::at(ErrorKind::VersionConflict, path).with_public_detail(CHANGED))
            }
            None => Ok(blob),
        }
    }
}

/// What a checked file is held to.
#[derive(Debug)]
struct Pin {
    version: Version,
    sha256: String,
}

impl Pin {
    /// True when `blob` may be served as this file: read at the checked
    /// version and, when it is the whole file, holding the checked bytes
    /// (a version kept across a rewrite, as a coarse timestamp allows, does
    /// not let other bytes through). A prefix read is held to the version
    /// alone.
    fn admits(&self, blob: &Blob) -> bool {
        self.version.same_as(&blob.version)
            && (blob.data.len() as u64 != blob.size || crate::integrity::digest::sha256_hex(&blob.data) == self.sha256)
    }
}

/// True when a read failing with `kind` means the file is no longer the
/// regular file that was checked (and not that the storage failed). Too
/// large is not among them: a read's own limit may be below the file's
/// size ([`Pins::checked_under`] tells).
fn lost(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::NotFound
            | ErrorKind::NotADirectory
            | ErrorKind::IsADirectory
            | ErrorKind::NotRegularFile
            | ErrorKind::SymlinkRefused
            | ErrorKind::SymlinkEscape
            | ErrorKind::SymlinkLoop
            | ErrorKind::DanglingSymlink
            | ErrorKind::VersionConflict
    )
}

/// A backend whose reads of a pinned skill's files are held to [`Pins`],
/// and whose confined reads of a path that belongs to no skill are not
/// found; everything else passes through to the backend it wraps.
#[derive(Debug)]
pub struct PinnedBackend {
    inner: Arc<dyn SkillBackend>,
    pins: Arc<Pins>,
}

impl PinnedBackend {
    /// `inner`, with reads of the skills in `pins` held to their versions.
    pub fn new(inner: Arc<dyn SkillBackend>, pins: Arc<Pins>) -> Self {
        PinnedBackend { inner, pins }
    }

    /// The pins reads are held to.
    pub fn pins(&self) -> &Arc<Pins> {
        &self.pins
    }

    /// Why a read of `path` is refused before it is made: not found below
    /// a skill's `.skillstore/` or when nothing is there, changed when it
    /// lies in a pinned skill and was not among the files checked.
    async fn refused(&self, path: &VPath, options: ReadOptions) -> Option<Error> {
        if let Some(foreign) = foreign(path, options) {
            return Some(foreign);
        }
        if let Some(refused) = self.pins.in_withdrawn(path) {
            return Some(refused);
        }
        let changed = self.pins.refuse_before(path)?;
        // Not a checked file: a path that was never there, or one the
        // guards refuse (too large, a link, not a regular file), answers
        // what the guards say, not a change a client should refresh for;
        // only a file the guards would serve was added since.
        match self.inner.read(path, options).await {
            Err(e) if e.kind() != ErrorKind::VersionConflict => Some(e),
            _ => Some(changed),
        }
    }
}

#[async_trait]
impl Layered for PinnedBackend {
    fn inner(&self) -> &dyn SkillBackend {
        &*self.inner
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        if let Some(refused) = self.refused(path, options).await {
            return Err(refused);
        }
        let read = self.inner.read(path, options).await;
        self.pins.after(path, read, options.limit)
    }
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        let mut refused: Vec<Option<Error>> = Vec::with_capacity(paths.len());
        for path in paths {
            refused.push(self.refused(path, options).await);
        }
        let admitted: Vec<VPath> = paths
            .iter()
            .zip(&refused)
            .filter(|(_, r)| r.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        let mut read = if admitted.is_empty() {
            Vec::new()
        } else {
            self.inner.read_many(&admitted, options).await
        }
        .into_iter();
        paths
            .iter()
            .zip(refused)
            .map(|(path, refused)| match refused {
                Some(refused) => Err(refused),
                None => {
                    let blob = read.next().unwrap_or_else(|| {
                        Err(Error::at(ErrorKind::Other, path).with_detail("a batch read lost an answer"))
                    });
                    self.pins.after(path, blob, options.limit)
                }
            })
            .collect()
    }
}

/// Not found, for a confined read of a path inside its skill that the
/// content rule refuses ([`crate::content`]): a `.git` entry, another
/// hidden path, or a path below `.skillstore/` other than the signature.
fn foreign(path: &VPath, options: ReadOptions) -> Option<Error> {
    let skill_depth = options.confinement?;
    let mut inside = path.segments().skip(skill_depth);
    if !inside.any(|s| s.starts_with('.') || crate::content::is_git_segment(s)) {
        return None;
    }
    let relative = path.segments().skip(skill_depth).collect::<Vec<_>>().join("/");
    crate::content::refusal(&relative)
        .map(|refusal| Error::at(ErrorKind::NotFound, path).with_public_detail(refusal.describe()))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    impl Pins {
        fn after_all(&self, path: &VPath, read: Result<Blob>) -> Result<Blob> {
            self.after(path, read, skillstore_backends::DEFAULT_READ_LIMIT)
        }
    }

    fn v(path: &str) -> VPath {
        VPath::new(path).expect("a valid path")
    }

    #[test]
    fn a_path_the_content_rule_refuses_is_never_read_in_a_skill() {
        let confined = ReadOptions::default().confined(2);
        for path in [
            "/s/pdf/.skillstore",
            "/s/pdf/.skillstore/x",
            "/s/pdf/.skillstore/a/b",
            "/s/pdf/a/.skillstore",
            "/s/pdf/.skillstorex",
            "/s/pdf/.git/config",
            "/s/pdf/scripts/.GIT/HEAD",
            "/s/pdf/.env",
        ] {
            let refused = foreign(&v(path), confined).expect("refused");
            assert_eq!(refused.kind(), ErrorKind::NotFound, "{path}");
        }
        for path in ["/s/pdf/.skillstore/signature", "/s/pdf/x.md", "/s/pdf/a.b/c"] {
            assert!(foreign(&v(path), confined).is_none(), "{path}");
        }
        // The rule holds inside a skill, not above it.
        assert!(foreign(&v("/.hidden/pdf/x.md"), confined).is_none());
    }

    #[test]
    fn only_the_checked_files_of_a_pinned_skill_are_admitted() {
        let mut pins = Pins::new();
        pins.pin(
            v("/s/pdf"),
            [(
                v("/s/pdf/SKILL.md"),
                Version::new("1"),
                crate::integrity::digest::sha256_hex(b"x"),
            )],
        );
        assert!(pins.admits(&v("/s/pdf/SKILL.md")));
        assert!(!pins.admits(&v("/s/pdf/added.sh")));
        assert!(!pins.admits(&v("/s/pdf/a/b/added.sh")));
        assert!(pins.admits(&v("/s/pdfx/SKILL.md")));
        assert!(pins.admits(&v("/s/other/SKILL.md")));
        let blob = |version: &str| {
            Ok(Blob {
                data: Bytes::from_static(b"x"),
                size: 1,
                version: Version::new(version),
            })
        };
        assert!(pins.after_all(&v("/s/pdf/SKILL.md"), blob("\"1\"")).is_ok());
        let changed = pins.after_all(&v("/s/pdf/SKILL.md"), blob("2")).unwrap_err();
        assert_eq!(changed.kind(), ErrorKind::VersionConflict);
        assert_eq!(changed.public_detail(), Some(CHANGED));
    }

    #[test]
    fn other_bytes_under_the_checked_version_are_refused_and_withdraw_the_skill() {
        let mut pins = Pins::new();
        let hash = crate::integrity::digest::sha256_hex(b"checked");
        pins.pin(
            v("/s/pdf"),
            [
                (v("/s/pdf/SKILL.md"), Version::new("1"), hash.clone()),
                (v("/s/pdf/run.sh"), Version::new("1"), hash),
            ],
        );
        let blob = |data: &'static [u8], size: u64| {
            Ok(Blob {
                data: Bytes::from_static(data),
                size,
                version: Version::new("1"),
            })
        };
        assert!(pins.after_all(&v("/s/pdf/run.sh"), blob(b"checked", 7)).is_ok());
        // A prefix of the checked version: held to the version alone.
        assert!(pins.after_all(&v("/s/pdf/run.sh"), blob(b"che", 7)).is_ok());
        assert_eq!(pins.withdrawn_count(), 0);
        let refused = pins.after_all(&v("/s/pdf/run.sh"), blob(b"EVIL!!!", 7)).unwrap_err();
        assert_eq!(refused.public_detail(), Some(CHANGED));
        assert!(pins.is_withdrawn(&v("/s/pdf")));
        let whole = pins.after_all(&v("/s/pdf/SKILL.md"), blob(b"checked", 7)).unwrap_err();
        assert_eq!(whole.path(), Some(&v("/s/pdf/run.sh")));
    }
}

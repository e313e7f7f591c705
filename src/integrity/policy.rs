//! What a namespace checks before it serves a skill: its digest against a
//! lock, and its signature against its source's `allowed_signers`. The
//! checks run inside every load and refresh of a catalog
//! ([`crate::Catalog::load`], [`crate::Catalog::refresh`],
//! [`crate::Catalog::reload_skill`]), so every front end (command, server,
//! sync, mount, Python) serves only what passed them.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use skillstore_backends::{ErrorKind as StorageKind, VPath};

use crate::catalog::{Catalog, Passed, Skill, Verdict, WinnerCheck};
use crate::diagnostic::{Diagnostic, DiagnosticKind, Severity};
use crate::error::Error;
use crate::integrity::digest::SkillDigest;
use crate::integrity::lock::{Lock, LockedSkill};
use crate::integrity::signature::{AllowedSigners, Refused, SIGNATURE_FILE, Signer, now};
use crate::skill_files::SkillFiles;

/// How many skills of one chunk are checked at once.
const PARALLEL: usize = 16;

/// How many winners one task of a check lists, digests and checks.
const CHUNK: usize = 256;

/// How many of those tasks run at once.
const PARALLEL_CHUNKS: usize = 8;

/// The signatures one source accepts.
#[derive(Debug, Clone)]
pub struct SignaturePolicy {
    /// Whose signatures verify.
    pub allowed: AllowedSigners,
    /// Whether an unsigned skill is withheld.
    pub required: bool,
}

/// The checks a namespace applies to every winner before serving it.
#[derive(Debug, Clone, Default)]
pub struct Integrity {
    /// The lock the winners must match (a version 1 lock pins no skill).
    pub lock: Option<Arc<Lock>>,
    /// The signature policy of each source that has one, by source name.
    pub signatures: Vec<(String, Arc<SignaturePolicy>)>,
}

/// What the signature check of one skill found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    /// Its source checks no signature.
    NotChecked,
    /// No signature, and none is required.
    Unsigned,
    /// Verified.
    Signed(Signer),
    /// Refused.
    Refused(Refused),
}

#[async_trait::async_trait]
impl WinnerCheck for Integrity {
    fn is_active(&self) -> bool {
        Integrity::is_active(self)
    }

    /// The winners that fail a check withheld, each with an error
    /// diagnostic saying why (`not_locked`, `lock_mismatch` for another
    /// digest or another source than the lock's, `signature_missing`,
    /// `signature_invalid`, `signer_not_allowed`, `signer_expired`); those
    /// that pass carry their digest and signer. A disabled winner the lock
    /// does not hold is left out with no diagnostic: the lock pins what is
    /// served, and it is not served.
    async fn verdicts(self: Arc<Self>, catalog: Arc<Catalog>) -> Vec<Verdict> {
        Integrity::all_verdicts(self, catalog).await
    }
}

impl Integrity {
    /// True when some check needs a skill's digest.
    pub fn is_active(&self) -> bool {
        self.lock.as_ref().is_some_and(|l| l.skills.is_some()) || !self.signatures.is_empty()
    }

    /// The signature policy of the source `source`, when it has one.
    pub fn signature_policy(&self, source: &str) -> Option<&SignaturePolicy> {
        self.signatures
            .iter()
            .find(|(s, _)| s == source)
            .map(|(_, p)| p.as_ref())
    }

    /// The verdict on each winner of `catalog`, in order
    /// ([`WinnerCheck::verdicts`]).
    ///
    /// The winners that need a digest are checked [`CHUNK`] at a time, each
    /// chunk a task of its own (its listings batched, its digests and
    /// verdicts computed there), so the work spreads over the runtime's
    /// workers while other chunks wait on storage.
    async fn all_verdicts(integrity: Arc<Integrity>, catalog: Arc<Catalog>) -> Vec<Verdict> {
        let locked: Option<HashMap<&str, usize>> = integrity
            .locked_skills()
            .map(|skills| skills.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect());
        // What needs no digest is decided first; the rest are digested in
        // chunks.
        let count = catalog.skills().len();
        let mut verdicts: Vec<Option<Verdict>> = Vec::with_capacity(count);
        let mut digested: Vec<(usize, Option<usize>)> = Vec::new();
        for (at, skill) in catalog.skills().iter().enumerate() {
            match integrity.before_digest(skill, locked.as_ref()) {
                Ok(entry) => {
                    digested.push((at, entry));
                    verdicts.push(None);
                }
                Err(verdict) => verdicts.push(Some(verdict)),
            }
        }
        drop(locked);
        let chunks: Vec<Vec<(usize, Option<usize>)>> = digested.chunks(CHUNK).map(<[_]>::to_vec).collect();
        let checks = chunks.into_iter().map(|chunk| {
            let integrity = Arc::clone(&integrity);
            let catalog = Arc::clone(&catalog);
            tokio::spawn(async move {
                let found = integrity.check_chunk(&catalog, &chunk).await;
                (chunk, found)
            })
        });
        let mut checked = futures::stream::iter(checks).buffered(PARALLEL_CHUNKS);
        while let Some(joined) = checked.next().await {
            let (chunk, found) = joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            for ((at, _), verdict) in chunk.into_iter().zip(found) {
                verdicts[at] = Some(verdict);
            }
        }
        drop(checked);
        // What this check hashed is kept for the next process, when the
        // store keeps hashes on disk ([`crate::cache::hashes`]).
        let digests = Arc::clone(catalog.file_digests());
        drop(catalog);
        if digests.is_persistent() {
            let _ = tokio::task::spawn_blocking(move || digests.persist()).await;
        }
        verdicts
            .into_iter()
            .map(|verdict| verdict.expect("every winner has a verdict"))
            .collect()
    }

    /// The skills the lock pins, when it pins any.
    fn locked_skills(&self) -> Option<&[LockedSkill]> {
        self.lock.as_ref().and_then(|l| l.skills.as_deref())
    }

    /// The verdicts on the winners of `catalog` at the positions `chunk`
    /// names, each with its lock entry (an index into the lock's skills):
    /// their listings batched, their digests computed, then checked.
    async fn check_chunk(&self, catalog: &Catalog, chunk: &[(usize, Option<usize>)]) -> Vec<Verdict> {
        let skills = catalog.skills();
        let names: Vec<&str> = chunk.iter().map(|(at, _)| skills[*at].name()).collect();
        let digests = catalog.listed_digests(&names).await;
        let locked = self.locked_skills().unwrap_or_default();
        // Collected first: a stream over a closure with borrowed arguments
        // is not `Send` for every lifetime the compiler asks about.
        let mut checks = Vec::with_capacity(chunk.len());
        for (&(at, entry), digest) in chunk.iter().zip(digests) {
            checks.push(self.after_digest(catalog, &skills[at], entry.map(|i| &locked[i]), digest));
        }
        futures::stream::iter(checks).buffered(PARALLEL).collect().await
    }

    /// The verdict on `winner` that needs no digest, or the lock entry (an
    /// index into the lock's skills) its digest is to be checked against
    /// (`None`: only its signature is).
    fn before_digest(
        &self,
        winner: &Skill,
        locked: Option<&HashMap<&str, usize>>,
    ) -> std::result::Result<Option<usize>, Verdict> {
        let entry = match locked {
            Some(locked) => match locked.get(winner.name()) {
                Some(&entry) => Some(entry),
                // A disabled skill is not served, so the lock need not hold
                // it (`lock` writes enabled winners only): it is left out
                // without a diagnostic.
                None if !winner.enabled => return Err(Err(None)),
                None => {
                    return Err(refuse(
                        winner,
                        DiagnosticKind::NotLocked,
                        "not in the lock file, so it is not served; run `skillstore lock` to accept it".into(),
                    ));
                }
            },
            None => None,
        };
        if let Some(entry) = entry.map(|i| &self.locked_skills().unwrap_or_default()[i])
            && entry.source != winner.source
        {
            return Err(refuse(
                winner,
                DiagnosticKind::LockMismatch,
                format!(
                    "it wins in the source `{}`, the lock says `{}`; it is not served",
                    winner.source, entry.source
                ),
            ));
        }
        if entry.is_none() && self.signature_policy(&winner.source).is_none() {
            return Err(Ok(Passed::default()));
        }
        Ok(entry)
    }

    /// The verdict on `winner` once its digest is computed over `listed`:
    /// checked against the lock `entry` and its source's signature policy.
    async fn after_digest(
        &self,
        catalog: &Catalog,
        winner: &Skill,
        entry: Option<&LockedSkill>,
        listed: crate::error::Result<(SkillFiles, SkillDigest)>,
    ) -> Verdict {
        let refused_kind = if entry.is_some() {
            DiagnosticKind::LockMismatch
        } else {
            DiagnosticKind::Signature(Refused::Invalid)
        };
        let (digest, files) = match listed {
            Ok((listed, found)) => {
                // The digest's files are the listing's, in its order.
                let files = listed
                    .files
                    .into_iter()
                    .zip(found.files)
                    .filter_map(|(file, digested)| Some((file.path, digested.version?, digested.sha256)))
                    .collect::<Vec<_>>();
                (found.digest, files)
            }
            Err(e) => {
                return refuse(
                    winner,
                    refused_kind,
                    format!("its digest cannot be computed ({e}); it is not served"),
                );
            }
        };
        // What the catalog shows (name, description, the rest of the
        // frontmatter) was parsed from one version of SKILL.md; the digest
        // must be of that same version, or a SKILL.md swapped between the
        // two reads would show text no check saw.
        if files
            .iter()
            .any(|(file, version, _)| *file == winner.path && *version != winner.version)
        {
            return refuse(
                winner,
                refused_kind,
                "its SKILL.md changed while it was checked; it is not served until a load sees one version".into(),
            );
        }
        // What the catalog shows is parsed from the bytes just digested,
        // never from an entry the load may have taken for that version.
        let shown = match shown_from_digested(catalog, winner) {
            Ok(shown) => shown,
            Err(why) => return refuse(winner, refused_kind, why),
        };
        if let Some(entry) = entry
            && entry.digest != digest
        {
            return refuse(
                winner,
                DiagnosticKind::LockMismatch,
                format!(
                    "its digest is {digest}, the lock says {}; it is not served",
                    entry.digest
                ),
            );
        }
        let signer = match self.signature_policy(&winner.source) {
            None => None,
            Some(policy) => match check_signature(catalog, winner.name(), &digest, policy).await {
                SignatureStatus::Signed(signer) => Some(signer.principal),
                SignatureStatus::Unsigned | SignatureStatus::NotChecked => None,
                SignatureStatus::Refused(refused) => {
                    return refuse(winner, DiagnosticKind::Signature(refused), signature_message(refused));
                }
            },
        };
        let mut files = files;
        if entry.is_some() && self.signature_policy(&winner.source).is_none() {
            // The lock pins the digest, which leaves the signature out: a
            // signature is served only when it is a valid signature over
            // that digest, as read by the check.
            let signature = winner.dir().join(SIGNATURE_FILE).ok();
            if let Some(signature) = signature
                && let Some(at) = files.iter().position(|(path, _, _)| *path == signature)
            {
                let valid = match catalog.read_file(winner.name(), SIGNATURE_FILE).await {
                    Ok(bytes) => crate::integrity::sha256_hex(&bytes) == files[at].2 && signs_digest(&bytes, &digest),
                    Err(_) => false,
                };
                if !valid {
                    files.remove(at);
                }
            }
        }
        Ok(Passed {
            digest: Some(digest),
            signer,
            files: Some(files),
            shown,
        })
    }
}

/// What the catalog is to show of `winner`: `None` when the frontmatter
/// its SKILL.md's digested bytes hold parses to what the load took, else
/// that parse; an error when those bytes hold no valid skill of the
/// winner's name.
fn shown_from_digested(
    catalog: &Catalog,
    winner: &Skill,
) -> std::result::Result<Option<Arc<crate::skill::SkillMetadata>>, String> {
    let shown = catalog
        .file_digests()
        .shown(winner.path.as_str(), &winner.version)
        .ok_or_else(|| "its SKILL.md was not read by the check; it is not served".to_owned())?;
    match shown {
        Some(metadata) if *metadata == *winner.metadata => Ok(None),
        Some(metadata) if metadata.name == winner.name() => Ok(Some(metadata)),
        _ => Err(format!(
            "its SKILL.md as checked does not describe a skill named `{}`; it is not served",
            winner.name()
        )),
    }
}

/// True when `signature` is a skillstore SSH signature over `digest` that
/// verifies under the key it carries (whoever that is).
fn signs_digest(signature: &[u8], digest: &str) -> bool {
    let Ok(sig) = ssh_key::SshSig::from_pem(signature) else {
        return false;
    };
    sig.namespace() == crate::integrity::signature::NAMESPACE
        && ssh_key::PublicKey::new(sig.public_key().clone(), "")
            .verify(crate::integrity::signature::NAMESPACE, digest.as_bytes(), &sig)
            .is_ok()
}

/// `winner` withheld as `kind`, saying `message`.
fn refuse(winner: &Skill, kind: DiagnosticKind, message: String) -> Verdict {
    Err(Some(Diagnostic::new(
        Severity::Error,
        kind,
        Some(&winner.source),
        Some(&winner.path),
        message,
    )))
}

/// Reads the signature of the skill `name` through a confined read and
/// checks it over `digest` against `policy`.
pub async fn check_signature(catalog: &Catalog, name: &str, digest: &str, policy: &SignaturePolicy) -> SignatureStatus {
    match catalog.read_file(name, SIGNATURE_FILE).await {
        Ok(bytes) => match policy.allowed.verify(&bytes, digest, now()) {
            Ok(signer) => SignatureStatus::Signed(signer),
            Err(refused) => SignatureStatus::Refused(refused),
        },
        Err(Error::Backend(e)) if e.kind() == StorageKind::NotFound => {
            if policy.required {
                SignatureStatus::Refused(Refused::Missing)
            } else {
                SignatureStatus::Unsigned
            }
        }
        Err(_) => SignatureStatus::Refused(Refused::Invalid),
    }
}

/// The sentence of a refused signature.
pub fn signature_message(refused: Refused) -> String {
    match refused {
        Refused::Missing => format!("its source requires a signature and it has no {SIGNATURE_FILE}; it is not served"),
        Refused::Invalid => {
            "its signature is not a valid skillstore SSH signature over its digest; it is not served".into()
        }
        Refused::Changed => "its content changed since it was signed (its signature, by an allowed key, is over other \
                             content: an edit, or another skill's signature); `skillstore sign` signs it again; it is not served"
            .into(),
        Refused::NotAllowed => "its signature is by a key its source does not allow; it is not served".into(),
        Refused::Expired => {
            "its signature is by a key outside the validity its source gives it (valid-after, valid-before); it is not served"
                .into()
        }
    }
}

/// What [`check_dir_files`] found: the verdict, and the SHA-256 (hex) of
/// every file of the skill as the check read it (its signature included),
/// by path. A front end that copies the skill elsewhere after the check
/// writes a file only when the bytes it writes have that hash, so what
/// lands is exactly what was checked.
#[derive(Debug, Clone)]
pub struct CheckedDir {
    /// The signature check's verdict.
    pub status: SignatureStatus,
    /// Each file read by the check and the SHA-256 of the bytes it read
    /// (empty when the skill could not be digested).
    pub files: Vec<(VPath, String)>,
}

/// The files of the skills of a tree a signature check passed, each with
/// the hash of the bytes the check read: what a front end copying the
/// tree after the check (`publish`) holds each write to.
#[derive(Debug, Clone, Default)]
pub struct CheckedFiles {
    dirs: std::collections::HashSet<VPath>,
    files: HashMap<VPath, String>,
}

/// What the copy of one file must hold to ([`CheckedFiles::expected`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected<'a> {
    /// The SHA-256 (hex) of the bytes the check read: write only bytes
    /// with this hash.
    Hash(&'a str),
    /// The file lies in a checked skill but the check did not read it
    /// (added since): it is not part of the skill, so it is not copied.
    NotChecked,
}

impl CheckedFiles {
    /// No skill checked.
    pub fn new() -> Self {
        CheckedFiles::default()
    }

    /// Records the skill whose directory is `dir` and the files its check
    /// read.
    pub fn add(&mut self, dir: VPath, checked: CheckedDir) {
        self.files.extend(checked.files);
        self.dirs.insert(dir);
    }

    /// What a copy of `path` must hold to, when it lies in a checked
    /// skill; `None` for a path of no checked skill.
    pub fn expected(&self, path: &VPath) -> Option<Expected<'_>> {
        if let Some(hash) = self.files.get(path) {
            return Some(Expected::Hash(hash));
        }
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| !d.is_root()) {
            if self.dirs.contains(&d) {
                return Some(Expected::NotChecked);
            }
            dir = d.parent();
        }
        None
    }

    /// True when `data`, read to be copied to `path`, may be: `path` lies
    /// in no checked skill, or `data` is what the check read.
    pub fn admits(&self, path: &VPath, data: &[u8]) -> bool {
        match self.expected(path) {
            None => true,
            Some(Expected::Hash(hash)) => crate::integrity::sha256_hex(data) == hash,
            Some(Expected::NotChecked) => false,
        }
    }
}

/// What the signature check of the skill whose directory is `dir` on
/// `backend` finds against `policy`: its digest over the files a confined
/// read serves ([`crate::skill_files`]) and its [`SIGNATURE_FILE`] read
/// the same way, as a source with that policy would check it once the
/// skill is there. Used before a local tree is published. A skill whose
/// digest cannot be computed is [`Refused::Invalid`].
pub async fn check_dir(
    backend: &dyn skillstore_backends::SkillBackend,
    dir: &VPath,
    policy: &SignaturePolicy,
) -> SignatureStatus {
    check_dir_files(backend, dir, policy).await.status
}

/// [`check_dir`], with the hash of every file as the check read it.
pub async fn check_dir_files(
    backend: &dyn skillstore_backends::SkillBackend,
    dir: &VPath,
    policy: &SignaturePolicy,
) -> CheckedDir {
    let refused = |why| CheckedDir {
        status: SignatureStatus::Refused(why),
        files: Vec::new(),
    };
    let listed = match crate::skill_files::list(
        backend,
        dir,
        skillstore_backends::DEFAULT_READ_LIMIT,
        crate::skill_files::FileLimits::default(),
    )
    .await
    {
        Ok(listed) => listed,
        Err(_) => return refused(Refused::Invalid),
    };
    let digests = crate::integrity::FileDigests::new();
    let Ok(digest) = digests.skill_digest(backend, &listed).await else {
        return refused(Refused::Invalid);
    };
    let Ok(path) = dir.join(SIGNATURE_FILE) else {
        return refused(Refused::Invalid);
    };
    let mut files: Vec<(VPath, String)> = digest
        .files
        .iter()
        .filter(|f| f.relative != SIGNATURE_FILE)
        .filter_map(|f| Some((dir.join(&f.relative).ok()?, f.sha256.clone())))
        .collect();
    let status = match backend.read(&path, listed.read_options()).await {
        Ok(blob) => {
            // The signature as verified, not as the digest's read saw it.
            files.push((path, crate::integrity::sha256_hex(&blob.data)));
            match policy.allowed.verify(&blob.data, &digest.digest, now()) {
                Ok(signer) => SignatureStatus::Signed(signer),
                Err(refused) => SignatureStatus::Refused(refused),
            }
        }
        Err(e) if e.kind() == StorageKind::NotFound && policy.required => SignatureStatus::Refused(Refused::Missing),
        Err(e) if e.kind() == StorageKind::NotFound => SignatureStatus::Unsigned,
        Err(_) => SignatureStatus::Refused(Refused::Invalid),
    };
    CheckedDir { status, files }
}

/// What the signature check of `archive` finds against `policy`, before
/// it is installed into a source with that policy: its
/// [`SIGNATURE_FILE`] over the archive's digest.
pub fn check_archive(archive: &crate::SkillArchive, policy: &SignaturePolicy) -> SignatureStatus {
    match archive.file(SIGNATURE_FILE) {
        Some(file) => match policy.allowed.verify(&file.data, &archive.digest(), now()) {
            Ok(signer) => SignatureStatus::Signed(signer),
            Err(refused) => SignatureStatus::Refused(refused),
        },
        None if policy.required => SignatureStatus::Refused(Refused::Missing),
        None => SignatureStatus::Unsigned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(path: &str) -> VPath {
        VPath::new(path).expect("a valid path")
    }

    #[test]
    fn a_copy_is_held_to_the_bytes_the_check_read() {
        let mut checked = CheckedFiles::new();
        let status = SignatureStatus::Unsigned;
        let hash = crate::integrity::sha256_hex(b"echo run\n");
        checked.add(
            v("/l/a"),
            CheckedDir {
                status,
                files: vec![(v("/l/a/scripts/run.sh"), hash.clone())],
            },
        );
        assert_eq!(checked.expected(&v("/l/a/scripts/run.sh")), Some(Expected::Hash(&hash)));
        assert!(checked.admits(&v("/l/a/scripts/run.sh"), b"echo run\n"));
        assert!(!checked.admits(&v("/l/a/scripts/run.sh"), b"echo EVIL\n"));
        assert_eq!(checked.expected(&v("/l/a/x/added.sh")), Some(Expected::NotChecked));
        assert!(!checked.admits(&v("/l/a/x/added.sh"), b""));
        assert_eq!(checked.expected(&v("/l/b/SKILL.md")), None);
        assert!(checked.admits(&v("/l/b/SKILL.md"), b"anything"));
    }
}

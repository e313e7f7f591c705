//! What a namespace checks before it serves a skill: its digest against a
//! lock, and its signature against its source's `allowed_signers`. The
//! checks run inside every load and refresh of a catalog
//! ([`crate::Catalog::load`], [`crate::Catalog::refresh`],
//! [`crate::Catalog::reload_skill`]), so every front end (command, server,
//! sync, mount, Python) serves only what passed them.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use skillstore_backends::{ErrorKind as StorageKind, VPath, Version};

use crate::catalog::Catalog;
use crate::diagnostic::{Diagnostic, DiagnosticKind, Severity};
use crate::error::Error;
use crate::integrity::lock::{Lock, LockedSkill};
use crate::integrity::signature::{AllowedSigners, Refused, SIGNATURE_FILE, Signer, now};

/// How many skills are checked at once.
const PARALLEL: usize = 16;

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

/// What the checks found for one winner that passed them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Checked {
    /// Its digest, when a check computed one.
    pub digest: Option<String>,
    /// Who signed it, when its signature verified.
    pub signer: Option<String>,
    /// Each file the digest was computed from and the version it was read
    /// at, when a check computed the digest: reads are held to these.
    pub files: Option<Vec<(VPath, Version)>>,
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

    /// `catalog` without the winners that fail a check, each replaced by an
    /// error diagnostic saying why (`not_locked`, `lock_mismatch` for
    /// another digest or another source than the lock's,
    /// `signature_missing`, `signature_invalid`, `signer_not_allowed`,
    /// `signer_expired`); those that pass carry their digest and signer. A
    /// disabled winner the lock does not hold is left out with no
    /// diagnostic: the lock pins what is served, and it is not served.
    pub(crate) async fn enforce(&self, catalog: Catalog) -> Catalog {
        let locked = self.lock.as_ref().and_then(|l| l.skills_by_name());
        let skills: Vec<(String, String, VPath, bool, Version)> = catalog
            .skills()
            .iter()
            .map(|s| {
                (
                    s.name().to_owned(),
                    s.source.clone(),
                    s.path.clone(),
                    s.enabled,
                    s.version.clone(),
                )
            })
            .collect();
        let (catalog_ref, locked_ref, this) = (&catalog, &locked, self);
        let checks = futures::stream::iter(skills)
            .map(move |(name, source, path, enabled, parsed)| async move {
                let refuse = |kind, message: String| {
                    let d = Diagnostic::new(Severity::Error, kind, Some(&source), Some(&path), message);
                    Err((name.clone(), Some(d)))
                };
                let policy = this.signature_policy(&source);
                let entry: Option<&LockedSkill> = match locked_ref {
                    Some(locked) => match locked.get(name.as_str()) {
                        Some(entry) => Some(entry),
                        // A disabled skill is not served, so the lock
                        // need not hold it (`lock` writes enabled winners
                        // only): it is left out without a diagnostic.
                        None if !enabled => return Err((name.clone(), None)),
                        None => {
                            return refuse(
                                DiagnosticKind::NotLocked,
                                "not in the lock file, so it is not served; run `skillstore lock` to accept it".into(),
                            );
                        }
                    },
                    None => None,
                };
                if let Some(entry) = entry
                    && entry.source != source
                {
                    return refuse(
                        DiagnosticKind::LockMismatch,
                        format!(
                            "it wins in the source `{source}`, the lock says `{}`; it is not served",
                            entry.source
                        ),
                    );
                }
                if entry.is_none() && policy.is_none() {
                    return Ok((name.clone(), Checked::default()));
                }
                let dir = path.parent().expect("a SKILL.md has a parent");
                let (digest, files) = match catalog_ref.skill_digest(&name).await {
                    Ok(found) => {
                        let files = found
                            .files
                            .into_iter()
                            .filter_map(|f| Some((dir.join(&f.relative).ok()?, f.version?)))
                            .collect::<Vec<_>>();
                        (found.digest, files)
                    }
                    Err(e) => {
                        let kind = if entry.is_some() {
                            DiagnosticKind::LockMismatch
                        } else {
                            DiagnosticKind::Signature(Refused::Invalid)
                        };
                        return refuse(kind, format!("its digest cannot be computed ({e}); it is not served"));
                    }
                };
                // What the catalog shows (name, description, the rest of the
                // frontmatter) was parsed from one version of SKILL.md; the
                // digest must be of that same version, or a SKILL.md swapped
                // between the two reads would show text no check saw.
                if files.iter().any(|(file, version)| *file == path && *version != parsed) {
                    let kind = if entry.is_some() {
                        DiagnosticKind::LockMismatch
                    } else {
                        DiagnosticKind::Signature(Refused::Invalid)
                    };
                    return refuse(
                        kind,
                        "its SKILL.md changed while it was checked; it is not served until a load sees one version"
                            .into(),
                    );
                }
                if let Some(entry) = entry
                    && entry.digest != digest
                {
                    return refuse(
                        DiagnosticKind::LockMismatch,
                        format!(
                            "its digest is {digest}, the lock says {}; it is not served",
                            entry.digest
                        ),
                    );
                }
                let signer = match policy {
                    None => None,
                    Some(policy) => match check_signature(catalog_ref, &name, &digest, policy).await {
                        SignatureStatus::Signed(signer) => Some(signer.principal),
                        SignatureStatus::Unsigned | SignatureStatus::NotChecked => None,
                        SignatureStatus::Refused(refused) => {
                            return refuse(DiagnosticKind::Signature(refused), signature_message(refused));
                        }
                    },
                };
                let checked = Checked {
                    digest: Some(digest),
                    signer,
                    files: Some(files),
                };
                Ok((name.clone(), checked))
            })
            .buffered(PARALLEL)
            .collect::<Vec<std::result::Result<(String, Checked), (String, Option<Diagnostic>)>>>()
            .await;
        let mut passed = HashMap::new();
        let mut refused = Vec::new();
        for check in checks {
            match check {
                Ok((name, found)) => {
                    passed.insert(name, found);
                }
                Err(no) => refused.push(no),
            }
        }
        let mut catalog = catalog;
        catalog.set_checked(passed);
        if refused.is_empty() {
            catalog
        } else {
            catalog.withhold(refused)
        }
    }
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
        Refused::NotAllowed => "its signature is by a key its source does not allow; it is not served".into(),
        Refused::Expired => {
            "its signature is by a key outside the validity its source gives it (valid-after, valid-before); it is not served"
                .into()
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
    let listed = match crate::skill_files::list(
        backend,
        dir,
        skillstore_backends::DEFAULT_READ_LIMIT,
        crate::skill_files::FileLimits::default(),
    )
    .await
    {
        Ok(listed) => listed,
        Err(_) => return SignatureStatus::Refused(Refused::Invalid),
    };
    let digests = crate::integrity::FileDigests::new();
    let Ok(digest) = digests.skill_digest(backend, &listed).await else {
        return SignatureStatus::Refused(Refused::Invalid);
    };
    let Ok(path) = dir.join(SIGNATURE_FILE) else {
        return SignatureStatus::Refused(Refused::Invalid);
    };
    match backend.read(&path, listed.read_options()).await {
        Ok(blob) => match policy.allowed.verify(&blob.data, &digest.digest, now()) {
            Ok(signer) => SignatureStatus::Signed(signer),
            Err(refused) => SignatureStatus::Refused(refused),
        },
        Err(e) if e.kind() == StorageKind::NotFound && policy.required => SignatureStatus::Refused(Refused::Missing),
        Err(e) if e.kind() == StorageKind::NotFound => SignatureStatus::Unsigned,
        Err(_) => SignatureStatus::Refused(Refused::Invalid),
    }
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

//! `verify`: per winner, its digest, how it stands against the lock, and
//! who signed it, without withholding anything.

use serde::Serialize;

use crate::integrity::policy::{SignatureStatus, check_signature, signature_message};
use crate::namespace::Namespace;

/// How a skill stands against the lock: one word in `verify`'s output
/// (`no_lock`, `matches`, `mismatch`, `not_locked`), what the lock holds
/// on a mismatch in fields of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStatus {
    /// No lock pins skills.
    NoLock,
    /// Its digest is the lock's.
    Matches,
    /// The lock pins another digest, or the skill to another source
    /// (`lock_mismatch`).
    Mismatch {
        /// The digest the lock holds.
        locked: String,
        /// The source the lock holds.
        locked_source: String,
    },
    /// The lock does not hold it (`not_locked`).
    NotLocked,
}

impl LockStatus {
    /// The status's word: `no_lock`, `matches`, `mismatch` or `not_locked`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LockStatus::NoLock => "no_lock",
            LockStatus::Matches => "matches",
            LockStatus::Mismatch { .. } => "mismatch",
            LockStatus::NotLocked => "not_locked",
        }
    }
}

impl Serialize for LockStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One winner, verified.
#[derive(Debug, Clone, Serialize)]
pub struct SkillReport {
    /// Its name.
    pub name: String,
    /// The source it won in.
    pub source: String,
    /// Its skill digest, when it could be computed.
    pub digest: Option<String>,
    /// Why it has no digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest_error: Option<String>,
    /// How it stands against the lock (always a string in JSON).
    pub lock: LockStatus,
    /// On a mismatch, the digest the lock holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_digest: Option<String>,
    /// On a mismatch, the source the lock holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_source: Option<String>,
    /// `not_checked`, `unsigned`, `signed`, or the refusal's kind.
    pub signature: String,
    /// The accepting principals, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// The signing key's fingerprint, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// A sentence when the skill would not be served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl SkillReport {
    /// True when the namespace's checks serve this skill.
    pub fn passes(&self) -> bool {
        self.problem.is_none()
    }
}

/// Every winner of `namespace`, loaded without its checks, reported
/// against them.
pub async fn verify(namespace: &Namespace) -> Vec<SkillReport> {
    let catalog = namespace.load_unchecked().await;
    let integrity = namespace.integrity().cloned().unwrap_or_default();
    let locked = integrity.lock.as_ref().and_then(|l| l.skills_by_name());
    let mut out = Vec::new();
    for skill in catalog.skills() {
        let name = skill.name();
        let (digest, digest_error) = match catalog.skill_digest(name).await {
            Ok(d) => (Some(d.digest), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let mut problem = digest_error.clone();
        let lock = match &locked {
            None => LockStatus::NoLock,
            Some(locked) => match locked.get(name) {
                // Disabled, so not served: the lock need not hold it.
                None if !skill.enabled => LockStatus::NotLocked,
                None => {
                    problem.get_or_insert_with(|| "not in the lock file".into());
                    LockStatus::NotLocked
                }
                Some(entry) if Some(&entry.digest) == digest.as_ref() && entry.source == skill.source => {
                    LockStatus::Matches
                }
                Some(entry) => {
                    problem.get_or_insert_with(|| {
                        if entry.source == skill.source {
                            format!("the lock says {}", entry.digest)
                        } else {
                            format!(
                                "it wins in the source `{}`, the lock says `{}`",
                                skill.source, entry.source
                            )
                        }
                    });
                    LockStatus::Mismatch {
                        locked: entry.digest.clone(),
                        locked_source: entry.source.clone(),
                    }
                }
            },
        };
        let status = match (integrity.signature_policy(&skill.source), &digest) {
            (None, _) | (_, None) => SignatureStatus::NotChecked,
            (Some(policy), Some(digest)) => check_signature(&catalog, name, digest, policy).await,
        };
        let (signature, signer, fingerprint) = match status {
            SignatureStatus::NotChecked => ("not_checked".to_owned(), None, None),
            SignatureStatus::Unsigned => ("unsigned".to_owned(), None, None),
            SignatureStatus::Signed(s) => ("signed".to_owned(), Some(s.principal), Some(s.fingerprint)),
            SignatureStatus::Refused(refused) => {
                problem.get_or_insert_with(|| signature_message(refused));
                (refused.as_str().to_owned(), None, None)
            }
        };
        let (locked_digest, locked_source) = match &lock {
            LockStatus::Mismatch { locked, locked_source } => (Some(locked.clone()), Some(locked_source.clone())),
            _ => (None, None),
        };
        out.push(SkillReport {
            name: name.to_owned(),
            source: skill.source.clone(),
            digest,
            digest_error,
            lock,
            locked_digest,
            locked_source,
            signature,
            signer,
            fingerprint,
            problem,
        });
    }
    out
}

//! The audit log: an append-only, hash-chained record of every change made
//! to a writable source, kept in the source's own storage.
//!
//! Each record is one immutable object, `SOURCE/.audit/NNNNNNNNNNNNNNNN.json`
//! (its sequence number in sixteen digits), holding who changed which
//! skill, how, when, the `sha256:` digest of every touched file before and
//! after, and `prev`: the digest of the previous record's stored bytes
//! ([`record`]). A record is written by a create-only put at the next
//! sequence number, so writers in several processes or replicas never
//! overwrite one another ([`log`]). [`verify`] walks the chain and names
//! the first record that is missing, unreadable, malformed or not the
//! record the next one was chained to.
//!
//! What the chain proves: a record removed, edited, reordered or inserted
//! anywhere but at the end is detected. What it cannot prove alone: that
//! the newest records were not cut off (or the last one rewritten); a
//! [`Checkpoint`] (the sequence number and hash of a record, kept
//! elsewhere) extends the proof up to that record.
//!
//! `.audit/` is a hidden directory at the source's root: it holds no
//! SKILL.md, so it is never listed as a skill, and the editor never takes a
//! name starting with `.` as a skill's.

pub mod log;
pub mod record;
pub mod verify;

pub use log::{Appended, AuditLog, Tail};
pub use record::{AuditRecord, FileDigest};
pub use verify::{Breach, BreachKind, Checkpoint, Verification};

/// The directory, inside a source, that holds the audit log.
pub const AUDIT_DIR: &str = ".audit";

/// A change to record, before it has a place in the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// When (RFC 3339, UTC).
    pub time: String,
    /// Who (cut to [`record::MAX_ACTOR_BYTES`]).
    pub actor: String,
    /// What: a snake_case action name.
    pub action: String,
    /// The skill's directory name.
    pub skill: String,
    /// The history entry a rollback restored.
    pub rollback_to: Option<u64>,
    /// The files touched, with their digests before and after.
    pub files: Vec<FileDigest>,
}

impl Entry {
    /// An entry made now by `actor`, who did `action` to `skill`.
    pub fn now(actor: &str, action: &str, skill: &str, files: Vec<FileDigest>) -> Self {
        Entry {
            time: crate::edit::history::now(),
            actor: record::bounded_actor(actor),
            action: action.to_owned(),
            skill: skill.to_owned(),
            rollback_to: None,
            files,
        }
    }
}

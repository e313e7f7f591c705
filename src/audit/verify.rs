//! Walking the chain: every record from 1 to the newest present, well
//! formed, and holding the hash of the one before it; the first that is
//! not is named with a stable kind.

use serde::Serialize;

use super::log::AuditLog;
use super::record::{AuditRecord, digest, is_digest, object_name};
use crate::error::{Error, Result};

/// Why a record breaks the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreachKind {
    /// No record holds this sequence number, though a later one exists
    /// (or a checkpoint names it): removed.
    Missing,
    /// The record is larger than the format allows; it was not read.
    TooLarge,
    /// The record is not JSON of the record's shape.
    Unparsable,
    /// The record breaks a rule of the format (format, version, digests,
    /// canonical bytes), or names another sequence number than its object.
    BadFormat,
    /// The next record does not hold this record's hash: this record was
    /// edited (or replaced), or the next one's `prev` was.
    HashMismatch,
    /// The record's hash is not the one a checkpoint holds.
    CheckpointMismatch,
}

impl BreachKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            BreachKind::Missing => "missing",
            BreachKind::TooLarge => "too_large",
            BreachKind::Unparsable => "unparsable",
            BreachKind::BadFormat => "bad_format",
            BreachKind::HashMismatch => "hash_mismatch",
            BreachKind::CheckpointMismatch => "checkpoint_mismatch",
        }
    }
}

/// The first record that breaks the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Breach {
    /// Its sequence number.
    pub seq: u64,
    /// Its object's name under `.audit/`.
    pub object: String,
    /// Why.
    pub kind: BreachKind,
    /// A sentence for a person.
    pub message: String,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record {} (.audit/{}) breaks the chain: {} ({})",
            self.seq,
            self.object,
            self.message,
            self.kind.as_str()
        )
    }
}

/// A record's place and hash, kept somewhere the log's writers cannot
/// reach: proof that the log reached `seq` with that record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// The record's sequence number.
    pub seq: u64,
    /// `sha256:HEX` of its stored bytes.
    pub hash: String,
}

impl std::str::FromStr for Checkpoint {
    type Err = Error;

    /// `SEQ:sha256:HEX`, as `audit --verify` prints the newest record.
    fn from_str(text: &str) -> Result<Self> {
        let refuse = || {
            Error::Usage(format!(
                "`{}` is not a checkpoint (SEQ:sha256:HEX)",
                text.escape_debug()
            ))
        };
        let (seq, hash) = text.split_once(':').ok_or_else(refuse)?;
        let seq: u64 = seq.parse().map_err(|_| refuse())?;
        if seq == 0 || !is_digest(hash) {
            return Err(refuse());
        }
        Ok(Checkpoint {
            seq,
            hash: hash.to_owned(),
        })
    }
}

impl std::fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

/// What a walk of the chain found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// How many records were checked and found sound.
    pub records: u64,
    /// The newest record, as a checkpoint to keep (when the chain holds and
    /// is not empty).
    pub tail: Option<Checkpoint>,
    /// The first record breaking the chain, if any.
    pub breach: Option<Breach>,
}

impl Verification {
    /// True when the chain holds.
    pub fn holds(&self) -> bool {
        self.breach.is_none()
    }
}

fn breach(seq: u64, kind: BreachKind, message: impl Into<String>) -> Breach {
    Breach {
        seq,
        object: object_name(seq),
        kind,
        message: message.into(),
    }
}

impl AuditLog {
    /// Walks the chain from record 1 to the newest present, reading one
    /// record at a time under the size bound and keeping only the last
    /// hash, and names the first record that breaks it. When `checkpoint`
    /// is given, the log must reach it and hold that record unchanged
    /// (a log cut short or whose newest records were rewritten fails
    /// there). An edit is named at the record edited: when the link from
    /// record `n` to `n + 1` breaks and the link from `n + 1` onwards holds,
    /// `n` changed; when both break, `n + 1` did (its `prev` was rewritten).
    /// Only a storage failure is an `Err`.
    pub async fn verify(&self, checkpoint: Option<&Checkpoint>) -> Result<Verification> {
        let seqs = self.seqs().await?;
        let newest = seqs.last().copied().unwrap_or(0);
        let mut present = seqs.into_iter().peekable();
        let mut previous: Option<String> = None;
        // `Some(n)`: the link from `n` to `n + 1` is broken; the next link
        // says which of the two changed.
        let mut pending: Option<u64> = None;
        let mut checked = 0;
        let unlinked = |n: u64| {
            breach(
                n,
                BreachKind::HashMismatch,
                format!(
                    "record {} does not hold this record's hash: one of the two was edited",
                    n + 1
                ),
            )
        };
        for seq in 1..=newest {
            let outcome = self.check_one(seq, present.next_if_eq(&seq).is_some()).await?;
            let (record, hash) = match outcome {
                Ok(found) => found,
                Err(found) => {
                    let first = pending.map_or(found, unlinked);
                    return Ok(self.broken(checked, first));
                }
            };
            let linked = record.prev == previous;
            if let Some(n) = pending {
                let first = if linked { unlinked(n) } else { unlinked(n + 1) };
                return Ok(self.broken(checked, first));
            }
            if !linked {
                if seq == 1 {
                    let first = breach(1, BreachKind::HashMismatch, "the first record names a previous one");
                    return Ok(self.broken(checked, first));
                }
                pending = Some(seq - 1);
            }
            if let Some(point) = checkpoint
                && point.seq == seq
                && point.hash != hash
            {
                let first = breach(
                    seq,
                    BreachKind::CheckpointMismatch,
                    "the record is not the one the checkpoint holds",
                );
                return Ok(self.broken(checked, first));
            }
            if pending.is_none() {
                checked += 1;
            }
            previous = Some(hash);
        }
        if let Some(n) = pending {
            return Ok(self.broken(checked, unlinked(n)));
        }
        if let Some(point) = checkpoint
            && point.seq > newest
        {
            let first = breach(
                point.seq,
                BreachKind::Missing,
                format!("the log ends at record {newest}, before the checkpoint: its newest records were removed"),
            );
            return Ok(self.broken(checked, first));
        }
        Ok(Verification {
            records: checked,
            tail: previous.map(|hash| Checkpoint { seq: newest, hash }),
            breach: None,
        })
    }

    fn broken(&self, checked: u64, first: Breach) -> Verification {
        Verification {
            records: checked.min(first.seq.saturating_sub(1)),
            tail: None,
            breach: Some(first),
        }
    }

    /// Reads and checks record `seq` on its own: present, within the
    /// bound, well formed and naming its own sequence number. Returns the
    /// record and the hash of its bytes.
    async fn check_one(&self, seq: u64, listed: bool) -> Result<Result<(AuditRecord, String), Breach>> {
        if !listed {
            return Ok(Err(breach(
                seq,
                BreachKind::Missing,
                "no record holds this number, though later ones exist",
            )));
        }
        let bytes = match self.read_bytes(seq).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Ok(Err(breach(
                    seq,
                    BreachKind::Missing,
                    "the record went away while it was read",
                )));
            }
            Err(Error::Backend(e)) if e.kind() == skillstore_backends::ErrorKind::TooLarge => {
                return Ok(Err(breach(
                    seq,
                    BreachKind::TooLarge,
                    "the record is larger than a record may be",
                )));
            }
            // Something planted in a record's place that no read takes (a
            // FIFO, a device, a link): the log was tampered with there.
            Err(Error::Backend(e))
                if matches!(
                    e.kind(),
                    skillstore_backends::ErrorKind::NotRegularFile
                        | skillstore_backends::ErrorKind::IsADirectory
                        | skillstore_backends::ErrorKind::SymlinkRefused
                        | skillstore_backends::ErrorKind::SymlinkEscape
                ) =>
            {
                return Ok(Err(breach(
                    seq,
                    BreachKind::BadFormat,
                    format!("the record is not a file a read takes ({})", e.kind().as_str()),
                )));
            }
            Err(e) => return Err(e),
        };
        let record = match AuditRecord::parse(&bytes) {
            Ok(record) => record,
            Err(("unparsable", why)) => return Ok(Err(breach(seq, BreachKind::Unparsable, why))),
            Err((_, why)) => return Ok(Err(breach(seq, BreachKind::BadFormat, why))),
        };
        if record.seq != seq {
            let why = format!("the record says it is record {}", record.seq);
            return Ok(Err(breach(seq, BreachKind::BadFormat, why)));
        }
        Ok(Ok((record, digest(&bytes))))
    }
}

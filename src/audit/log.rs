//! The log's storage: one immutable object per record under `.audit/`,
//! its tail found by listing, appended by create-only puts.

use std::sync::Arc;

use bytes::Bytes;
use skillstore_backends::{EntryKind, ErrorKind, PutMode, ReadOptions, SkillBackend, VPath, Version};

use super::record::{AuditRecord, FORMAT, FORMAT_VERSION, MAX_RECORD_BYTES, MAX_SEQ, digest, object_name, seq_of};
use super::{AUDIT_DIR, Entry};
use crate::error::{Error, Result};

/// How many times an append finds the tail again after losing a race.
const ATTEMPTS: u32 = 64;

/// The newest record of a log, as an append chains to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// Its sequence number (0: the log is empty).
    pub seq: u64,
    /// `sha256:HEX` of its stored bytes (`None`: the log is empty).
    pub hash: Option<String>,
}

/// A record as appended, with the version its object was written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The record.
    pub record: AuditRecord,
    /// Its object's version.
    pub version: Version,
}

/// The audit log of one source: the records under `SOURCE/.audit/` in
/// the backend the source is stored in.
#[derive(Debug, Clone)]
pub struct AuditLog {
    backend: Arc<dyn SkillBackend>,
    dir: VPath,
}

impl AuditLog {
    /// The log of the source at `source` (a directory of `backend`).
    pub fn new(backend: Arc<dyn SkillBackend>, source: &VPath) -> Result<Self> {
        Ok(AuditLog {
            backend,
            dir: source.join(AUDIT_DIR)?,
        })
    }

    /// The directory holding the records.
    pub fn dir(&self) -> &VPath {
        &self.dir
    }

    /// The path of record `seq`.
    pub fn path_of(&self, seq: u64) -> Result<VPath> {
        Ok(self.dir.join(&object_name(seq))?)
    }

    /// The sequence numbers of the records stored, in ascending order
    /// (none when the log does not exist). Names that are not a record's
    /// are left out.
    pub async fn seqs(&self) -> Result<Vec<u64>> {
        let entries = match self.backend.list(&self.dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut seqs: Vec<u64> = entries
            .iter()
            .filter(|e| e.kind != EntryKind::Dir)
            .filter_map(|e| seq_of(&e.name))
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    /// The stored bytes of record `seq`, read under [`MAX_RECORD_BYTES`];
    /// `None` when there is no such record.
    pub async fn read_bytes(&self, seq: u64) -> Result<Option<Bytes>> {
        match self
            .backend
            .read(&self.path_of(seq)?, ReadOptions::with_limit(MAX_RECORD_BYTES))
            .await
        {
            Ok(blob) => Ok(Some(blob.data)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The newest record: the highest sequence number stored and the hash
    /// of its bytes. Fails when that record cannot be read (too large,
    /// storage failure): nothing can be chained to it.
    pub async fn tail(&self) -> Result<Tail> {
        let Some(&seq) = self.seqs().await?.last() else {
            return Ok(Tail { seq: 0, hash: None });
        };
        match self.read_bytes(seq).await {
            Ok(Some(bytes)) => Ok(Tail {
                seq,
                hash: Some(digest(&bytes)),
            }),
            Ok(None) => Err(Error::Audit(format!(
                "record {seq} went away while the log's tail was read"
            ))),
            Err(e) => Err(Error::Audit(format!(
                "record {seq}, the log's tail, cannot be read: {e}"
            ))),
        }
    }

    /// The records stored, oldest first, from the first whose time is at or
    /// after `since` (a key from [`super::record::since_key`]; `None`: all),
    /// each read under the size bound. A record that cannot be read or
    /// parsed fails the whole read, naming it: [`AuditLog::verify`] says
    /// more.
    pub async fn records(&self, since: Option<&str>) -> Result<Vec<AuditRecord>> {
        let mut records = Vec::new();
        for seq in self.seqs().await? {
            let Some(bytes) = self.read_bytes(seq).await? else {
                continue;
            };
            let record = AuditRecord::parse(&bytes)
                .map_err(|(kind, why)| Error::Audit(format!("record {seq} cannot be shown: {why} ({kind})")))?;
            if since.is_none_or(|since| record.time.as_str() >= since) {
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Checks that the storage can hold the log (create-only puts) and
    /// that `entry`'s record fits in [`MAX_RECORD_BYTES`], and returns the
    /// tail to chain to: what a writer asks before it writes anything.
    pub async fn prepare(&self, entry: &Entry) -> Result<Tail> {
        let capabilities = self.backend.capabilities_at(&self.dir);
        // A read-only backend refuses the change itself, with its own kind.
        if capabilities.write && !capabilities.create_only {
            return Err(Error::Audit(
                "the storage cannot create an object only where none exists, which the audit log needs".into(),
            ));
        }
        let estimate = entry.record(MAX_SEQ, Some(digest(b""))).canonical().len() as u64;
        if estimate > MAX_RECORD_BYTES {
            return Err(Error::Audit(format!(
                "the change's audit record would be {estimate} bytes, more than {MAX_RECORD_BYTES}"
            )));
        }
        self.tail().await
    }

    /// Appends `entry` as the record after `tail` (from
    /// [`AuditLog::prepare`], or `None` to find it now) and returns it as
    /// stored. Each record is written by a create-only put at the next
    /// sequence number: of two writers racing for one number one wins, and
    /// the other finds the tail again and retries, so no record is lost or
    /// overwritten.
    pub async fn append(&self, entry: &Entry, tail: Option<Tail>) -> Result<Appended> {
        let mut tail = match tail {
            Some(tail) => tail,
            None => self.tail().await?,
        };
        for attempt in 0..ATTEMPTS {
            let seq = tail.seq + 1;
            if seq > MAX_SEQ {
                return Err(Error::Audit("the audit log is full".into()));
            }
            let record = entry.record(seq, tail.hash.clone());
            let bytes = Bytes::from(record.canonical());
            match self.backend.put(&self.path_of(seq)?, bytes, PutMode::Create).await {
                Ok(version) => return Ok(Appended { record, version }),
                Err(e) if matches!(e.kind(), ErrorKind::AlreadyExists | ErrorKind::VersionConflict) => {
                    crate::edit::history::backoff(attempt).await;
                    tail = self.tail().await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Audit(format!(
            "other writers kept taking the next record for {ATTEMPTS} attempts"
        )))
    }

    /// Removes `appended`, the record this writer just wrote, because the
    /// change it records was undone: only while it is still the newest
    /// record (no other record has been chained to it) and unchanged.
    /// Returns whether it was removed; a record left in place records a
    /// change that did not land, and says so nowhere else.
    pub async fn withdraw(&self, appended: &Appended) -> Result<bool> {
        let seq = appended.record.seq;
        match self.backend.stat(&self.path_of(seq + 1)?).await {
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        self.backend
            .delete_if_version(&self.path_of(seq)?, &appended.version)
            .await?;
        Ok(true)
    }
}

impl Entry {
    /// This entry as record `seq`, chained to `prev`.
    pub(super) fn record(&self, seq: u64, prev: Option<String>) -> AuditRecord {
        AuditRecord {
            format: FORMAT.to_owned(),
            version: FORMAT_VERSION,
            seq,
            time: self.time.clone(),
            actor: self.actor.clone(),
            action: self.action.clone(),
            skill: self.skill.clone(),
            rollback_to: self.rollback_to,
            files: self.files.clone(),
            prev,
        }
    }
}

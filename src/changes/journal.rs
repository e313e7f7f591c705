//! The change journal: `.skillstore/changes/head.json` at the root of a
//! store (a directory, a memory file, an S3 bucket), moved forward by
//! conditional puts.
//!
//! The head holds a generation counter, an epoch (a random name given when
//! the head is made, so a head removed and made again is told apart) and
//! the newest [`MAX_ENTRIES`] entries, each naming the generation it made
//! and the directory a write changed, as a path from the store's root. A
//! writer reads the head and its version, adds one entry and puts it back
//! only over that version (`If-Match` on S3, the version check of the
//! filesystem and memory backends); of concurrent writers one wins and the
//! others read again and retry, so no entry is lost. A reader learns
//! everything with one read of the head; one that fell more than
//! [`MAX_ENTRIES`] generations behind lists everything again.
//!
//! The head is untrusted input: it is read under [`MAX_HEAD_BYTES`], and a
//! head that does not follow every rule of [`parse`] is refused whole.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use skillstore_backends::{ErrorKind, PutMode, ReadOptions, SkillBackend, VPath, Version};

/// The head's path from the store's root.
pub const HEAD_FILE: &str = ".skillstore/changes/head.json";
/// The `format` every head names.
pub const HEAD_FORMAT: &str = "skillstore-changes";
/// The head's format version.
pub const HEAD_VERSION: u32 = 1;
/// The highest generation a head may hold (2^53, the largest integer every
/// JSON reader keeps exact).
pub const MAX_GENERATION: u64 = 1 << 53;

/// The most entries a head keeps (the oldest are dropped first).
pub const MAX_ENTRIES: usize = 256;
/// The longest path an entry may name, in bytes.
pub const MAX_ENTRY_PATH: usize = 512;
/// The largest head read, in bytes: [`MAX_ENTRIES`] entries of
/// [`MAX_ENTRY_PATH`] bytes fit with room to spare.
pub const MAX_HEAD_BYTES: u64 = 256 * 1024;
/// How many times a writer reads the head again after losing a race.
const ATTEMPTS: u32 = 64;

/// The head: what one read of the journal tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    /// Always [`HEAD_FORMAT`].
    pub format: String,
    /// Always [`HEAD_VERSION`].
    pub version: u32,
    /// A name given when the head was made: a different epoch is another
    /// journal, whose generations say nothing about the old one's.
    pub epoch: String,
    /// The number of entries ever added under this epoch.
    pub generation: u64,
    /// The newest entries, oldest first, generations consecutive and the
    /// last one `generation`.
    pub entries: Vec<Entry>,
}

/// One write, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The generation this entry made.
    pub generation: u64,
    /// The directory written (a source's), from the store's root.
    pub path: String,
    /// When, in seconds since the Unix epoch (for people; never compared).
    #[serde(default)]
    pub time: u64,
}

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The head does not follow the format; it is not used.
    #[error("the change journal's head is refused: {0}")]
    Refused(String),
    /// The head is larger than [`MAX_HEAD_BYTES`].
    #[error("the change journal's head is larger than {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    /// The storage failed.
    #[error("the change journal could not be used: {0}")]
    Storage(#[from] skillstore_backends::Error),
    /// Other writers kept winning.
    #[error("the change journal stayed busy for {ATTEMPTS} attempts")]
    Busy,
    /// The store did not answer in the time the caller allowed.
    #[error("the change journal did not answer in time")]
    Slow,
}

impl JournalError {
    /// A stable snake_case name of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            JournalError::Refused(_) => "journal_refused",
            JournalError::TooLarge => "journal_too_large",
            JournalError::Storage(_) => "journal_unavailable",
            JournalError::Busy => "journal_busy",
            JournalError::Slow => "journal_slow",
        }
    }
}

/// One store's journal: the backend rooted at the store, and a name for
/// it that is the same for every reader of that store (what several
/// tenants' followers are shared by).
#[derive(Debug, Clone)]
pub struct Journal {
    backend: Arc<dyn SkillBackend>,
    store: Arc<str>,
}

/// A head as read: parsed, with the version it was read at.
#[derive(Debug, Clone)]
pub struct ReadHead {
    /// The head.
    pub head: Head,
    /// Its version in the store.
    pub version: Version,
}

impl Journal {
    /// The journal of the store `backend` is rooted at, named `store`.
    pub fn new(backend: Arc<dyn SkillBackend>, store: impl Into<Arc<str>>) -> Self {
        Journal {
            backend,
            store: store.into(),
        }
    }

    /// The store's name (a location with no credentials in it).
    pub fn store(&self) -> &str {
        &self.store
    }

    fn head_path() -> VPath {
        VPath::root().join(HEAD_FILE).expect("the head's path is valid")
    }

    /// The head and its version; `None` when the store has no journal
    /// yet. Reads at most [`MAX_HEAD_BYTES`] and refuses a head that breaks
    /// a rule of [`parse`].
    pub async fn read(&self) -> Result<Option<ReadHead>, JournalError> {
        Ok(match self.read_raw().await? {
            None => None,
            Some((bytes, version)) => Some(ReadHead {
                head: parse(&bytes)?,
                version,
            }),
        })
    }

    /// Whether the store keeps a journal (its head exists), without
    /// reading the head.
    pub async fn exists(&self) -> Result<bool, JournalError> {
        match self.backend.stat(&Self::head_path()).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn read_raw(&self) -> Result<Option<(Bytes, Version)>, JournalError> {
        match self
            .backend
            .read(&Self::head_path(), ReadOptions::with_limit(MAX_HEAD_BYTES))
            .await
        {
            Ok(blob) => Ok(Some((blob.data, blob.version))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == ErrorKind::TooLarge => Err(JournalError::TooLarge),
            Err(e) => Err(e.into()),
        }
    }

    /// Adds an entry naming `path` (a directory from the store's root) and
    /// returns the generation it made. Every put is conditional on the
    /// version read, so concurrent writers each add their entry or try
    /// again. A head that cannot be used (refused, too large) is replaced,
    /// conditionally, by a new one with a new epoch, which tells every
    /// reader to list everything again.
    pub async fn record(&self, path: &VPath) -> Result<u64, JournalError> {
        let text = path.as_str();
        if text.len() > MAX_ENTRY_PATH {
            return Err(JournalError::Refused(format!(
                "an entry's path is longer than {MAX_ENTRY_PATH} bytes"
            )));
        }
        for attempt in 0..ATTEMPTS {
            let (head, mode) = match self.read_raw().await {
                Ok(None) => (fresh(), PutMode::Create),
                Ok(Some((bytes, version))) => match parse(&bytes) {
                    Ok(head) => (head, PutMode::IfVersion(version)),
                    Err(e) => {
                        tracing::warn!(store = %self.store, error = %e, "the change journal's head was refused; starting a new one");
                        (fresh(), PutMode::IfVersion(version))
                    }
                },
                Err(JournalError::TooLarge) => {
                    let Some(version) = self.backend.stat(&Self::head_path()).await?.version else {
                        return Err(JournalError::Refused("the store gives the head no version".into()));
                    };
                    tracing::warn!(store = %self.store, "the change journal's head is too large; starting a new one");
                    (fresh(), PutMode::IfVersion(version))
                }
                Err(e) => return Err(e),
            };
            let head = advance(head, text);
            let bytes = serde_json::to_vec(&head).expect("a head serializes");
            match self.backend.put(&Self::head_path(), Bytes::from(bytes), mode).await {
                Ok(_) => return Ok(head.generation),
                Err(e) if matches!(e.kind(), ErrorKind::VersionConflict | ErrorKind::AlreadyExists) => {
                    crate::edit::history::backoff(attempt).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(JournalError::Busy)
    }
}

/// A head with no entries and a new epoch.
fn fresh() -> Head {
    Head {
        format: HEAD_FORMAT.to_owned(),
        version: HEAD_VERSION,
        epoch: new_epoch(),
        generation: 0,
        entries: Vec::new(),
    }
}

/// `head` with one more entry naming `path`, the oldest dropped past
/// [`MAX_ENTRIES`].
fn advance(mut head: Head, path: &str) -> Head {
    head.generation += 1;
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    head.entries.push(Entry {
        generation: head.generation,
        path: path.to_owned(),
        time,
    });
    let excess = head.entries.len().saturating_sub(MAX_ENTRIES);
    head.entries.drain(..excess);
    head
}

/// Sixteen hex digits no other head is likely to hold.
fn new_epoch() -> String {
    use std::hash::{BuildHasher, RandomState};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let value = RandomState::new().hash_one((nanos, std::process::id()));
    format!("{value:016x}")
}

/// Parses a head and checks every rule: the format and version; an epoch
/// of 1 to 64 ASCII letters and digits; at most [`MAX_ENTRIES`] entries
/// whose generations are consecutive and end at the head's generation;
/// each entry's path a valid virtual path of at most [`MAX_ENTRY_PATH`]
/// bytes, not inside `.skillstore/`.
pub fn parse(bytes: &[u8]) -> Result<Head, JournalError> {
    if bytes.len() as u64 > MAX_HEAD_BYTES {
        return Err(JournalError::TooLarge);
    }
    let head: Head = serde_json::from_slice(bytes).map_err(|e| JournalError::Refused(format!("not a head: {e}")))?;
    let refuse = |why: &str| Err(JournalError::Refused(why.to_owned()));
    if head.format != HEAD_FORMAT || head.version != HEAD_VERSION {
        return refuse("another format or version");
    }
    if head.epoch.is_empty() || head.epoch.len() > 64 || !head.epoch.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return refuse("the epoch is not 1 to 64 letters and digits");
    }
    if head.entries.len() > MAX_ENTRIES {
        return refuse("more entries than a head keeps");
    }
    // Far above what writes reach, and far below where counting overflows.
    if head.generation > MAX_GENERATION {
        return refuse("the generation is out of range");
    }
    let first = head.generation.checked_sub(head.entries.len() as u64);
    let consecutive = first.is_some_and(|first| {
        head.entries
            .iter()
            .zip(first + 1..)
            .all(|(entry, expected)| entry.generation == expected)
    });
    if !consecutive {
        return refuse("the entries' generations are not consecutive up to the head's");
    }
    for entry in &head.entries {
        let valid = entry.path.len() <= MAX_ENTRY_PATH
            && VPath::new(&entry.path).is_ok()
            && !entry.path.split('/').any(|s| s == crate::content::RESERVED_DIR);
        if !valid {
            return refuse("an entry names a path that is not a source's directory");
        }
    }
    Ok(head)
}

/// What a write through the editor records: the journal, and the path of
/// the source it writes, from the store's root.
#[derive(Debug, Clone)]
pub struct JournalWriter {
    /// The store's journal.
    pub journal: Journal,
    /// The written source's directory, from the store's root.
    pub path: VPath,
}

impl JournalWriter {
    /// Records a write to the source. A failure is logged and not
    /// returned: the write itself landed, and readers' fallback poll finds
    /// it.
    pub async fn record(&self) {
        if let Err(e) = self.journal.record(&self.path).await {
            tracing::warn!(store = %self.journal.store(), source = %self.path, error = %e, "a write could not be recorded in the change journal; followers will find it at their fallback poll");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_json(generation: u64, entries: &[(u64, &str)]) -> Vec<u8> {
        let entries: Vec<serde_json::Value> = entries
            .iter()
            .map(|(g, p)| serde_json::json!({"generation": g, "path": p, "time": 0}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "format": HEAD_FORMAT, "version": HEAD_VERSION, "epoch": "abc123",
            "generation": generation, "entries": entries,
        }))
        .unwrap()
    }

    #[test]
    fn a_well_formed_head_parses() {
        let head = parse(&head_json(7, &[(6, "/team"), (7, "/t/acme/team")])).unwrap();
        assert_eq!(head.generation, 7);
        assert_eq!(head.entries.len(), 2);
        parse(&head_json(0, &[])).unwrap();
    }

    #[test]
    fn a_head_breaking_a_rule_is_refused() {
        for bad in [
            head_json(7, &[(5, "/team"), (7, "/team")]),
            head_json(7, &[(6, "/team")]),
            head_json(1, &[(1, "/../etc")]),
            head_json(1, &[(1, "relative")]),
            head_json(1, &[(1, "/team/.skillstore/changes")]),
            head_json(1, &[(1, &format!("/{}", "a".repeat(MAX_ENTRY_PATH)))]),
            head_json(0, &[(1, "/team")]),
            b"{\"format\":\"skillstore-changes\"}".to_vec(),
            b"not json".to_vec(),
        ] {
            assert!(
                matches!(parse(&bad), Err(JournalError::Refused(_))),
                "{}",
                String::from_utf8_lossy(&bad)
            );
        }
        let many: Vec<(u64, &str)> = (1..=MAX_ENTRIES as u64 + 1).map(|g| (g, "/t")).collect();
        assert!(parse(&head_json(MAX_ENTRIES as u64 + 1, &many)).is_err());
        assert!(matches!(
            parse(&vec![b' '; MAX_HEAD_BYTES as usize + 1]),
            Err(JournalError::TooLarge)
        ));
    }

    #[test]
    fn a_generation_past_the_bound_is_refused_before_any_arithmetic() {
        for generation in [u64::MAX, MAX_GENERATION + 1] {
            assert!(parse(&head_json(generation, &[])).is_err(), "{generation}");
        }
        let at_bound = parse(&head_json(MAX_GENERATION, &[(MAX_GENERATION, "/team")])).unwrap();
        assert_eq!(advance(at_bound, "/team").generation, MAX_GENERATION + 1);
    }

    #[test]
    fn advancing_keeps_the_newest_entries() {
        let mut head = fresh();
        for _ in 0..MAX_ENTRIES + 10 {
            head = advance(head, "/team");
        }
        assert_eq!(head.entries.len(), MAX_ENTRIES);
        assert_eq!(head.generation, MAX_ENTRIES as u64 + 10);
        let bytes = serde_json::to_vec(&head).unwrap();
        assert!(bytes.len() as u64 <= MAX_HEAD_BYTES);
        parse(&bytes).unwrap();
    }
}

//! Per-skill change history: one JSON Lines file per skill under the
//! source's `.history/` directory, appended with conditional writes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use skillstore_backends::{ErrorKind, PutMode, ReadOptions, SkillBackend, VPath, Version};

use crate::error::{Error, Result};

/// The directory, inside a source, that holds the history files.
pub const HISTORY_DIR: &str = ".history";

/// The largest history file read or written, in bytes (64 MiB). A record
/// that would push the file past it makes room by dropping the oldest
/// records; a change whose record alone would not fit is refused before
/// anything is written.
pub const MAX_HISTORY_BYTES: u64 = 64 * 1024 * 1024;

/// Room left in a record's estimate for each file's versions, which are
/// known only once written.
const VERSION_ROOM: u64 = 512;

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A new skill.
    Create,
    /// SKILL.md replaced whole.
    Edit,
    /// A find-and-replace on one file.
    Patch,
    /// The whole skill removed.
    Delete,
    /// A supporting file written.
    WriteFile,
    /// A supporting file removed.
    RemoveFile,
    /// Files restored to an earlier entry.
    Rollback,
    /// A skill installed from an archive.
    Install,
    /// A skill copied from the winner of another source, to be changed in
    /// this one (`skill override`).
    Override,
}

impl Action {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Edit => "edit",
            Action::Patch => "patch",
            Action::Delete => "delete",
            Action::WriteFile => "write_file",
            Action::RemoveFile => "remove_file",
            Action::Rollback => "rollback",
            Action::Install => "install",
            Action::Override => "override",
        }
    }
}

/// File content as recorded: UTF-8 text as is, anything else in base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// The bytes were valid UTF-8.
    Text(String),
    /// The bytes, base64-encoded (standard alphabet, padded).
    Base64(String),
}

impl Content {
    /// Records `bytes` exactly.
    pub fn of(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Content::Text(text.to_owned()),
            Err(_) => Content::Base64(BASE64.encode(bytes)),
        }
    }

    /// The exact bytes recorded.
    pub fn to_bytes(&self) -> Result<Bytes> {
        match self {
            Content::Text(text) => Ok(Bytes::from(text.clone())),
            Content::Base64(encoded) => BASE64
                .decode(encoded)
                .map(Bytes::from)
                .map_err(|e| Error::History(format!("a recorded file is not valid base64: {e}"))),
        }
    }
}

/// How one file changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The path inside the skill's directory.
    pub path: String,
    /// The version before the change; `None` when the file did not exist.
    pub previous_version: Option<Version>,
    /// The version after the change; `None` when the file was removed.
    pub new_version: Option<Version>,
    /// The content before the change.
    pub previous: Option<Content>,
    /// The content after the change.
    pub new: Option<Content>,
}

/// One line of a skill's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The entry's number, from 1, in the order entries were appended.
    pub id: u64,
    /// When the change was made (RFC 3339, UTC).
    pub time: String,
    /// What was done.
    pub action: Action,
    /// Who did it, as the writer said.
    pub author: String,
    /// The entry a rollback restored, for [`Action::Rollback`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<u64>,
    /// Every file the change touched.
    pub files: Vec<FileChange>,
}

/// What a change did to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileEvent {
    /// The file did not exist before.
    Created,
    /// The file existed before and after.
    Modified,
    /// The file was removed.
    Removed,
}

/// One file of a [`HistoryEntry`]: its path and what happened to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// The path inside the skill's directory.
    pub path: String,
    /// What the change did to it.
    pub event: FileEvent,
}

/// A history record as it travels over the network: what changed, when,
/// by whom, and which files, but neither their contents nor their versions
/// (a filesystem version carries the size, an S3 ETag is often the MD5 of
/// the bytes: either would tell a reader something of a file a later change
/// removed, such as a secret taken out of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// The entry's number.
    pub id: u64,
    /// When the change was made (RFC 3339, UTC).
    pub time: String,
    /// What was done.
    pub action: Action,
    /// Who did it.
    pub author: String,
    /// The entry a rollback restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<u64>,
    /// Every file the change touched.
    pub files: Vec<FileEntry>,
}

/// A record read without its contents: serde skips them without keeping
/// them, so the entries of a 64 MiB history cost little beyond its bytes.
#[derive(Deserialize)]
struct RawEntry {
    id: u64,
    time: String,
    action: Action,
    author: String,
    #[serde(default)]
    rollback_to: Option<u64>,
    files: Vec<RawFile>,
}

#[derive(Deserialize)]
struct RawFile {
    path: String,
    #[serde(default)]
    previous_version: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    new_version: Option<serde::de::IgnoredAny>,
}

/// The entries of the history at `path`, oldest first, without contents or
/// versions. The file is read under [`MAX_HISTORY_BYTES`] and parsed on a
/// blocking thread, so a large history never holds up the async runtime.
pub async fn read_entries(backend: &dyn SkillBackend, path: &VPath) -> Result<Vec<HistoryEntry>> {
    let blob = match backend.read(path, ReadOptions::with_limit(MAX_HISTORY_BYTES)).await {
        Ok(blob) => blob,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let shown = path.to_string();
    tokio::task::spawn_blocking(move || parse_entries(&blob.data, &shown))
        .await
        .map_err(|e| Error::History(format!("{path}: reading the history stopped: {e}")))?
}

fn parse_entries(data: &[u8], shown: &str) -> Result<Vec<HistoryEntry>> {
    let mut entries = Vec::new();
    for (n, line) in data.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let raw: RawEntry = serde_json::from_slice(line)
            .map_err(|e| Error::History(format!("{shown}: line {} is not a history record: {e}", n + 1)))?;
        let files = raw
            .files
            .into_iter()
            .map(|f| FileEntry {
                path: f.path,
                event: match (f.previous_version.is_some(), f.new_version.is_some()) {
                    (false, _) => FileEvent::Created,
                    (true, true) => FileEvent::Modified,
                    (true, false) => FileEvent::Removed,
                },
            })
            .collect();
        entries.push(HistoryEntry {
            id: raw.id,
            time: raw.time,
            action: raw.action,
            author: raw.author,
            rollback_to: raw.rollback_to,
            files,
        });
    }
    Ok(entries)
}

/// The history file of `skill` in the source at `source`.
pub fn history_path(source: &VPath, skill: &str) -> Result<VPath> {
    Ok(source.join(HISTORY_DIR)?.join(&format!("{skill}.jsonl"))?)
}

/// The records of one history file, oldest first (none when the skill has
/// no history yet).
pub async fn read(backend: &dyn SkillBackend, path: &VPath) -> Result<Vec<Record>> {
    Ok(read_raw(backend, path).await?.0)
}

/// The records, the file's bytes and its version (`None` when absent).
async fn read_raw(backend: &dyn SkillBackend, path: &VPath) -> Result<(Vec<Record>, Bytes, Option<Version>)> {
    let blob = match backend.read(path, ReadOptions::with_limit(MAX_HISTORY_BYTES)).await {
        Ok(blob) => blob,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((Vec::new(), Bytes::new(), None)),
        Err(e) => return Err(e.into()),
    };
    let mut records = Vec::new();
    for (n, line) in blob.data.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let record: Record = serde_json::from_slice(line)
            .map_err(|e| Error::History(format!("{path}: line {} is not a history record: {e}", n + 1)))?;
        records.push(record);
    }
    Ok((records, blob.data, Some(blob.version)))
}

/// Fails unless `record` can be appended to the history at `path` once its
/// files are written: the history reads back (it is not a link, a
/// directory or malformed), has an id left, and the record alone fits
/// within [`MAX_HISTORY_BYTES`] (counting room for versions not yet known).
/// Called before a change writes anything, so a change is refused rather
/// than left unrecorded.
pub(crate) async fn check_room(backend: &dyn SkillBackend, path: &VPath, record: &Record) -> Result<()> {
    let text = match backend.read(path, ReadOptions::with_limit(MAX_HISTORY_BYTES)).await {
        Ok(blob) => blob.data,
        Err(e) if e.kind() == ErrorKind::NotFound => Bytes::new(),
        Err(e) => return Err(e.into()),
    };
    // The last record's id is enough here; the append reads every record.
    let last = text
        .split(|&b| b == b'\n')
        .rev()
        .find(|line| !line.iter().all(u8::is_ascii_whitespace));
    if let Some(line) = last {
        let record: Record = serde_json::from_slice(line)
            .map_err(|e| Error::History(format!("{path}: the last line is not a history record: {e}")))?;
        if record.id == u64::MAX {
            return Err(Error::History(format!("{path}: history ids are exhausted")));
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, record).expect("records serialize");
    let needed = counter.0 + 1 + VERSION_ROOM * record.files.len() as u64;
    if needed > MAX_HISTORY_BYTES {
        return Err(skillstore_backends::Error::too_large(path, needed, MAX_HISTORY_BYTES)
            .with_detail(format!(
                "the change's history record alone would take {needed} bytes, more than a history may hold; nothing was written"
            ))
            .into());
    }
    Ok(())
}

/// Counts the bytes written to it.
struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The bytes of `existing` (whole lines) to keep so that `more` bytes fit
/// after them within [`MAX_HISTORY_BYTES`]: the newest lines, dropping the
/// oldest first. `None` when `more` alone does not fit.
fn keep_newest(existing: &[u8], more: usize) -> Option<&[u8]> {
    let room = usize::try_from(MAX_HISTORY_BYTES)
        .unwrap_or(usize::MAX)
        .checked_sub(more)?;
    let mut start = 0;
    while existing.len() - start > room {
        start = match memchr::memchr(b'\n', &existing[start..]) {
            Some(end) => start + end + 1,
            None => existing.len(),
        };
    }
    Some(&existing[start..])
}

/// Appends one record, numbering it, and retries when another writer
/// appended first. When the file would grow past [`MAX_HISTORY_BYTES`], the
/// oldest records are dropped to make room. A record whose file change follows one not yet recorded
/// (another writer changed the file just before, and has not appended yet)
/// waits briefly for it, so entries keep the order the changes were made.
pub async fn append(backend: &dyn SkillBackend, path: &VPath, mut record: Record) -> Result<Record> {
    const ATTEMPTS: u32 = 400;
    const PATIENCE: u32 = 40;
    let mut waited = 0;
    for attempt in 0..ATTEMPTS {
        let (records, existing, version) = read_raw(backend, path).await?;
        if waited < PATIENCE && !follows_recorded(&records, &record) {
            waited += 1;
            backoff(attempt).await;
            continue;
        }
        record.id = match records.last() {
            None => 1,
            Some(last) => last
                .id
                .checked_add(1)
                .ok_or_else(|| Error::History(format!("{path}: history ids are exhausted")))?,
        };
        let line = serde_json::to_vec(&record).expect("records serialize");
        let Some(kept) = keep_newest(&existing, line.len() + 2) else {
            return Err(Error::History(format!(
                "{path}: one record would be larger than a history may hold ({MAX_HISTORY_BYTES} bytes)"
            )));
        };
        let mut text = Vec::with_capacity(kept.len() + line.len() + 2);
        text.extend_from_slice(kept);
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(&line);
        text.push(b'\n');
        let mode = match version {
            Some(v) => PutMode::IfVersion(v),
            None => PutMode::Create,
        };
        match backend.put(path, Bytes::from(text), mode).await {
            Ok(_) => return Ok(record),
            Err(e) if matches!(e.kind(), ErrorKind::VersionConflict | ErrorKind::AlreadyExists) => {
                backoff(attempt).await
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::History(format!(
        "{path}: gave up appending after {ATTEMPTS} attempts"
    )))
}

/// True when, for every file of `record`, the last recorded change to that
/// file ended at the version `record` started from.
fn follows_recorded(records: &[Record], record: &Record) -> bool {
    record.files.iter().all(|change| {
        let last = records
            .iter()
            .rev()
            .flat_map(|r| r.files.iter())
            .find(|f| f.path == change.path);
        match last {
            Some(last) => last.new_version == change.previous_version,
            None => true,
        }
    })
}

/// A short, growing, jittered pause between attempts.
pub(crate) async fn backoff(attempt: u32) {
    use std::hash::{BuildHasher, RandomState};
    let jitter = RandomState::new().hash_one(attempt) % 1000;
    let base = 1u64 << attempt.min(5);
    let micros = base * 500 + jitter * base / 2;
    tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
}

/// The current time, RFC 3339 in UTC with milliseconds.
pub(crate) fn now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_millis(since.as_secs(), since.subsec_millis())
}

/// `secs` after the Unix epoch (and `millis`), as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn rfc3339_millis(secs: u64, millis: u32) -> String {
    let days = secs / 86_400;
    let rest = secs % 86_400;
    // Civil date from a day count (proleptic Gregorian), by 400-year eras.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod trim_tests {
    use super::*;

    #[test]
    fn the_oldest_whole_lines_leave_first() {
        let max = MAX_HISTORY_BYTES as usize;
        let text = b"one\ntwo\nthree\n";
        assert_eq!(keep_newest(text, 10), Some(&text[..]));
        assert_eq!(keep_newest(text, max - 10), Some(&b"two\nthree\n"[..]));
        assert_eq!(keep_newest(text, max - 9), Some(&b"three\n"[..]));
        assert_eq!(keep_newest(text, max - 6), Some(&b"three\n"[..]));
        assert_eq!(keep_newest(text, max - 5), Some(&b""[..]));
        assert_eq!(keep_newest(text, max), Some(&b""[..]));
        assert_eq!(keep_newest(text, max + 1), None);
    }
}

#[cfg(test)]
mod time_tests {
    use super::rfc3339_millis;

    #[test]
    fn formats_rfc3339_in_utc() {
        assert_eq!(rfc3339_millis(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(rfc3339_millis(1_795_392_000 + 3_723, 999), "2026-11-23T01:02:03.999Z");
        assert_eq!(rfc3339_millis(4_102_444_799, 0), "2099-12-31T23:59:59.000Z");
    }
}

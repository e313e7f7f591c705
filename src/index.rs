//! The index beside a source's skills: `SOURCE/.skillstore/index.json`,
//! the frontmatter of every SKILL.md with the version it was read from, so
//! a cold load over a network store reads every frontmatter in one request.
//!
//! The index is a hint, never an authority: a load takes an entry only when
//! its version and size equal those the listing gives for that file now,
//! when it names the SHA-256 of the file it describes, and when the skill
//! it describes is named after its directory. Whatever is wrong with it
//! (stale, truncated, too large, another format, no file hash, paths out
//! of the source, a name that is not the directory's) only means those
//! files are read, with a diagnostic. Writers update it with a conditional
//! put; a writer that loses a race leaves entries that are stale, which the
//! next writer replaces and every reader passes over.
//!
//! An entry taken is held to its file: whenever the file is read whole
//! (a level-2 read, a digest) and its bytes at the entry's version do not
//! hash to the entry's `sha256` or do not hold its `yaml`, the skill is
//! withdrawn from the catalog and the next load reads the file
//! ([`crate::integrity::pin`]). Under a lock or a signature check, what a
//! catalog shows is parsed from the bytes the check digested, whatever an
//! entry says.
//!
//! ```json
//! {"format": "skillstore-index", "version": 2,
//!  "entries": {"pdf/SKILL.md": {"version": "\"9b2c…\"", "size": 1834,
//!                               "sha256": "3f1a…",
//!                               "yaml": "name: pdf\ndescription: …\n"}}}
//! ```

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use skillstore_backends::{ErrorKind, PutMode, ReadOptions, SkillBackend, VPath, Version, is_valid_segment};

use crate::skill::{LOWERCASE_SKILL_FILE, SKILL_FILE, Scan, scan};

/// The directory beside the skills that holds the index; never a skill.
pub const INDEX_DIR: &str = ".skillstore";
/// The index's path relative to its source.
pub const INDEX_FILE: &str = ".skillstore/index.json";
/// The format name written in every index.
pub const INDEX_FORMAT: &str = "skillstore-index";
/// The format version this build reads and writes (version 1 entries
/// name no file hash and are not trusted).
pub const INDEX_VERSION: u32 = 2;
/// The largest index read, in bytes; a larger one is not fetched.
pub const MAX_INDEX_BYTES: u64 = 8 * 1024 * 1024;
/// The most entries an index may hold; one with more is not used at all.
pub const MAX_INDEX_ENTRIES: usize = 100_000;

/// What the index (or the local cache) knows of one SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadEntry {
    /// The file's version when its frontmatter was taken.
    pub version: Version,
    /// The file's size then, in bytes.
    pub size: u64,
    /// The lowercase hex SHA-256 of the whole file then. Every index entry
    /// names one (an entry without it is not taken); a local cache entry
    /// names one when its file was read whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The YAML between the frontmatter's fences, exactly as in the file.
    pub yaml: String,
}

impl HeadEntry {
    /// The entry for a file of these (whole) bytes and version, with their
    /// SHA-256, or `None` when its frontmatter is not closed, not UTF-8 or
    /// absent (such a file is always read).
    pub fn of_file(data: &[u8], version: Version) -> Option<HeadEntry> {
        match scan(data, true) {
            Scan::Yaml(yaml) => Some(HeadEntry {
                version,
                size: data.len() as u64,
                sha256: Some(crate::integrity::sha256_hex(data)),
                yaml: yaml.to_owned(),
            }),
            _ => None,
        }
    }

    /// True when the entry names a file hash: 64 lowercase hex digits.
    pub fn has_hash(&self) -> bool {
        self.sha256
            .as_deref()
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    }
}

/// The entry an index writer records for the SKILL.md of the skill
/// directory `dir`: only a file whose frontmatter makes a valid skill named
/// after its directory (readers trust nothing else), else `None`.
pub fn entry_for(dir: &str, data: &[u8], version: Version) -> Option<HeadEntry> {
    let entry = HeadEntry::of_file(data, version)?;
    let parsed = crate::skill::parse_frontmatter(&entry.yaml, Some(dir), crate::skill::Strictness::Lenient);
    parsed.skill.is_some_and(|skill| skill.name == dir).then_some(entry)
}

/// The entries of an index, by path relative to the source
/// (`pdf/SKILL.md`).
pub type Entries = BTreeMap<String, HeadEntry>;

/// Why an index, or an entry of one, was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The whole index, with the reason.
    Whole(String),
    /// Some entries: how many for each reason.
    Entries(BTreeMap<&'static str, usize>),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Whole(why) => write!(f, "the index is not used: {why}"),
            Refused::Entries(counts) => {
                let parts: Vec<String> = counts.iter().map(|(why, n)| format!("{n} {why}")).collect();
                write!(
                    f,
                    "index entries not trusted, their files are read: {}",
                    parts.join(", ")
                )
            }
        }
    }
}

/// The path of `source`'s index.
pub fn index_path(source: &VPath) -> skillstore_backends::Result<VPath> {
    source.join(INDEX_FILE)
}

/// True when `relative` names a skill file directly below a source
/// (`DIR/SKILL.md` or `DIR/skill.md`, `DIR` one valid segment other than
/// [`INDEX_DIR`]); the directory's name is returned.
pub fn skill_dir_of(relative: &str) -> Option<&str> {
    let (dir, file) = relative.split_once('/')?;
    let valid = is_valid_segment(dir) && dir != INDEX_DIR && (file == SKILL_FILE || file == LOWERCASE_SKILL_FILE);
    valid.then_some(dir)
}

#[derive(Deserialize)]
struct Document {
    format: String,
    version: u32,
    entries: Bounded,
}

/// The entries as raw values, refused past [`MAX_INDEX_ENTRIES`] while
/// parsing (a million entries are never all held).
struct Bounded(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Bounded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Walk;
        impl<'de> Visitor<'de> for Walk {
            type Value = Bounded;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Bounded, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                    if entries.len() == MAX_INDEX_ENTRIES {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_INDEX_ENTRIES} entries"
                        )));
                    }
                    entries.push((key, value));
                }
                Ok(Bounded(entries))
            }
        }
        deserializer.deserialize_map(Walk)
    }
}

/// Parses an index: its entries, and the count of those malformed (keys
/// that are no skill file of the source, values of the wrong shape). The
/// whole index is refused when it is not JSON, of another format or
/// version, or holds too many entries.
pub fn parse(bytes: &[u8]) -> Result<(Entries, usize), Refused> {
    let document: Document = serde_json::from_slice(bytes).map_err(|e| {
        Refused::Whole(if e.to_string().contains("more than") {
            format!("more than {MAX_INDEX_ENTRIES} entries")
        } else {
            format!("not a readable index ({})", e.classify_name())
        })
    })?;
    if document.format != INDEX_FORMAT || document.version != INDEX_VERSION {
        return Err(Refused::Whole(format!(
            "format `{}` version {}, expected `{INDEX_FORMAT}` version {INDEX_VERSION}",
            document.format.escape_debug(),
            document.version
        )));
    }
    let mut entries = Entries::new();
    let mut malformed = 0;
    for (key, value) in document.entries.0 {
        match (skill_dir_of(&key), serde_json::from_value::<HeadEntry>(value)) {
            (Some(_), Ok(entry)) => {
                entries.insert(key, entry);
            }
            _ => malformed += 1,
        }
    }
    Ok((entries, malformed))
}

trait Classify {
    fn classify_name(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "malformed JSON",
            serde_json::error::Category::Data => "unexpected structure",
            serde_json::error::Category::Eof => "truncated",
        }
    }
}

/// The bytes of an index holding `entries`.
pub fn render(entries: &Entries) -> Bytes {
    #[derive(Serialize)]
    struct Out<'a> {
        format: &'static str,
        version: u32,
        entries: &'a Entries,
    }
    let out = Out {
        format: INDEX_FORMAT,
        version: INDEX_VERSION,
        entries,
    };
    Bytes::from(serde_json::to_vec(&out).expect("an index serializes"))
}

/// Reads the index of the source at `source`: `None` when there is none,
/// or when it cannot be read (why goes to the debug log).
async fn read(backend: &dyn SkillBackend, path: &VPath) -> skillstore_backends::Result<Option<(Entries, Version)>> {
    match backend.read(path, ReadOptions::with_limit(MAX_INDEX_BYTES)).await {
        Ok(blob) => Ok(Some((
            parse(&blob.data).map(|(e, _)| e).unwrap_or_default(),
            blob.version,
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == ErrorKind::TooLarge => {
            // Start again rather than never write it again.
            let version = backend.stat(path).await?.version;
            Ok(version.map(|v| (Entries::new(), v)))
        }
        Err(e) => Err(e),
    }
}

/// How many times a writer tries again after losing a race for the index.
const UPDATE_ATTEMPTS: u32 = 4;

/// Applies `changes` (an entry, or `None` to remove it) to the index of the
/// source at `source` with a conditional put, reading it again after a
/// lost race. Entries for files gone or changed are left as they are:
/// readers pass them over. Errors are returned for the caller to log; the
/// skills themselves are already written.
pub async fn update(
    backend: &dyn SkillBackend,
    source: &VPath,
    changes: &[(String, Option<HeadEntry>)],
) -> skillstore_backends::Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let path = index_path(source)?;
    let mut last = None;
    for _ in 0..UPDATE_ATTEMPTS {
        let (mut entries, version) = match read(backend, &path).await? {
            Some((entries, version)) => (entries, Some(version)),
            None => (Entries::new(), None),
        };
        for (key, entry) in changes {
            match entry {
                Some(entry) if entry.yaml.len() as u64 <= MAX_INDEX_BYTES => {
                    entries.insert(key.clone(), entry.clone());
                }
                _ => {
                    entries.remove(key);
                }
            }
        }
        if entries.len() > MAX_INDEX_ENTRIES {
            return Ok(());
        }
        let data = render(&entries);
        if data.len() as u64 > MAX_INDEX_BYTES {
            // Too large to be read back: leave none rather than a useless one.
            if let Some(version) = version {
                let _ = backend.delete_if_version(&path, &version).await;
            }
            return Ok(());
        }
        let mode = version.map_or(PutMode::Create, PutMode::IfVersion);
        match backend.put(&path, data, mode).await {
            Ok(_) => return Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::VersionConflict | ErrorKind::AlreadyExists) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("every attempt lost a race"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_files_directly_below_the_source_only() {
        assert_eq!(skill_dir_of("pdf/SKILL.md"), Some("pdf"));
        assert_eq!(skill_dir_of("pdf/skill.md"), Some("pdf"));
        for bad in [
            "../pdf/SKILL.md",
            "/pdf/SKILL.md",
            "a/b/SKILL.md",
            "pdf/README.md",
            ".skillstore/SKILL.md",
            "SKILL.md",
            "./SKILL.md",
            "pdf//SKILL.md",
        ] {
            assert_eq!(skill_dir_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_index_round_trips() {
        let mut entries = Entries::new();
        entries.insert(
            "pdf/SKILL.md".into(),
            HeadEntry::of_file(b"---\nname: pdf\ndescription: d\n---\nbody\n", Version::new("\"e1\"")).unwrap(),
        );
        let (back, malformed) = parse(&render(&entries)).unwrap();
        assert_eq!(back, entries);
        assert_eq!(malformed, 0);
    }
}

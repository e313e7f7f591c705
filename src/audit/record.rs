//! One audit record: its fields, its canonical bytes, and the rules a
//! stored record must follow.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::integrity::sha256_hex;

/// The `format` every record names.
pub const FORMAT: &str = "skillstore-audit";
/// The record format's version.
pub const FORMAT_VERSION: u32 = 1;
/// The largest record written or read, in bytes (4 MiB). A change whose
/// record would be larger is refused before anything is written; a stored
/// record larger than this is refused unread.
pub const MAX_RECORD_BYTES: u64 = 4 * 1024 * 1024;
/// The longest actor name kept, in bytes; a longer one is cut at a
/// character boundary.
pub const MAX_ACTOR_BYTES: usize = 256;
/// The longest action name, in bytes.
pub const MAX_ACTION_BYTES: usize = 64;
/// The highest sequence number a log may reach (16 decimal digits, the
/// width of a record's name, and within what every JSON reader keeps exact).
pub const MAX_SEQ: u64 = 1 << 53;

/// What one file looked like before and after the recorded change:
/// `sha256:HEX` of its bytes, or `None` where there was no file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDigest {
    /// The path inside the skill's directory (`SKILL.md`, `scripts/run.sh`).
    pub path: String,
    /// The file's digest before the change; `None`: it did not exist.
    pub before: Option<String>,
    /// The file's digest after the change; `None`: it was removed.
    pub after: Option<String>,
}

impl FileDigest {
    /// The digests of `before` and `after` (either absent) at `path`.
    pub fn of(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> Self {
        FileDigest {
            path: path.to_owned(),
            before: before.map(digest),
            after: after.map(digest),
        }
    }
}

/// `sha256:HEX` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// One record of the audit log. Its stored bytes are exactly
/// [`AuditRecord::canonical`]: compact JSON, fields in this order, so the
/// hash the next record holds is a hash of the bytes in storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`].
    pub version: u32,
    /// The record's number, from 1, one more than the record before it.
    pub seq: u64,
    /// When the change was made (RFC 3339, UTC, milliseconds), as the
    /// writer's clock said.
    pub time: String,
    /// Who made it, as the writer said (the command line's `--author` or
    /// user, the server's tenant).
    pub actor: String,
    /// What was done: a snake_case name (`create`, `edit`, `patch`,
    /// `delete`, `write_file`, `remove_file`, `rollback`, `install`,
    /// `override`; `release`, `tag`, `yank` for releases).
    pub action: String,
    /// The skill's directory name in the source.
    pub skill: String,
    /// The history entry a rollback restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<u64>,
    /// Every file the change touched, with its digests before and after.
    pub files: Vec<FileDigest>,
    /// `sha256:HEX` of the previous record's stored bytes; `None` for the
    /// first record.
    pub prev: Option<String>,
}

impl AuditRecord {
    /// The bytes this record is stored as.
    pub fn canonical(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a record serializes")
    }

    /// Parses a stored record and checks every rule of the format: the
    /// format and version, a sequence number from 1 to [`MAX_SEQ`], a
    /// bounded actor and action, digests of the form `sha256:HEX`, and the
    /// bytes exactly the record's canonical bytes. `Err` says which rule
    /// failed, as `(kind, reason)` with kind `unparsable` or `bad_format`.
    pub fn parse(bytes: &[u8]) -> std::result::Result<AuditRecord, (&'static str, String)> {
        let record: AuditRecord =
            serde_json::from_slice(bytes).map_err(|e| ("unparsable", format!("not an audit record: {e}")))?;
        let bad = |why: &str| Err(("bad_format", why.to_owned()));
        if record.format != FORMAT || record.version != FORMAT_VERSION {
            return bad("another format or version");
        }
        if record.seq == 0 || record.seq > MAX_SEQ {
            return bad("the sequence number is out of range");
        }
        if record.actor.len() > MAX_ACTOR_BYTES {
            return bad("the actor is too long");
        }
        if record.skill.is_empty() || record.skill.len() > 255 || record.files.iter().any(|f| f.path.len() > 4096) {
            return bad("the skill or a file's path is empty or too long");
        }
        if !is_action(&record.action) {
            return bad("the action is not a snake_case name");
        }
        let digests = record.files.iter().flat_map(|f| [&f.before, &f.after]).flatten();
        if !digests.chain(&record.prev).all(|d| is_digest(d)) {
            return bad("a digest is not `sha256:` and 64 lowercase hex digits");
        }
        if record.canonical() != bytes {
            return bad("the bytes are not the record's canonical form");
        }
        Ok(record)
    }
}

/// True for `sha256:` and 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// True for a snake_case action name of at most [`MAX_ACTION_BYTES`].
pub fn is_action(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_ACTION_BYTES && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// `actor` cut to at most [`MAX_ACTOR_BYTES`], at a character boundary.
pub fn bounded_actor(actor: &str) -> String {
    let mut end = actor.len().min(MAX_ACTOR_BYTES);
    while !actor.is_char_boundary(end) {
        end -= 1;
    }
    actor[..end].to_owned()
}

/// The name of the object holding record `seq`: sixteen decimal digits
/// and `.json` (`0000000000000042.json`).
pub fn object_name(seq: u64) -> String {
    format!("{seq:016}.json")
}

/// The sequence number an object's name gives, or `None` for a name that
/// is not a record's.
pub fn seq_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.len() != 16 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|seq| (1..=MAX_SEQ).contains(seq))
}

/// A `--since` time as the key records' times compare against: a date
/// (`2026-11-28`), or a UTC time with or without milliseconds
/// (`2026-11-28T18:30:00Z`, `2026-11-28T18:30:00.250Z`). Anything else is
/// a usage error.
pub fn since_key(text: &str) -> Result<String> {
    let refuse = || {
        Error::Usage(format!(
            "`{}` is not a time: give a date (2026-11-28) or a UTC time (2026-11-28T18:30:00Z)",
            text.escape_debug()
        ))
    };
    let shape = |s: &str, pattern: &str| {
        s.len() == pattern.len()
            && s.bytes()
                .zip(pattern.bytes())
                .all(|(c, p)| if p == b'9' { c.is_ascii_digit() } else { c == p })
    };
    let key = if shape(text, "9999-99-99") {
        format!("{text}T00:00:00.000Z")
    } else if shape(text, "9999-99-99T99:99:99Z") {
        format!("{}.000Z", &text[..19])
    } else if shape(text, "9999-99-99T99:99:99.999Z") {
        text.to_owned()
    } else {
        return Err(refuse());
    };
    let number = |range: std::ops::Range<usize>| key[range].parse::<u32>().unwrap_or(99);
    let (year, month) = (number(0..4), number(5..7));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let valid = (1..=12).contains(&month)
        && (1..=days).contains(&number(8..10))
        && number(11..13) < 24
        && number(14..16) < 60
        && number(17..19) < 61;
    if valid { Ok(key) } else { Err(refuse()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> AuditRecord {
        AuditRecord {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            seq: 3,
            time: "2026-11-28T18:30:00.000Z".into(),
            actor: "ada".into(),
            action: "edit".into(),
            skill: "pdf".into(),
            rollback_to: None,
            files: vec![FileDigest::of("SKILL.md", Some(b"a"), Some(b"b"))],
            prev: Some(digest(b"previous")),
        }
    }

    #[test]
    fn a_record_round_trips_through_its_canonical_bytes() {
        let record = record();
        assert_eq!(AuditRecord::parse(&record.canonical()).unwrap(), record);
    }

    #[test]
    fn a_record_breaking_a_rule_is_refused_with_its_kind() {
        let mut spaced = record().canonical();
        spaced.insert(1, b' ');
        assert_eq!(AuditRecord::parse(&spaced).unwrap_err().0, "bad_format");
        assert_eq!(AuditRecord::parse(b"{not json").unwrap_err().0, "unparsable");
        let mut extra: serde_json::Value = serde_json::from_slice(&record().canonical()).unwrap();
        extra["extra"] = 1.into();
        assert_eq!(
            AuditRecord::parse(&serde_json::to_vec(&extra).unwrap()).unwrap_err().0,
            "unparsable"
        );
        let broken: [fn(&mut AuditRecord); 5] = [
            |r| r.format = "other".into(),
            |r| r.seq = 0,
            |r| r.action = "Edit!".into(),
            |r| r.prev = Some("sha256:XYZ".into()),
            |r| r.actor = "a".repeat(MAX_ACTOR_BYTES + 1),
        ];
        for change in broken {
            let mut r = record();
            change(&mut r);
            assert_eq!(AuditRecord::parse(&r.canonical()).unwrap_err().0, "bad_format", "{r:?}");
        }
    }

    #[test]
    fn names_and_times_follow_their_rules() {
        assert_eq!(object_name(42), "0000000000000042.json");
        assert_eq!(seq_of("0000000000000042.json"), Some(42));
        for odd in [
            "42.json",
            "0000000000000000.json",
            "000000000000004a.json",
            "0000000000000042.json.bak",
        ] {
            assert_eq!(seq_of(odd), None, "{odd}");
        }
        assert_eq!(since_key("2026-11-28").unwrap(), "2026-11-28T00:00:00.000Z");
        assert_eq!(since_key("2026-11-28T18:30:00Z").unwrap(), "2026-11-28T18:30:00.000Z");
        assert!(since_key("2028-02-29").is_ok());
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-11-28T25:00:00Z",
            "2026-11-28 18:30",
            "2026-02-29",
            "2026-02-30",
            "2026-11-31",
            "2100-02-29",
        ] {
            assert!(since_key(bad).is_err(), "{bad}");
        }
        assert_eq!(bounded_actor(&"é".repeat(200)).len(), MAX_ACTOR_BYTES);
    }
}

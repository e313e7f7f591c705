//! Listing a source: directory by directory, or deep where the backend
//! lists a whole tree at once, with the source's index applied.

use std::collections::{BTreeMap, HashMap};

use skillstore_backends::{
    DeepLimits, EntryKind, ErrorKind, MAX_PATH_BYTES, ReadOptions, SkillBackend, VPath, Version, is_valid_segment,
};

use super::parse::{entry_refuted, shown_cause, take_entry};
use super::state::{Candidate, DeepSkill, DeepSource};
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::index::{INDEX_DIR, INDEX_FILE, MAX_INDEX_BYTES, Refused};
use crate::integrity::FileDigests;
use crate::release::RELEASES_DIR;
use crate::skill::{LOWERCASE_SKILL_FILE, SKILL_FILE, Severity};
use crate::source::Source;

/// Lists a source: the names of its subdirectories (or entries that may be
/// links to some) it admits, in ascending order of `"<name>/"`.
/// The directories skillstore keeps beside a source's skills (history,
/// audit records, releases): never skills, and left out of a deep listing
/// so that however many records they hold, the skills are still listed in
/// one pass.
const BOOKKEEPING_DIRS: &[&str] = &[crate::edit::history::HISTORY_DIR, crate::audit::AUDIT_DIR, RELEASES_DIR];

/// What a listing by directory found in a source.
pub(super) struct Listed {
    /// The names of its subdirectories (or entries that may be links to
    /// some) it admits, in ascending order of `"<name>/"`.
    pub(super) dirs: Vec<String>,
    /// The names (escaped) no path can hold.
    pub(super) odd: Vec<String>,
    /// Whether the source holds a `SKILL.md` of its own.
    pub(super) holds_skill_file: bool,
}

/// Lists a source by directory.
pub(super) async fn list_source(backend: &dyn SkillBackend, source: &Source) -> skillstore_backends::Result<Listed> {
    let listing = backend.list_detailed(source.path()).await.inspect_err(|e| {
        tracing::debug!(source = source.name(), path = %source.path(), error = %e, "cannot list a source");
    })?;
    // The longest directory name whose SKILL.md still fits in a path.
    let room = MAX_PATH_BYTES.saturating_sub(source.path().as_str().len() + 2 + SKILL_FILE.len());
    let mut odd = listing.invalid;
    let mut names: Vec<String> = Vec::with_capacity(listing.entries.len());
    let mut holds_skill_file = false;
    for entry in listing.entries {
        if !matches!(entry.kind, EntryKind::Dir | EntryKind::Other) {
            holds_skill_file |= is_skill_file(&entry.name);
            continue;
        }
        // A backend of someone else's making could list a name no path can
        // hold; it cannot be a skill.
        if !is_valid_segment(&entry.name) || entry.name.len() > room {
            odd.push(entry.name.escape_debug().to_string());
        } else if source.admits(&entry.name) && entry.name != INDEX_DIR && entry.name != RELEASES_DIR {
            names.push(entry.name);
        }
    }
    names.sort_unstable_by(|a, b| slash_order(a, b));
    odd.sort();
    Ok(Listed {
        dirs: names,
        odd,
        holds_skill_file,
    })
}

fn is_skill_file(name: &str) -> bool {
    name == SKILL_FILE || name == LOWERCASE_SKILL_FILE
}

/// The warning for a source that is itself one skill's directory: a source
/// holds skill directories, so its parent was likely meant.
pub(super) fn source_is_a_skill(source: &Source) -> Diagnostic {
    let advice = match source.path().parent() {
        Some(parent) => format!("point it at its parent ({parent})"),
        None => "put the skill in a directory of its own".to_owned(),
    };
    Diagnostic::new(
        Severity::Warning,
        DiagnosticKind::SourceIsASkill,
        Some(source.name()),
        Some(source.path()),
        format!(
            "the source is one skill's directory (it holds {SKILL_FILE}); a source holds skill directories: {advice}"
        ),
    )
}

/// Orders directory names as their paths with a trailing `/` compare
/// (`foo-kit/` before `foo/`, since `-` sorts before `/`).
pub(super) fn slash_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let common = a.len().min(b.len());
    // Past the common length the shorter name's `/` is compared; names
    // hold no `/`, so the order is settled there.
    a[..common]
        .cmp(&b[..common])
        .then_with(|| a.get(common).unwrap_or(&b'/').cmp(b.get(common).unwrap_or(&b'/')))
}

/// The SKILL.md of the directory `dir_name` of a source.
pub(super) fn skill_file(source: &Source, dir_name: &str) -> skillstore_backends::Result<VPath> {
    let mut relative = String::with_capacity(dir_name.len() + 1 + SKILL_FILE.len());
    relative.push_str(dir_name);
    relative.push('/');
    relative.push_str(SKILL_FILE);
    source.path().join(&relative)
}

/// Reads the source's index and takes from it every pending candidate
/// whose entry matches the listed version and size; the candidates left in
/// `pending` are to be read. Returns how many were taken and a diagnostic
/// for what was not trusted.
pub(super) async fn apply_index(
    backend: &dyn SkillBackend,
    source: &Source,
    (_, listed_size): &(Version, u64),
    candidates: &mut [Candidate],
    pending: &mut Vec<(usize, Version, u64)>,
    digests: &FileDigests,
) -> (usize, Option<Diagnostic>) {
    let path = source.path().join(INDEX_FILE).expect("the index's path fits");
    let note = |refused: Refused| {
        Some(Diagnostic::new(
            Severity::Warning,
            DiagnosticKind::IndexIgnored,
            Some(source.name()),
            Some(&path),
            refused.to_string(),
        ))
    };
    if *listed_size > MAX_INDEX_BYTES {
        return (
            0,
            note(Refused::Whole(format!(
                "{listed_size} bytes, over the limit of {MAX_INDEX_BYTES}"
            ))),
        );
    }
    let blob = match backend.read(&path, ReadOptions::with_limit(MAX_INDEX_BYTES)).await {
        Ok(blob) => blob,
        Err(err) if err.kind() == ErrorKind::NotFound => return (0, None),
        Err(err) => {
            tracing::debug!(source = source.name(), error = %err, "cannot read the index");
            return (0, note(Refused::Whole(shown_cause(&err))));
        }
    };
    let (entries, malformed) = match crate::index::parse(&blob.data) {
        Ok(parsed) => parsed,
        Err(refused) => return (0, note(refused)),
    };
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    if malformed > 0 {
        counts.insert("malformed or outside the source", malformed);
    }
    let mut taken = 0;
    pending.retain(|(at, version, size)| {
        let candidate = &mut candidates[*at];
        let Some(entry) = entries.get(&candidate.key()) else {
            return true;
        };
        if entry.version != *version || entry.size != *size {
            *counts.entry("stale").or_default() += 1;
            return true;
        }
        if !entry.has_hash() {
            *counts.entry("naming no hash of their file").or_default() += 1;
            return true;
        }
        if entry_refuted(&candidate.skill_md, entry, digests) {
            *counts.entry("found not to describe their file").or_default() += 1;
            return true;
        }
        if take_entry(source, candidate, entry, false, digests) {
            taken += 1;
            false
        } else {
            *counts
                .entry("not describing a valid skill named after its directory")
                .or_default() += 1;
            true
        }
    });
    let diagnostic = (!counts.is_empty()).then(|| note(Refused::Entries(counts))).flatten();
    (taken, diagnostic)
}

/// The deep listing of a source, or `None` when the source is to be listed
/// by directory: the backend cannot list it deep, the listing failed,
/// found nothing (so the usual listing reports why), or was cut short by
/// [`DeepLimits`] (a source of far more files than skills).
pub(super) async fn list_deep_source(backend: &dyn SkillBackend, source: &Source) -> Option<DeepSource> {
    let limits = DeepLimits {
        skip: BOOKKEEPING_DIRS,
        ..DeepLimits::default()
    };
    let listing = match backend.list_deep(source.path(), limits).await {
        Ok(listing) if !listing.truncated && !listing.files.is_empty() => listing,
        Ok(listing) => {
            tracing::debug!(
                source = source.name(),
                truncated = listing.truncated,
                "listing the source by directory"
            );
            return None;
        }
        Err(err) => {
            tracing::debug!(source = source.name(), error = %err, "no deep listing; listing by directory");
            return None;
        }
    };
    #[derive(Default)]
    struct Found {
        upper: Option<(Option<Version>, Option<u64>)>,
        lower: Option<(Option<Version>, Option<u64>)>,
        upper_is_dir: bool,
        lower_is_dir: bool,
    }
    let room = MAX_PATH_BYTES.saturating_sub(source.path().as_str().len() + 2 + SKILL_FILE.len());
    let mut dirs: HashMap<String, Found> = HashMap::new();
    let mut odd = Vec::new();
    let mut index = None;
    let mut holds_skill_file = false;
    for file in listing.files {
        if file.relative == INDEX_FILE {
            index = file.version.zip(file.size);
            continue;
        }
        let Some((top, rest)) = file.relative.split_once('/') else {
            holds_skill_file |= is_skill_file(&file.relative);
            continue;
        };
        if top == INDEX_DIR || top == RELEASES_DIR || !source.admits(top) && top.len() <= room {
            continue;
        }
        if top.len() > room {
            odd.push(top.escape_debug().to_string());
            continue;
        }
        let found = match dirs.get_mut(top) {
            Some(found) => found,
            None => dirs.entry(top.to_owned()).or_default(),
        };
        let listed = Some((file.version, file.size));
        if rest == SKILL_FILE {
            found.upper = listed;
        } else if rest == LOWERCASE_SKILL_FILE {
            found.lower = listed;
        } else if rest.starts_with(SKILL_FILE) && rest.as_bytes().get(SKILL_FILE.len()) == Some(&b'/') {
            found.upper_is_dir = true;
        } else if rest.starts_with(LOWERCASE_SKILL_FILE)
            && rest.as_bytes().get(LOWERCASE_SKILL_FILE.len()) == Some(&b'/')
        {
            found.lower_is_dir = true;
        }
    }
    // As a read by directory would find them: SKILL.md, else skill.md;
    // anything odd (a directory where the file should be) is read to
    // report it as such a read does.
    let versioned = |listed: (Option<Version>, Option<u64>)| listed.0.zip(listed.1);
    let mut skills: Vec<DeepSkill> = dirs
        .into_iter()
        .filter_map(|(name, found)| {
            let (file, listed, is_dir) = match found {
                Found { upper: Some(l), .. } => (SKILL_FILE, versioned(l), false),
                Found { upper_is_dir: true, .. } => (SKILL_FILE, None, true),
                Found { lower: Some(l), .. } => (LOWERCASE_SKILL_FILE, versioned(l), false),
                Found { lower_is_dir: true, .. } => (SKILL_FILE, None, false),
                _ => return None,
            };
            Some((name, file, listed, is_dir))
        })
        .collect();
    skills.sort_unstable_by(|a, b| slash_order(&a.0, &b.0));
    odd.sort();
    odd.dedup();
    Some(DeepSource {
        skills,
        odd,
        holds_skill_file,
        index,
    })
}

/// The warning for a name in a source no path can hold.
pub(super) fn invalid_key(source: &Source, name: &str) -> Diagnostic {
    Diagnostic::new(
        Severity::Warning,
        DiagnosticKind::InvalidKey,
        Some(source.name()),
        Some(source.path()),
        format!("`{name}` cannot be a skill: no virtual path can hold its name"),
    )
}

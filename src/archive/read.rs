//! Reading an archive under every guard.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Cursor, Read};

use bytes::Bytes;
use skillstore_backends::{VPath, is_valid_segment};
use unicode_normalization::UnicodeNormalization;
use zip::{CompressionMethod, ZipArchive, ZipReadOptions};

use super::{ArchiveError, ArchiveFile, ArchiveLimits, Refusal, SkillArchive};
use crate::catalog::SKILL_FILE;
use crate::skill::{Strictness, parse_skill_md};

type Result<T> = std::result::Result<T, ArchiveError>;

/// The Unix file type bits of an entry's mode, and the two types accepted.
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFLNK: u32 = 0o120_000;

/// One entry, checked from the central directory, not yet inflated.
struct Planned {
    index: usize,
    /// The path inside the skill's directory.
    path: String,
    size: u64,
    crc32: u32,
}

impl SkillArchive {
    /// Reads a `.skill` (zip) archive under every guard of [`super::Refusal`],
    /// in this order: the archive's size, its structure, the entry count,
    /// exact duplicates, then each entry's name, type, encryption,
    /// compression, ratio and size, then the whole archive's layout,
    /// folded duplicates, total size, ratio and overlaps, and last each
    /// entry's inflated size and checksum and SKILL.md's strict validation.
    /// Either every check passes or nothing is returned.
    pub fn read(bytes: &[u8], limits: &ArchiveLimits) -> Result<SkillArchive> {
        let archive = read_checked(bytes, limits, None)?;
        let parsed = parse_skill_md(archive.skill_md(), Some(&archive.name), Strictness::Strict);
        if !parsed.is_valid() {
            return Err(crate::Error::InvalidSkill {
                skill: archive.name.clone(),
                problems: parsed.problems,
            }
            .into());
        }
        Ok(archive)
    }

    /// Reads a rooted archive, the layout Agent Skills discovery serves:
    /// `SKILL.md` and the other files at the archive's root, for the skill
    /// `name` (which must be a valid directory name). Every check of
    /// [`SkillArchive::read`] applies except the one top-level directory
    /// (`several_top_directories` and `no_top_directory` cannot arise; an
    /// empty archive is `missing_skill_md`) and SKILL.md's strict
    /// validation: a catalog reading these files parses SKILL.md as it
    /// does from any backend, reporting problems as diagnostics.
    pub fn read_rooted(bytes: &[u8], name: &str, limits: &ArchiveLimits) -> Result<SkillArchive> {
        if !is_valid_segment(name) || name.starts_with('.') {
            return Err(ArchiveError::entry(
                Refusal::InvalidPath,
                name,
                "not a skill directory name",
            ));
        }
        read_checked(bytes, limits, Some(name))
    }
}

/// The archive reader a discovery backend unpacks rooted archives with:
/// [`SkillArchive::read_rooted`] under the default limits, each file
/// bounded by the namespace's read limit.
#[cfg(feature = "discovery")]
#[derive(Debug)]
pub(crate) struct RootedUnpack {
    limits: ArchiveLimits,
}

#[cfg(feature = "discovery")]
impl RootedUnpack {
    pub(crate) fn new(read_limit: u64) -> Self {
        RootedUnpack {
            limits: ArchiveLimits {
                max_file_bytes: read_limit,
                ..ArchiveLimits::default()
            },
        }
    }
}

#[cfg(feature = "discovery")]
impl skillstore_backends::Unpack for RootedUnpack {
    fn unpack(&self, name: &str, bytes: &[u8]) -> std::result::Result<Vec<(String, Bytes)>, (String, String)> {
        match SkillArchive::read_rooted(bytes, name, &self.limits) {
            Ok(archive) => Ok(archive.files.into_iter().map(|f| (f.path, f.data)).collect()),
            // The backend's diagnostic says "refused archive (KIND): " once
            // itself: the message alone, however the refusal was wrapped.
            Err(e) => {
                let kind = e.kind().to_owned();
                let shown = e.to_string();
                let message = shown
                    .strip_prefix(&format!("refused archive ({kind}): "))
                    .map_or_else(|| shown.clone(), str::to_owned);
                Err((kind, message))
            }
        }
    }
}

/// Every check but SKILL.md's validation; `rooted` names the skill of a
/// rooted archive, `None` reads the `.skill` layout.
fn read_checked(bytes: &[u8], limits: &ArchiveLimits, rooted: Option<&str>) -> Result<SkillArchive> {
    if bytes.len() as u64 > limits.max_archive_bytes {
        return Err(ArchiveError::refused(
            Refusal::ArchiveTooLarge,
            format!(
                "the archive is {} bytes; the limit is {}",
                bytes.len(),
                limits.max_archive_bytes
            ),
        ));
    }
    let mut zip = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| ArchiveError::refused(Refusal::NotAnArchive, format!("not a readable zip archive: {e}")))?;
    if zip.len() > limits.max_entries {
        return Err(ArchiveError::refused(
            Refusal::TooManyEntries,
            format!("{} entries; the limit is {}", zip.len(), limits.max_entries),
        ));
    }
    if zip.has_duplicate_names() {
        return Err(ArchiveError::refused(
            Refusal::DuplicateEntry,
            "two entries have the same name",
        ));
    }

    let mut top: Option<String> = None;
    let mut planned = Vec::new();
    let mut dirs = Vec::new();
    let mut total: u64 = 0;
    let mut compressed_total: u64 = 0;
    for index in 0..zip.len() {
        let entry = zip
            .by_index_data(index)
            .map_err(|e| ArchiveError::refused(Refusal::NotAnArchive, format!("entry {index}: {e}")))?;
        let Ok(name) = std::str::from_utf8(entry.name_raw()) else {
            let shown = String::from_utf8_lossy(entry.name_raw()).into_owned();
            return Err(ArchiveError::entry(
                Refusal::NonUtf8Name,
                &shown,
                "the name is not UTF-8",
            ));
        };
        let is_dir = name.ends_with('/');
        let segments = check_name(name)?;
        let file_type = entry.unix_mode().map(|mode| mode & S_IFMT).filter(|&t| t != 0);
        match file_type {
            Some(S_IFLNK) => {
                return Err(ArchiveError::entry(Refusal::SymlinkEntry, name, "a symbolic link"));
            }
            Some(S_IFREG) | Some(S_IFDIR) | None => {}
            Some(other) => {
                return Err(ArchiveError::entry(
                    Refusal::SpecialEntry,
                    name,
                    format!("neither a file nor a directory (mode {other:o})"),
                ));
            }
        }
        if file_type == Some(S_IFDIR) && !is_dir {
            return Err(ArchiveError::entry(
                Refusal::SpecialEntry,
                name,
                "a directory by its mode, a file by its name",
            ));
        }
        if entry.encrypted() {
            return Err(ArchiveError::entry(Refusal::EncryptedEntry, name, "encrypted"));
        }
        let method = entry.compression();
        if !matches!(method, CompressionMethod::Stored | CompressionMethod::Deflated) {
            return Err(ArchiveError::entry(
                Refusal::UnsupportedCompression,
                name,
                format!("compressed with {method}; only deflate and stored entries are read"),
            ));
        }
        let (size, compressed) = (entry.size(), entry.compressed_size());
        if exceeds_ratio(size, compressed, limits) {
            return Err(ArchiveError::entry(
                Refusal::CompressionRatio,
                name,
                format!(
                    "{compressed} bytes would inflate to {size}, more than {} times",
                    limits.max_ratio
                ),
            ));
        }
        if size > limits.max_file_bytes {
            return Err(ArchiveError::entry(
                Refusal::FileTooLarge,
                name,
                format!("declares {size} bytes; the limit is {}", limits.max_file_bytes),
            ));
        }
        total = total.saturating_add(size);
        compressed_total = compressed_total.saturating_add(compressed);
        if total > limits.max_total_bytes {
            return Err(ArchiveError::refused(
                Refusal::TotalTooLarge,
                format!("the files add up to more than {} bytes", limits.max_total_bytes),
            ));
        }

        let (first, rest) = match rooted {
            Some(name) => (name, segments.0),
            None => segments.1,
        };
        if rooted.is_none() && rest.is_empty() && !is_dir {
            return Err(ArchiveError::entry(
                Refusal::NoTopDirectory,
                name,
                "a file at the archive's root; a skill archive holds one directory",
            ));
        }
        match &top {
            None => top = Some(first.to_owned()),
            Some(top) if top != first => {
                return Err(ArchiveError::refused(
                    Refusal::SeveralTopDirectories,
                    format!(
                        "entries lie under `{}` and `{}`; a skill archive holds one directory",
                        top.escape_debug(),
                        first.escape_debug()
                    ),
                ));
            }
            Some(_) => {}
        }
        if let Some(refusal) = crate::content::refusal(rest.trim_end_matches('/'))
            && !(is_dir && rest.trim_end_matches('/') == crate::content::RESERVED_DIR)
        {
            return Err(ArchiveError::entry(refusal.into(), name, refusal.describe()));
        }
        if is_dir {
            if !rest.is_empty() {
                dirs.push(rest.to_owned());
            }
        } else {
            planned.push(Planned {
                index,
                path: rest.to_owned(),
                size,
                crc32: entry.crc32(),
            });
        }
    }

    let name = match (top, rooted) {
        (_, Some(name)) => name.to_owned(),
        (Some(top), None) => top,
        (None, None) => {
            return Err(ArchiveError::refused(Refusal::NoTopDirectory, "the archive is empty"));
        }
    };
    if !is_valid_segment(&name) || name.starts_with('.') {
        return Err(ArchiveError::entry(
            Refusal::InvalidPath,
            &name,
            "the top-level directory is not a skill directory name",
        ));
    }
    check_distinct(&planned, &dirs)?;
    if !planned.iter().any(|p| p.path == SKILL_FILE) {
        let expected = match rooted {
            Some(_) => SKILL_FILE.to_owned(),
            None => format!("{}/{SKILL_FILE}", name.escape_debug()),
        };
        return Err(ArchiveError::refused(
            Refusal::MissingSkillMd,
            format!("`{expected}` is not in the archive"),
        ));
    }
    if exceeds_ratio(total, bytes.len() as u64, limits) {
        return Err(ArchiveError::refused(
            Refusal::CompressionRatio,
            format!(
                "{} bytes of archive would inflate to {total}, more than {} times",
                bytes.len(),
                limits.max_ratio
            ),
        ));
    }
    let overlapping = zip
        .has_overlapping_entries()
        .map_err(|e| ArchiveError::refused(Refusal::NotAnArchive, format!("an entry cannot be located: {e}")))?;
    if overlapping || compressed_total > bytes.len() as u64 {
        return Err(ArchiveError::refused(
            Refusal::OverlappingEntries,
            "entries share bytes of the archive",
        ));
    }

    let mut files = Vec::with_capacity(planned.len());
    for plan in &planned {
        let shown = match rooted {
            Some(_) => plan.path.clone(),
            None => format!("{name}/{}", plan.path),
        };
        let data = inflate(&mut zip, plan, &shown)?;
        files.push(ArchiveFile {
            path: plan.path.clone(),
            data,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(SkillArchive { name, files })
}

/// Checks an entry's name and gives it without a trailing `/`, and split
/// into its top-level directory and the rest (empty for the directory
/// itself).
fn check_name(name: &str) -> Result<(&str, (&str, &str))> {
    let refuse = |kind, why: &str| Err(ArchiveError::entry(kind, name, why));
    if name.starts_with('/') {
        return refuse(Refusal::AbsolutePath, "an absolute path");
    }
    let bytes = name.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return refuse(Refusal::DriveLetter, "starts with a drive letter");
    }
    if name.contains('\\') {
        return refuse(Refusal::BackslashPath, "holds a backslash");
    }
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    if trimmed.split('/').any(|s| s == "..") {
        return refuse(Refusal::ParentSegment, "holds a `..` segment");
    }
    if trimmed.is_empty() {
        return refuse(Refusal::InvalidPath, "an empty name");
    }
    if let Err(e) = VPath::root().join(trimmed) {
        let why = e.detail().unwrap_or("breaks a virtual path rule").to_owned();
        return refuse(Refusal::InvalidPath, &why);
    }
    Ok((trimmed, trimmed.split_once('/').unwrap_or((trimmed, ""))))
}

/// True when `size` bytes from `compressed` is past the ratio limit.
fn exceeds_ratio(size: u64, compressed: u64, limits: &ArchiveLimits) -> bool {
    size > limits.ratio_floor && size > compressed.max(1).saturating_mul(limits.max_ratio)
}

/// Refuses two files, or a file and a directory, whose paths are equal
/// once normalized (NFC) and lowercased.
fn check_distinct(planned: &[Planned], dirs: &[String]) -> Result<()> {
    let fold = |path: &str| -> String { path.nfc().collect::<String>().to_lowercase().nfc().collect() };
    let mut files: BTreeMap<String, &str> = BTreeMap::new();
    for plan in planned {
        if let Some(other) = files.insert(fold(&plan.path), &plan.path) {
            return Err(ArchiveError::entry(
                Refusal::DuplicateEntry,
                &plan.path,
                format_args!(
                    "the same path as `{}` once normalized and lowercased",
                    other.escape_debug()
                ),
            ));
        }
    }
    let mut directories: BTreeSet<String> = dirs.iter().map(|d| fold(d)).collect();
    for folded in files.keys().cloned().chain(directories.clone()) {
        let mut cut = folded.len();
        while let Some(slash) = folded[..cut].rfind('/') {
            directories.insert(folded[..slash].to_owned());
            cut = slash;
        }
    }
    if let Some((_, path)) = files.iter().find(|(folded, _)| directories.contains(*folded)) {
        return Err(ArchiveError::entry(
            Refusal::DuplicateEntry,
            path,
            "a file with the path of a directory",
        ));
    }
    Ok(())
}

/// Inflates one entry, counting the bytes as they come: never more than
/// its header declared plus one, and refused unless exactly that many with
/// the declared checksum. The checksum is computed here, so that the
/// reader's own check at the end of the data cannot be taken for data past
/// the declared size.
fn inflate(zip: &mut ZipArchive<Cursor<&[u8]>>, plan: &Planned, shown: &str) -> Result<Bytes> {
    let corrupt = |e: &dyn std::fmt::Display| ArchiveError::entry(Refusal::CorruptEntry, shown, e);
    let options = ZipReadOptions::new().ignore_crc32(true);
    let mut file = zip
        .by_index_with_options(plan.index, options)
        .map_err(|e| corrupt(&e))?;
    // The declared size is a claim: the buffer grows with what inflates.
    let mut data = Vec::with_capacity(plan.size.min(64 * 1024) as usize);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let held = data.len() as u64;
        // Ask for no more than the declared size, then one byte past it.
        let want = (plan.size - held).clamp(1, chunk.len() as u64) as usize;
        match file.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&chunk[..n]);
                if data.len() as u64 > plan.size {
                    return Err(size_mismatch(shown, plan.size, "more"));
                }
            }
            Err(_) if held == plan.size => return Err(size_mismatch(shown, plan.size, "more")),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(corrupt(&e)),
        }
    }
    if (data.len() as u64) < plan.size {
        return Err(size_mismatch(shown, plan.size, "fewer"));
    }
    if crc32(&data) != plan.crc32 {
        return Err(corrupt(&"the data does not match its checksum"));
    }
    Ok(Bytes::from(data))
}

/// The CRC-32 (IEEE) of `data`, as zip headers declare it.
fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    !data.iter().fold(!0u32, |crc, &b| {
        TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

fn size_mismatch(shown: &str, declared: u64, found: &str) -> ArchiveError {
    ArchiveError::entry(
        Refusal::SizeMismatch,
        shown,
        format!("inflates to {found} bytes than the {declared} its header declares"),
    )
}

//! Packing a skill directory into a deterministic archive.

use std::io::{Cursor, Write};

use skillstore_backends::{EntryKind, ErrorKind, ReadOptions, SkillBackend, VPath, is_valid_segment};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::{ArchiveError, ArchiveFile, ArchiveLimits, Refusal, SkillArchive};
use crate::catalog::SKILL_FILE;
use crate::skill::{Strictness, parse_skill_md};

type Result<T> = std::result::Result<T, ArchiveError>;

/// The deflate level every entry is written with.
const LEVEL: i64 = 6;
/// The permissions every entry is written with.
const MODE: u32 = 0o644;

/// Packs a local skill directory: the directory's parent is opened with
/// every link refused (an archive holds no links), then [`pack`]. Returns
/// the skill directory's name and the archive.
pub async fn pack_dir(path: &std::path::Path, limits: &ArchiveLimits) -> Result<(String, Vec<u8>)> {
    let shown = path.display();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| crate::Error::Usage(format!("`{shown}` names no skill directory")))?
        .to_owned();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let backend = skillstore_backends::FsBackend::with_policy(&parent, skillstore_backends::SymlinkPolicy::Deny)
        .map_err(|e| crate::Error::Usage(format!("cannot open `{shown}`: {e}")))?
        .read_only();
    let dir = VPath::root()
        .join(&name)
        .map_err(|e| crate::Error::Usage(format!("`{shown}` is not a skill directory: {e}")))?;
    let bytes = pack(&backend, &dir, limits).await?;
    Ok((name, bytes))
}

/// Packs the skill directory `dir` of `backend` into a `.skill` archive
/// (the directory's name at the archive's root), and returns its bytes.
///
/// SKILL.md must pass strict validation. Every file is read through the
/// backend under its read guards, with [`ArchiveLimits::max_file_bytes`]
/// as the read limit; the walk lists directories the backend lists as
/// directories, never follows what it lists as anything else (a path of
/// kind [`EntryKind::Other`] refuses the pack with `special_entry`), and
/// stops with `too_deep` or `too_many_entries` at the limits, so a link
/// that loops cannot keep it going. A backend resolves links by its own
/// policy; pack a local directory through an `FsBackend` with
/// `SymlinkPolicy::Deny` to refuse every link.
///
/// The same files give the same bytes (see [the module](super)), and the
/// archive is read back under `limits` before it is returned, so what
/// `pack` makes, [`SkillArchive::read`] accepts.
pub async fn pack(backend: &dyn SkillBackend, dir: &VPath, limits: &ArchiveLimits) -> Result<Vec<u8>> {
    let name = dir.file_name().unwrap_or_default();
    if !is_valid_segment(name) || name.starts_with('.') {
        return Err(crate::Error::Usage(format!("`{dir}` is not a skill directory")).into());
    }
    let mut files = walk(backend, dir, limits).await?;
    if !files.iter().any(|f| f == SKILL_FILE) {
        return Err(ArchiveError::refused(
            Refusal::MissingSkillMd,
            format!("`{dir}` holds no {SKILL_FILE}"),
        ));
    }
    files.sort();

    let mut zip = Writer::new();
    let mut total: u64 = 0;
    for batch in files.chunks(backend.preferred_batch().max(1)) {
        let paths = batch
            .iter()
            .map(|f| dir.join(f))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(crate::Error::from)?;
        let reads = backend
            .read_many(&paths, ReadOptions::with_limit(limits.max_file_bytes))
            .await;
        for ((relative, path), read) in batch.iter().zip(&paths).zip(reads) {
            let blob = match read {
                Ok(blob) => blob,
                Err(e) if e.kind() == ErrorKind::TooLarge => {
                    return Err(ArchiveError::entry(
                        Refusal::FileTooLarge,
                        relative,
                        format_args!("larger than {} bytes", limits.max_file_bytes),
                    ));
                }
                Err(e) => return Err(crate::Error::from(e).into()),
            };
            total = total.saturating_add(blob.data.len() as u64);
            if total > limits.max_total_bytes {
                return Err(ArchiveError::refused(
                    Refusal::TotalTooLarge,
                    format!(
                        "the files of `{dir}` add up to more than {} bytes",
                        limits.max_total_bytes
                    ),
                ));
            }
            if relative == SKILL_FILE {
                check_skill_md(&blob.data, name)?;
            }
            zip.add(&format!("{name}/{relative}"), &blob.data)
                .map_err(|e| crate::Error::Usage(format!("packing `{path}` failed: {e}")))?;
        }
    }
    let bytes = zip
        .finish()
        .map_err(|e| crate::Error::Usage(format!("packing `{dir}` failed: {e}")))?;
    SkillArchive::read(&bytes, limits)?;
    Ok(bytes)
}

/// Packs files already read (paths relative to the skill's directory, as
/// [`SkillArchive::files`] gives them) into a rooted archive: `SKILL.md`
/// and every other file at the archive's root, no directory around them,
/// the layout Agent Skills discovery serves. The skill is named `name`;
/// its SKILL.md is not validated here (a catalog has already parsed it).
///
/// Deterministic as [`pack`] is: the same paths and bytes give the same
/// archive bytes in any order given. The result is read back with
/// [`SkillArchive::read_rooted`] under `limits` before it is returned.
pub fn pack_rooted(name: &str, files: &[ArchiveFile], limits: &ArchiveLimits) -> Result<Vec<u8>> {
    let mut sorted: Vec<&ArchiveFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    if !sorted.iter().any(|f| f.path == SKILL_FILE) {
        return Err(ArchiveError::refused(
            Refusal::MissingSkillMd,
            format!("`{}` has no {SKILL_FILE}", name.escape_debug()),
        ));
    }
    let mut zip = Writer::new();
    for file in sorted {
        zip.add(&file.path, &file.data)
            .map_err(|e| crate::Error::Usage(format!("packing `{}` failed: {e}", file.path.escape_debug())))?;
    }
    let bytes = zip
        .finish()
        .map_err(|e| crate::Error::Usage(format!("packing `{}` failed: {e}", name.escape_debug())))?;
    SkillArchive::read_rooted(&bytes, name, limits)?;
    Ok(bytes)
}

fn check_skill_md(data: &[u8], name: &str) -> Result<()> {
    let parsed = parse_skill_md(data, Some(name), Strictness::Strict);
    if parsed.is_valid() {
        Ok(())
    } else {
        Err(crate::Error::InvalidSkill {
            skill: name.to_owned(),
            problems: parsed.problems,
        }
        .into())
    }
}

/// The deterministic zip writer: every entry deflated at [`LEVEL`], dated
/// 1980-01-01, mode [`MODE`].
struct Writer {
    zip: ZipWriter<Cursor<Vec<u8>>>,
    options: SimpleFileOptions,
}

impl Writer {
    fn new() -> Self {
        Writer {
            zip: ZipWriter::new(Cursor::new(Vec::new())),
            options: SimpleFileOptions::default()
                .compression_method(CompressionMethod::Deflated)
                .compression_level(Some(LEVEL))
                .last_modified_time(DateTime::DEFAULT)
                .unix_permissions(MODE),
        }
    }

    fn add(&mut self, name: &str, data: &[u8]) -> zip::result::ZipResult<()> {
        self.zip.start_file(name, self.options)?;
        self.zip.write_all(data).map_err(Into::into)
    }

    fn finish(self) -> zip::result::ZipResult<Vec<u8>> {
        Ok(self.zip.finish()?.into_inner())
    }
}

/// Every file under `dir`, relative to it, walking only what the backend
/// lists as directories, within the limits.
async fn walk(backend: &dyn SkillBackend, dir: &VPath, limits: &ArchiveLimits) -> Result<Vec<String>> {
    let mut files = Vec::new();
    let mut seen = 0usize;
    let mut pending = vec![(dir.clone(), String::new(), 0usize)];
    while let Some((current, prefix, depth)) = pending.pop() {
        for entry in backend.list(&current).await.map_err(crate::Error::from)? {
            seen += 1;
            if seen > limits.max_entries {
                return Err(ArchiveError::refused(
                    Refusal::TooManyEntries,
                    format!("`{dir}` holds more than {} files and directories", limits.max_entries),
                ));
            }
            let relative = format!("{prefix}{}", entry.name);
            match entry.kind {
                // Not a file of the skill: left out of the archive.
                EntryKind::File if crate::skill_files::is_foreign(&relative) => {}
                EntryKind::File => files.push(relative),
                EntryKind::Dir if depth < limits.max_depth => {
                    pending.push((
                        current.join(&entry.name).map_err(crate::Error::from)?,
                        relative + "/",
                        depth + 1,
                    ));
                }
                EntryKind::Dir => {
                    return Err(ArchiveError::entry(
                        Refusal::TooDeep,
                        &relative,
                        format_args!("directories nest deeper than {}", limits.max_depth),
                    ));
                }
                EntryKind::Other => {
                    return Err(ArchiveError::entry(
                        Refusal::SpecialEntry,
                        &relative,
                        "neither a file nor a directory the backend will read (a link, a FIFO)",
                    ));
                }
            }
        }
    }
    Ok(files)
}

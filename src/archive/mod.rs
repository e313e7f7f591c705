//! Skills as single files: `.skill` archives out ([`pack`]) and in
//! ([`SkillArchive::read`], then [`SkillEditor::install`](crate::SkillEditor::install)).
//!
//! A `.skill` archive is a zip holding one skill's directory at its root:
//! `NAME/SKILL.md`, `NAME/references/...`, and so on.
//!
//! **Packing** is deterministic: the same files give the same bytes, whatever
//! their timestamps or modes. Entries come in byte order of their paths, one
//! per file (no directory entries), each deflated at level 6, dated
//! 1980-01-01 00:00:00, with Unix permissions `0644`.
//!
//! **Reading** trusts nothing the archive says. Every entry is checked, and
//! the whole archive refused with one [`Refusal`] (a stable snake_case kind)
//! before a single file is handed out; the checks and their kinds are
//! listed on [`Refusal`]. Sizes are counted while inflating, never taken from
//! the headers alone, and an archive inside the archive is a file like any
//! other: it is never opened.
//!
//! **Installing** goes through the [`SkillEditor`](crate::SkillEditor), so
//! an install is validated, content-checked, written with conditional puts
//! and recorded in the skill's history as one [`Action::Install`](crate::Action::Install)
//! entry. Its paths obey the rule every write obeys (SKILL.md, or a file
//! under `references/`, `scripts/`, `assets/` or `templates/`), and it lands
//! whole or not at all.
//!
//! ```
//! use std::sync::Arc;
//! use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
//! use skillstore::{Action, ArchiveLimits, InstallOptions, SkillArchive, SkillEditor, Source, pack};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let files: Arc<dyn SkillBackend> = Arc::new(MemoryBackend::new());
//! let skill_md = "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps...";
//! files.put(&VPath::new("/drafts/pdf/SKILL.md")?, skill_md.into(), PutMode::Create).await?;
//!
//! let limits = ArchiveLimits::default();
//! let bytes = pack(&*files, &VPath::new("/drafts/pdf")?, &limits).await?;
//! assert_eq!(bytes, pack(&*files, &VPath::new("/drafts/pdf")?, &limits).await?);
//!
//! let archive = SkillArchive::read(&bytes, &limits)?;
//! let team = Source::parse("/team")?.with_writable(true);
//! let editor = SkillEditor::new(Arc::clone(&files), &team)?;
//! let change = editor.install(&archive, InstallOptions::default()).await?;
//! assert_eq!(change.record.action, Action::Install);
//! let again = editor.install(&archive, InstallOptions::default()).await.unwrap_err();
//! assert_eq!(again.kind(), "already_exists");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod pack;
mod read;
mod save;
mod winner;

use std::fmt;

use bytes::Bytes;

pub use pack::{pack, pack_dir, pack_rooted};
#[cfg(feature = "discovery")]
pub(crate) use read::RootedUnpack;
pub use save::save;
pub use winner::{WinnerArchive, winner_archive};

/// Why an archive (or a skill directory being packed) was refused. Each
/// kind has a stable snake_case name ([`Refusal::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// `not_an_archive`: the bytes are not a readable zip archive.
    NotAnArchive,
    /// `archive_too_large`: the archive itself is larger than
    /// [`ArchiveLimits::max_archive_bytes`].
    ArchiveTooLarge,
    /// `too_many_entries`: more entries than [`ArchiveLimits::max_entries`]
    /// (or, when packing, more files and directories than that).
    TooManyEntries,
    /// `non_utf8_name`: an entry's name is not UTF-8.
    NonUtf8Name,
    /// `absolute_path`: an entry's name starts with `/`.
    AbsolutePath,
    /// `drive_letter`: an entry's name starts with a drive letter (`C:`).
    DriveLetter,
    /// `backslash_path`: an entry's name holds a backslash.
    BackslashPath,
    /// `parent_segment`: an entry's name holds a `..` segment.
    ParentSegment,
    /// `invalid_path`: an entry's name breaks another virtual path rule
    /// (an empty or `.` segment, a control character, too long), or the
    /// top-level directory is not a skill directory name.
    InvalidPath,
    /// `symlink_entry`: an entry is a symbolic link.
    SymlinkEntry,
    /// `special_entry`: an entry is neither a file nor a directory (a FIFO,
    /// a device); when packing, a path the backend lists as neither (a link
    /// its policy does not resolve).
    SpecialEntry,
    /// `encrypted_entry`: an entry is encrypted.
    EncryptedEntry,
    /// `unsupported_compression`: an entry is compressed with something
    /// other than deflate or nothing.
    UnsupportedCompression,
    /// `duplicate_entry`: two entries name the same path, exactly or once
    /// Unicode-normalized (NFC) and lowercased, or a file has the path of a
    /// directory.
    DuplicateEntry,
    /// `no_top_directory`: the archive is empty, or holds a file at its
    /// root instead of inside the skill's directory.
    NoTopDirectory,
    /// `several_top_directories`: entries lie under more than one
    /// top-level directory.
    SeveralTopDirectories,
    /// `missing_skill_md`: the skill's directory holds no `SKILL.md`.
    MissingSkillMd,
    /// `file_too_large`: one file (SKILL.md included) is larger than
    /// [`ArchiveLimits::max_file_bytes`].
    FileTooLarge,
    /// `total_too_large`: the files add up to more than
    /// [`ArchiveLimits::max_total_bytes`].
    TotalTooLarge,
    /// `compression_ratio`: an entry, or the whole archive, inflates more
    /// than [`ArchiveLimits::max_ratio`] times its compressed size.
    CompressionRatio,
    /// `overlapping_entries`: two entries share bytes of the archive.
    OverlappingEntries,
    /// `size_mismatch`: an entry inflates to more or fewer bytes than its
    /// header declares.
    SizeMismatch,
    /// `corrupt_entry`: an entry's data cannot be inflated, or does not
    /// match its checksum.
    CorruptEntry,
    /// `reserved_path`: a file below the skill's `.skillstore/` directory
    /// other than its signature (`.skillstore/signature`), which belongs
    /// to no skill.
    ReservedPath,
    /// `git_entry`: a `.git` entry, in any case, anywhere
    /// ([`crate::content`]).
    GitEntry,
    /// `hidden_path`: another entry with a segment starting with `.`
    /// ([`crate::content`]).
    HiddenPath,
    /// `too_deep`: when packing, directories nest deeper than
    /// [`ArchiveLimits::max_depth`].
    TooDeep,
}

impl Refusal {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NotAnArchive => "not_an_archive",
            Refusal::ArchiveTooLarge => "archive_too_large",
            Refusal::TooManyEntries => "too_many_entries",
            Refusal::NonUtf8Name => "non_utf8_name",
            Refusal::AbsolutePath => "absolute_path",
            Refusal::DriveLetter => "drive_letter",
            Refusal::BackslashPath => "backslash_path",
            Refusal::ParentSegment => "parent_segment",
            Refusal::InvalidPath => "invalid_path",
            Refusal::SymlinkEntry => "symlink_entry",
            Refusal::SpecialEntry => "special_entry",
            Refusal::EncryptedEntry => "encrypted_entry",
            Refusal::UnsupportedCompression => "unsupported_compression",
            Refusal::DuplicateEntry => "duplicate_entry",
            Refusal::NoTopDirectory => "no_top_directory",
            Refusal::SeveralTopDirectories => "several_top_directories",
            Refusal::MissingSkillMd => "missing_skill_md",
            Refusal::FileTooLarge => "file_too_large",
            Refusal::TotalTooLarge => "total_too_large",
            Refusal::CompressionRatio => "compression_ratio",
            Refusal::OverlappingEntries => "overlapping_entries",
            Refusal::SizeMismatch => "size_mismatch",
            Refusal::CorruptEntry => "corrupt_entry",
            Refusal::TooDeep => "too_deep",
            Refusal::ReservedPath => "reserved_path",
            Refusal::GitEntry => "git_entry",
            Refusal::HiddenPath => "hidden_path",
        }
    }
}

impl From<crate::content::ContentRefusal> for Refusal {
    fn from(refusal: crate::content::ContentRefusal) -> Self {
        match refusal {
            crate::content::ContentRefusal::GitEntry => Refusal::GitEntry,
            crate::content::ContentRefusal::Hidden => Refusal::HiddenPath,
            crate::content::ContentRefusal::Reserved => Refusal::ReservedPath,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What can go wrong packing or reading an archive. Messages name entries
/// of the archive (escaped) and virtual paths only.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The archive, or the directory being packed, was refused; nothing
    /// was written.
    #[error("refused archive ({kind}): {message}")]
    Refused {
        /// Which check refused it.
        kind: Refusal,
        /// The entry concerned, relative to the archive's root (escaped),
        /// when one entry is to blame.
        entry: Option<String>,
        /// What was found.
        message: String,
    },
    /// SKILL.md failed strict validation, or the storage layer failed.
    #[error(transparent)]
    Skill(#[from] crate::Error),
}

impl ArchiveError {
    /// A stable snake_case name: the [`Refusal`]'s, or the skills layer's
    /// [`crate::Error::kind`] (`invalid_skill`, `not_found`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            ArchiveError::Refused { kind, .. } => kind.as_str(),
            ArchiveError::Skill(e) => e.kind().as_str(),
        }
    }

    /// The refusal, when a check refused the archive.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            ArchiveError::Refused { kind, .. } => Some(*kind),
            ArchiveError::Skill(_) => None,
        }
    }

    pub(crate) fn refused(kind: Refusal, message: impl Into<String>) -> Self {
        ArchiveError::Refused {
            kind,
            entry: None,
            message: message.into(),
        }
    }

    pub(crate) fn entry(kind: Refusal, entry: &str, message: impl fmt::Display) -> Self {
        let entry = entry.escape_debug().to_string();
        ArchiveError::Refused {
            kind,
            message: format!("`{entry}`: {message}"),
            entry: Some(entry),
        }
    }
}

/// The bounds an archive must stay within, when read and when packed.
/// Every field may be changed from its default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArchiveLimits {
    /// The largest archive read, in bytes (default 64 MiB).
    pub max_archive_bytes: u64,
    /// The most entries (files and directories) in an archive (default
    /// 4096).
    pub max_entries: usize,
    /// The largest single file, SKILL.md included, in bytes (default 10 MiB,
    /// the read limit of every backend).
    pub max_file_bytes: u64,
    /// The most bytes all files may inflate to together (default 128 MiB).
    pub max_total_bytes: u64,
    /// The most an entry may inflate relative to its compressed size, and
    /// the whole archive relative to its size (default 100).
    pub max_ratio: u64,
    /// Entries (and archives) that inflate to at most this many bytes are
    /// exempt from the ratio check (default 1 MiB): they cannot hurt.
    pub ratio_floor: u64,
    /// The deepest directory nesting packed below the skill's directory
    /// (default 32).
    pub max_depth: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            max_archive_bytes: 64 * 1024 * 1024,
            max_entries: 4096,
            max_file_bytes: skillstore_backends::DEFAULT_READ_LIMIT,
            max_total_bytes: 128 * 1024 * 1024,
            max_ratio: 100,
            ratio_floor: 1024 * 1024,
            max_depth: 32,
        }
    }
}

/// One file of a skill archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveFile {
    /// The path inside the skill's directory (`SKILL.md`,
    /// `references/api.md`); it passes every virtual path rule.
    pub path: String,
    /// The file's bytes, exactly as inflated.
    pub data: Bytes,
}

/// A skill read from an archive that passed every check: one top-level
/// directory naming the skill, a SKILL.md that passes strict validation,
/// files with safe, distinct paths, within the limits it was read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillArchive {
    name: String,
    files: Vec<ArchiveFile>,
}

impl SkillArchive {
    /// The skill's name: the archive's top-level directory.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every file, in byte order of its path.
    pub fn files(&self) -> &[ArchiveFile] {
        &self.files
    }

    /// The file at `path` inside the skill's directory.
    pub fn file(&self, path: &str) -> Option<&ArchiveFile> {
        self.files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }

    /// The SKILL.md bytes.
    pub fn skill_md(&self) -> &Bytes {
        &self
            .file(crate::SKILL_FILE)
            .expect("a read archive always holds SKILL.md")
            .data
    }

    /// The skill digest of the archive's files
    /// ([`crate::integrity::digest`]): the digest the skill has in a source
    /// once installed.
    pub fn digest(&self) -> String {
        let hashed: Vec<(&str, String)> = self
            .files
            .iter()
            .map(|f| (f.path.as_str(), crate::integrity::sha256_hex(&f.data)))
            .collect();
        crate::integrity::digest_lines(hashed.iter().map(|(p, h)| (*p, h.as_str())))
    }

    /// The bytes of all files together.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.data.len() as u64).sum()
    }
}

/// How an install treats a skill the source already has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstallOptions {
    /// Replace a skill of the same name in the source: its files become
    /// exactly the archive's (files the archive lacks are removed). Without
    /// it, such an install fails with `already_exists`.
    pub replace: bool,
}

impl InstallOptions {
    /// Options that replace an existing skill.
    pub fn replacing() -> Self {
        InstallOptions { replace: true }
    }
}

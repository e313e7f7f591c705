//! Diagnostics: problems met while loading, as data.

use serde::{Serialize, Serializer};
use skillstore_backends::{ErrorKind as StorageKind, VPath};

use crate::integrity::signature::Refused;
use crate::skill::ProblemKind;
pub use crate::skill::Severity;
use crate::skill_files::LeftOutKind;

/// What a diagnostic is about: a rule of a SKILL.md, a storage error, or
/// one of the catalog's own situations. [`DiagnosticKind::as_str`] is the
/// stable snake_case name it is shown and serialized as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// A SKILL.md broke a rule of the specification or is unusable.
    Problem(ProblemKind),
    /// The storage refused or failed (`symlink_escape`, `permission_denied`, ...).
    Storage(StorageKind),
    /// A source's directory does not exist (`source_not_found`).
    SourceNotFound,
    /// A source could not be reached (`source_unavailable`).
    SourceUnavailable,
    /// A source could not be listed now; its skills are those of an earlier
    /// load (`source_stale`).
    SourceStale,
    /// A source is itself one skill's directory (it holds `SKILL.md`), so
    /// its parent was likely meant (`source_is_a_skill`).
    SourceIsASkill,
    /// Two skills of one source share a name (`duplicate_name`).
    DuplicateName,
    /// A source's storage holds a name no virtual path can carry (an object
    /// key with a control character, an empty or `..` segment); the rest of
    /// the source loads (`invalid_key`).
    InvalidKey,
    /// A source's index (`.skillstore/index.json`) was not used, in whole or
    /// for some entries (stale, malformed, out of the source, too large, of
    /// another format); the files concerned were read instead
    /// (`index_ignored`).
    IndexIgnored,
    /// A file or directory of a skill left out of the skill's files
    /// (`directory_link`, `unresolved_link`, `special_file`, `too_deep`);
    /// a storage refusal is [`DiagnosticKind::Storage`].
    LeftOut(LeftOutKind),
    /// A winner not served because a lock pins another digest for it
    /// (`lock_mismatch`).
    LockMismatch,
    /// A winner not served because the lock does not hold it
    /// (`not_locked`).
    NotLocked,
    /// A winner not served because its source requires signatures and
    /// its own is missing, invalid, or by a signer not allowed or expired
    /// (`signature_missing`, `signature_invalid`, `signer_not_allowed`,
    /// `signer_expired`).
    Signature(Refused),
}

impl DiagnosticKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::Problem(kind) => kind.as_str(),
            DiagnosticKind::Storage(kind) => kind.as_str(),
            DiagnosticKind::SourceNotFound => "source_not_found",
            DiagnosticKind::SourceUnavailable => "source_unavailable",
            DiagnosticKind::SourceStale => "source_stale",
            DiagnosticKind::SourceIsASkill => "source_is_a_skill",
            DiagnosticKind::DuplicateName => "duplicate_name",
            DiagnosticKind::InvalidKey => "invalid_key",
            DiagnosticKind::IndexIgnored => "index_ignored",
            DiagnosticKind::LeftOut(kind) => kind.as_str(),
            DiagnosticKind::LockMismatch => "lock_mismatch",
            DiagnosticKind::NotLocked => "not_locked",
            DiagnosticKind::Signature(refused) => refused.as_str(),
        }
    }

    /// True for the kinds of a winner withheld by an integrity check (a
    /// lock): the skill exists but is not served.
    pub fn is_withheld(self) -> bool {
        matches!(
            self,
            DiagnosticKind::LockMismatch | DiagnosticKind::NotLocked | DiagnosticKind::Signature(_)
        )
    }

    /// True for the kinds about a whole source (it was missing,
    /// unreachable or stale) rather than one skill.
    pub fn is_about_source(self) -> bool {
        matches!(
            self,
            DiagnosticKind::SourceNotFound | DiagnosticKind::SourceUnavailable | DiagnosticKind::SourceStale
        )
    }
}

impl From<ProblemKind> for DiagnosticKind {
    fn from(kind: ProblemKind) -> Self {
        DiagnosticKind::Problem(kind)
    }
}

impl From<LeftOutKind> for DiagnosticKind {
    fn from(kind: LeftOutKind) -> Self {
        match kind {
            LeftOutKind::Storage(storage) => DiagnosticKind::Storage(storage),
            other => DiagnosticKind::LeftOut(other),
        }
    }
}

impl From<StorageKind> for DiagnosticKind {
    fn from(kind: StorageKind) -> Self {
        DiagnosticKind::Storage(kind)
    }
}

impl std::fmt::Display for DiagnosticKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DiagnosticKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl PartialEq<str> for DiagnosticKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DiagnosticKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One problem met while loading a catalog. Diagnostics are data: a stable
/// [`DiagnosticKind`], the source and virtual path concerned, and a message
/// that never holds a host path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// `warning` (the skill or source still loaded) or `error` (it did not).
    pub severity: Severity,
    /// What it is about, serialized as its stable name.
    pub kind: DiagnosticKind,
    /// The name of the source concerned.
    pub source: Option<String>,
    /// The virtual path concerned.
    pub path: Option<VPath>,
    /// What happened, for a person.
    pub message: String,
    /// The storage's own reason, when it was given as safe to show to
    /// anyone ([`skillstore_backends::Error::public_detail`]): a front end
    /// that replaces storage messages with fixed sentences keeps this.
    /// Not serialized (it is already in `message`).
    #[serde(skip)]
    pub public_detail: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with every field given.
    pub fn new(
        severity: Severity,
        kind: impl Into<DiagnosticKind>,
        source: Option<&str>,
        path: Option<&VPath>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity,
            kind: kind.into(),
            source: source.map(str::to_owned),
            path: path.cloned(),
            message: message.into(),
            public_detail: None,
        }
    }

    /// This diagnostic with the storage's public reason `detail`.
    pub fn with_public_detail(mut self, detail: Option<&str>) -> Self {
        self.public_detail = detail.map(str::to_owned);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's name, as `list --json` and `validate --json` have
    /// always written it.
    #[test]
    fn every_kind_serializes_to_its_stable_name() {
        let problems = [
            (ProblemKind::MissingSkillMd, "missing_skill_md"),
            (ProblemKind::LowercaseSkillMd, "lowercase_skill_md"),
            (ProblemKind::NoFrontmatter, "no_frontmatter"),
            (ProblemKind::UnclosedFrontmatter, "unclosed_frontmatter"),
            (ProblemKind::FrontmatterTooLarge, "frontmatter_too_large"),
            (ProblemKind::InvalidYaml, "invalid_yaml"),
            (ProblemKind::NotAMapping, "not_a_mapping"),
            (ProblemKind::YamlAlias, "yaml_alias"),
            (ProblemKind::YamlTooDeep, "yaml_too_deep"),
            (ProblemKind::NotUtf8, "not_utf8"),
            (ProblemKind::FileTooLarge, "file_too_large"),
            (ProblemKind::UnexpectedField, "unexpected_field"),
            (ProblemKind::MissingName, "missing_name"),
            (ProblemKind::MissingDescription, "missing_description"),
            (ProblemKind::InvalidFieldType, "invalid_field_type"),
            (ProblemKind::ControlCharacter, "control_character"),
            (ProblemKind::NameTooLong, "name_too_long"),
            (ProblemKind::NameNotLowercase, "name_not_lowercase"),
            (ProblemKind::NameHyphenEdge, "name_hyphen_edge"),
            (ProblemKind::NameConsecutiveHyphens, "name_consecutive_hyphens"),
            (ProblemKind::NameInvalidChars, "name_invalid_chars"),
            (ProblemKind::NameMismatch, "name_mismatch"),
            (ProblemKind::DescriptionTooLong, "description_too_long"),
            (ProblemKind::CompatibilityTooLong, "compatibility_too_long"),
            (ProblemKind::DescriptionPlaceholder, "description_placeholder"),
        ];
        assert_eq!(problems.len(), ProblemKind::ALL.len());
        let storage = [
            (StorageKind::NotFound, "not_found"),
            (StorageKind::NotADirectory, "not_a_directory"),
            (StorageKind::IsADirectory, "is_a_directory"),
            (StorageKind::InvalidPath, "invalid_path"),
            (StorageKind::PermissionDenied, "permission_denied"),
            (StorageKind::TooLarge, "too_large"),
            (StorageKind::NotRegularFile, "not_regular_file"),
            (StorageKind::SymlinkRefused, "symlink_refused"),
            (StorageKind::SymlinkEscape, "symlink_escape"),
            (StorageKind::SymlinkLoop, "symlink_loop"),
            (StorageKind::DanglingSymlink, "dangling_symlink"),
            (StorageKind::AlreadyExists, "already_exists"),
            (StorageKind::VersionConflict, "version_conflict"),
            (StorageKind::Unsupported, "unsupported"),
            (StorageKind::ReadOnly, "read_only"),
            (StorageKind::Unavailable, "unavailable"),
            (StorageKind::Other, "other"),
        ];
        let own = [
            (DiagnosticKind::SourceNotFound, "source_not_found"),
            (DiagnosticKind::SourceUnavailable, "source_unavailable"),
            (DiagnosticKind::SourceStale, "source_stale"),
            (DiagnosticKind::SourceIsASkill, "source_is_a_skill"),
            (DiagnosticKind::DuplicateName, "duplicate_name"),
            (DiagnosticKind::InvalidKey, "invalid_key"),
            (DiagnosticKind::IndexIgnored, "index_ignored"),
            (DiagnosticKind::LockMismatch, "lock_mismatch"),
            (DiagnosticKind::NotLocked, "not_locked"),
            (DiagnosticKind::Signature(Refused::Missing), "signature_missing"),
            (DiagnosticKind::Signature(Refused::Invalid), "signature_invalid"),
            (DiagnosticKind::Signature(Refused::NotAllowed), "signer_not_allowed"),
            (DiagnosticKind::Signature(Refused::Expired), "signer_expired"),
        ];
        let all = problems
            .iter()
            .map(|&(k, s)| (DiagnosticKind::from(k), s))
            .chain(storage.iter().map(|&(k, s)| (DiagnosticKind::from(k), s)))
            .chain(own);
        for (kind, name) in all {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert!(kind == name);
        }
        for (kind, name) in problems {
            assert_eq!(kind.as_str(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
    }

    #[test]
    fn a_diagnostic_serializes_its_kind_as_a_string() {
        let path = VPath::new("/base/pdf/SKILL.md").unwrap();
        let d = Diagnostic::new(
            Severity::Warning,
            DiagnosticKind::DuplicateName,
            Some("base"),
            Some(&path),
            "m",
        );
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"severity":"warning","kind":"duplicate_name","source":"base","path":"/base/pdf/SKILL.md","message":"m"}"#
        );
    }
}

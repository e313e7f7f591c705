//! Errors of the skills layer.

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong above the storage layer. Messages name virtual paths
/// only.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller's input is malformed (a bad path, pattern or option).
    #[error("{0}")]
    Usage(String),
    /// A configuration file is wrong; the message names the key or line.
    #[error("{0}")]
    Config(String),
    /// No skill of this name is in the catalog.
    #[error("no skill named `{0}` in the catalog")]
    SkillNotFound(String),
    /// A path inside a skill was refused before any read.
    #[error("refused path `{path}` in skill `{skill}`: {reason}")]
    InvalidSkillPath {
        /// The skill.
        skill: String,
        /// The path as given (escaped for display).
        path: String,
        /// Why it was refused.
        reason: String,
    },
    /// No source of this name is in the source list.
    #[error("no source named `{0}`")]
    SourceNotFound(String),
    /// A write was aimed at a source that is not configured writable.
    #[error("the source `{0}` is read-only; mark it writable to change its skills")]
    ReadOnlySource(String),
    /// The skill does not exist in the source a change was aimed at.
    #[error("no skill `{skill}` in the source `{source_name}`")]
    NotInSource {
        /// The skill.
        skill: String,
        /// The source.
        source_name: String,
    },
    /// A new SKILL.md failed strict validation; nothing was written.
    #[error("refused SKILL.md for `{skill}`: {}", list_problems(problems))]
    InvalidSkill {
        /// The skill.
        skill: String,
        /// Every problem found.
        problems: Vec<crate::skill::Problem>,
    },
    /// A content check blocked a file; nothing was written.
    #[error("blocked: {reason}")]
    ContentBlocked {
        /// The skill.
        skill: String,
        /// The file inside the skill.
        path: String,
        /// Why, as the check said.
        reason: String,
    },
    /// A patch found its text a different number of times than expected;
    /// nothing was written.
    #[error("patch of `{path}` in `{skill}` expected {expected} match(es) of the text, found {found}")]
    PatchMismatch {
        /// The skill.
        skill: String,
        /// The file patched.
        path: String,
        /// The count the caller expected.
        expected: usize,
        /// The count found.
        found: usize,
    },
    /// A history file could not be read, or a change could not be recorded.
    #[error("history: {0}")]
    History(String),
    /// No release of the skill matches what was asked (a version, a channel
    /// or a range); yanked releases match only an exact version.
    #[error("no release of `{skill}` matches `{selector}`")]
    ReleaseNotFound {
        /// The skill.
        skill: String,
        /// What was asked, as given.
        selector: String,
    },
    /// A release, tag or yank was refused by a rule of releases (a version
    /// not greater than the last release, a frontmatter version that
    /// disagrees, a yanked version tagged); nothing was written.
    #[error("{0}")]
    ReleaseRefused(String),
    /// The audit log could not be read, or a change could not be recorded
    /// in it.
    #[error("audit log: {0}")]
    Audit(String),
    /// The storage layer refused or failed.
    #[error(transparent)]
    Backend(#[from] skillstore_backends::Error),
}

/// What kind of situation an [`Error`] is. [`ErrorKind::as_str`] is the
/// stable snake_case name it is shown and serialized as. A refusal the
/// storage layer also knows (`invalid_path`, `read_only`) is that storage
/// kind, whichever layer refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Malformed input (`usage`).
    Usage,
    /// A wrong configuration (`config`).
    Config,
    /// No such skill (`skill_not_found`).
    SkillNotFound,
    /// No such source (`source_not_found`).
    SourceNotFound,
    /// A SKILL.md failed strict validation (`invalid_skill`).
    InvalidSkill,
    /// A content check blocked a file (`content_blocked`).
    ContentBlocked,
    /// A patch found its text the wrong number of times (`patch_mismatch`).
    PatchMismatch,
    /// A history could not be read or recorded (`history`).
    History,
    /// No release matches a version, channel or range (`release_not_found`).
    ReleaseNotFound,
    /// A rule of releases refused a release, tag or yank (`release_refused`).
    ReleaseRefused,
    /// The audit log could not be read or appended to (`audit`).
    Audit,
    /// The storage layer's kind (`version_conflict`, `read_only`, ...).
    Storage(skillstore_backends::ErrorKind),
}

impl ErrorKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::Config => "config",
            ErrorKind::SkillNotFound => "skill_not_found",
            ErrorKind::SourceNotFound => "source_not_found",
            ErrorKind::InvalidSkill => "invalid_skill",
            ErrorKind::ContentBlocked => "content_blocked",
            ErrorKind::PatchMismatch => "patch_mismatch",
            ErrorKind::History => "history",
            ErrorKind::ReleaseNotFound => "release_not_found",
            ErrorKind::ReleaseRefused => "release_refused",
            ErrorKind::Audit => "audit",
            ErrorKind::Storage(kind) => kind.as_str(),
        }
    }
}

impl From<skillstore_backends::ErrorKind> for ErrorKind {
    fn from(kind: skillstore_backends::ErrorKind) -> Self {
        ErrorKind::Storage(kind)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Error {
    /// What kind of situation this is: one kind per variant, or the
    /// storage layer's kind.
    pub fn kind(&self) -> ErrorKind {
        use skillstore_backends::ErrorKind as Storage;
        match self {
            Error::Usage(_) => ErrorKind::Usage,
            Error::Config(_) => ErrorKind::Config,
            Error::SkillNotFound(_) | Error::NotInSource { .. } => ErrorKind::SkillNotFound,
            Error::InvalidSkillPath { .. } => ErrorKind::Storage(Storage::InvalidPath),
            Error::SourceNotFound(_) => ErrorKind::SourceNotFound,
            Error::ReadOnlySource(_) => ErrorKind::Storage(Storage::ReadOnly),
            Error::InvalidSkill { .. } => ErrorKind::InvalidSkill,
            Error::ContentBlocked { .. } => ErrorKind::ContentBlocked,
            Error::PatchMismatch { .. } => ErrorKind::PatchMismatch,
            Error::History(_) => ErrorKind::History,
            Error::ReleaseNotFound { .. } => ErrorKind::ReleaseNotFound,
            Error::ReleaseRefused(_) => ErrorKind::ReleaseRefused,
            Error::Audit(_) => ErrorKind::Audit,
            Error::Backend(e) => ErrorKind::Storage(e.kind()),
        }
    }
}

fn list_problems(problems: &[crate::skill::Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{} ({})", p.message, p.kind))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillstore_backends::ErrorKind as Storage;

    /// Every error kind's name, as the command line has always shown it.
    #[test]
    fn every_kind_keeps_its_stable_name() {
        let kinds = [
            (ErrorKind::Usage, "usage"),
            (ErrorKind::Config, "config"),
            (ErrorKind::SkillNotFound, "skill_not_found"),
            (ErrorKind::SourceNotFound, "source_not_found"),
            (ErrorKind::InvalidSkill, "invalid_skill"),
            (ErrorKind::ContentBlocked, "content_blocked"),
            (ErrorKind::PatchMismatch, "patch_mismatch"),
            (ErrorKind::History, "history"),
            (ErrorKind::ReleaseNotFound, "release_not_found"),
            (ErrorKind::ReleaseRefused, "release_refused"),
            (ErrorKind::Audit, "audit"),
            (ErrorKind::Storage(Storage::VersionConflict), "version_conflict"),
            (ErrorKind::Storage(Storage::ReadOnly), "read_only"),
            (ErrorKind::Storage(Storage::InvalidPath), "invalid_path"),
        ];
        for (kind, name) in kinds {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
        let errors = [
            (Error::Usage("u".into()), "usage"),
            (Error::Config("c".into()), "config"),
            (Error::SkillNotFound("s".into()), "skill_not_found"),
            (
                Error::InvalidSkillPath {
                    skill: "s".into(),
                    path: "p".into(),
                    reason: "r".into(),
                },
                "invalid_path",
            ),
            (Error::SourceNotFound("s".into()), "source_not_found"),
            (Error::ReadOnlySource("s".into()), "read_only"),
            (
                Error::NotInSource {
                    skill: "s".into(),
                    source_name: "t".into(),
                },
                "skill_not_found",
            ),
            (
                Error::InvalidSkill {
                    skill: "s".into(),
                    problems: Vec::new(),
                },
                "invalid_skill",
            ),
            (
                Error::ContentBlocked {
                    skill: "s".into(),
                    path: "p".into(),
                    reason: "r".into(),
                },
                "content_blocked",
            ),
            (
                Error::PatchMismatch {
                    skill: "s".into(),
                    path: "p".into(),
                    expected: 1,
                    found: 2,
                },
                "patch_mismatch",
            ),
            (Error::History("h".into()), "history"),
            (Error::Audit("a".into()), "audit"),
            (
                Error::ReleaseNotFound {
                    skill: "s".into(),
                    selector: "^1".into(),
                },
                "release_not_found",
            ),
            (Error::ReleaseRefused("r".into()), "release_refused"),
            (
                Error::Backend(skillstore_backends::Error::new(Storage::AlreadyExists)),
                "already_exists",
            ),
        ];
        for (error, name) in errors {
            assert_eq!(error.kind(), name, "{error}");
        }
    }
}

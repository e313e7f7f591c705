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
    /// The storage layer refused or failed.
    #[error(transparent)]
    Backend(#[from] skillstore_backends::Error),
}

impl Error {
    /// A stable snake_case name for the situation: one per variant, or the
    /// backend's [`skillstore_backends::ErrorKind`] name (`version_conflict`,
    /// `already_exists`, `read_only`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Usage(_) => "usage",
            Error::Config(_) => "config",
            Error::SkillNotFound(_) => "skill_not_found",
            Error::InvalidSkillPath { .. } => "invalid_path",
            Error::SourceNotFound(_) => "source_not_found",
            Error::ReadOnlySource(_) => "read_only",
            Error::NotInSource { .. } => "skill_not_found",
            Error::InvalidSkill { .. } => "invalid_skill",
            Error::ContentBlocked { .. } => "content_blocked",
            Error::PatchMismatch { .. } => "patch_mismatch",
            Error::History(_) => "history",
            Error::Backend(e) => e.kind().as_str(),
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

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
    /// The storage layer refused or failed.
    #[error(transparent)]
    Backend(#[from] skillstore_backends::Error),
}

//! Diagnostics: problems met while loading, as data.

use serde::Serialize;
use skillstore_backends::VPath;

pub use crate::skill::Severity;

/// One problem met while loading a catalog. Diagnostics are data: a stable
/// snake_case `kind`, the source and virtual path concerned, and a message
/// that never holds a host path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// `warning` (the skill or source still loaded) or `error` (it did not).
    pub severity: Severity,
    /// A stable name: a [`crate::ProblemKind`], a backend
    /// [`skillstore_backends::ErrorKind`], or one of the catalog's own
    /// (`source_not_found`, `source_unavailable`, `source_stale`,
    /// `duplicate_name`).
    pub kind: String,
    /// The name of the source concerned.
    pub source: Option<String>,
    /// The virtual path concerned.
    pub path: Option<VPath>,
    /// What happened, for a person.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic with every field given.
    pub fn new(
        severity: Severity,
        kind: impl Into<String>,
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
        }
    }
}

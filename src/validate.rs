//! Strict validation of a skill directory on the local filesystem, as
//! `skillstore validate` reports it.
//!
//! [`validate_path`] takes a skill directory, or the `SKILL.md` (or
//! `skill.md`) inside one, reads the file through a filesystem backend
//! rooted at the skill's directory (links within it only, the read limit,
//! regular files only), and applies every rule of the specification under
//! [`Strictness::Strict`].

use std::path::{Path, PathBuf};

use serde::Serialize;
use skillstore_backends::{ErrorKind as StorageKind, FsBackend, ReadOptions, SkillBackend, SymlinkPolicy, VPath};

use crate::diagnostic::DiagnosticKind;
use crate::skill::{LOWERCASE_SKILL_FILE, ProblemKind, SKILL_FILE, Severity, Strictness, parse_skill_md};

/// The verdict on one path, serialized as `validate --json` writes each
/// result: `{"path", "valid", "problems": [{"kind", "severity", "message"}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The path as it was given.
    pub path: String,
    /// True when no problem is an error.
    pub valid: bool,
    /// Every problem found, errors and warnings, in the order found.
    pub problems: Vec<Finding>,
}

/// One problem found by [`validate_path`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Which rule, or which refusal of the storage layer.
    pub kind: DiagnosticKind,
    /// `error` makes the skill invalid; a `warning` does not.
    pub severity: Severity,
    /// What is wrong, for a person.
    pub message: String,
}

impl Finding {
    fn error(kind: impl Into<DiagnosticKind>, message: impl Into<String>) -> Self {
        Finding {
            kind: kind.into(),
            severity: Severity::Error,
            message: message.into(),
        }
    }
}

/// Validates the skill at `path`: a skill directory, or its `SKILL.md` (or
/// `skill.md`). Any other path (a directory's supporting file, say) is an
/// error that says so. Never fails as a whole: what cannot be read is a
/// problem of the outcome.
pub async fn validate_path(path: &Path) -> Outcome {
    let problems = match skill_dir(path) {
        Ok((dir, name)) => check_dir(&dir, &name).await,
        Err(finding) => vec![finding],
    };
    Outcome {
        path: path.display().to_string(),
        valid: problems.iter().all(|p| p.severity < Severity::Error),
        problems,
    }
}

/// The skill directory `path` names, and that directory's name.
fn skill_dir(path: &Path) -> Result<(PathBuf, String), Finding> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| Finding::error(ProblemKind::MissingSkillMd, format!("cannot open the path: {e}")))?;
    let dir = if canonical.is_dir() {
        canonical
    } else {
        let is_skill_file = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == SKILL_FILE || n == LOWERCASE_SKILL_FILE);
        if !is_skill_file {
            return Err(Finding::error(
                StorageKind::InvalidPath,
                format!("not a skill: expected a skill directory or the {SKILL_FILE} inside one"),
            ));
        }
        canonical.parent().map(Path::to_path_buf).unwrap_or(canonical)
    };
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Finding::error(StorageKind::InvalidPath, "the skill directory needs a UTF-8 name"))?
        .to_owned();
    Ok((dir, name))
}

async fn check_dir(dir: &Path, dir_name: &str) -> Vec<Finding> {
    let backend = match FsBackend::with_policy(dir, SymlinkPolicy::WithinRoot) {
        Ok(backend) => backend.read_only(),
        Err(e) => {
            return vec![Finding::error(
                e.kind(),
                format!("cannot open the directory: {}", e.kind().describe()),
            )];
        }
    };
    let mut problems = Vec::new();
    let mut blob = read(&backend, SKILL_FILE).await;
    if matches!(&blob, Err(e) if e.kind() == StorageKind::NotFound)
        && let Ok(lower) = read(&backend, LOWERCASE_SKILL_FILE).await
    {
        problems.push(Finding {
            kind: ProblemKind::LowercaseSkillMd.into(),
            severity: Severity::Warning,
            message: format!("the file is named `{LOWERCASE_SKILL_FILE}`; the specification names it `{SKILL_FILE}`"),
        });
        blob = Ok(lower);
    }
    let blob = match blob {
        Ok(blob) => blob,
        Err(e) => {
            let kind: DiagnosticKind = match e.kind() {
                StorageKind::NotFound => ProblemKind::MissingSkillMd.into(),
                StorageKind::TooLarge => ProblemKind::FileTooLarge.into(),
                other => other.into(),
            };
            let message = match e.kind() {
                StorageKind::NotFound => format!("the directory holds no {SKILL_FILE}"),
                other => format!("cannot read {SKILL_FILE}: {}", other.describe()),
            };
            return vec![Finding::error(kind, message)];
        }
    };
    let parsed = parse_skill_md(&blob.data, Some(dir_name), Strictness::Strict);
    problems.extend(parsed.problems.into_iter().map(|p| Finding {
        kind: p.kind.into(),
        severity: p.severity,
        message: p.message,
    }));
    problems
}

async fn read(backend: &FsBackend, file: &str) -> skillstore_backends::Result<skillstore_backends::Blob> {
    let path = VPath::root().join(file)?;
    backend.read(&path, ReadOptions::default()).await
}

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

/// The skill directories `path` stands for: itself when it holds a
/// `SKILL.md` or is not a directory; otherwise, in name order, the
/// directories under it (one level, or two for a root of layers such as
/// `examples/skills`) that hold one. Hidden names and links are not
/// followed. A directory with no skill anywhere stands for itself, so its
/// validation says what is missing.
pub fn skill_dirs(path: &Path) -> Vec<PathBuf> {
    fn holds_skill(dir: &Path) -> bool {
        [SKILL_FILE, LOWERCASE_SKILL_FILE].iter().any(|f| dir.join(f).is_file())
    }
    fn subdirs(dir: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        dirs.sort();
        dirs
    }
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    if !is_dir || holds_skill(path) {
        return vec![path.to_path_buf()];
    }
    let mut found = Vec::new();
    for child in subdirs(path) {
        if holds_skill(&child) {
            found.push(child);
        } else {
            found.extend(subdirs(&child).into_iter().filter(|d| holds_skill(d)));
        }
    }
    if found.is_empty() {
        vec![path.to_path_buf()]
    } else {
        found
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
/// One problem found in a tree before it is published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeProblem {
    /// The file concerned, as a path in the tree.
    pub path: VPath,
    /// A stable snake_case kind (`name_mismatch`, `content_blocked`, ...).
    pub kind: String,
    /// What is wrong, for a person.
    pub message: String,
}

/// What [`check_tree`] found: errors refuse the tree, warnings do not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TreeReport {
    /// Problems that must stop an upload.
    pub errors: Vec<TreeProblem>,
    /// Problems worth reporting that do not.
    pub warnings: Vec<TreeProblem>,
}

/// Checks the `files` of a tree (read through `backend`, under its read
/// guards) as the editor checks a write, before any of them is uploaded:
/// every `SKILL.md` passes strict validation with its name matching its
/// directory, and every file of a skill passes `check` (the default blocks
/// executable binaries). A file outside any skill directory is checked for
/// content alone.
pub async fn check_tree(
    backend: &dyn SkillBackend,
    files: &[VPath],
    check: &dyn crate::edit::check::ContentCheck,
) -> TreeReport {
    use crate::edit::check::{PendingFile, Verdict};
    let skill_dirs: std::collections::HashSet<VPath> = files
        .iter()
        .filter(|f| f.file_name() == Some(SKILL_FILE))
        .filter_map(|f| f.parent())
        .collect();
    let mut report = TreeReport::default();
    for file in files {
        let data = match backend.read(file, ReadOptions::default()).await {
            Ok(blob) => blob.data,
            Err(e) => {
                report.errors.push(TreeProblem {
                    path: file.clone(),
                    kind: e.kind().as_str().to_owned(),
                    message: e.to_string(),
                });
                continue;
            }
        };
        let mut skill = None;
        let mut dir = file.parent();
        while let Some(current) = dir {
            if skill_dirs.contains(&current) {
                skill = Some(current);
                break;
            }
            dir = current.parent();
        }
        let (skill_name, relative) = match &skill {
            Some(dir) => (
                dir.file_name().unwrap_or_default(),
                file.strip_prefix(dir)
                    .map(|r| r.relative_str().to_owned())
                    .unwrap_or_default(),
            ),
            None => ("", file.relative_str().to_owned()),
        };
        if skill.is_some() && relative == SKILL_FILE {
            for problem in parse_skill_md(&data, Some(skill_name), Strictness::Strict).problems {
                let found = TreeProblem {
                    path: file.clone(),
                    kind: problem.kind.as_str().to_owned(),
                    message: problem.message,
                };
                if problem.severity == Severity::Error {
                    report.errors.push(found);
                } else {
                    report.warnings.push(found);
                }
            }
        }
        match check.check(&PendingFile {
            skill: skill_name,
            path: &relative,
            data: &data,
        }) {
            Verdict::Allow => {}
            Verdict::Warn(reason) => report.warnings.push(TreeProblem {
                path: file.clone(),
                kind: "content_warning".into(),
                message: reason,
            }),
            Verdict::Block(reason) => report.errors.push(TreeProblem {
                path: file.clone(),
                kind: "content_blocked".into(),
                message: reason,
            }),
        }
    }
    report
}

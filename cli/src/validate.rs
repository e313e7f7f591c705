//! `validate`: strict specification checks of skill directories.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use skillstore::backends::{ErrorKind, FsBackend, ReadOptions, SkillBackend, SymlinkPolicy, VPath};
use skillstore::{ProblemKind, Severity, Strictness, parse_skill_md};

use super::terminal::shown;
use super::{Failure, emit};

#[derive(Serialize)]
struct Report {
    results: Vec<Outcome>,
}

#[derive(Serialize)]
struct Outcome {
    path: String,
    valid: bool,
    problems: Vec<Finding>,
}

#[derive(Serialize)]
struct Finding {
    kind: String,
    severity: Severity,
    message: String,
}

pub async fn run(paths: &[PathBuf], json: bool) -> Result<(), Failure> {
    let mut results = Vec::with_capacity(paths.len());
    for path in paths {
        results.push(check(path).await);
    }
    let invalid = results.iter().filter(|r| !r.valid).count();
    let total = results.len();
    if json {
        let mut text = serde_json::to_vec(&Report { results }).map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        emit(&text)?;
    } else {
        let mut out = String::new();
        for result in &results {
            if result.valid {
                let _ = writeln!(out, "ok       {}", shown(&result.path));
            } else {
                let _ = writeln!(out, "invalid  {}", shown(&result.path));
            }
            for p in &result.problems {
                let _ = writeln!(
                    out,
                    "  {} [{}] {}",
                    p.severity.as_str(),
                    shown(&p.kind),
                    shown(&p.message)
                );
            }
        }
        emit(out.as_bytes())?;
    }
    if invalid == 0 {
        Ok(())
    } else {
        Err(Failure::failed(format!("{invalid} of {total} skill(s) are invalid")))
    }
}

fn finding(kind: &str, message: impl Into<String>) -> Finding {
    Finding {
        kind: kind.to_owned(),
        severity: Severity::Error,
        message: message.into(),
    }
}

/// Validates one skill directory, or the directory of a SKILL.md, reading
/// through the same guards as every other read.
async fn check(path: &Path) -> Outcome {
    let shown = path.display().to_string();
    let problems = match locate(path) {
        Ok((parent, dir_name)) => check_dir(&parent, &dir_name).await,
        Err(finding) => vec![finding],
    };
    Outcome {
        path: shown,
        valid: problems.is_empty(),
        problems,
    }
}

/// The parent directory and the skill directory's name.
fn locate(path: &Path) -> Result<(PathBuf, String), Finding> {
    let canonical = std::fs::canonicalize(path).map_err(|e| {
        finding(
            ProblemKind::MissingSkillMd.as_str(),
            format!("cannot open the path: {e}"),
        )
    })?;
    let dir = if canonical.is_file() {
        canonical.parent().map(Path::to_path_buf).unwrap_or(canonical)
    } else {
        canonical
    };
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| finding("invalid_path", "the skill directory needs a UTF-8 name"))?
        .to_owned();
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_else(|| dir.clone());
    Ok((parent, name))
}

async fn check_dir(parent: &Path, dir_name: &str) -> Vec<Finding> {
    let backend = match FsBackend::with_policy(parent, SymlinkPolicy::WithinRoot) {
        Ok(backend) => backend.read_only(),
        Err(e) => return vec![finding("invalid_path", format!("cannot open the directory: {e}"))],
    };
    let skill_md = match VPath::root().join(dir_name).and_then(|d| d.join("SKILL.md")) {
        Ok(path) => path,
        Err(e) => return vec![finding("invalid_path", e.to_string())],
    };
    let blob = match backend.read(&skill_md, ReadOptions::default()).await {
        Ok(blob) => blob,
        Err(e) => {
            let kind = match e.kind() {
                ErrorKind::NotFound => ProblemKind::MissingSkillMd.as_str(),
                ErrorKind::TooLarge => ProblemKind::FileTooLarge.as_str(),
                other => other.as_str(),
            };
            return vec![finding(kind, format!("cannot read SKILL.md: {e}"))];
        }
    };
    parse_skill_md(&blob.data, Some(dir_name), Strictness::Strict)
        .problems
        .into_iter()
        .map(|p| Finding {
            kind: p.kind.as_str().to_owned(),
            severity: p.severity,
            message: p.message,
        })
        .collect()
}

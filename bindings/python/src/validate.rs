//! `validate` and `parse_skill_md`: the specification's checks from
//! Python.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use skillstore::{Config, Strictness};
use skillstore_backends::{ErrorKind, ReadOptions, VPath};

use crate::runtime::block_on;

/// One problem found in a SKILL.md.
#[pyclass(name = "Problem", module = "skillstore", frozen, get_all)]
#[derive(Clone)]
pub struct PyProblem {
    /// Which rule (`invalid_name`, `missing_description`, ...).
    pub kind: String,
    /// `warning` or `error`.
    pub severity: &'static str,
    /// What is wrong, for a person.
    pub message: String,
}

#[pymethods]
impl PyProblem {
    fn __repr__(&self) -> String {
        format!("Problem(kind={:?}, severity={:?})", self.kind, self.severity)
    }
}

/// The result of validating one skill, or of parsing one SKILL.md.
#[pyclass(name = "Validation", module = "skillstore", frozen, get_all)]
pub struct PyValidation {
    /// The path validated (None for parsed text).
    pub path: Option<String>,
    /// True when no problem is an error.
    pub valid: bool,
    /// The frontmatter's name, when it could be read.
    pub name: Option<String>,
    /// The frontmatter's description, when it could be read.
    pub description: Option<String>,
    /// Every problem, in the order found.
    pub problems: Vec<PyProblem>,
}

#[pymethods]
impl PyValidation {
    fn __bool__(&self) -> bool {
        self.valid
    }

    fn __repr__(&self) -> String {
        format!(
            "Validation(path={:?}, valid={}, problems={})",
            self.path,
            if self.valid { "True" } else { "False" },
            self.problems.len()
        )
    }
}

fn problem(kind: &str, message: String) -> PyProblem {
    PyProblem {
        kind: kind.to_owned(),
        severity: "error",
        message,
    }
}

fn from_parsed(path: Option<String>, parsed: skillstore::Parsed) -> PyValidation {
    PyValidation {
        path,
        valid: parsed.is_valid(),
        name: parsed.skill.as_ref().map(|s| s.name.clone()),
        description: parsed.skill.as_ref().map(|s| s.description.clone()),
        problems: parsed
            .problems
            .into_iter()
            .map(|p| PyProblem {
                kind: p.kind.as_str().to_owned(),
                severity: p.severity.as_str(),
                message: p.message,
            })
            .collect(),
    }
}

fn failed(path: String, p: PyProblem) -> PyValidation {
    PyValidation {
        path: Some(path),
        valid: false,
        name: None,
        description: None,
        problems: vec![p],
    }
}

/// Validates skill directories (or the directory of a SKILL.md) strictly
/// against the specification: every problem is an error. The SKILL.md is
/// read through a namespace on the directory's parent, with the same
/// guards as every other read.
#[pyfunction]
pub fn validate(py: Python<'_>, paths: Vec<PathBuf>) -> Vec<PyValidation> {
    paths.iter().map(|p| validate_one(py, p)).collect()
}

fn validate_one(py: Python<'_>, path: &Path) -> PyValidation {
    let shown = path.display().to_string();
    let dir = if path.is_file() {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        path.to_path_buf()
    };
    let absolute = std::path::absolute(&dir).unwrap_or(dir);
    let (Some(name), Some(parent)) = (
        absolute.file_name().and_then(|n| n.to_str()).map(str::to_owned),
        absolute.parent(),
    ) else {
        return failed(
            shown,
            problem("invalid_path", "the skill directory needs a UTF-8 name".into()),
        );
    };
    let mut config = Config::default();
    let opened = config
        .set_mount("/", &parent.to_string_lossy(), parent)
        .and_then(|()| config.set_sources(["/"]))
        .and_then(|()| config.open());
    let ns = match opened {
        Ok(ns) => ns,
        Err(e) => {
            return failed(
                shown,
                problem("invalid_path", format!("cannot open the directory: {e}")),
            );
        }
    };
    let Ok(skill_md) = VPath::root().join(&name).and_then(|d| d.join("SKILL.md")) else {
        return failed(
            shown,
            problem(
                "invalid_path",
                format!("`{}` is not a valid directory name", name.escape_debug()),
            ),
        );
    };
    let backend = ns.backend();
    let limit = ns.load_options().read_limit;
    match block_on(py, backend.read(&skill_md, ReadOptions::with_limit(limit))) {
        Ok(blob) => from_parsed(
            Some(shown),
            skillstore::parse_skill_md(&blob.data, Some(&name), Strictness::Strict),
        ),
        Err(e) => {
            let kind = match e.kind() {
                ErrorKind::NotFound => "missing_skill_md",
                ErrorKind::TooLarge => "file_too_large",
                other => other.as_str(),
            };
            failed(shown, problem(kind, format!("cannot read SKILL.md: {e}")))
        }
    }
}

/// Parses SKILL.md content. `dir_name`, when given, is checked against the
/// frontmatter's name; `strict` makes every problem an error.
#[pyfunction]
#[pyo3(signature = (data, *, dir_name=None, strict=false))]
pub fn parse_skill_md(data: Vec<u8>, dir_name: Option<&str>, strict: bool) -> PyValidation {
    let strictness = if strict {
        Strictness::Strict
    } else {
        Strictness::Lenient
    };
    from_parsed(None, skillstore::parse_skill_md(&data, dir_name, strictness))
}

//! Exceptions: `SkillstoreError` with the stable `kind` (and the virtual
//! `path` where one is concerned), and one subclass per family.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    skillstore,
    SkillstoreError,
    PyException,
    "Any skillstore failure. `kind` is the stable snake_case name of the situation; `path` the virtual path concerned, or None."
);
create_exception!(
    skillstore,
    NotFoundError,
    SkillstoreError,
    "Nothing at the path, or no skill or source of that name."
);
create_exception!(
    skillstore,
    RefusedPathError,
    SkillstoreError,
    "A path was refused before any read: traversal, a bad segment, a link leading out or refused by policy, a file that is not regular."
);
create_exception!(
    skillstore,
    TooLargeError,
    SkillstoreError,
    "A file is larger than the read limit."
);
create_exception!(
    skillstore,
    ConflictError,
    SkillstoreError,
    "A conditional change found another version, an existing object, or a different number of matches."
);
create_exception!(
    skillstore,
    UnavailableError,
    SkillstoreError,
    "The storage could not be reached; the same call may succeed later."
);
create_exception!(
    skillstore,
    ReadOnlyError,
    SkillstoreError,
    "A write was aimed at a read-only source, mount or backend."
);
create_exception!(
    skillstore,
    InvalidSkillError,
    SkillstoreError,
    "A SKILL.md failed validation or a content check blocked a file; nothing was written."
);
create_exception!(
    skillstore,
    UsageError,
    SkillstoreError,
    "A malformed argument or configuration."
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SkillstoreError", py.get_type::<SkillstoreError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("RefusedPathError", py.get_type::<RefusedPathError>())?;
    m.add("TooLargeError", py.get_type::<TooLargeError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("InvalidSkillError", py.get_type::<InvalidSkillError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    Ok(())
}

/// The exception for `kind`, with `kind` and `path` set on it.
pub fn raise(py: Python<'_>, kind: &str, message: String, path: Option<&str>) -> PyErr {
    let err = match kind {
        "not_found" | "skill_not_found" | "source_not_found" | "not_a_directory" | "is_a_directory" => {
            NotFoundError::new_err(message)
        }
        "invalid_path" | "symlink_refused" | "symlink_escape" | "symlink_loop" | "dangling_symlink"
        | "not_regular_file" => RefusedPathError::new_err(message),
        "too_large" => TooLargeError::new_err(message),
        "version_conflict" | "already_exists" | "patch_mismatch" => ConflictError::new_err(message),
        "unavailable" => UnavailableError::new_err(message),
        "read_only" | "permission_denied" => ReadOnlyError::new_err(message),
        "invalid_skill" | "content_blocked" => InvalidSkillError::new_err(message),
        "usage" | "config" => UsageError::new_err(message),
        _ => SkillstoreError::new_err(message),
    };
    let value = err.value(py);
    // Setting attributes on a fresh exception object cannot fail.
    let _ = value.setattr("kind", kind);
    let _ = value.setattr("path", path);
    err
}

/// A library error as an exception.
pub fn core(py: Python<'_>, error: skillstore::Error) -> PyErr {
    let error = match error {
        skillstore::Error::Backend(e) => return backend(py, e),
        other => other,
    };
    let path = match &error {
        skillstore::Error::Backend(e) => e.path().map(|p| p.as_str().to_owned()),
        _ => None,
    };
    let problems: Vec<(String, String, String)> = match &error {
        skillstore::Error::InvalidSkill { problems, .. } => problems
            .iter()
            .map(|p| {
                (
                    p.kind.as_str().to_owned(),
                    p.severity.as_str().to_owned(),
                    p.message.clone(),
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let err = raise(py, error.kind().as_str(), error.to_string(), path.as_deref());
    if !problems.is_empty() {
        let _ = err.value(py).setattr("problems", problems);
    }
    err
}

/// A storage error as an exception. For failures of the storage service
/// itself, the service's own words (which may name its endpoint or bucket)
/// are left out: the message is the kind and the virtual path.
pub fn backend(py: Python<'_>, error: skillstore_backends::Error) -> PyErr {
    use skillstore_backends::ErrorKind;
    let path = error.path().map(|p| p.as_str().to_owned());
    let message = match error.kind() {
        ErrorKind::Unavailable | ErrorKind::Other | ErrorKind::PermissionDenied => match &path {
            Some(p) => format!("{}: {p}", error.kind().describe()),
            None => error.kind().describe().to_owned(),
        },
        _ => error.to_string(),
    };
    raise(py, error.kind().as_str(), message, path.as_deref())
}

/// Converts library results to Python results.
pub trait CoreResult<T> {
    /// The value, or the error as an exception.
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> CoreResult<T> for skillstore::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| core(py, e))
    }
}

impl<T> CoreResult<T> for skillstore_backends::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| backend(py, e))
    }
}

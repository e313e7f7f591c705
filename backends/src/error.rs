//! One error type for every backend, with a stable [`ErrorKind`].
//!
//! An [`Error`] names the virtual path it concerns and its kind, never a host
//! path, an endpoint, a bucket or a request URL: its message is safe to show
//! to an agent or a tenant. The underlying cause (an `io::Error`, an
//! `object_store` error) stays reachable through
//! [`std::error::Error::source`] for logs.

use std::fmt;

use crate::vpath::VPath;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, as a stable category. New kinds may be added; match with
/// a wildcard arm. [`ErrorKind::as_str`] gives a stable snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Nothing exists at the path.
    NotFound,
    /// A directory was expected and something else was found.
    NotADirectory,
    /// A file was expected and a directory was found.
    IsADirectory,
    /// The path was refused by [`VPath`] rules or by the backend.
    InvalidPath,
    /// The backend's host or service refused access.
    PermissionDenied,
    /// The object is larger than the read's byte limit.
    TooLarge,
    /// The object is not a regular file (a FIFO, socket or device).
    NotRegularFile,
    /// A symbolic link was met and the symlink policy refuses links.
    SymlinkRefused,
    /// A symbolic link leads outside the backend's root.
    SymlinkEscape,
    /// Symbolic links form a loop (or nest too deeply to resolve).
    SymlinkLoop,
    /// A symbolic link points at nothing.
    DanglingSymlink,
    /// A write or delete met a symbolic link at some component of its path.
    /// Writes never follow links, whatever the symlink policy, so a link
    /// cannot carry a write into another skill, layer or directory.
    WriteThroughSymlink,
    /// A create-only write found an existing object.
    AlreadyExists,
    /// A conditional write found a different version than expected.
    VersionConflict,
    /// The backend does not support the operation.
    Unsupported,
    /// A write was refused because the backend, mount or source is
    /// read-only.
    ReadOnly,
    /// The backend could not be reached or failed transiently; retrying later
    /// may succeed.
    Unavailable,
    /// The disk or the quota is full (`ENOSPC`, `EDQUOT`): nothing more can
    /// be written until space is freed.
    StorageFull,
    /// A source selects releases of a skill and none matches its selector
    /// (a channel pointing nowhere, a range no release is in): the skill is
    /// not served.
    ReleaseNotFound,
    /// Anything else; the source error says more.
    Other,
}

impl ErrorKind {
    /// The stable snake_case name of this kind, used in diagnostics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::NotADirectory => "not_a_directory",
            ErrorKind::IsADirectory => "is_a_directory",
            ErrorKind::InvalidPath => "invalid_path",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::NotRegularFile => "not_regular_file",
            ErrorKind::SymlinkRefused => "symlink_refused",
            ErrorKind::SymlinkEscape => "symlink_escape",
            ErrorKind::SymlinkLoop => "symlink_loop",
            ErrorKind::DanglingSymlink => "dangling_symlink",
            ErrorKind::WriteThroughSymlink => "write_through_symlink",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::VersionConflict => "version_conflict",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::StorageFull => "storage_full",
            ErrorKind::ReleaseNotFound => "release_not_found",
            ErrorKind::Other => "other",
        }
    }

    /// A short human description of the kind.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::NotADirectory => "not a directory",
            ErrorKind::IsADirectory => "is a directory",
            ErrorKind::InvalidPath => "invalid path",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::TooLarge => "too large",
            ErrorKind::NotRegularFile => "not a regular file",
            ErrorKind::SymlinkRefused => "symbolic link refused by policy",
            ErrorKind::SymlinkEscape => "symbolic link leads outside the root",
            ErrorKind::SymlinkLoop => "symbolic link loop",
            ErrorKind::DanglingSymlink => "dangling symbolic link",
            ErrorKind::WriteThroughSymlink => "writes do not go through symbolic links",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::VersionConflict => "version conflict",
            ErrorKind::Unsupported => "operation not supported by this backend",
            ErrorKind::ReadOnly => "read-only",
            ErrorKind::Unavailable => "backend unavailable",
            ErrorKind::StorageFull => "no space left (disk or quota full)",
            ErrorKind::ReleaseNotFound => "no release matches the source's selection",
            ErrorKind::Other => "backend error",
        }
    }

    /// True for kinds where the same call may succeed later
    /// ([`ErrorKind::Unavailable`]).
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorKind::Unavailable)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend error: a kind, the virtual path concerned, a detail written by
/// this crate, and the underlying cause.
///
/// `Display` shows the kind, the path and the detail, and never a host path.
pub struct Error {
    kind: ErrorKind,
    path: Option<VPath>,
    detail: Option<String>,
    public: bool,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// An error of `kind` with no path, detail or source yet.
    pub fn new(kind: ErrorKind) -> Self {
        Error {
            kind,
            path: None,
            detail: None,
            public: false,
            source: None,
        }
    }

    /// Shorthand for `Error::new(kind).with_path(path)`.
    pub fn at(kind: ErrorKind, path: &VPath) -> Self {
        Error::new(kind).with_path(path.clone())
    }

    /// Sets the virtual path the error concerns.
    pub fn with_path(mut self, path: VPath) -> Self {
        self.path = Some(path);
        self
    }

    /// Sets a detail shown after the kind and path. It must not hold host
    /// paths, endpoints, buckets, key prefixes or URLs.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self.public = false;
        self
    }

    /// Sets a detail that says why content was refused in words a caller
    /// of any front end may see (a digest that does not match, an archive
    /// refused, an entry listed twice): shown in catalog diagnostics and
    /// server answers, where other details stay in the log. It must name
    /// no host, URL, credential or host path.
    pub fn with_public_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self.public = true;
        self
    }

    /// The detail, when it was set with [`Error::with_public_detail`].
    pub fn public_detail(&self) -> Option<&str> {
        self.detail.as_deref().filter(|_| self.public)
    }

    /// Sets the underlying cause, kept for `source()` and never displayed.
    pub fn with_source(mut self, source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The stable kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The virtual path concerned, when known.
    pub fn path(&self) -> Option<&VPath> {
        self.path.as_ref()
    }

    /// The detail written by this crate, when any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Replaces the path (used when a mount re-roots a backend's error into
    /// the shared namespace).
    pub fn map_path(mut self, f: impl FnOnce(&VPath) -> Option<VPath>) -> Self {
        if let Some(p) = self.path.as_ref().and_then(f) {
            self.path = Some(p);
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.describe())?;
        if let Some(path) = &self.path {
            write!(f, ": {path}")?;
        }
        if let Some(detail) = &self.detail {
            write!(f, " ({detail})")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind)
            .field("path", &self.path)
            .field("detail", &self.detail);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|s| &**s as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_path_and_detail_but_not_source() {
        let path = VPath::new("/base/x/SKILL.md").unwrap();
        let source = std::io::Error::other("/home/someone/secret/root");
        let err = Error::at(ErrorKind::TooLarge, &path)
            .with_detail("11 bytes, limit 10")
            .with_source(source);
        let shown = err.to_string();
        assert_eq!(shown, "too large: /base/x/SKILL.md (11 bytes, limit 10)");
        assert!(!shown.contains("/home"));
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn kind_names_are_stable_snake_case() {
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::SymlinkEscape,
            ErrorKind::WriteThroughSymlink,
            ErrorKind::StorageFull,
            ErrorKind::VersionConflict,
            ErrorKind::Unavailable,
        ] {
            let name = kind.as_str();
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
        }
        assert!(ErrorKind::Unavailable.is_transient());
        assert!(!ErrorKind::NotFound.is_transient());
    }
}

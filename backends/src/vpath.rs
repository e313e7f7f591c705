//! [`VPath`]: the only path type a backend accepts.
//!
//! A virtual path is absolute, POSIX, `/`-separated and UTF-8. It is checked
//! once, when it is built, and is then known to be safe to hand to any
//! backend: it cannot name a parent directory, cannot hide a second path
//! behind a separator of another platform, and cannot smuggle control bytes
//! to a server or a kernel.
//!
//! Nothing is ever normalized: `/a/./b`, `/a//b` and `/a/b/..` are refused,
//! never rewritten into something else. `%2e%2e` is a literal four-character
//! name; nothing here decodes percent escapes.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// The longest virtual path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// An absolute, validated virtual path such as `/base/pdf-tools/SKILL.md`.
///
/// Guarantees, for every value of this type:
/// - it starts with `/`, and is `/` alone only for the root;
/// - every segment is non-empty and is neither `.` nor `..`;
/// - it holds no backslash, no NUL and no other control character;
/// - it is at most [`MAX_PATH_BYTES`] bytes long.
///
/// Cloning is cheap (a reference count).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VPath(Arc<str>);

impl VPath {
    /// The root, `/`.
    pub fn root() -> Self {
        VPath(Arc::from("/"))
    }

    /// Parses an absolute virtual path, refusing (never repairing) anything
    /// unsafe; the fault says why. [`VPath::new`] reports it as an error.
    pub(crate) fn parse(path: &str) -> Result<Self, Fault> {
        check_length(path)?;
        let Some(rest) = path.strip_prefix('/') else {
            return Err(Fault::new(path, "a virtual path must be absolute (start with `/`)"));
        };
        if rest.is_empty() {
            return Ok(Self::root());
        }
        check_relative(path, rest)?;
        Ok(VPath(Arc::from(path)))
    }

    /// Appends a relative path under the rules of [`VPath::parse`];
    /// [`VPath::join`] reports the fault as an error.
    pub(crate) fn join_checked(&self, relative: &str) -> Result<Self, Fault> {
        if relative.starts_with('/') {
            return Err(Fault::new(relative, "expected a relative path, found an absolute one"));
        }
        if relative.is_empty() {
            return Err(Fault::new(relative, "the relative path is empty"));
        }
        check_relative(relative, relative)?;
        let base = if self.is_root() { "" } else { &self.0 };
        let mut joined = String::with_capacity(base.len() + 1 + relative.len());
        joined.push_str(base);
        joined.push('/');
        joined.push_str(relative);
        check_length(&joined)?;
        Ok(VPath(Arc::from(joined)))
    }

    /// The path as a string, always starting with `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for `/`.
    pub fn is_root(&self) -> bool {
        &*self.0 == "/"
    }

    /// The segments, outermost first; empty for the root.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.0[1..].split('/').filter(|s| !s.is_empty())
    }

    /// The path without its leading `/` (empty for the root).
    pub fn relative_str(&self) -> &str {
        &self.0[1..]
    }

    /// The last segment, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.is_root() {
            None
        } else {
            self.0.rsplit('/').next()
        }
    }

    /// The enclosing directory, or `None` for the root.
    pub fn parent(&self) -> Option<VPath> {
        if self.is_root() {
            return None;
        }
        let cut = self.0.rfind('/').unwrap_or(0);
        Some(if cut == 0 {
            Self::root()
        } else {
            VPath(Arc::from(&self.0[..cut]))
        })
    }

    /// True when `prefix` is this path or one of its ancestors, compared by
    /// whole segments: `/team` is a prefix of `/team/x` but not of `/teamwork`.
    pub fn starts_with(&self, prefix: &VPath) -> bool {
        if prefix.is_root() {
            return true;
        }
        match self.0.strip_prefix(prefix.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        }
    }

    /// The part of this path below `prefix`, re-rooted at `/`
    /// (`/team/x/y` without `/team` is `/x/y`), or `None` when `prefix` is
    /// not an ancestor by whole segments.
    pub fn strip_prefix(&self, prefix: &VPath) -> Option<VPath> {
        if !self.starts_with(prefix) {
            return None;
        }
        if prefix.is_root() {
            return Some(self.clone());
        }
        let rest = &self.0[prefix.0.len()..];
        Some(if rest.is_empty() {
            Self::root()
        } else {
            VPath(Arc::from(rest))
        })
    }
}

/// True when `name` can be one segment of a [`VPath`]: non-empty, not `.`
/// or `..`, and free of `/`, backslashes and control characters.
pub fn is_valid_segment(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Why a string is not a [`VPath`]: the reason, and the string as shown
/// (escaped, and cut short when long).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    /// The reason and the offending string, escaped.
    pub(crate) detail: String,
}

impl Fault {
    fn new(path: &str, why: &str) -> Self {
        Fault {
            detail: format!("{why}: {}", path.escape_debug()),
        }
    }
}

fn check_length(path: &str) -> Result<(), Fault> {
    if path.len() > MAX_PATH_BYTES {
        let shown: String = path.chars().take(64).collect();
        return Err(Fault::new(
            &format!("{shown}..."),
            &format!(
                "the path is {} bytes long; at most {MAX_PATH_BYTES} are allowed",
                path.len()
            ),
        ));
    }
    Ok(())
}

/// Checks `rest`, the part of `whole` after its leading `/` (if any).
fn check_relative(whole: &str, rest: &str) -> Result<(), Fault> {
    for segment in rest.split('/') {
        match segment {
            "" => {
                return Err(Fault::new(
                    whole,
                    "the path has an empty segment (`//` or a trailing `/`)",
                ));
            }
            "." => return Err(Fault::new(whole, "the path has a `.` segment")),
            ".." => return Err(Fault::new(whole, "the path has a `..` segment")),
            _ => {}
        }
        if let Some(c) = segment.chars().find(|c| *c == '\\' || c.is_control()) {
            let what = if c == '\\' {
                "a backslash".to_owned()
            } else {
                format!("the control character U+{:04X}", c as u32)
            };
            return Err(Fault::new(whole, &format!("the path holds {what}")));
        }
    }
    Ok(())
}

impl fmt::Display for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VPath({:?})", self.0)
    }
}

impl AsRef<str> for VPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for VPath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for VPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

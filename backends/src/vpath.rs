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

use crate::error::{Error, ErrorKind, Result};

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
    /// unsafe. Errors have kind [`ErrorKind::InvalidPath`].
    pub fn new(path: impl AsRef<str>) -> Result<Self> {
        let path = path.as_ref();
        check_length(path)?;
        let Some(rest) = path.strip_prefix('/') else {
            return Err(invalid(path, "a virtual path must be absolute (start with `/`)"));
        };
        if rest.is_empty() {
            return Ok(Self::root());
        }
        check_relative(path, rest)?;
        Ok(VPath(Arc::from(path)))
    }

    /// Appends a relative path (`a/b/c`), checking it with the same rules as
    /// [`VPath::new`]. An absolute or empty `relative` is refused.
    pub fn join(&self, relative: &str) -> Result<Self> {
        if relative.starts_with('/') {
            return Err(invalid(relative, "expected a relative path, found an absolute one"));
        }
        if relative.is_empty() {
            return Err(invalid(relative, "the relative path is empty"));
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

    /// This path re-rooted under `base` (`/x` under `/team` is `/team/x`).
    pub fn rebase(&self, base: &VPath) -> Result<VPath> {
        if self.is_root() {
            Ok(base.clone())
        } else {
            base.join(self.relative_str())
        }
    }
}

/// True when `name` can be one segment of a [`VPath`]: non-empty, not `.`
/// or `..`, and free of `/`, backslashes and control characters.
pub fn is_valid_segment(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

fn check_length(path: &str) -> Result<()> {
    if path.len() > MAX_PATH_BYTES {
        let shown: String = path.chars().take(64).collect();
        return Err(invalid(
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
fn check_relative(whole: &str, rest: &str) -> Result<()> {
    for segment in rest.split('/') {
        match segment {
            "" => return Err(invalid(whole, "the path has an empty segment (`//` or a trailing `/`)")),
            "." => return Err(invalid(whole, "the path has a `.` segment")),
            ".." => return Err(invalid(whole, "the path has a `..` segment")),
            _ => {}
        }
        if let Some(c) = segment.chars().find(|c| *c == '\\' || c.is_control()) {
            let what = if c == '\\' {
                "a backslash".to_owned()
            } else {
                format!("the control character U+{:04X}", c as u32)
            };
            return Err(invalid(whole, &format!("the path holds {what}")));
        }
    }
    Ok(())
}

fn invalid(path: &str, why: &str) -> Error {
    Error::new(ErrorKind::InvalidPath).with_detail(format!("{why}: {}", path.escape_debug()))
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

impl std::str::FromStr for VPath {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        VPath::new(s)
    }
}

impl TryFrom<&str> for VPath {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        VPath::new(s)
    }
}

impl TryFrom<String> for VPath {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        VPath::new(&s)
    }
}

impl serde::Serialize for VPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for VPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        VPath::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> VPath {
        VPath::new(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn refused(s: &str) {
        let err = VPath::new(s).expect_err(s);
        assert_eq!(err.kind(), ErrorKind::InvalidPath, "{s:?}");
    }

    #[test]
    fn accepts_plain_absolute_paths() {
        assert!(ok("/").is_root());
        assert_eq!(ok("/a/b.md").as_str(), "/a/b.md");
        assert_eq!(ok("/café/日本語").segments().collect::<Vec<_>>(), ["café", "日本語"]);
        assert_eq!(ok("/%2e%2e/x").segments().next(), Some("%2e%2e"));
        assert_eq!(ok("/...").file_name(), Some("..."));
        assert_eq!(ok("/.hidden").file_name(), Some(".hidden"));
    }

    #[test]
    fn refuses_every_unsafe_shape() {
        for s in [
            "",
            "a",
            "a/b",
            "/a/../b",
            "/..",
            "/a/..",
            "/./a",
            "/a/.",
            "//",
            "/a//b",
            "/a/",
            "/a\\b",
            "\\a",
            "/a\0b",
            "/a\nb",
            "/a\u{7f}",
            "/a\u{85}b",
            "/a\tb",
        ] {
            refused(s);
        }
    }

    #[test]
    fn length_limit_is_in_bytes_and_inclusive() {
        let at_limit = format!("/{}", "é".repeat((MAX_PATH_BYTES - 1) / 2)) + "a";
        assert_eq!(at_limit.len(), MAX_PATH_BYTES);
        ok(&at_limit);
        refused(&format!("{at_limit}b"));
    }

    #[test]
    fn join_checks_like_new() {
        let base = ok("/base");
        assert_eq!(base.join("x/SKILL.md").unwrap().as_str(), "/base/x/SKILL.md");
        assert_eq!(VPath::root().join("x").unwrap().as_str(), "/x");
        for bad in ["", "/x", "../x", "x/..", "x//y", "x/", ".", "x\\y", "x\0"] {
            assert_eq!(base.join(bad).unwrap_err().kind(), ErrorKind::InvalidPath, "{bad:?}");
        }
        let long = "a".repeat(MAX_PATH_BYTES);
        assert_eq!(base.join(&long).unwrap_err().kind(), ErrorKind::InvalidPath);
    }

    #[test]
    fn segment_aware_prefixes() {
        let team = ok("/team");
        assert!(ok("/team").starts_with(&team));
        assert!(ok("/team/x").starts_with(&team));
        assert!(!ok("/teamwork").starts_with(&team));
        assert!(!ok("/teamwork/x").starts_with(&team));
        assert!(ok("/anything").starts_with(&VPath::root()));
        assert_eq!(ok("/team/x/y").strip_prefix(&team).unwrap().as_str(), "/x/y");
        assert!(ok("/team").strip_prefix(&team).unwrap().is_root());
        assert_eq!(ok("/teamwork").strip_prefix(&team), None);
        assert_eq!(ok("/x/y").rebase(&team).unwrap().as_str(), "/team/x/y");
        assert_eq!(VPath::root().rebase(&team).unwrap(), team);
    }

    #[test]
    fn parent_and_file_name() {
        assert_eq!(ok("/a/b/c").parent().unwrap().as_str(), "/a/b");
        assert!(ok("/a").parent().unwrap().is_root());
        assert_eq!(VPath::root().parent(), None);
        assert_eq!(VPath::root().file_name(), None);
        assert_eq!(ok("/a/b").file_name(), Some("b"));
    }

    #[test]
    fn serde_round_trip_refuses_bad_input() {
        let p: VPath = serde_json::from_str("\"/a/b\"").unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"/a/b\"");
        assert!(serde_json::from_str::<VPath>("\"/a/../b\"").is_err());
    }
}

//! The constructors of [`VPath`] that report an [`Error`].
//!
//! [`crate::vpath`] knows nothing of errors: it checks strings and says why
//! one is refused. This module turns that reason into an
//! [`ErrorKind::InvalidPath`] error, so that the error type may name paths
//! without the path type depending on it.

use crate::error::{Error, ErrorKind, Result};
use crate::vpath::{Fault, VPath};

impl From<Fault> for Error {
    fn from(fault: Fault) -> Self {
        Error::new(ErrorKind::InvalidPath).with_detail(fault.detail)
    }
}

impl VPath {
    /// Parses an absolute virtual path, refusing (never repairing) anything
    /// unsafe. Errors have kind [`ErrorKind::InvalidPath`].
    pub fn new(path: impl AsRef<str>) -> Result<Self> {
        Ok(VPath::parse(path.as_ref())?)
    }

    /// Appends a relative path (`a/b/c`), checking it with the same rules as
    /// [`VPath::new`]. An absolute or empty `relative` is refused.
    pub fn join(&self, relative: &str) -> Result<Self> {
        Ok(self.join_checked(relative)?)
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

impl<'de> serde::Deserialize<'de> for VPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        VPath::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vpath::MAX_PATH_BYTES;

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

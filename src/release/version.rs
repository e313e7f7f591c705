//! The words of releases: a release version, a channel name, and a
//! selector (an exact version, a channel, or a Cargo range).
//!
//! A version is a plain `MAJOR.MINOR.PATCH[-PRE]` written the one way the
//! `semver` crate prints it: no build metadata (`+build`, which semver
//! ignores when ordering, so two spellings would name one release), no
//! leading `v`, no spaces. Such a string is made of ASCII letters, digits,
//! `.` and `-` only, never `.` or `..` alone, so it is always one safe path
//! segment.

use std::fmt;

use crate::error::{Error, Result};

/// The longest version string accepted, in bytes.
pub const MAX_VERSION_LEN: usize = 64;

/// The longest channel name accepted, in bytes.
pub const MAX_CHANNEL_LEN: usize = 64;

/// The channel every release moves to itself.
pub const LATEST: &str = "latest";

/// Parses a release version: a plain `MAJOR.MINOR.PATCH[-PRE]` in its one
/// canonical spelling. Anything else (build metadata, a leading `v`, a
/// range, a path) is refused with [`Error::Usage`].
pub fn parse_version(text: &str) -> Result<semver::Version> {
    let refuse = |why: &str| {
        Error::Usage(format!(
            "`{}` is not a release version ({why}); write MAJOR.MINOR.PATCH[-PRE], as `1.4.0` or `2.0.0-rc.1`",
            text.escape_debug()
        ))
    };
    if text.len() > MAX_VERSION_LEN {
        return Err(refuse("too long"));
    }
    let version = semver::Version::parse(text).map_err(|e| refuse(&e.to_string()))?;
    if !version.build.is_empty() {
        return Err(refuse("build metadata does not order releases, so it cannot name one"));
    }
    if version.to_string() != text {
        return Err(refuse("not in its canonical spelling"));
    }
    Ok(version)
}

/// True for a channel name: `[a-z][a-z0-9-]*`, at most
/// [`MAX_CHANNEL_LEN`] bytes. No channel name parses as a version or
/// holds a path separator.
pub fn is_channel_name(text: &str) -> bool {
    let mut bytes = text.bytes();
    text.len() <= MAX_CHANNEL_LEN
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Fails with [`Error::Usage`] unless `text` is a channel name.
pub fn check_channel(text: &str) -> Result<()> {
    if is_channel_name(text) {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "`{}` is not a channel name (a lowercase letter, then lowercase letters, digits and hyphens)",
            text.escape_debug()
        )))
    }
}

/// What picks one release of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Exactly this version, yanked or not (`1.1.0`).
    Exact(semver::Version),
    /// The version a channel points to, unless it is yanked (`stable`).
    Channel(String),
    /// The greatest release that is not yanked and matches the range, by
    /// Cargo's rules (`^1`, `>=1.2, <2`, `~1.4`, `*`).
    Range(semver::VersionReq),
}

impl Selector {
    /// Parses a selector: a channel name, else a plain version (an exact
    /// pin), else a Cargo version requirement. A bare version is exact
    /// here, as in `read NAME@1.1.0`; write `^1.1.0` for Cargo's caret.
    pub fn parse(text: &str) -> Result<Selector> {
        if is_channel_name(text) {
            return Ok(Selector::Channel(text.to_owned()));
        }
        if let Ok(version) = parse_version(text) {
            return Ok(Selector::Exact(version));
        }
        if text.len() > 256 {
            return Err(Error::Usage("a version range is at most 256 bytes".into()));
        }
        if text.contains('+') {
            return Err(Error::Usage(format!(
                "`{}`: build metadata (`+...`) does not order releases, so no selector holds it",
                text.escape_debug()
            )));
        }
        semver::VersionReq::parse(text).map(Selector::Range).map_err(|e| {
            Error::Usage(format!(
                "`{}` is neither a channel, a version nor a version range: {e}",
                text.escape_debug()
            ))
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Exact(v) => write!(f, "{v}"),
            Selector::Channel(c) => f.write_str(c),
            Selector::Range(r) => write!(f, "{r}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_canonical_versions_are_release_versions() {
        for good in ["0.0.0", "1.4.0", "2.0.0-rc.1", "1.0.0-alpha-2.x"] {
            assert_eq!(parse_version(good).unwrap().to_string(), good);
        }
        for bad in [
            "",
            "1",
            "1.2",
            "v1.2.3",
            "1.2.3+build",
            "1.2.3+../x",
            "01.2.3",
            " 1.2.3",
            "1.2.3 ",
            "../1.2.3",
            "1.2.3/..",
            "1.2.3-",
            "1.2.3-a..b",
            "1.2.3-a/b",
            "^1.2.3",
            "1.2.3\0",
        ] {
            assert_eq!(parse_version(bad).unwrap_err().kind(), "usage", "{bad:?}");
        }
        assert!(parse_version(&format!("1.2.3-{}", "a".repeat(80))).is_err());
    }

    #[test]
    fn channel_names_and_selectors() {
        for good in ["latest", "stable", "beta-2", "a"] {
            assert!(is_channel_name(good), "{good}");
        }
        for bad in ["", "Stable", "2x", "-a", "a_b", "a/b", "a.b", ".."] {
            assert!(!is_channel_name(bad), "{bad}");
        }
        assert_eq!(Selector::parse("stable").unwrap(), Selector::Channel("stable".into()));
        assert!(matches!(Selector::parse("1.1.0").unwrap(), Selector::Exact(_)));
        assert!(matches!(Selector::parse("^1").unwrap(), Selector::Range(_)));
        assert!(matches!(Selector::parse("*").unwrap(), Selector::Range(_)));
        assert!(matches!(Selector::parse(">=1.2, <2").unwrap(), Selector::Range(_)));
        assert_eq!(Selector::parse("no way").unwrap_err().kind(), "usage");
        assert_eq!(Selector::parse("1.0.0+x").unwrap_err().kind(), "usage");
        assert_eq!(Selector::parse("^1.0.0+x").unwrap_err().kind(), "usage");
    }
}

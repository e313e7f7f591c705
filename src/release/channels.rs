//! A skill's channels file (`channels.json`): the one mutable record of its
//! releases, moved only by conditional puts.
//!
//! ```json
//! {"format": 1, "last": "2.0.0", "channels": {"latest": "2.0.0", "stable": "1.1.0"}, "yanked": ["1.0.1"]}
//! ```
//!
//! Which releases exist is what manifests say; this file adds where each
//! channel points, which releases are yanked, and the greatest version
//! ever released (`last`, which a yank does not lower, so a yanked
//! version is never released again).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::version::{LATEST, is_channel_name, parse_version};
use crate::error::{Error, Result};

/// The format written.
pub const FORMAT: u32 = 1;

/// The largest channels file read, in bytes (1 MiB).
pub const MAX_CHANNELS_BYTES: u64 = 1024 * 1024;

/// The most channels a skill may have.
pub const MAX_CHANNELS: usize = 256;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    format: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<String>,
    #[serde(default)]
    channels: BTreeMap<String, String>,
    #[serde(default)]
    yanked: Vec<String>,
}

/// The channels, yanked versions and last release of one skill.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Channels {
    /// The greatest version released; none before the first release.
    pub last: Option<semver::Version>,
    /// Channel name -> the version it points to.
    pub channels: BTreeMap<String, semver::Version>,
    /// Versions kept readable by an exact pin only.
    pub yanked: BTreeSet<semver::Version>,
}

impl Channels {
    /// Reads a channels file, refusing it whole (with
    /// [`Error::ReleaseRefused`]) when it is not well formed: every version
    /// a plain release version, every channel name a channel name.
    pub fn parse(bytes: &[u8], skill: &str) -> Result<Channels> {
        let refuse = |why: String| Error::ReleaseRefused(format!("the channels of `{skill}` are refused: {why}"));
        let stored: Stored = serde_json::from_slice(bytes).map_err(|e| refuse(e.to_string()))?;
        if stored.format != FORMAT {
            return Err(refuse(format!("format {} is not {FORMAT}", stored.format)));
        }
        let version = |text: &str| parse_version(text).map_err(|e| refuse(e.to_string()));
        let mut channels = BTreeMap::new();
        for (name, v) in &stored.channels {
            if !is_channel_name(name) {
                return Err(refuse(format!("`{}` is not a channel name", name.escape_debug())));
            }
            channels.insert(name.clone(), version(v)?);
        }
        if channels.len() > MAX_CHANNELS {
            return Err(refuse(format!("more than {MAX_CHANNELS} channels")));
        }
        Ok(Channels {
            last: stored.last.as_deref().map(version).transpose()?,
            channels,
            yanked: stored.yanked.iter().map(|v| version(v)).collect::<Result<_>>()?,
        })
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let stored = Stored {
            format: FORMAT,
            last: self.last.as_ref().map(ToString::to_string),
            channels: self.channels.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
            yanked: self.yanked.iter().map(ToString::to_string).collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&stored).expect("channels serialize");
        bytes.push(b'\n');
        bytes
    }

    /// Takes in a new release `version`: `last` and `latest` move to it
    /// when it is greater than what they name (a slower writer of a lower
    /// version never moves them back).
    pub fn released(&mut self, version: &semver::Version) {
        if self.last.as_ref().is_none_or(|last| version > last) {
            self.last = Some(version.clone());
        }
        let latest = self.channels.get(LATEST);
        if latest.is_none_or(|latest| version > latest || self.yanked.contains(latest)) {
            self.channels.insert(LATEST.to_owned(), version.clone());
        }
    }

    /// Yanks `version`: it leaves every channel; `latest` moves to the
    /// greatest of `existing` that is not yanked (or is removed).
    pub fn yank(&mut self, version: &semver::Version, existing: &[semver::Version]) {
        self.yanked.insert(version.clone());
        self.channels.retain(|_, v| v != version);
        if !self.channels.contains_key(LATEST)
            && let Some(greatest) = existing.iter().filter(|v| !self.yanked.contains(v)).max()
        {
            self.channels.insert(LATEST.to_owned(), greatest.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> semver::Version {
        semver::Version::parse(text).unwrap()
    }

    #[test]
    fn a_round_trip_and_refusals() {
        let mut c = Channels::default();
        c.released(&v("1.0.0"));
        c.released(&v("2.0.0"));
        c.released(&v("1.5.0"));
        assert_eq!(c.last, Some(v("2.0.0")));
        assert_eq!(c.channels[LATEST], v("2.0.0"));
        c.yank(&v("2.0.0"), &[v("1.0.0"), v("1.5.0"), v("2.0.0")]);
        assert_eq!(c.channels[LATEST], v("1.5.0"));
        assert_eq!(c.last, Some(v("2.0.0")));
        assert_eq!(Channels::parse(&c.to_bytes(), "s").unwrap(), c);
        for bad in [
            r#"{"format": 2}"#,
            r#"{"format": 1, "channels": {"Bad": "1.0.0"}}"#,
            r#"{"format": 1, "channels": {"a": "../1"}}"#,
            r#"{"format": 1, "yanked": ["1.0.0+x"]}"#,
            r#"{"format": 1, "extra": 1}"#,
        ] {
            assert_eq!(
                Channels::parse(bad.as_bytes(), "s").unwrap_err().kind(),
                "release_refused",
                "{bad}"
            );
        }
    }
}

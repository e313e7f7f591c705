//! Where releases live inside a source.
//!
//! ```text
//! SOURCE/.releases/NAME/channels.json        channels, yanked versions, the last release (moved by conditional puts)
//! SOURCE/.releases/NAME/VERSION.json         a release's manifest: the release exists once this does
//! SOURCE/.releases/NAME/VERSION/ID/...       its files, as the skill's directory held them
//! ```
//!
//! `ID` is a fresh name each attempt at a release writes its files under,
//! so two writers racing for one version never write into one directory:
//! whichever creates the manifest first wins, and the other's files are
//! never named by a manifest. The manifest sits beside the files rather
//! than among them, so a skill may hold a file of any name.

use skillstore_backends::VPath;

use crate::error::Result;

/// The directory at a source's root that holds every skill's releases. It
/// starts with `.`, so no skill is ever named after it.
pub const RELEASES_DIR: &str = ".releases";

/// The file, in a skill's releases directory, holding its channels.
pub const CHANNELS_FILE: &str = "channels.json";

/// The length of a files directory's name: lowercase hex digits.
pub const ID_LEN: usize = 16;

/// `SOURCE/.releases/NAME`: every release of one skill.
pub fn skill_dir(source: &VPath, name: &str) -> Result<VPath> {
    Ok(source.join(RELEASES_DIR)?.join(name)?)
}

/// `SOURCE/.releases/NAME/channels.json`.
pub fn channels_path(source: &VPath, name: &str) -> Result<VPath> {
    Ok(skill_dir(source, name)?.join(CHANNELS_FILE)?)
}

/// `SOURCE/.releases/NAME/VERSION.json`: the manifest of one release.
pub fn manifest_path(source: &VPath, name: &str, version: &semver::Version) -> Result<VPath> {
    Ok(skill_dir(source, name)?.join(&format!("{version}.json"))?)
}

/// `SOURCE/.releases/NAME/VERSION/ID`: the directory holding a release's
/// files (`ID` as [`is_id`] says).
pub fn files_dir(source: &VPath, name: &str, version: &semver::Version, id: &str) -> Result<VPath> {
    Ok(skill_dir(source, name)?.join(&version.to_string())?.join(id)?)
}

/// True for the name of a files directory: [`ID_LEN`] lowercase hex digits.
pub fn is_id(text: &str) -> bool {
    text.len() == ID_LEN && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A fresh files directory name: the hash of the moment, the process, a
/// counter and a random state, so concurrent attempts (in one process or
/// several) do not share one.
pub fn fresh_id(name: &str, version: &semver::Version) -> String {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let seed = format!(
        "{name}@{version} {nanos} {} {} {}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        RandomState::new().hash_one(nanos)
    );
    crate::integrity::digest::sha256_hex(seed.as_bytes())[..ID_LEN].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_below_the_skill_releases() {
        let source = VPath::new("/team").unwrap();
        let v = semver::Version::parse("1.2.0-rc.1").unwrap();
        assert_eq!(
            manifest_path(&source, "pdf", &v).unwrap().as_str(),
            "/team/.releases/pdf/1.2.0-rc.1.json"
        );
        let id = fresh_id("pdf", &v);
        assert!(is_id(&id));
        assert_ne!(id, fresh_id("pdf", &v));
        assert_eq!(
            files_dir(&source, "pdf", &v, &id).unwrap().as_str(),
            format!("/team/.releases/pdf/1.2.0-rc.1/{id}")
        );
        assert!(!is_id("../../../../x"));
        assert!(!is_id("ABCDEF0123456789"));
    }
}

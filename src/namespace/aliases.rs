//! Sources that alias one another: where a source's directory really
//! is, judged on the storage itself.

use std::path::Path;

use skillstore_backends::VPath;

use crate::error::{Error, Result};
use crate::location::Location;
use crate::source::{Source, SourceList};

use super::open::Mount;

/// Where a source's directory really is, to find sources that alias or
/// hold one another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Identity {
    /// A local directory: its (device, inode) and its ancestors', nearest
    /// first.
    Dir(Vec<(u64, u64)>),
    /// Storage addressed by name: a storage key, then path segments.
    Keyed(Vec<String>),
    /// The directory does not exist (yet): it holds nothing to alias.
    Absent,
}

pub(super) fn identity(mount: &Mount, mounts: &[Mount], inner: &VPath) -> Identity {
    match &mount.location {
        Location::Dir(dir) => dir_identity(&dir.join(inner.relative_str())),
        Location::S3 { bucket, prefix } => {
            let mut key = vec![format!("s3:{bucket}")];
            key.extend(prefix.split('/').filter(|s| !s.is_empty()).map(str::to_owned));
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
        Location::Git { remote, .. } => {
            let mut key = vec![format!("git:{remote}@{}", mount.opened.commit().unwrap_or_default())];
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
        Location::Discovery(url) => {
            let mut key = vec![format!("discovery:{url}")];
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
        Location::Memory(_) => {
            // Each memory mount is a store of its own.
            let index = mounts.iter().position(|m| std::ptr::eq(m, mount)).unwrap_or(usize::MAX);
            let mut key = vec![format!("memory:{index}")];
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
    }
}

/// The identities of a local directory and its ancestors. The path was
/// already opened under its mount's policy; resolving it here serves only
/// to compare sources, never to open one.
fn dir_identity(path: &Path) -> Identity {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(canonical) = std::fs::canonicalize(path) else {
            return Identity::Absent;
        };
        let chain = canonical
            .ancestors()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        Identity::Dir(chain)
    }
    #[cfg(not(unix))]
    {
        match std::fs::canonicalize(path) {
            Ok(canonical) => Identity::Keyed(
                canonical
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect(),
            ),
            Err(_) => Identity::Absent,
        }
    }
}

/// True when `a` and `b` are the same directory or one holds the other.
fn overlaps(a: &Identity, b: &Identity) -> bool {
    match (a, b) {
        (Identity::Dir(a), Identity::Dir(b)) => match (a.first(), b.first()) {
            (Some(a0), Some(b0)) => a.contains(b0) || b.contains(a0),
            _ => false,
        },
        (Identity::Keyed(a), Identity::Keyed(b)) => a.starts_with(b) || b.starts_with(a),
        _ => false,
    }
}

pub(super) fn refuse_aliases(sources: &SourceList, identities: &[(usize, bool, Identity)]) -> Result<()> {
    let names: Vec<&Source> = sources.iter().collect();
    for (i, (a, a_writable, a_id)) in identities.iter().enumerate() {
        for (b, b_writable, b_id) in &identities[i + 1..] {
            if a_writable != b_writable && overlaps(a_id, b_id) {
                let (writable, read_only) = if *a_writable { (*a, *b) } else { (*b, *a) };
                return Err(Error::Usage(format!(
                    "the writable source `{}` ({}) and the read-only source `{}` ({}) are the same directory or one holds the other; a write to one would change the other",
                    names[writable].name(),
                    names[writable].display_path(),
                    names[read_only].name(),
                    names[read_only].display_path()
                )));
            }
        }
    }
    Ok(())
}

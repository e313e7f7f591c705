//! Opening one location as a mount's backend, by kind, and the local
//! directories this process holds open as mounts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillstore_backends::{FsBackend, MemoryBackend, SkillBackend, Subtree, SymlinkPolicy, VPath};

use crate::error::{Error, Result};
use crate::location::{Location, read_local_text};

/// A mount, opened.
pub(super) struct Mount {
    pub(super) at: VPath,
    pub(super) location: Location,
    pub(super) policy: SymlinkPolicy,
    pub(super) opened: Opened,
}

/// A mount's backend, writable, kept by kind so that a source's own
/// backend can be opened beneath it. (A build without Git or discovery
/// support never makes those kinds.)
#[cfg_attr(not(all(feature = "git", feature = "discovery")), allow(dead_code))]
pub(super) enum Opened {
    Fs(FsBackend),
    #[cfg(feature = "s3")]
    Object(skillstore_backends::ObjectStoreBackend),
    Memory(Arc<MemoryBackend>),
    /// A Git repository at its commit, or, when the remote could not be
    /// reached and nothing was fetched before, a stand-in answering
    /// `unavailable` (so the other sources are still served).
    Git {
        backend: Arc<dyn SkillBackend>,
        commit: Option<String>,
        /// Served at a commit fetched before: the remote did not answer.
        stale: bool,
    },
    Discovery(Arc<dyn SkillBackend>),
}

impl Opened {
    pub(super) fn open(
        location: &Location,
        policy: SymlinkPolicy,
        read_limit: u64,
        cache: Option<&crate::cache::CacheSettings>,
        allow_http: bool,
        discovery_bytes: Option<u64>,
    ) -> Result<Opened> {
        #[cfg(not(all(feature = "git", feature = "discovery")))]
        let _ = (cache, allow_http, discovery_bytes);
        match location {
            Location::Dir(path) => open_dir(path, policy)
                .map(Opened::Fs)
                .map_err(|e| Error::Usage(format!("cannot open the directory `{}`: {e}", path.display()))),
            #[cfg(feature = "s3")]
            Location::S3 { .. } => skillstore_backends::ObjectStoreBackend::from_s3_url(
                &location.to_string(),
                &skillstore_backends::S3Options::default(),
            )
            .map(Opened::Object)
            .map_err(|e| Error::Usage(format!("cannot use `{location}`: {e}"))),
            #[cfg(not(feature = "s3"))]
            Location::S3 { .. } => Err(not_built(location, "s3")),
            Location::Memory(file) => {
                let text = read_local_text(file, read_limit, "memory file")?;
                let backend = MemoryBackend::from_json(&text)
                    .map_err(|e| Error::Usage(format!("cannot load the memory file `{}`: {e}", file.display())))?;
                Ok(Opened::Memory(Arc::new(backend)))
            }
            #[cfg(not(feature = "discovery"))]
            Location::Discovery(_) => Err(not_built(location, "discovery")),
            #[cfg(feature = "discovery")]
            Location::Discovery(url) => {
                let unpack = Arc::new(crate::archive::RootedUnpack::new(read_limit));
                let mut limits = skillstore_backends::DiscoveryLimits::default();
                if let Some(max) = discovery_bytes {
                    limits.max_total_bytes = max;
                }
                // Files are kept in the private cache directory (checked as
                // the frontmatter cache is), else in memory under the bound.
                skillstore_backends::DiscoveryBackend::new(url, unpack, limits, allow_http)
                    .map(|b| match cache.and_then(crate::cache::LocalCache::open) {
                        Some(local) => b.with_cache(local.dir().join("discovery"), local.max_bytes()),
                        None => b,
                    })
                    .map(|b| Opened::Discovery(Arc::new(b) as Arc<dyn SkillBackend>))
                    .map_err(|e| Error::Usage(format!("cannot use `{location}`: {e}")))
            }
            #[cfg(not(feature = "git"))]
            Location::Git { .. } => Err(not_built(location, "git")),
            #[cfg(feature = "git")]
            Location::Git { remote, reference } => {
                match crate::git_source::open(
                    remote,
                    reference.as_deref(),
                    policy,
                    cache.and_then(|c| c.dir.as_deref()),
                ) {
                    Ok((b, resolution)) => Ok(Opened::Git {
                        commit: Some(b.commit()),
                        backend: Arc::new(b) as Arc<dyn SkillBackend>,
                        stale: resolution == skillstore_backends::GitResolution::Stale,
                    }),
                    Err(e) if e.kind().is_transient() => {
                        tracing::warn!(location = %location, error = %crate::git_source::with_causes(&e), "a Git remote could not be reached; its sources are unavailable");
                        Ok(Opened::Git {
                            backend: Arc::new(crate::git_source::Unreachable),
                            commit: None,
                            stale: false,
                        })
                    }
                    Err(e) => Err(Error::Usage(format!(
                        "cannot use `{location}`: {}",
                        crate::git_source::with_causes(&e)
                    ))),
                }
            }
        }
    }

    /// Which directory a local mount opened (its device and inode), so
    /// that one opened again after its path was renamed or relinked is
    /// never taken for it.
    pub(super) fn identity(&self) -> Option<String> {
        match self {
            Opened::Fs(b) => b.root_identity().map(|(dev, ino)| format!("{dev}:{ino}")),
            _ => None,
        }
    }

    /// The commit served, for a Git mount.
    pub(super) fn commit(&self) -> Option<String> {
        match self {
            Opened::Git { commit, .. } => commit.clone(),
            _ => None,
        }
    }

    /// The whole mount, read-only.
    pub(super) fn read_only(&self) -> Arc<dyn SkillBackend> {
        match self {
            Opened::Fs(b) => Arc::new(b.clone().read_only()),
            #[cfg(feature = "s3")]
            Opened::Object(b) => Arc::new(b.clone().read_only()),
            Opened::Memory(b) => {
                Arc::new(Subtree::new(Arc::clone(b) as Arc<dyn SkillBackend>, VPath::root()).read_only())
            }
            Opened::Git { backend, .. } => Arc::clone(backend),
            Opened::Discovery(b) => Arc::clone(b),
        }
    }

    /// A backend rooted at `inner` under this mount.
    pub(super) fn subdir(
        &self,
        inner: &VPath,
        policy: Option<SymlinkPolicy>,
        writable: bool,
    ) -> Result<Arc<dyn SkillBackend>> {
        Ok(match self {
            Opened::Fs(b) => {
                let sub = b.subdir(inner, policy.unwrap_or(b.policy()))?;
                Arc::new(if writable { sub } else { sub.read_only() })
            }
            #[cfg(feature = "s3")]
            Opened::Object(b) => {
                let sub = b.subdir(inner)?;
                Arc::new(if writable { sub } else { sub.read_only() })
            }
            Opened::Memory(b) => {
                let sub = Subtree::new(Arc::clone(b) as Arc<dyn SkillBackend>, inner.clone());
                Arc::new(if writable { sub } else { sub.read_only() })
            }
            Opened::Git { backend, .. } => Arc::new(Subtree::new(Arc::clone(backend), inner.clone()).read_only()),
            Opened::Discovery(_) if writable => {
                return Err(Error::Usage(
                    "a discovery endpoint is read-only: its source cannot be writable".into(),
                ));
            }
            Opened::Discovery(b) => Arc::new(Subtree::new(Arc::clone(b), inner.clone()).read_only()),
        })
    }
}

/// The error for a location this build cannot open: the Cargo `feature`
/// that adds it was left out.
#[cfg(not(all(feature = "s3", feature = "git", feature = "discovery")))]
fn not_built(location: &Location, feature: &str) -> Error {
    Error::Usage(format!(
        "`{location}` needs the `{feature}` feature, which this build of skillstore leaves out"
    ))
}

impl Location {
    /// Opens the location as one writable backend, with `policy` for a
    /// local directory and `read_limit` for a memory file. For tools that
    /// write a whole tree to a location (`publish`); catalogs, editors and
    /// servers go through [`Config::open`], which applies the namespace's
    /// rules. A Git location is refused before anything is fetched: it is
    /// never written to.
    pub fn open(&self, policy: SymlinkPolicy, read_limit: u64) -> Result<Arc<dyn SkillBackend>> {
        if self.is_git() {
            return Err(Error::Usage(format!(
                "`{self}` is a Git repository, which is read-only; write to a directory or an s3:// location"
            )));
        }
        Ok(match Opened::open(self, policy, read_limit, None, false, None)? {
            Opened::Fs(b) => Arc::new(b),
            #[cfg(feature = "s3")]
            Opened::Object(b) => Arc::new(b),
            Opened::Memory(b) => b,
            Opened::Git { backend, .. } => backend,
            Opened::Discovery(b) => b,
        })
    }
}

/// Directories this process has open as mounts, by path and symlink
/// policy: namespaces that mount one directory alike (a server's tenants
/// over one base) share one handle and the listings it keeps, rather than
/// a descriptor each. A handle is reused only while the path still names
/// the directory it opened, and dropped once no namespace holds it.
static OPEN_DIRS: std::sync::Mutex<Option<OpenDirs>> = std::sync::Mutex::new(None);

/// [`OPEN_DIRS`]: the handles, and the count past which the unheld ones
/// are looked for.
#[derive(Default)]
struct OpenDirs {
    handles: std::collections::HashMap<(PathBuf, u8), FsBackend>,
    sweep_at: usize,
}

pub(super) fn open_dir(path: &Path, policy: SymlinkPolicy) -> skillstore_backends::Result<FsBackend> {
    let rank = match policy {
        SymlinkPolicy::Deny => 0,
        SymlinkPolicy::WithinRoot => 1,
        SymlinkPolicy::Follow => 2,
    };
    let mut guard = OPEN_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let open = guard.get_or_insert_with(OpenDirs::default);
    if open.handles.len() >= open.sweep_at {
        open.handles.retain(|_, b| b.holders() > 1);
        open.sweep_at = (open.handles.len() * 2).max(64);
    }
    let key = (path.to_path_buf(), rank);
    if let Some(backend) = open.handles.get(&key).filter(|b| b.is_rooted_at(path)) {
        return Ok(backend.clone());
    }
    let backend = FsBackend::with_policy(path, policy)?;
    open.handles.insert(key, backend.clone());
    Ok(backend)
}

//! [`MountTable`]: one namespace built from several backends.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::backend::{
    Blob, Capabilities, DeepLimits, DeepListing, Entry, EntryKind, Listing, Metadata, PutMode, ReadOptions,
    SkillBackend, Version,
};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;

/// Backends mounted at virtual paths, routed by the longest mount point that
/// is an ancestor of the path by whole segments (`/team` never serves
/// `/teamwork`). A backend sees paths relative to its own root; errors come
/// back with paths in the shared namespace. A read's
/// [`ReadOptions::confinement`] is counted again from the mount point; one
/// at or above it confines the read to the mounted backend's root. Listing a directory shows the
/// mount points below it as directories.
#[derive(Clone, Default)]
pub struct MountTable {
    /// Deepest mount points first, so the first match is the longest.
    mounts: Vec<Mount>,
}

#[derive(Clone)]
struct Mount {
    at: VPath,
    backend: Arc<dyn SkillBackend>,
}

impl std::fmt::Debug for MountTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.mounts.iter().map(|m| (m.at.as_str(), &m.backend)))
            .finish()
    }
}

impl MountTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mounts `backend` at `at`. Mounting twice at the same point is
    /// [`ErrorKind::AlreadyExists`].
    pub fn mount(&mut self, at: VPath, backend: Arc<dyn SkillBackend>) -> Result<()> {
        if self.mounts.iter().any(|m| m.at == at) {
            return Err(Error::at(ErrorKind::AlreadyExists, &at).with_detail("something is already mounted here"));
        }
        self.mounts.push(Mount { at, backend });
        self.mounts.sort_by_key(|m| std::cmp::Reverse(m.at.segments().count()));
        Ok(())
    }

    /// Builder form of [`MountTable::mount`].
    pub fn with(mut self, at: VPath, backend: Arc<dyn SkillBackend>) -> Result<Self> {
        self.mount(at, backend)?;
        Ok(self)
    }

    /// The mount points, deepest first.
    pub fn mount_points(&self) -> impl Iterator<Item = &VPath> {
        self.mounts.iter().map(|m| &m.at)
    }

    /// The backend serving `path` and the path as that backend sees it.
    pub fn resolve(&self, path: &VPath) -> Option<(&Arc<dyn SkillBackend>, VPath)> {
        self.mounts
            .iter()
            .find_map(|m| path.strip_prefix(&m.at).map(|inner| (&m.backend, inner)))
    }

    fn route(&self, path: &VPath) -> Result<(&Mount, VPath)> {
        self.mounts
            .iter()
            .find_map(|m| path.strip_prefix(&m.at).map(|inner| (m, inner)))
            .ok_or_else(|| Error::at(ErrorKind::NotFound, path).with_detail("no backend is mounted here"))
    }

    /// Names of the children of `dir` that lead to a mount point below it.
    fn mount_children(&self, dir: &VPath) -> Vec<String> {
        self.mounts
            .iter()
            .filter(|m| m.at != *dir)
            .filter_map(|m| m.at.strip_prefix(dir))
            .filter_map(|below| below.segments().next().map(str::to_owned))
            .collect()
    }
}

impl MountTable {
    /// A path with a mount point below it is a directory, whatever the
    /// backend above holds there.
    fn refuse_mount_ancestor(&self, path: &VPath) -> Result<()> {
        if self.mount_children(path).is_empty() {
            Ok(())
        } else {
            Err(Error::at(ErrorKind::IsADirectory, path))
        }
    }
}

impl Mount {
    /// How many segments below the namespace's root the mount point is.
    fn depth(&self) -> usize {
        self.at.segments().count()
    }
}

fn outer(err: Error, mount: &Mount) -> Error {
    err.map_path(|inner| inner.rebase(&mount.at).ok())
}

#[async_trait]
impl SkillBackend for MountTable {
    /// The union of the mounted backends' capabilities; a write still fails
    /// where the backend serving the path is read-only.
    fn capabilities(&self) -> Capabilities {
        self.mounts.iter().fold(Capabilities::READ_ONLY, |acc, m| {
            let c = m.backend.capabilities();
            Capabilities {
                write: acc.write || c.write,
                create_only: acc.create_only || c.create_only,
                if_version: acc.if_version || c.if_version,
                if_version_delete: acc.if_version_delete || c.if_version_delete,
                symlinks: acc.symlinks || c.symlinks,
                deep_list: acc.deep_list || c.deep_list,
            }
        })
    }

    /// The largest batch any mounted backend prefers: each mount is handed
    /// its share of a batch in one call.
    fn preferred_batch(&self) -> usize {
        self.mounts
            .iter()
            .map(|m| m.backend.preferred_batch())
            .max()
            .unwrap_or(16)
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        Ok(self.list_detailed(dir).await?.entries)
    }

    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        let mounted = self.mount_children(dir);
        let listed = match self.route(dir) {
            Ok((mount, inner)) => match mount.backend.list_detailed(&inner).await {
                Ok(listing) => listing,
                Err(e) if e.kind() == ErrorKind::NotFound && !mounted.is_empty() => Listing::default(),
                Err(e) => return Err(outer(e, mount)),
            },
            Err(e) if mounted.is_empty() => return Err(e),
            Err(_) => Listing::default(),
        };
        let Listing { mut entries, invalid } = listed;
        // A mount point hides whatever the parent backend has there.
        entries.retain(|e| !mounted.contains(&e.name));
        entries.extend(mounted.into_iter().map(|name| Entry {
            name,
            kind: EntryKind::Dir,
            size: None,
            version: None,
            symlink: false,
        }));
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        // A name listed twice (an object and a prefix at once) is the
        // directory: what lies below it is listed, as a walk lists it.
        entries.dedup_by(|later, kept| {
            let same = later.name == kept.name;
            if same && later.kind == EntryKind::Dir {
                std::mem::swap(later, kept);
            }
            same
        });
        Ok(Listing { entries, invalid })
    }

    /// The capabilities of the backend serving `path`; a directory with a
    /// mount point below it cannot be listed deep (one backend's listing
    /// would miss the other's files).
    fn capabilities_at(&self, path: &VPath) -> Capabilities {
        let Ok((mount, inner)) = self.route(path) else {
            return Capabilities::READ_ONLY;
        };
        let caps = mount.backend.capabilities_at(&inner);
        if self.mount_children(path).is_empty() {
            caps
        } else {
            caps.with_deep_list(false)
        }
    }

    /// The deep listing of the backend serving `dir`, or a walk when a mount
    /// point lies below it.
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        if !self.mount_children(dir).is_empty() {
            return crate::walk::walk(
                self,
                dir,
                crate::walk::WalkLimits {
                    max_files: limits.max_files,
                    ..Default::default()
                },
            )
            .await
            .map(DeepListing::from_walk);
        }
        let (mount, inner) = self.route(dir)?;
        mount
            .backend
            .list_deep(&inner, limits)
            .await
            .map_err(|e| outer(e, mount))
    }

    fn location_id(&self, dir: &VPath) -> Option<String> {
        if !self.mount_children(dir).is_empty() {
            return None;
        }
        let (mount, inner) = self.route(dir).ok()?;
        mount.backend.location_id(&inner)
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        if !self.mount_children(path).is_empty() {
            return Ok(Metadata {
                kind: EntryKind::Dir,
                size: None,
                version: None,
            });
        }
        let (mount, inner) = self.route(path)?;
        mount.backend.stat(&inner).await.map_err(|e| outer(e, mount))
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.refuse_mount_ancestor(path)?;
        let (mount, inner) = self.route(path)?;
        mount
            .backend
            .read(&inner, options.below_mount(mount.depth()))
            .await
            .map_err(|e| outer(e, mount))
    }

    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.refuse_mount_ancestor(path)?;
        let (mount, inner) = self.route(path)?;
        mount.backend.put(&inner, data, mode).await.map_err(|e| outer(e, mount))
    }

    async fn delete(&self, path: &VPath) -> Result<()> {
        self.refuse_mount_ancestor(path)?;
        let (mount, inner) = self.route(path)?;
        mount.backend.delete(&inner).await.map_err(|e| outer(e, mount))
    }

    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        self.refuse_mount_ancestor(path)?;
        let (mount, inner) = self.route(path)?;
        mount
            .backend
            .delete_if_version(&inner, expected)
            .await
            .map_err(|e| outer(e, mount))
    }

    /// Each mount gets one batch of the paths it serves.
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        let groups = self.group(paths);
        let batches = groups
            .iter()
            .map(|(mount, _, inner)| mount.backend.read_many(inner, options.below_mount(mount.depth())));
        let done = futures::future::join_all(batches).await;
        self.scatter(paths, &groups, done, |p| {
            self.refuse_mount_ancestor(p).and_then(|_| self.route(p).map(|_| ()))
        })
    }

    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        let groups = self.group(paths);
        let batches = groups.iter().map(|(mount, _, inner)| mount.backend.stat_many(inner));
        let done = futures::future::join_all(batches).await;
        // A path with a mount point below it is a directory; stat answers
        // it one by one.
        let mut results = self.scatter(paths, &groups, done, |p| self.route(p).map(|_| ()));
        for (path, result) in paths.iter().zip(results.iter_mut()) {
            if !self.mount_children(path).is_empty() {
                *result = self.stat(path).await;
            }
        }
        results
    }

    /// Each mount gets one batch of the directories it serves; a directory
    /// with a mount point below it is listed on its own.
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        let groups = self.group(dirs);
        let batches = groups.iter().map(|(mount, _, inner)| mount.backend.list_many(inner));
        let done = futures::future::join_all(batches).await;
        let mut results = self.scatter(dirs, &groups, done, |p| self.route(p).map(|_| ()));
        for (dir, result) in dirs.iter().zip(results.iter_mut()) {
            if !self.mount_children(dir).is_empty() {
                *result = self.list(dir).await;
            }
        }
        results
    }
}

/// The paths one mount serves: the mount, their positions, and the paths
/// as the mount's backend sees them.
type Group<'a> = (&'a Mount, Vec<usize>, Vec<VPath>);

impl MountTable {
    fn group(&self, paths: &[VPath]) -> Vec<Group<'_>> {
        let mut groups: Vec<Group<'_>> = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            if !self.mount_children(path).is_empty() {
                continue;
            }
            let Ok((mount, inner)) = self.route(path) else { continue };
            match groups.iter_mut().find(|(m, _, _)| m.at == mount.at) {
                Some((_, positions, inners)) => {
                    positions.push(i);
                    inners.push(inner);
                }
                None => groups.push((mount, vec![i], vec![inner])),
            }
        }
        groups
    }

    /// Puts each mount's results back in the order of `paths`; a path no
    /// mount took gets the error `unrouted` gives it.
    fn scatter<T>(
        &self,
        paths: &[VPath],
        groups: &[Group<'_>],
        done: Vec<Vec<Result<T>>>,
        unrouted: impl Fn(&VPath) -> Result<()>,
    ) -> Vec<Result<T>> {
        let mut results: Vec<Option<Result<T>>> = paths.iter().map(|_| None).collect();
        for ((mount, positions, _), outcomes) in groups.iter().zip(done) {
            for (&i, outcome) in positions.iter().zip(outcomes) {
                results[i] = Some(outcome.map_err(|e| outer(e, mount)));
            }
        }
        paths
            .iter()
            .zip(results)
            .map(|(path, result)| {
                result.unwrap_or_else(|| {
                    Err(unrouted(path)
                        .err()
                        .unwrap_or_else(|| Error::at(ErrorKind::NotFound, path)))
                })
            })
            .collect()
    }
}

//! [`Subtree`]: one directory of a backend seen as a backend of its own.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::backend::{Blob, Capabilities, Entry, Listing, Metadata, PutMode, ReadOptions, SkillBackend, Version};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;

/// The directory `root` of an inner backend, re-rooted: `/x` here is
/// `root/x` there. A [`VPath`] cannot name a parent, so nothing above
/// `root` is reachable. Optionally read-only whatever the inner backend
/// allows.
///
/// For backends without symbolic links (memory, object stores) this
/// confinement is exact. A filesystem directory should instead be opened
/// with `FsBackend::subdir`, which resolves links against the new root.
#[derive(Debug, Clone)]
pub struct Subtree {
    inner: Arc<dyn SkillBackend>,
    root: VPath,
    writable: bool,
}

impl Subtree {
    /// `root` of `inner`, writable where `inner` is.
    pub fn new(inner: Arc<dyn SkillBackend>, root: VPath) -> Self {
        Subtree {
            inner,
            root,
            writable: true,
        }
    }

    /// The same view, refusing `put` and `delete`.
    pub fn read_only(mut self) -> Self {
        self.writable = false;
        self
    }

    fn inner_path(&self, path: &VPath) -> Result<VPath> {
        if path.is_root() {
            return Ok(self.root.clone());
        }
        self.root.join(path.relative_str())
    }

    fn check_writable(&self, path: &VPath) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::at(ErrorKind::ReadOnly, path).with_detail("this directory is opened read-only"))
        }
    }

    /// Maps an inner error's path back to this view's.
    fn outer_error(&self, path: &VPath, err: Error) -> Error {
        err.with_path(path.clone())
    }
}

impl Subtree {
    /// Each of `paths` mapped to the inner backend, and those that map.
    fn inner_paths(&self, paths: &[VPath]) -> (Vec<Result<VPath>>, Vec<VPath>) {
        let mapped: Vec<Result<VPath>> = paths.iter().map(|p| self.inner_path(p)).collect();
        let valid = mapped.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
        (mapped, valid)
    }

    /// The answers of a batch over the paths that mapped, put back in the
    /// order of `paths`, beside the errors of those that did not.
    fn scatter<T>(&self, paths: &[VPath], mapped: Vec<Result<VPath>>, results: Vec<Result<T>>) -> Vec<Result<T>> {
        let mut results = results.into_iter();
        paths
            .iter()
            .zip(mapped)
            .map(|(path, inner)| match inner {
                Ok(_) => results
                    .next()
                    .unwrap_or_else(|| Err(Error::at(ErrorKind::Other, path)))
                    .map_err(|e| self.outer_error(path, e)),
                Err(e) => Err(e),
            })
            .collect()
    }
}

#[async_trait]
impl SkillBackend for Subtree {
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        if !self.writable {
            caps.write = false;
        }
        caps
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        let inner = self.inner_path(dir)?;
        self.inner.list(&inner).await.map_err(|e| self.outer_error(dir, e))
    }

    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        let inner = self.inner_path(dir)?;
        self.inner
            .list_detailed(&inner)
            .await
            .map_err(|e| self.outer_error(dir, e))
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        let inner = self.inner_path(path)?;
        self.inner.stat(&inner).await.map_err(|e| self.outer_error(path, e))
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        let inner = self.inner_path(path)?;
        self.inner
            .read(&inner, options)
            .await
            .map_err(|e| self.outer_error(path, e))
    }

    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.check_writable(path)?;
        let inner = self.inner_path(path)?;
        self.inner
            .put(&inner, data, mode)
            .await
            .map_err(|e| self.outer_error(path, e))
    }

    async fn delete(&self, path: &VPath) -> Result<()> {
        self.check_writable(path)?;
        let inner = self.inner_path(path)?;
        self.inner.delete(&inner).await.map_err(|e| self.outer_error(path, e))
    }

    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        self.check_writable(path)?;
        let inner = self.inner_path(path)?;
        self.inner
            .delete_if_version(&inner, expected)
            .await
            .map_err(|e| self.outer_error(path, e))
    }

    fn preferred_batch(&self) -> usize {
        self.inner.preferred_batch()
    }

    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        let (mapped, valid) = self.inner_paths(paths);
        let results = self.inner.read_many(&valid, options).await;
        self.scatter(paths, mapped, results)
    }

    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        let (mapped, valid) = self.inner_paths(dirs);
        let results = self.inner.list_many(&valid).await;
        self.scatter(dirs, mapped, results)
    }
}

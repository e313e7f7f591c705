//! Backends that wrap another and change a few of its calls.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;

use crate::backend::{
    Blob, Capabilities, DeepLimits, DeepListing, Entry, Listing, Metadata, PutMode, ReadOptions, SkillBackend, Version,
};
use crate::error::Result;
use crate::vpath::VPath;

/// A backend made of another ([`Layered::inner`]) with some calls changed:
/// a wrapper implements `inner` and only the methods it changes; every
/// other [`SkillBackend`] call goes to the inner backend unchanged, so a
/// method added to the trait reaches the inner backend through every
/// wrapper without any of them written again. Every `Layered` type is a
/// [`SkillBackend`].
#[async_trait]
pub trait Layered: Send + Sync + fmt::Debug {
    /// The backend the calls this layer does not change go to.
    fn inner(&self) -> &dyn SkillBackend;

    /// [`SkillBackend::capabilities`].
    fn capabilities(&self) -> Capabilities {
        self.inner().capabilities()
    }
    /// [`SkillBackend::list`].
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.inner().list(dir).await
    }
    /// [`SkillBackend::list_detailed`].
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        self.inner().list_detailed(dir).await
    }
    /// [`SkillBackend::list_deep`].
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        self.inner().list_deep(dir, limits).await
    }
    /// [`SkillBackend::capabilities_at`].
    fn capabilities_at(&self, path: &VPath) -> Capabilities {
        self.inner().capabilities_at(path)
    }
    /// [`SkillBackend::location_id`].
    fn location_id(&self, dir: &VPath) -> Option<String> {
        self.inner().location_id(dir)
    }
    /// [`SkillBackend::stat`].
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.inner().stat(path).await
    }
    /// [`SkillBackend::read`].
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.inner().read(path, options).await
    }
    /// [`SkillBackend::put`].
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.inner().put(path, data, mode).await
    }
    /// [`SkillBackend::delete`].
    async fn delete(&self, path: &VPath) -> Result<()> {
        self.inner().delete(path).await
    }
    /// [`SkillBackend::delete_if_version`].
    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        self.inner().delete_if_version(path, expected).await
    }
    /// [`SkillBackend::preferred_batch`].
    fn preferred_batch(&self) -> usize {
        self.inner().preferred_batch()
    }
    /// [`SkillBackend::read_many`].
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        self.inner().read_many(paths, options).await
    }
    /// [`SkillBackend::stat_many`].
    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        self.inner().stat_many(paths).await
    }
    /// [`SkillBackend::list_many`].
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        self.inner().list_many(dirs).await
    }
}

#[async_trait]
impl<L: Layered> SkillBackend for L {
    fn capabilities(&self) -> Capabilities {
        Layered::capabilities(self)
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        Layered::list(self, dir).await
    }
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        Layered::list_detailed(self, dir).await
    }
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        Layered::list_deep(self, dir, limits).await
    }
    fn capabilities_at(&self, path: &VPath) -> Capabilities {
        Layered::capabilities_at(self, path)
    }
    fn location_id(&self, dir: &VPath) -> Option<String> {
        Layered::location_id(self, dir)
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        Layered::stat(self, path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        Layered::read(self, path, options).await
    }
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        Layered::put(self, path, data, mode).await
    }
    async fn delete(&self, path: &VPath) -> Result<()> {
        Layered::delete(self, path).await
    }
    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        Layered::delete_if_version(self, path, expected).await
    }
    fn preferred_batch(&self) -> usize {
        Layered::preferred_batch(self)
    }
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        Layered::read_many(self, paths, options).await
    }
    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        Layered::stat_many(self, paths).await
    }
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        Layered::list_many(self, dirs).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::MemoryBackend;

    /// Counts reads and changes nothing else.
    #[derive(Debug)]
    struct CountingReads {
        inner: MemoryBackend,
        reads: AtomicUsize,
    }

    #[async_trait]
    impl Layered for CountingReads {
        fn inner(&self) -> &dyn SkillBackend {
            &self.inner
        }
        async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.inner.read(path, options).await
        }
    }

    #[tokio::test]
    async fn a_layer_changes_only_what_it_writes_and_forwards_the_rest() {
        let layer = CountingReads {
            inner: MemoryBackend::new(),
            reads: AtomicUsize::new(0),
        };
        let path = VPath::new("/a/SKILL.md").unwrap();
        let backend: &dyn SkillBackend = &layer;
        backend
            .put(&path, Bytes::from_static(b"x"), PutMode::Overwrite)
            .await
            .unwrap();
        assert_eq!(backend.stat(&path).await.unwrap().size, Some(1));
        assert_eq!(
            &backend.read(&path, ReadOptions::default()).await.unwrap().data[..],
            b"x"
        );
        assert_eq!(backend.list(&VPath::new("/a").unwrap()).await.unwrap().len(), 1);
        assert_eq!(backend.preferred_batch(), layer.inner.preferred_batch());
        assert_eq!(layer.reads.load(Ordering::Relaxed), 1);
        backend.delete(&path).await.unwrap();
        assert!(layer.inner.stat(&path).await.is_err());
    }
}

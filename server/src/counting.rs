//! A backend wrapper counting the calls a tenant's namespace makes of its
//! storage, for `/metrics`. Every call goes on to the wrapped backend
//! unchanged, so every guard applies as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use skillstore::backends::{
    Blob, DeepLimits, DeepListing, Entry, Layered, Listing, Metadata, PutMode, ReadOptions, Result, SkillBackend,
    VPath, Version,
};

/// The kinds of storage call counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// One directory listed.
    List,
    /// One deep listing (every file below a directory).
    ListDeep,
    /// One path's metadata.
    Stat,
    /// One file read.
    Read,
    /// One file written.
    Put,
    /// One file deleted.
    Delete,
}

impl Call {
    /// Every kind, in the order `/metrics` shows them.
    pub const ALL: [Call; 6] = [
        Call::List,
        Call::ListDeep,
        Call::Stat,
        Call::Read,
        Call::Put,
        Call::Delete,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Call::List => "list",
            Call::ListDeep => "list_deep",
            Call::Stat => "stat",
            Call::Read => "read",
            Call::Put => "put",
            Call::Delete => "delete",
        }
    }
}

/// Storage calls by kind, across tenants.
#[derive(Debug, Default)]
pub struct BackendCalls([AtomicU64; 6]);

impl BackendCalls {
    fn add(&self, call: Call, n: usize) {
        self.0[call as usize].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// How many calls of this kind were made.
    pub fn get(&self, call: Call) -> u64 {
        self.0[call as usize].load(Ordering::Relaxed)
    }
}

/// A backend counting its calls into [`BackendCalls`].
#[derive(Debug)]
pub struct Counting {
    inner: Arc<dyn SkillBackend>,
    calls: Arc<BackendCalls>,
}

impl Counting {
    /// Wraps `inner`.
    pub fn wrap(inner: Arc<dyn SkillBackend>, calls: Arc<BackendCalls>) -> Arc<dyn SkillBackend> {
        Arc::new(Counting { inner, calls })
    }
}

#[async_trait]
impl Layered for Counting {
    fn inner(&self) -> &dyn SkillBackend {
        &*self.inner
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.calls.add(Call::List, 1);
        self.inner.list(dir).await
    }
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        self.calls.add(Call::List, 1);
        self.inner.list_detailed(dir).await
    }
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        self.calls.add(Call::ListDeep, 1);
        self.inner.list_deep(dir, limits).await
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.calls.add(Call::Stat, 1);
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.calls.add(Call::Read, 1);
        self.inner.read(path, options).await
    }
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.calls.add(Call::Put, 1);
        self.inner.put(path, data, mode).await
    }
    async fn delete(&self, path: &VPath) -> Result<()> {
        self.calls.add(Call::Delete, 1);
        self.inner.delete(path).await
    }
    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        self.calls.add(Call::Delete, 1);
        self.inner.delete_if_version(path, expected).await
    }
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        self.calls.add(Call::Read, paths.len());
        self.inner.read_many(paths, options).await
    }
    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        self.calls.add(Call::Stat, paths.len());
        self.inner.stat_many(paths).await
    }
    async fn list_many(&self, dirs: &[VPath]) -> Vec<Result<Vec<Entry>>> {
        self.calls.add(Call::List, dirs.len());
        self.inner.list_many(dirs).await
    }
}

//! Helpers shared by the integration tests: the same files on every
//! backend, and a backend wrapper that counts and fails on demand.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use skillstore::backends::testkit::Fixture;
use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{
    Blob, Capabilities, Entry, Error, ErrorKind, FsBackend, MemoryBackend, Metadata, ObjectStoreBackend, PutMode,
    ReadOptions, Result, SkillBackend, VPath, Version,
};

/// A backend holding some files, and whatever keeps it alive.
pub struct Tree {
    pub backend: Arc<dyn SkillBackend>,
    _keep: Option<Box<dyn std::any::Any>>,
}

/// `files` written into a fixture of the backend matrix; the tree keeps the
/// fixture alive.
pub async fn fill(fixture: Fixture, files: &[(&str, &[u8])]) -> Tree {
    put_all(&*fixture.backend, files).await;
    Tree {
        backend: fixture.backend.clone(),
        _keep: Some(Box::new(fixture)),
    }
}

async fn put_all(backend: &dyn SkillBackend, files: &[(&str, &[u8])]) {
    for (path, data) in files {
        backend
            .put(
                &VPath::new(path).unwrap(),
                Bytes::copy_from_slice(data),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
    }
}

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Memory,
    Fs,
    ObjectStore,
    /// Our in-process S3 server (s3s-fs behind a write lock that makes
    /// conditional writes atomic).
    S3,
    /// moto, an S3 server we did not write, under a fresh prefix of the
    /// bucket named by `SKILLSTORE_MOTO_ENDPOINT` (panics without it: such a
    /// test is ignored unless run with `--include-ignored`, as CI does).
    Moto,
}

impl Kind {
    /// Whether the store makes its conditional writes (create-only,
    /// replace-if-version) atomic. moto does not: it checks the condition
    /// and then writes, so two simultaneous conditional writes can both
    /// succeed. Tests that race conditional writes assert the weaker
    /// property that still holds where this is false.
    pub fn atomic_conditionals(self) -> bool {
        !matches!(self, Kind::Moto)
    }
}

pub async fn tree(kind: Kind, files: &[(&str, &[u8])]) -> Tree {
    let (backend, keep): (Arc<dyn SkillBackend>, _) = match kind {
        Kind::Memory => (Arc::new(MemoryBackend::new()), None),
        Kind::Fs => {
            let dir = tempfile::tempdir().unwrap();
            (Arc::new(FsBackend::new(dir.path()).unwrap()), Some(dir))
        }
        Kind::ObjectStore => {
            let store = Arc::new(skillstore::backends::object_store::memory::InMemory::new());
            (Arc::new(ObjectStoreBackend::new(store, "skills").unwrap()), None)
        }
        Kind::S3 => {
            let server = S3TestServer::shared();
            let bucket = server.create_bucket();
            (
                Arc::new(ObjectStoreBackend::new(server.store(&bucket), "skills").unwrap()),
                None,
            )
        }
        Kind::Moto => (skillstore::backends::testkit::s3_server::moto_fixture().backend, None),
    };
    put_all(&*backend, files).await;
    Tree {
        backend,
        _keep: keep.map(|dir| Box::new(dir) as Box<dyn std::any::Any>),
    }
}

/// A SKILL.md with a name and description.
pub fn skill_md(name: &str, description: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody.\n").into_bytes()
}

/// Counts calls and can make listings fail, to watch what a catalog does.
#[derive(Debug)]
pub struct Watched {
    pub inner: Arc<dyn SkillBackend>,
    pub reads: AtomicUsize,
    pub stats: AtomicUsize,
    pub lists: AtomicUsize,
    pub fail_lists: AtomicBool,
}

impl Watched {
    pub fn new(inner: Arc<dyn SkillBackend>) -> Arc<Self> {
        Arc::new(Watched {
            inner,
            reads: AtomicUsize::new(0),
            stats: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
            fail_lists: AtomicBool::new(false),
        })
    }

    pub fn reset(&self) {
        self.reads.store(0, Ordering::SeqCst);
        self.stats.store(0, Ordering::SeqCst);
        self.lists.store(0, Ordering::SeqCst);
    }

    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl SkillBackend for Watched {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        if self.fail_lists.load(Ordering::SeqCst) {
            return Err(Error::at(ErrorKind::Unavailable, dir).with_detail("injected outage"));
        }
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.stats.fetch_add(1, Ordering::SeqCst);
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(path, options).await
    }
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.inner.put(path, data, mode).await
    }
    async fn delete(&self, path: &VPath) -> Result<()> {
        self.inner.delete(path).await
    }
}

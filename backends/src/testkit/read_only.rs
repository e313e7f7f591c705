//! The read part of the conformance suite, for backends that cannot be
//! written: every case runs on the same tree ([`TREE`]), seeded before the
//! backend is opened. [`read_only_conformance_tests!`](crate::read_only_conformance_tests)
//! expands them on a factory; [`memory_seeded`] is the reference and
//! [`discovery_seeded`] publishes the tree from a local HTTP server as a
//! discovery endpoint (the 0.1 form, one file a request) and reads it with
//! a [`crate::DiscoveryBackend`].

use std::any::Any;
#[cfg(feature = "discovery")]
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::backend::{EntryKind, PutMode, ReadOptions, SkillBackend};
use crate::error::ErrorKind;
use crate::vpath::VPath;

/// A seeded read-only backend and whatever keeps it alive.
pub struct SeededFixture {
    /// The backend, holding [`TREE`].
    pub backend: Arc<dyn SkillBackend>,
    _keep: Box<dyn Any + Send + Sync>,
}

/// The tree every read-only case reads: skills at the root, as a
/// discovery endpoint can hold them.
pub const TREE: &[(&str, usize)] = &[
    ("/alpha/SKILL.md", 40),
    ("/alpha/references/guide.md", 70_000),
    ("/alpha/references/empty.md", 0),
    ("/alpha/scripts/run.sh", 1001),
    ("/beta/SKILL.md", 1000),
];

/// The bytes of a file of [`TREE`] of `len` bytes.
pub fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
}

/// A [`crate::MemoryBackend`] holding [`TREE`], read-only.
pub fn memory_seeded() -> SeededFixture {
    let memory = crate::MemoryBackend::new();
    futures::executor::block_on(async {
        for (path, len) in TREE {
            let path = VPath::new(path).expect("a tree path");
            memory
                .put(&path, pattern(*len), PutMode::Overwrite)
                .await
                .expect("seeding");
        }
    });
    SeededFixture {
        backend: Arc::new(crate::Subtree::new(Arc::new(memory), VPath::root()).read_only()),
        _keep: Box::new(()),
    }
}

/// Stores nothing: 0.1 endpoints carry no archives.
#[cfg(feature = "discovery")]
#[derive(Debug)]
struct NoArchives;

#[cfg(feature = "discovery")]
impl crate::Unpack for NoArchives {
    fn unpack(&self, _: &str, _: &[u8]) -> std::result::Result<Vec<(String, Bytes)>, (String, String)> {
        Err(("unsupported".into(), "no archives here".into()))
    }
}

/// [`TREE`] published as a 0.1 discovery index by a minimal HTTP/1.1
/// server on a loopback port, read through a [`crate::DiscoveryBackend`].
/// Must be called inside a Tokio runtime.
#[cfg(feature = "discovery")]
pub fn discovery_seeded() -> SeededFixture {
    let mut site: HashMap<String, Bytes> = HashMap::new();
    let mut skills: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for (path, len) in TREE {
        let (name, relative) = path[1..].split_once('/').expect("a skill file");
        skills.entry(name).or_default().push(relative.to_owned());
        site.insert(format!("/.well-known/skills/{name}/{relative}"), pattern(*len));
    }
    let index: Vec<serde_json::Value> = skills
        .iter()
        .map(|(name, files)| serde_json::json!({"name": name, "description": "x", "files": files}))
        .collect();
    site.insert(
        "/.well-known/skills/index.json".into(),
        Bytes::from(serde_json::json!({ "skills": index }).to_string()),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("an address");
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let site = Arc::new(site);
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(answer(stream, Arc::clone(&site)));
        }
    });
    let backend = crate::DiscoveryBackend::new(
        &format!("http://{addr}"),
        Arc::new(NoArchives),
        crate::DiscoveryLimits::default(),
        false,
    )
    .expect("a loopback endpoint");
    SeededFixture {
        backend: Arc::new(backend),
        _keep: Box::new(AbortOnDrop(server)),
    }
}

#[cfg(feature = "discovery")]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

#[cfg(feature = "discovery")]
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Answers one request: the file at its path, or 404.
#[cfg(feature = "discovery")]
async fn answer(mut stream: tokio::net::TcpStream, site: Arc<HashMap<String, Bytes>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (status, body) = match site.get(&path) {
        Some(body) => ("200 OK", body.clone()),
        None => ("404 Not Found", Bytes::new()),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(header.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}

/// Runs one case on a fresh fixture, made inside a multi-threaded runtime.
pub fn run_seeded_case<F, Fut>(factory: fn() -> SeededFixture, case: F)
where
    F: FnOnce(SeededFixture) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let fixture = {
        let _entered = runtime.enter();
        factory()
    };
    runtime.block_on(case(fixture));
}

fn p(s: &str) -> VPath {
    VPath::new(s).expect("test paths are valid")
}

async fn names(f: &SeededFixture, dir: &str) -> Vec<(String, EntryKind)> {
    let mut entries: Vec<_> = f
        .backend
        .list(&p(dir))
        .await
        .unwrap_or_else(|e| panic!("list {dir}: {e}"))
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    entries.sort();
    entries
}

#[track_caller]
fn assert_kind<T: std::fmt::Debug>(result: crate::Result<T>, kind: ErrorKind) {
    match result {
        Ok(v) => panic!("expected {kind}, got Ok({v:?})"),
        Err(e) => assert_eq!(e.kind(), kind, "unexpected error: {e}"),
    }
}

/// Listings show the tree, one level at a time.
pub async fn lists_the_tree(f: SeededFixture) {
    assert_eq!(
        names(&f, "/").await,
        [("alpha".into(), EntryKind::Dir), ("beta".into(), EntryKind::Dir)]
    );
    assert_eq!(
        names(&f, "/alpha").await,
        [
            ("SKILL.md".into(), EntryKind::File),
            ("references".into(), EntryKind::Dir),
            ("scripts".into(), EntryKind::Dir)
        ]
    );
    assert_eq!(
        names(&f, "/alpha/references").await,
        [
            ("empty.md".into(), EntryKind::File),
            ("guide.md".into(), EntryKind::File)
        ]
    );
}

/// A missing directory is `not_found`, a file listed is `not_a_directory`.
pub async fn lists_of_missing_directories_and_files_fail(f: SeededFixture) {
    assert_kind(f.backend.list(&p("/gamma")).await, ErrorKind::NotFound);
    assert_kind(f.backend.list(&p("/alpha/absent")).await, ErrorKind::NotFound);
    assert_kind(f.backend.list(&p("/alpha/SKILL.md")).await, ErrorKind::NotADirectory);
}

/// `stat` tells files (size, version) from directories and absence, and
/// the version is the one reads give, the same at every read.
pub async fn stat_and_read_agree(f: SeededFixture) {
    let meta = f.backend.stat(&p("/alpha/references/guide.md")).await.unwrap();
    assert_eq!(meta.kind, EntryKind::File);
    assert_eq!(meta.size, Some(70_000));
    let a = f
        .backend
        .read(&p("/alpha/references/guide.md"), ReadOptions::default())
        .await
        .unwrap();
    let b = f
        .backend
        .read(&p("/alpha/references/guide.md"), ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(a.data, pattern(70_000));
    assert_eq!(a.size, 70_000);
    assert!(a.is_complete());
    assert_eq!(a.version, b.version);
    assert_eq!(meta.version, Some(a.version));
    assert_eq!(f.backend.stat(&p("/alpha")).await.unwrap().kind, EntryKind::Dir);
    assert_kind(f.backend.stat(&p("/alpha/nothing")).await, ErrorKind::NotFound);
}

/// Reads of nothing, a directory, the root and below a file fail as every
/// backend's do.
pub async fn reads_that_cannot_be(f: SeededFixture) {
    let read = |path: VPath| {
        let backend = Arc::clone(&f.backend);
        async move { backend.read(&path, ReadOptions::default()).await }
    };
    assert_kind(read(p("/alpha/absent.md")).await, ErrorKind::NotFound);
    assert_kind(read(p("/gamma/SKILL.md")).await, ErrorKind::NotFound);
    assert_kind(read(p("/alpha/references")).await, ErrorKind::IsADirectory);
    assert_kind(read(VPath::root()).await, ErrorKind::IsADirectory);
    let below = read(p("/alpha/SKILL.md/child"))
        .await
        .expect_err("a file has no children");
    assert!(
        matches!(below.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory),
        "{below}"
    );
}

/// An empty file reads as zero bytes; prefixes give the prefix and the
/// whole size.
pub async fn empty_files_and_prefixes(f: SeededFixture) {
    let empty = f
        .backend
        .read(&p("/alpha/references/empty.md"), ReadOptions::default())
        .await
        .unwrap();
    assert!(empty.data.is_empty());
    let prefix = f
        .backend
        .read(&p("/alpha/references/guide.md"), ReadOptions::prefix(4096))
        .await
        .unwrap();
    assert_eq!(prefix.data, pattern(70_000).slice(..4096));
    assert_eq!(prefix.size, 70_000);
    assert!(!prefix.is_complete());
}

/// The size guard: exactly the limit is read, one byte over is
/// `too_large`, prefix reads included.
pub async fn the_size_guard_holds(f: SeededFixture) {
    let at = f
        .backend
        .read(&p("/beta/SKILL.md"), ReadOptions::with_limit(1000))
        .await
        .unwrap();
    assert_eq!(at.data.len(), 1000);
    assert_kind(
        f.backend
            .read(&p("/alpha/scripts/run.sh"), ReadOptions::with_limit(1000))
            .await,
        ErrorKind::TooLarge,
    );
    let options = ReadOptions {
        prefix: Some(10),
        ..ReadOptions::with_limit(1000)
    };
    assert_kind(
        f.backend.read(&p("/alpha/scripts/run.sh"), options).await,
        ErrorKind::TooLarge,
    );
}

/// Writes are refused, and the capabilities say so.
pub async fn writes_are_refused(f: SeededFixture) {
    assert!(!f.backend.capabilities().write);
    assert_kind(
        f.backend
            .put(&p("/alpha/SKILL.md"), Bytes::from_static(b"x"), PutMode::Overwrite)
            .await,
        ErrorKind::ReadOnly,
    );
    assert_kind(f.backend.delete(&p("/alpha/SKILL.md")).await, ErrorKind::ReadOnly);
}

/// Hostile paths never reach a backend: `VPath` refuses them first.
pub async fn hostile_paths_are_refused_before_any_call(f: SeededFixture) {
    for raw in super::hostile::refused_corpus() {
        assert!(VPath::new(&raw).is_err(), "{raw:?}");
    }
    assert_eq!(names(&f, "/").await.len(), 2);
}

/// Expands the read-only cases into `#[test]` functions in the calling
/// module, for one `fn() -> SeededFixture` factory.
#[macro_export]
macro_rules! read_only_conformance_tests {
    ($factory:path) => {
        $crate::__read_only_cases!(
            $factory;
            lists_the_tree,
            lists_of_missing_directories_and_files_fail,
            stat_and_read_agree,
            reads_that_cannot_be,
            empty_files_and_prefixes,
            the_size_guard_holds,
            writes_are_refused,
            hostile_paths_are_refused_before_any_call,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __read_only_cases {
    ($factory:path; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::testkit::read_only::run_seeded_case($factory, $crate::testkit::read_only::$case);
            }
        )+
    };
}

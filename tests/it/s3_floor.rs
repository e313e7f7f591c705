//! Loading S3 sources in a few requests: the deep listing, refresh by
//! listed versions, the index beside the skills and the local cache, on a
//! real S3 server (s3s-fs, and moto where `SKILLSTORE_MOTO_ENDPOINT` is set),
//! with files changed behind skillstore's back between every pair of loads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::json;
use skillstore::backends::testkit::s3_server::{MOTO_ENV, S3TestServer, s3_backend};
use skillstore::backends::{
    Blob, Capabilities, DeepLimits, DeepListing, Entry, Listing, Metadata, ObjectStoreBackend, PutMode, ReadOptions,
    Result, SkillBackend, VPath, Version,
};
use skillstore::cache::{CacheSettings, LocalCache};
use skillstore::index::{Entries, HeadEntry, INDEX_FILE};
use skillstore::{Catalog, DiagnosticKind, LoadOptions, Source, SourceList};

/// Counts what a catalog asks of its backend.
#[derive(Debug)]
struct Counting {
    inner: ObjectStoreBackend,
    deep_lists: AtomicUsize,
    lists: AtomicUsize,
    stats: AtomicUsize,
    reads: AtomicUsize,
    read_paths: std::sync::Mutex<Vec<String>>,
}

impl Counting {
    fn new(inner: ObjectStoreBackend) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            deep_lists: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
            stats: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
            read_paths: Default::default(),
        })
    }

    /// (deep listings, listings, stats, reads) since the last call.
    fn take(&self) -> (usize, usize, usize, usize) {
        self.read_paths.lock().unwrap().clear();
        (
            self.deep_lists.swap(0, Ordering::SeqCst),
            self.lists.swap(0, Ordering::SeqCst),
            self.stats.swap(0, Ordering::SeqCst),
            self.reads.swap(0, Ordering::SeqCst),
        )
    }
}

#[async_trait]
impl SkillBackend for Counting {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(dir).await
    }
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list_detailed(dir).await
    }
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        self.deep_lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list_deep(dir, limits).await
    }
    fn location_id(&self, dir: &VPath) -> Option<String> {
        self.inner.location_id(dir)
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.stats.fetch_add(1, Ordering::SeqCst);
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.read_paths.lock().unwrap().push(path.to_string());
        self.inner.read(path, options).await
    }
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.inner.put(path, data, mode).await
    }
    async fn delete(&self, path: &VPath) -> Result<()> {
        self.inner.delete(path).await
    }
}

fn skill_md(name: &str, description: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n").into_bytes()
}

fn vpath(p: &str) -> VPath {
    VPath::new(p).unwrap()
}

fn sources() -> SourceList {
    SourceList::from_sources(["/base/", "/team/"].map(|p| Source::parse(p).unwrap())).unwrap()
}

fn options(cache: Option<&std::path::Path>) -> LoadOptions {
    LoadOptions {
        cache: cache.map(|dir| CacheSettings {
            dir: Some(dir.to_path_buf()),
            ..CacheSettings::default()
        }),
        ..LoadOptions::default()
    }
}

/// A fresh prefix on the s3s-fs server: the backend, and a plain client for
/// changes behind skillstore's back.
fn s3s() -> ObjectStoreBackend {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    server.backend(&bucket, "catalog")
}

fn moto() -> ObjectStoreBackend {
    let url = std::env::var(MOTO_ENV).unwrap_or_else(|_| panic!("{MOTO_ENV} is not set"));
    let (endpoint, bucket) = url.trim_end_matches('/').rsplit_once('/').unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    s3_backend(endpoint, bucket, &format!("floor-{nanos}"))
}

async fn put(backend: &ObjectStoreBackend, path: &str, data: impl Into<Bytes>) -> Version {
    backend
        .put(&vpath(path), data.into(), PutMode::Overwrite)
        .await
        .unwrap()
}

/// The skills of a catalog as comparable data, and its diagnostics other
/// than those about the index.
fn view(catalog: &Catalog) -> (Vec<serde_json::Value>, Vec<String>) {
    let skills = catalog
        .skills()
        .iter()
        .map(|s| json!({"skill": s, "version": s.version.as_str()}))
        .collect();
    let diagnostics = catalog
        .diagnostics()
        .iter()
        .filter(|d| d.kind != DiagnosticKind::IndexIgnored)
        .map(|d| serde_json::to_string(d).unwrap())
        .collect();
    (skills, diagnostics)
}

fn index_notes(catalog: &Catalog) -> Vec<String> {
    catalog
        .diagnostics()
        .iter()
        .filter(|d| d.kind == DiagnosticKind::IndexIgnored)
        .map(|d| d.message.clone())
        .collect()
}

async fn seed(backend: &ObjectStoreBackend, per_source: usize) {
    for layer in ["base", "team"] {
        for i in 0..per_source {
            let name = format!("skill-{i:02}");
            put(
                backend,
                &format!("/{layer}/{name}/SKILL.md"),
                skill_md(&name, &format!("{layer} {i}")),
            )
            .await;
            put(backend, &format!("/{layer}/{name}/references/notes.md"), "notes").await;
        }
    }
}

/// Writes the index of a source as a writer would, from what is there now.
async fn write_index(backend: &ObjectStoreBackend, source: &str) {
    let listing = backend.list_deep(&vpath(source), DeepLimits::default()).await.unwrap();
    let mut changes = Vec::new();
    for file in listing.files {
        let Some(dir) = skillstore::index::skill_dir_of(&file.relative) else {
            continue;
        };
        let blob = backend
            .read(&vpath(&format!("{source}/{}", file.relative)), ReadOptions::default())
            .await
            .unwrap();
        changes.push((
            file.relative.clone(),
            skillstore::index::entry_for(dir, &blob.data, blob.version),
        ));
    }
    skillstore::index::update(backend, &vpath(source), &changes)
        .await
        .unwrap();
}

#[tokio::test]
async fn deep_listing_gives_every_key_with_its_version() {
    let backend = s3s();
    seed(&backend, 3).await;
    let listing = backend.list_deep(&vpath("/base"), DeepLimits::default()).await.unwrap();
    assert!(!listing.truncated);
    let mut relative: Vec<&str> = listing.files.iter().map(|f| f.relative.as_str()).collect();
    relative.sort();
    assert_eq!(relative.len(), 6);
    assert_eq!(relative[0], "skill-00/SKILL.md");
    for file in &listing.files {
        let meta = backend.stat(&vpath(&format!("/base/{}", file.relative))).await.unwrap();
        assert_eq!(file.version, meta.version, "{}", file.relative);
        assert_eq!(file.size, meta.size);
    }
    // The same files through the default walk (any backend's fallback).
    let memory = skillstore::backends::MemoryBackend::new();
    for file in &listing.files {
        memory
            .put(&vpath(&format!("/{}", file.relative)), "x".into(), PutMode::Overwrite)
            .await
            .unwrap();
    }
    let walked = memory.list_deep(&VPath::root(), DeepLimits::default()).await.unwrap();
    let mut walked: Vec<String> = walked.files.into_iter().map(|f| f.relative).collect();
    walked.sort();
    assert_eq!(walked, relative);
    // Cut short by the file limit, and by files per directory.
    let cut = backend
        .list_deep(
            &vpath("/base"),
            DeepLimits {
                max_files: 4,
                ..DeepLimits::default()
            },
        )
        .await
        .unwrap();
    assert!(cut.truncated);
    for i in 0..2100 {
        put(&backend, &format!("/big/one/assets/{i:04}"), "a").await;
    }
    let big = backend.list_deep(&vpath("/big"), DeepLimits::default()).await.unwrap();
    assert!(
        big.truncated,
        "a source of far more files than directories is listed by directory"
    );
}

#[tokio::test]
async fn a_deep_listing_meeting_a_key_no_path_holds_fails_rather_than_drop_it() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let backend = server.backend(&bucket, "catalog");
    put(&backend, "/base/good/SKILL.md", skill_md("good", "d")).await;
    server.put_raw(&bucket, "catalog/base/bad\u{7f}/SKILL.md", &skill_md("bad", "d"));
    let err = backend
        .list_deep(&vpath("/base"), DeepLimits::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), skillstore::backends::ErrorKind::InvalidPath);
    // The catalog lists that source by directory and reports the name.
    let catalog = Catalog::load(Arc::new(backend), sources(), options(None)).await;
    assert!(catalog.get("good").is_some());
    assert!(
        catalog
            .diagnostics()
            .iter()
            .any(|d| d.kind == DiagnosticKind::InvalidKey)
    );
}

#[tokio::test]
async fn refresh_of_an_unchanged_catalog_is_the_listing_alone() {
    let backend = s3s();
    seed(&backend, 5).await;
    let counting = Counting::new(backend.clone());
    let catalog = Catalog::load(counting.clone(), sources(), options(None)).await;
    assert_eq!(catalog.skills().len(), 5);
    assert_eq!(
        counting.take(),
        (2, 0, 0, 10),
        "one deep listing per source, one read per SKILL.md"
    );

    let same = catalog.refresh().await;
    assert_eq!(counting.take(), (2, 0, 0, 0), "no stat, no read");
    assert_eq!(view(&same), view(&catalog));

    put(
        &backend,
        "/team/skill-03/SKILL.md",
        skill_md("skill-03", "team 3 changed"),
    )
    .await;
    let after = same.refresh().await;
    assert_eq!(counting.take(), (2, 0, 0, 1), "one read of the changed file");
    assert_eq!(after.get("skill-03").unwrap().metadata.description, "team 3 changed");
}

/// However many records the history, the audit log and releases keep
/// beside the skills, a source is still listed in one deep pass: their
/// keys are neither listed nor counted against the listing's limits.
#[tokio::test]
async fn bookkeeping_beside_the_skills_never_costs_the_deep_listing() {
    let backend = s3s();
    seed(&backend, 5).await;
    let records: Vec<String> = (0..2100)
        .map(|i| match i % 3 {
            0 => format!("/base/.audit/{i:016}.json"),
            1 => format!("/base/.history/skill-{i}.jsonl"),
            _ => format!("/base/.releases/skill-00/{i}.0.0.json"),
        })
        .collect();
    futures::future::join_all(records.iter().map(|path| put(&backend, path, "{}"))).await;
    // A hidden directory is never a skill, whatever it holds.
    for hidden in [".audit", ".history", ".releases", ".git", ".x"] {
        put(
            &backend,
            &format!("/base/{hidden}/SKILL.md"),
            skill_md("hidden", "hidden"),
        )
        .await;
    }
    let counting = Counting::new(backend.clone());
    let catalog = Catalog::load(counting.clone(), sources(), options(None)).await;
    assert_eq!(catalog.skills().len(), 5);
    assert_eq!(
        counting.take(),
        (2, 0, 0, 10),
        "one deep listing per source, no listing by directory"
    );
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
}

#[tokio::test]
async fn a_cold_load_with_an_index_reads_no_skill_md() {
    let backend = s3s();
    seed(&backend, 5).await;
    write_index(&backend, "/base").await;
    write_index(&backend, "/team").await;
    let counting = Counting::new(backend.clone());
    let catalog = Catalog::load(counting.clone(), sources(), options(None)).await;
    let reads = counting.read_paths.lock().unwrap().clone();
    assert_eq!(counting.take(), (2, 0, 0, 2), "{reads:?}");
    assert!(reads.iter().all(|p| p.ends_with(INDEX_FILE)), "{reads:?}");
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
    let fresh = Catalog::load(Arc::new(backend.clone()), sources(), options(None)).await;
    assert_eq!(view(&catalog), view(&fresh));
    // The index is no skill and no file of one.
    assert!(
        catalog
            .skills()
            .iter()
            .all(|s| !s.path.as_str().contains(".skillstore"))
    );
}

#[tokio::test]
async fn a_cold_load_with_a_local_cache_reads_nothing() {
    let backend = s3s();
    seed(&backend, 5).await;
    let cache = tempfile::tempdir().unwrap();
    let counting = Counting::new(backend.clone());
    let first = Catalog::load(counting.clone(), sources(), options(Some(cache.path()))).await;
    assert_eq!(counting.take(), (2, 0, 0, 10));
    let second = Catalog::load(counting.clone(), sources(), options(Some(cache.path()))).await;
    assert_eq!(counting.take(), (2, 0, 0, 0), "every frontmatter came from the cache");
    assert_eq!(view(&first), view(&second));

    // Private to its user.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(cache.path()), 0o700);
    let files: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "one file per source: {files:?}");
    for file in &files {
        assert_eq!(mode(file), 0o600);
    }

    // A corrupt file is a miss, never an error.
    for file in &files {
        std::fs::write(file, b"{\"format\": \"skillstore-cache\", \"vers").unwrap();
    }
    let third = Catalog::load(counting.clone(), sources(), options(Some(cache.path()))).await;
    assert_eq!(counting.take(), (2, 0, 0, 10));
    assert_eq!(view(&third), view(&first));

    // Off: nothing read from it or written to it.
    let off = tempfile::tempdir().unwrap();
    let unused = off.path().join("cache");
    let fourth = Catalog::load(
        counting.clone(),
        sources(),
        LoadOptions {
            cache: None,
            ..options(Some(&unused))
        },
    )
    .await;
    assert_eq!(counting.take(), (2, 0, 0, 10));
    assert!(!unused.exists());
    assert_eq!(view(&fourth), view(&first));
}

#[tokio::test]
async fn an_existing_cache_directory_open_to_others_is_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("c");
    std::fs::create_dir(&cache_dir).unwrap();
    std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let cache = LocalCache::open(&CacheSettings {
        dir: Some(cache_dir.clone()),
        ..CacheSettings::default()
    })
    .expect("this user's directory");
    assert_eq!(
        std::fs::metadata(cache.dir()).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

fn entries_of(name: &str, version: &str) -> Entries {
    let mut entries = Entries::new();
    entries.insert(
        format!("{name}/SKILL.md"),
        HeadEntry::of_file(&skill_md(name, "d"), Version::new(version)).unwrap(),
    );
    entries
}

#[test]
fn two_locations_never_read_each_others_entries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(&CacheSettings {
        dir: Some(dir.path().to_path_buf()),
        ..CacheSettings::default()
    })
    .unwrap();
    let a = "s3|http://one|us-east-1|bucket|tenants/a";
    let b = "s3|http://one|us-east-1|bucket|tenants/b";
    cache.store(a, &entries_of("pdf", "\"1\""));
    assert_eq!(cache.load(a), entries_of("pdf", "\"1\""));
    assert!(cache.load(b).is_empty());
    // A file renamed to another location's name is refused by its content.
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cache.store(b, &entries_of("docx", "\"2\""));
    let b_file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !files.contains(p))
        .unwrap();
    std::fs::copy(&files[0], &b_file).unwrap();
    assert!(cache.load(b).is_empty());
}

#[test]
fn concurrent_writers_leave_one_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: Some(dir.path().to_path_buf()),
        ..CacheSettings::default()
    };
    let location = "s3|http://one|r|b|p";
    let written: Vec<Entries> = (0..8)
        .map(|i| entries_of(&format!("s{i}"), &format!("\"{i}\"")))
        .collect();
    let written = &written;
    std::thread::scope(|scope| {
        for entries in written {
            let settings = settings.clone();
            scope.spawn(move || {
                let cache = LocalCache::open(&settings).unwrap();
                for _ in 0..20 {
                    cache.store(location, entries);
                    let seen = cache.load(location);
                    assert!(written.contains(&seen), "a torn or foreign file: {seen:?}");
                }
            });
        }
    });
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
}

#[test]
fn the_cache_stays_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(&CacheSettings {
        dir: Some(dir.path().to_path_buf()),
        max_bytes: 2_000,
    })
    .unwrap();
    for i in 0..20 {
        cache.store(&format!("loc-{i}"), &entries_of("pdf", "\"1\""));
    }
    let total: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(total <= 2_000, "{total}");
    assert!(!cache.load("loc-19").is_empty(), "the newest is kept");
}

/// A cache entry is served only for the version it was read from: one
/// forged for the current version is served (so the cache is in use), one
/// for another version never is, and another location never sees it.
#[tokio::test]
async fn a_cache_entry_is_served_only_at_its_version_and_location() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let a = server.backend(&bucket, "a");
    let b = server.backend(&bucket, "b");
    for backend in [&a, &b] {
        put(backend, "/base/pdf/SKILL.md", skill_md("pdf", "real")).await;
        put(backend, "/team/keep/SKILL.md", skill_md("keep", "real")).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(&CacheSettings {
        dir: Some(dir.path().to_path_buf()),
        ..CacheSettings::default()
    })
    .unwrap();
    let version = a.stat(&vpath("/base/pdf/SKILL.md")).await.unwrap().version.unwrap();
    let forged = |version: Version| {
        let mut entries = Entries::new();
        let mut entry = HeadEntry::of_file(&skill_md("pdf", "forged"), version).unwrap();
        entry.size = skill_md("pdf", "real").len() as u64;
        entries.insert("pdf/SKILL.md".into(), entry);
        entries
    };
    let location_a = a.location_id(&vpath("/base")).unwrap();
    cache.store(&location_a, &forged(version.clone()));
    let from_a = Catalog::load(Arc::new(a.clone()), sources(), options(Some(dir.path()))).await;
    assert_eq!(from_a.get("pdf").unwrap().metadata.description, "forged");
    let from_b = Catalog::load(Arc::new(b.clone()), sources(), options(Some(dir.path()))).await;
    assert_eq!(from_b.get("pdf").unwrap().metadata.description, "real");

    cache.store(&location_a, &forged(Version::new("\"not-the-version\"")));
    let again = Catalog::load(Arc::new(a.clone()), sources(), options(Some(dir.path()))).await;
    assert_eq!(again.get("pdf").unwrap().metadata.description, "real");
}

/// Hostile and broken indexes, one by one: each is passed over for the
/// entries it gets wrong, with an `index_ignored` diagnostic, and the
/// catalog equals one loaded with no index at all.
#[tokio::test]
async fn hostile_indexes_are_never_trusted() {
    let backend = s3s();
    seed(&backend, 3).await;
    let truth = view(&Catalog::load(Arc::new(backend.clone()), sources(), options(None)).await);
    let pdf = backend.stat(&vpath("/team/skill-01/SKILL.md")).await.unwrap();
    let (version, size) = (pdf.version.unwrap(), pdf.size.unwrap());
    let hash = skillstore::integrity::sha256_hex(&skill_md("skill-01", "team 1"));
    let entry = |name: &str, version: &str, size: u64| json!({"version": version, "size": size, "sha256": hash, "yaml": format!("name: {name}\ndescription: forged\n")});
    let doc = |entries: serde_json::Value| {
        json!({"format": "skillstore-index", "version": 2, "entries": entries}).to_string()
    };
    let mut huge = serde_json::Map::new();
    for i in 0..100_001 {
        huge.insert(format!("x{i}/SKILL.md"), json!(0));
    }
    let million: String = {
        let mut text = String::from("{\"format\":\"skillstore-index\",\"version\":1,\"entries\":{");
        for i in 0..1_000_000 {
            text.push_str(&format!("\"s{i}/SKILL.md\":0,"));
        }
        text.push_str("\"last/SKILL.md\":0}}");
        text
    };
    let v = version.as_str();
    let cases: Vec<(&str, String)> = vec![
        ("stale", doc(json!({"skill-01/SKILL.md": entry("skill-01", "\"other\"", size)}))),
        ("wrong size", doc(json!({"skill-01/SKILL.md": entry("skill-01", v, size + 1)}))),
        ("truncated", doc(json!({"skill-01/SKILL.md": entry("skill-01", v, size)}))[..60].to_owned()),
        (
            "other format version",
            json!({"format": "skillstore-index", "version": 1, "entries": {"skill-01/SKILL.md": {"version": v, "size": size, "yaml": "name: skill-01\ndescription: forged\n"}}}).to_string(),
        ),
        (
            "no file hash",
            doc(json!({"skill-01/SKILL.md": {"version": v, "size": size, "yaml": "name: skill-01\ndescription: forged\n"}})),
        ),
        ("other format", json!({"format": "something", "version": 1, "entries": {}}).to_string()),
        (
            "paths outside the source",
            doc(json!({"../base/skill-01/SKILL.md": entry("skill-01", v, size), "/skill-01/SKILL.md": entry("skill-01", v, size), "a/b/SKILL.md": entry("b", v, size)})),
        ),
        ("name is not the directory's", doc(json!({"skill-01/SKILL.md": entry("skill-02", v, size)}))),
        ("not a skill", doc(json!({"skill-01/SKILL.md": {"version": v, "size": size, "sha256": hash, "yaml": "name: skill-01\n"}}))),
        ("wrong shape", doc(json!({"skill-01/SKILL.md": {"version": 7}}))),
        ("too many entries", json!({"format": "skillstore-index", "version": 1, "entries": huge}).to_string()),
        ("a million entries", million),
        ("not JSON", "\u{0}\u{1}garbage".to_owned()),
    ];
    for (case, text) in cases {
        put(&backend, &format!("/team/{INDEX_FILE}"), text).await;
        let counting = Counting::new(backend.clone());
        let catalog = Catalog::load(counting.clone(), sources(), options(None)).await;
        assert_eq!(view(&catalog), truth, "{case}");
        let notes = index_notes(&catalog);
        assert_eq!(notes.len(), 1, "{case}: {notes:?}");
        let read = counting.read_paths.lock().unwrap().clone();
        assert!(
            read.iter().any(|p| p == "/team/skill-01/SKILL.md"),
            "{case}: the file is read: {read:?}"
        );
    }
}

/// One step of changes made behind skillstore's back with plain puts and
/// deletes, as another tool would.
async fn change(backend: &ObjectStoreBackend, step: usize, rng: &mut u64) {
    let mut next = |n: u64| {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    };
    let layer = ["base", "team"][next(2) as usize];
    let i = next(6);
    let name = format!("skill-{i:02}");
    let path = format!("/{layer}/{name}/SKILL.md");
    match next(7) {
        // Same size, same second: only the bytes differ.
        0 | 1 => {
            let text = skill_md(&name, &format!("{layer} {:04}", step % 10_000));
            put(backend, &path, text).await;
        }
        2 => {
            let _ = backend.delete(&vpath(&path)).await;
        }
        3 => {
            put(backend, &path, skill_md(&format!("renamed-{i}"), "another name")).await;
        }
        4 => {
            let _ = backend.delete(&vpath(&path)).await;
            put(
                backend,
                &format!("/{layer}/{name}/skill.md"),
                skill_md(&name, "lowercase"),
            )
            .await;
        }
        5 => {
            put(backend, &path, b"---\nname: [broken\n---\n".to_vec()).await;
        }
        _ => write_index(backend, &format!("/{layer}")).await,
    }
}

async fn behind_the_back(backend: ObjectStoreBackend) {
    seed(&backend, 6).await;
    write_index(&backend, "/base").await;
    let cache = tempfile::tempdir().unwrap();
    let mut refreshed = Catalog::load(Arc::new(backend.clone()), sources(), options(Some(cache.path()))).await;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for step in 0..40 {
        change(&backend, step, &mut rng).await;
        if step % 3 == 0 {
            // Twice in the same second, same size.
            change(&backend, step, &mut rng).await;
        }
        let fresh = view(&Catalog::load(Arc::new(backend.clone()), sources(), options(None)).await);
        let cached = Catalog::load(Arc::new(backend.clone()), sources(), options(Some(cache.path()))).await;
        refreshed = refreshed.refresh().await;
        assert_eq!(view(&cached), fresh, "a cold load with the cache, step {step}");
        assert_eq!(view(&refreshed), fresh, "a refresh, step {step}");
    }
}

#[tokio::test]
async fn the_catalog_always_equals_a_fresh_load_on_s3s() {
    behind_the_back(s3s()).await;
}

#[tokio::test]
#[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"]
async fn the_catalog_always_equals_a_fresh_load_on_moto() {
    behind_the_back(moto()).await;
}

#[tokio::test]
#[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"]
async fn refresh_and_index_request_counts_on_moto() {
    let backend = moto();
    seed(&backend, 4).await;
    write_index(&backend, "/base").await;
    let counting = Counting::new(backend.clone());
    let catalog = Catalog::load(counting.clone(), sources(), options(None)).await;
    assert_eq!(
        counting.take(),
        (2, 0, 0, 1 + 4),
        "the base index, and team's four files"
    );
    catalog.refresh().await;
    assert_eq!(counting.take(), (2, 0, 0, 0));
}

/// The editor keeps the index up to date: a load after a change reads the
/// index alone.
#[tokio::test]
async fn edits_keep_the_index_current() {
    let backend = s3s();
    seed(&backend, 2).await;
    let team = Source::parse("/team/").unwrap().with_writable(true);
    let list = SourceList::from_sources([Source::parse("/base/").unwrap(), team.clone()]).unwrap();
    let editor = skillstore::SkillEditor::new(Arc::new(backend.clone()), &team).unwrap();
    editor.create("fresh", skill_md("fresh", "new")).await.unwrap();
    editor
        .edit("skill-01", skill_md("skill-01", "edited"), None)
        .await
        .unwrap();
    editor.delete("skill-00", None).await.unwrap();
    let counting = Counting::new(backend.clone());
    let catalog = Catalog::load(counting.clone(), list.clone(), options(None)).await;
    let read = counting.read_paths.lock().unwrap().clone();
    let team_reads: Vec<&String> = read.iter().filter(|p| p.starts_with("/team/")).collect();
    assert_eq!(team_reads, [&format!("/team/{INDEX_FILE}")]);
    assert!(index_notes(&catalog).is_empty(), "{:?}", index_notes(&catalog));
    assert_eq!(catalog.get("skill-01").unwrap().metadata.description, "edited");
    assert_eq!(catalog.get("fresh").unwrap().source, "team");
    let fresh = Catalog::load(Arc::new(backend), list, options(None)).await;
    assert_eq!(view(&catalog), view(&fresh));
}

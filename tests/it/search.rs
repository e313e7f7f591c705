//! Search over a catalog: stems and name parts match, headings outrank
//! text, only winners are results, disabled skills only when asked, a
//! refresh reads only what changed, and a warm start from the local cache
//! reads no SKILL.md that did not change.

use crate::common::{Kind, Watched, tree};
use skillstore::backends::{PutMode, SkillBackend, VPath};
use skillstore::cache::CacheSettings;
use skillstore::search::{SearchIndex, SearchOptions};
use skillstore::source::Patterns;
use skillstore::{Catalog, LoadOptions, SkillFilter, Source, SourceList};

fn md(name: &str, description: &str, body: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}").into_bytes()
}

fn sources(names: &[&str]) -> SourceList {
    SourceList::from_sources(names.iter().map(|n| Source::parse(n).unwrap())).unwrap()
}

async fn put(backend: &dyn SkillBackend, path: &str, data: Vec<u8>) {
    backend
        .put(&VPath::new(path).unwrap(), data.into(), PutMode::Overwrite)
        .await
        .unwrap();
}

fn names(hits: &[skillstore::search::SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

fn options(limit: usize) -> SearchOptions {
    SearchOptions {
        limit,
        include_disabled: false,
    }
}

#[tokio::test]
async fn stems_and_name_parts_match() {
    let files = tree(
        Kind::Memory,
        &[
            (
                "/base/pdf-form-filler/SKILL.md",
                &md("pdf-form-filler", "Complete documents.", "Steps.\n"),
            ),
            (
                "/base/db_migrations/SKILL.md",
                &md("db_migrations", "Schema changes.", "Steps.\n"),
            ),
            ("/base/other/SKILL.md", &md("other", "Nothing related.", "Steps.\n")),
        ],
    )
    .await;
    let catalog = Catalog::load(files.backend.clone(), sources(&["/base"]), LoadOptions::default()).await;
    let index = SearchIndex::in_memory();
    index.refresh(&catalog).await.unwrap();
    // A name's parts are words; words match their stems.
    let hits = index.search(&catalog, "forms", options(5)).unwrap();
    assert_eq!(names(&hits), ["pdf-form-filler"]);
    let hits = index.search(&catalog, "completing", options(5)).unwrap();
    assert_eq!(names(&hits), ["pdf-form-filler"]);
    let hits = index.search(&catalog, "migration", options(5)).unwrap();
    assert_eq!(names(&hits), ["db_migrations"]);
    let hit = &hits[0];
    assert_eq!(hit.source, "base");
    assert_eq!(hit.path.as_str(), "/base/db_migrations/SKILL.md");
    assert_eq!(hit.description, "Schema changes.");
    assert!(hit.score > 0.0);
    // Words only, never syntax; nothing left after analysis is no result.
    assert!(index.search(&catalog, "the and of", options(5)).unwrap().is_empty());
    assert!(index.search(&catalog, "name:\"x AND (", options(5)).unwrap().is_empty());
    assert!(index.search(&catalog, "forms", options(0)).unwrap().is_empty());
}

#[tokio::test]
async fn a_heading_outranks_the_same_word_in_text_and_best_comes_first() {
    let files = tree(
        Kind::Memory,
        &[
            (
                "/base/in-text/SKILL.md",
                &md("in-text", "One.", "# Usage\nThis covers spreadsheets.\n"),
            ),
            (
                "/base/in-heading/SKILL.md",
                &md("in-heading", "Two.", "# Spreadsheets\nThis covers usage.\n"),
            ),
        ],
    )
    .await;
    let catalog = Catalog::load(files.backend.clone(), sources(&["/base"]), LoadOptions::default()).await;
    let index = SearchIndex::in_memory();
    index.refresh(&catalog).await.unwrap();
    let hits = index.search(&catalog, "spreadsheet", options(5)).unwrap();
    assert_eq!(names(&hits), ["in-heading", "in-text"]);
    assert!(hits[0].score > hits[1].score);
    assert_eq!(index.search(&catalog, "spreadsheet", options(1)).unwrap().len(), 1);
}

#[tokio::test]
async fn a_shadowed_skill_is_never_a_result_and_disabled_ones_only_when_asked() {
    let files = tree(
        Kind::Memory,
        &[
            (
                "/base/pdf/SKILL.md",
                &md("pdf", "Read PDFs.", "Uses the ghostscript tool.\n"),
            ),
            (
                "/team/pdf/SKILL.md",
                &md("pdf", "Read PDFs, the team's way.", "Uses poppler.\n"),
            ),
            (
                "/team/legacy/SKILL.md",
                &md("legacy", "Old PDF tricks.", "Uses poppler too.\n"),
            ),
        ],
    )
    .await;
    let load = LoadOptions {
        filter: SkillFilter::new(None, Patterns::new(["legacy"]).unwrap()),
        ..LoadOptions::default()
    };
    let catalog = Catalog::load(files.backend.clone(), sources(&["/base", "/team"]), load).await;
    let index = SearchIndex::in_memory();
    index.refresh(&catalog).await.unwrap();
    assert_eq!(index.len(), 2, "one document per winner");
    assert!(index.search(&catalog, "ghostscript", options(5)).unwrap().is_empty());
    let hits = index.search(&catalog, "poppler", options(5)).unwrap();
    assert_eq!(names(&hits), ["pdf"]);
    assert_eq!(hits[0].source, "team");
    // Asking for one result still finds the enabled one past a disabled one.
    let hits = index.search(&catalog, "poppler tricks", options(1)).unwrap();
    assert_eq!(names(&hits), ["pdf"]);
    let all = SearchOptions {
        limit: 5,
        include_disabled: true,
    };
    let hits = index.search(&catalog, "poppler tricks", all).unwrap();
    assert_eq!(names(&hits), ["legacy", "pdf"]);
    assert!(!hits[0].enabled);
}

#[tokio::test]
async fn a_refresh_reads_only_what_changed_and_forgets_what_is_gone() {
    let files = tree(
        Kind::Memory,
        &[
            ("/base/a/SKILL.md", &md("a", "First.", "alpha\n")),
            ("/base/b/SKILL.md", &md("b", "Second.", "beta\n")),
            ("/base/c/SKILL.md", &md("c", "Third.", "gamma\n")),
        ],
    )
    .await;
    let watched = Watched::new(files.backend.clone());
    let catalog = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    let index = SearchIndex::in_memory();
    let stats = index.refresh(&catalog).await.unwrap();
    assert_eq!((stats.indexed, stats.removed, stats.kept), (3, 0, 0));

    put(&*files.backend, "/base/b/SKILL.md", md("b", "Second.", "delta\n")).await;
    files
        .backend
        .delete(&VPath::new("/base/c/SKILL.md").unwrap())
        .await
        .unwrap();
    let catalog = catalog.refresh().await;
    watched.reset();
    let stats = index.refresh(&catalog).await.unwrap();
    assert_eq!((stats.indexed, stats.removed, stats.kept), (1, 1, 1));
    assert_eq!(watched.reads(), 1, "only the changed SKILL.md is read");
    assert!(index.search(&catalog, "beta", options(5)).unwrap().is_empty());
    assert_eq!(names(&index.search(&catalog, "delta", options(5)).unwrap()), ["b"]);
    assert!(index.search(&catalog, "gamma", options(5)).unwrap().is_empty());
    assert_eq!(index.len(), 2);

    watched.reset();
    let stats = index.refresh(&catalog).await.unwrap();
    assert_eq!((stats.indexed, stats.removed, stats.kept), (0, 0, 2));
    assert_eq!(watched.reads(), 0);
}

#[tokio::test]
async fn a_hit_changed_since_the_refresh_is_not_returned() {
    let files = tree(Kind::Memory, &[("/base/a/SKILL.md", &md("a", "First.", "alpha\n"))]).await;
    let catalog = Catalog::load(files.backend.clone(), sources(&["/base"]), LoadOptions::default()).await;
    let index = SearchIndex::in_memory();
    index.refresh(&catalog).await.unwrap();
    put(&*files.backend, "/base/a/SKILL.md", md("a", "First.", "omega\n")).await;
    let newer = catalog.refresh().await;
    assert!(index.search(&newer, "alpha", options(5)).unwrap().is_empty());
    assert_eq!(index.search(&catalog, "alpha", options(5)).unwrap().len(), 1);
}

async fn warm_start_reads_only_changes(kind: Kind) {
    let files = tree(
        kind,
        &[
            ("/base/a/SKILL.md", &md("a", "First.", "alpha\n")),
            ("/base/b/SKILL.md", &md("b", "Second.", "beta\n")),
        ],
    )
    .await;
    let cache_dir = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: Some(cache_dir.path().join("cache")),
        ..CacheSettings::default()
    };
    let watched = Watched::new(files.backend.clone());
    let catalog = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    {
        let index = SearchIndex::open_cached(&settings, "namespace one");
        assert!(index.is_cached());
        assert_eq!(index.refresh(&catalog).await.unwrap().indexed, 2);
    }
    // A later process: the index comes from the cache, nothing is read.
    watched.reset();
    let index = SearchIndex::open_cached(&settings, "namespace one");
    assert_eq!(index.len(), 2);
    let stats = index.refresh(&catalog).await.unwrap();
    assert_eq!((stats.indexed, stats.kept), (0, 2));
    assert_eq!(watched.reads(), 0);
    assert_eq!(names(&index.search(&catalog, "beta", options(5)).unwrap()), ["b"]);
    drop(index);

    // One change: one read.
    put(&*files.backend, "/base/a/SKILL.md", md("a", "First, again.", "omega\n")).await;
    let catalog = catalog.refresh().await;
    watched.reset();
    let index = SearchIndex::open_cached(&settings, "namespace one");
    let stats = index.refresh(&catalog).await.unwrap();
    assert_eq!((stats.indexed, stats.kept), (1, 1));
    assert_eq!(watched.reads(), 1);
    assert_eq!(names(&index.search(&catalog, "omega", options(5)).unwrap()), ["a"]);

    // Another namespace never sees this one's index.
    let other = SearchIndex::open_cached(&settings, "namespace two");
    assert!(other.is_empty());
}

#[tokio::test]
async fn a_warm_start_from_the_cache_reads_no_unchanged_skill_md_fs() {
    warm_start_reads_only_changes(Kind::Fs).await;
}

#[tokio::test]
async fn a_warm_start_from_the_cache_reads_no_unchanged_skill_md_s3() {
    warm_start_reads_only_changes(Kind::S3).await;
}

#[tokio::test]
async fn the_cache_keeps_the_most_recently_opened_indexes() {
    let cache_dir = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: Some(cache_dir.path().join("cache")),
        ..CacheSettings::default()
    };
    let count = || {
        std::fs::read_dir(cache_dir.path().join("cache"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("search-"))
            .count()
    };
    for i in 0..skillstore::search::MAX_CACHED_INDEXES + 3 {
        let index = SearchIndex::open_cached(&settings, &format!("namespace {i}"));
        assert!(index.is_cached());
        assert!(count() <= skillstore::search::MAX_CACHED_INDEXES);
    }
    assert_eq!(count(), skillstore::search::MAX_CACHED_INDEXES);
}

/// What a new process finds for `word`: a fresh catalog of `backend` and
/// the index kept for `identity` in the local cache.
async fn search_anew(
    backend: std::sync::Arc<dyn SkillBackend>,
    settings: &CacheSettings,
    identity: &str,
    word: &str,
) -> Vec<String> {
    let catalog = Catalog::load(backend, sources(&["/base"]), LoadOptions::default()).await;
    let index = SearchIndex::open_cached(settings, identity);
    assert!(index.is_cached());
    index.refresh(&catalog).await.unwrap();
    let hits = index.search(&catalog, word, options(5)).unwrap();
    hits.into_iter().map(|h| h.name).collect()
}

fn about(word: &str) -> Vec<u8> {
    md("alpha", "Alpha.", &format!("# Alpha\n\nAbout {word}.\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cached_index_follows_content_changed_behind_every_kind() {
    use skillstore::backends::testkit::git_repo::{CommittingGit, git};
    use skillstore::backends::testkit::s3_server::S3TestServer;
    use skillstore::backends::{FsBackend, ObjectStoreBackend};
    use std::sync::Arc;

    let cache = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: Some(cache.path().to_owned()),
        ..CacheSettings::default()
    };
    let path = "/base/alpha/SKILL.md";

    // A directory: each process opens it afresh.
    let dir = tempfile::tempdir().unwrap();
    let fs = || Arc::new(FsBackend::new(dir.path()).unwrap()) as Arc<dyn SkillBackend>;
    put(&*fs(), path, about("zeppelin")).await;
    assert_eq!(search_anew(fs(), &settings, "dir", "zeppelin").await, ["alpha"]);
    put(&*fs(), path, about("quokka")).await;
    assert_eq!(search_anew(fs(), &settings, "dir", "quokka").await, ["alpha"]);
    assert!(search_anew(fs(), &settings, "dir", "zeppelin").await.is_empty());

    // S3 (the in-process server): a new client each time.
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let s3 = || Arc::new(ObjectStoreBackend::new(server.store(&bucket), "skills").unwrap()) as Arc<dyn SkillBackend>;
    put(&*s3(), path, about("zeppelin")).await;
    assert_eq!(search_anew(s3(), &settings, "s3", "zeppelin").await, ["alpha"]);
    put(&*s3(), path, about("quokka")).await;
    assert_eq!(search_anew(s3(), &settings, "s3", "quokka").await, ["alpha"]);
    assert!(search_anew(s3(), &settings, "s3", "zeppelin").await.is_empty());

    // Git: each write committed by the real `git`; each process reads the
    // last commit.
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["commit", "-q", "--allow-empty", "-m", "empty"]);
    let committing = CommittingGit::new(repo.path());
    let head = || Arc::new(committing.current()) as Arc<dyn SkillBackend>;
    put(&committing, path, about("zeppelin")).await;
    assert_eq!(search_anew(head(), &settings, "git", "zeppelin").await, ["alpha"]);
    put(&committing, path, about("quokka")).await;
    assert_eq!(search_anew(head(), &settings, "git", "quokka").await, ["alpha"]);
    assert!(search_anew(head(), &settings, "git", "zeppelin").await.is_empty());

    // A memory file is numbered afresh in each process: its namespace is
    // indexed in memory, never from the cache.
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("skills.json");
    let write_memory = async |word: &str| {
        let memory = skillstore::backends::MemoryBackend::new();
        put(&memory, path, about(word)).await;
        std::fs::write(&file, memory.to_json().unwrap()).unwrap();
    };
    let config = skillstore::Config::parse(&format!(
        "mounts:\n  - at: /\n    location: \"memory:{}\"\nsources:\n  - path: /base\ncache:\n  dir: \"{}\"\n",
        file.display(),
        cache.path().display()
    ))
    .unwrap();
    let memory_search = |word: &'static str| {
        let config = config.clone();
        async move {
            let namespace = config.open().unwrap();
            let catalog = namespace.load().await;
            let index = namespace.search_index_for(&catalog).await.unwrap();
            assert!(!index.is_cached());
            let hits = index.search(&catalog, word, options(5)).unwrap();
            hits.into_iter().map(|h| h.name).collect::<Vec<_>>()
        }
    };
    write_memory("zeppelin").await;
    assert_eq!(memory_search("zeppelin").await, ["alpha"]);
    write_memory("quokka").await;
    assert_eq!(memory_search("quokka").await, ["alpha"]);
    assert!(memory_search("zeppelin").await.is_empty());
}

fn aged_file(path: &std::path::Path, bytes: usize, age_secs: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, vec![b'x'; bytes]).unwrap();
    set_age(path, age_secs);
}

fn set_age(path: &std::path::Path, age_secs: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age_secs);
    std::fs::File::open(path).unwrap().set_modified(when).unwrap();
}

/// The bytes of the regular files under `dir`.
fn bytes_under(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let meta = std::fs::symlink_metadata(entry.as_ref().unwrap().path()).unwrap();
            if meta.is_dir() {
                pending.push(entry.unwrap().path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    total
}

#[test]
fn the_trim_bounds_every_directory_of_the_cache_oldest_first() {
    use skillstore::cache::LocalCache;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let open = |max_bytes| {
        LocalCache::open(&CacheSettings {
            dir: Some(dir.clone()),
            max_bytes,
        })
        .unwrap()
    };
    open(1 << 30);
    // Oldest first: a repository being fetched (its lock held), a
    // frontmatter file, a search index, a discovery blob, an idle
    // repository, a newer discovery blob.
    aged_file(&dir.join("git/busy.git/objects/pack"), 3000, 0);
    aged_file(&dir.join("git/busy.lock"), 0, 60);
    aged_file(&dir.join("0123456789abcdef0123456789abcdef.json"), 3000, 50);
    aged_file(&dir.join("search-1-abc/segment"), 3000, 0);
    set_age(&dir.join("search-1-abc"), 40);
    aged_file(&dir.join("discovery/endpoint/old-blob"), 3000, 30);
    aged_file(&dir.join("git/idle.git/objects/pack"), 3000, 0);
    aged_file(&dir.join("git/idle.lock"), 0, 20);
    aged_file(&dir.join("discovery/endpoint/new-blob"), 3000, 10);
    assert_eq!(bytes_under(&dir), 18_000);

    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("git/busy.lock"))
        .unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    open(10_000).trim();
    assert!(bytes_under(&dir) <= 10_000, "{}", bytes_under(&dir));
    assert!(
        dir.join("git/busy.git/objects/pack").exists(),
        "a repository being fetched is kept"
    );
    assert!(!dir.join("0123456789abcdef0123456789abcdef.json").exists());
    assert!(!dir.join("search-1-abc").exists());
    assert!(!dir.join("discovery/endpoint/old-blob").exists());
    assert!(dir.join("git/idle.git").exists(), "newer than what had to go");
    assert!(dir.join("discovery/endpoint/new-blob").exists());

    // Once its lock is free, the oldest repository goes first.
    drop(held);
    open(6_000).trim();
    assert!(!dir.join("git/busy.git").exists());
    assert!(!dir.join("git/busy.lock").exists());
    assert!(dir.join("git/idle.git").exists());
    assert!(bytes_under(&dir) <= 6_000);
}

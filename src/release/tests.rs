//! Releases on the memory backend, a directory and S3: the model, every
//! refusal, races, and the bytes of a release never changing.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use skillstore_backends::testkit::s3_server::S3TestServer;
use skillstore_backends::{FsBackend, MemoryBackend, PutMode, SkillBackend, SkillBackendExt, VPath};

use super::*;
use crate::{Catalog, LoadOptions, SourceList};

#[derive(Debug, Clone, Copy)]
enum Kind {
    Memory,
    Fs,
    S3,
}

struct Tree {
    backend: Arc<dyn SkillBackend>,
    _dir: Option<tempfile::TempDir>,
}

fn tree(kind: Kind) -> Tree {
    match kind {
        Kind::Memory => Tree {
            backend: Arc::new(MemoryBackend::new()),
            _dir: None,
        },
        Kind::Fs => {
            let dir = tempfile::tempdir().unwrap();
            Tree {
                backend: Arc::new(FsBackend::new(dir.path()).unwrap()),
                _dir: Some(dir),
            }
        }
        Kind::S3 => {
            let server = S3TestServer::shared();
            let bucket = server.create_bucket();
            Tree {
                backend: Arc::new(server.backend(&bucket, "skills")),
                _dir: None,
            }
        }
    }
}

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

fn team() -> Source {
    Source::parse("/team").unwrap().with_writable(true)
}

fn skill_md(name: &str, body: &str, version: Option<&str>) -> Bytes {
    let metadata = version
        .map(|v| format!("metadata:\n  version: \"{v}\"\n"))
        .unwrap_or_default();
    Bytes::from(format!(
        "---\nname: {name}\ndescription: Does {name}.\n{metadata}---\n\n{body}\n"
    ))
}

async fn put(backend: &dyn SkillBackend, path: &str, data: impl Into<Bytes>) {
    backend.put(&p(path), data.into(), PutMode::Overwrite).await.unwrap();
}

fn releases(tree: &Tree) -> Releases {
    Releases::new(Arc::clone(&tree.backend), &team()).with_author("ana")
}

fn sel(text: &str) -> Selector {
    Selector::parse(text).unwrap()
}

async fn picked(r: &Releases, name: &str, selector: &str) -> Option<String> {
    r.resolve(name, &sel(selector)).await.unwrap().map(|m| m.version)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

async fn channels_ranges_and_yanks(kind: Kind) {
    let t = tree(kind);
    let b = &*t.backend;
    let r = releases(&t);
    put(b, "/team/csv-report/references/a.md", "one").await;
    for (version, body) in [("1.0.0", "first"), ("1.1.0", "second"), ("2.0.0", "third")] {
        put(
            b,
            "/team/csv-report/SKILL.md",
            skill_md("csv-report", body, Some(version)),
        )
        .await;
        let made = r.release("csv-report", version, Some("notes")).await.unwrap();
        assert_eq!(made.manifest.version, version);
        assert_eq!(made.manifest.author, "ana");
        assert_eq!(made.manifest.files.len(), 2);
    }
    // The digest is the working copy's, by the one definition.
    let listed = crate::skill_files::list(b, &p("/team/csv-report"), 1 << 20, Default::default())
        .await
        .unwrap();
    let digest = crate::integrity::FileDigests::new()
        .skill_digest(b, &listed)
        .await
        .unwrap();
    let newest = r.require_resolved("csv-report", &sel("latest")).await.unwrap();
    assert_eq!(newest.digest, digest.digest);

    assert_eq!(picked(&r, "csv-report", "^1").await.as_deref(), Some("1.1.0"));
    assert_eq!(picked(&r, "csv-report", "latest").await.as_deref(), Some("2.0.0"));
    assert_eq!(picked(&r, "csv-report", "*").await.as_deref(), Some("2.0.0"));
    assert_eq!(picked(&r, "csv-report", "^3").await, None);
    assert_eq!(picked(&r, "csv-report", "stable").await, None);
    r.tag("csv-report", "stable", "1.0.0").await.unwrap();
    assert_eq!(picked(&r, "csv-report", "stable").await.as_deref(), Some("1.0.0"));

    r.yank("csv-report", "1.1.0").await.unwrap();
    assert_eq!(picked(&r, "csv-report", "^1").await.as_deref(), Some("1.0.0"));
    let pinned = r.require_resolved("csv-report", &sel("1.1.0")).await.unwrap();
    let text = r.read_file(&pinned, "SKILL.md").await.unwrap();
    assert!(String::from_utf8_lossy(&text).contains("second"));
    assert_eq!(
        r.tag("csv-report", "stable", "1.1.0").await.unwrap_err().kind(),
        "release_refused"
    );
    r.yank("csv-report", "2.0.0").await.unwrap();
    assert_eq!(picked(&r, "csv-report", "latest").await.as_deref(), Some("1.0.0"));
    let listed: Vec<_> = r
        .versions("csv-report")
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i.manifest.version, i.yanked, i.channels))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("1.0.0".into(), false, vec!["latest".to_owned(), "stable".to_owned()]),
            ("1.1.0".into(), true, vec![]),
            ("2.0.0".into(), true, vec![]),
        ]
    );
    // A yanked version is never released again, nor a lower one.
    put(b, "/team/csv-report/SKILL.md", skill_md("csv-report", "again", None)).await;
    assert_eq!(
        r.release("csv-report", "2.0.0", None).await.unwrap_err().kind(),
        "already_exists"
    );
    assert_eq!(
        r.release("csv-report", "1.5.0", None).await.unwrap_err().kind(),
        "release_refused"
    );
    r.release("csv-report", "2.0.1", None).await.unwrap();
    assert_eq!(picked(&r, "csv-report", "latest").await.as_deref(), Some("2.0.1"));

    // The releases directory is no skill, and costs no diagnostic.
    let sources = SourceList::from_sources([team()]).unwrap();
    let catalog = Catalog::load(Arc::clone(&t.backend), sources, LoadOptions::default()).await;
    let names: Vec<_> = catalog.skills().iter().map(|s| s.name().to_owned()).collect();
    assert_eq!(names, ["csv-report"]);
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
}

#[tokio::test]
async fn channels_ranges_and_yanks_on_memory() {
    channels_ranges_and_yanks(Kind::Memory).await;
}

#[tokio::test]
async fn channels_ranges_and_yanks_on_a_directory() {
    channels_ranges_and_yanks(Kind::Fs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_ranges_and_yanks_on_s3() {
    channels_ranges_and_yanks(Kind::S3).await;
}

/// A release, a tag and a yank each append one audit record naming the
/// files they wrote with their digests before and after, and the chain
/// verifies; a log that cannot be appended to refuses them first.
async fn releases_are_audited(kind: Kind) {
    let t = tree(kind);
    let b = &*t.backend;
    let r = releases(&t);
    put(b, "/team/pdf/SKILL.md", skill_md("pdf", "x", None)).await;
    r.release("pdf", "1.0.0", None).await.unwrap();
    r.tag("pdf", "stable", "1.0.0").await.unwrap();
    r.yank("pdf", "1.0.0").await.unwrap();
    let log = crate::audit::AuditLog::new(Arc::clone(&t.backend), &p("/team")).unwrap();
    let records = log.records(None).await.unwrap();
    let actions: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| (r.action.as_str(), r.skill.as_str(), r.actor.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("release", "pdf", "ana"), ("tag", "pdf", "ana"), ("yank", "pdf", "ana")]
    );
    let manifest = b
        .read(&p("/team/.releases/pdf/1.0.0.json"), Default::default())
        .await
        .unwrap();
    assert_eq!(records[0].files[0].path, ".releases/pdf/1.0.0.json");
    assert_eq!(records[0].files[0].before, None);
    assert_eq!(
        records[0].files[0].after,
        Some(crate::audit::record::digest(&manifest.data))
    );
    let channels = b
        .read(&p("/team/.releases/pdf/channels.json"), Default::default())
        .await
        .unwrap();
    assert_eq!(records[2].files[0].path, ".releases/pdf/channels.json");
    assert_eq!(records[2].files[0].before, records[1].files[0].after);
    assert_eq!(
        records[2].files[0].after,
        Some(crate::audit::record::digest(&channels.data))
    );
    assert!(log.verify(None).await.unwrap().breach.is_none());
    // A log whose newest record cannot be read refuses the next change.
    put(b, "/team/.audit/0000000000000004.json", vec![b'x'; 5 << 20]).await;
    assert!(r.tag("pdf", "beta", "1.0.0").await.is_err());
    assert!(!r.channels("pdf").await.unwrap().channels.contains_key("beta"));
}

#[tokio::test]
async fn releases_are_audited_on_memory() {
    releases_are_audited(Kind::Memory).await;
}

#[tokio::test]
async fn releases_are_audited_on_a_directory() {
    releases_are_audited(Kind::Fs).await;
}

#[tokio::test]
async fn every_refusal_writes_nothing() {
    let t = tree(Kind::Memory);
    let b = &*t.backend;
    let r = releases(&t);
    let kind = |e: Error| e.kind().as_str();
    put(b, "/team/pdf/SKILL.md", skill_md("pdf", "x", Some("1.0.0"))).await;
    for bad in [
        "1.0.0+build",
        "../1.0.0",
        "1.0",
        "v1.0.0",
        "1.0.0/..",
        "01.0.0",
        "1.0.0-a/b",
    ] {
        assert_eq!(kind(r.release("pdf", bad, None).await.unwrap_err()), "usage", "{bad}");
    }
    for bad in ["..", ".releases", "a/b", ""] {
        assert_eq!(kind(r.release(bad, "1.0.0", None).await.unwrap_err()), "usage", "{bad}");
    }
    assert_eq!(
        kind(r.release("pdf", "1.0.1", None).await.unwrap_err()),
        "release_refused"
    );
    assert_eq!(
        kind(r.release("nope", "1.0.0", None).await.unwrap_err()),
        "release_refused"
    );
    put(b, "/team/pdf/assets/tool", &b"\x7fELF\x02\x01\x01"[..]).await;
    assert_eq!(
        kind(r.release("pdf", "1.0.0", None).await.unwrap_err()),
        "content_blocked"
    );
    b.delete(&p("/team/pdf/assets/tool")).await.unwrap();
    put(b, "/team/pdf/SKILL.md", "---\nname: other\ndescription: d\n---\n").await;
    assert_eq!(
        kind(r.release("pdf", "1.0.0", None).await.unwrap_err()),
        "invalid_skill"
    );
    assert!(!b.exists(&p("/team/.releases")).await.unwrap_or(false));

    // A hidden file in the working copy is not part of the skill, so not
    // of its release.
    put(b, "/team/pdf/SKILL.md", skill_md("pdf", "x", None)).await;
    put(b, "/team/pdf/.env", "SECRET=1").await;
    let made = r.release("pdf", "1.0.0", None).await.unwrap();
    assert_eq!(
        made.manifest.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
        ["SKILL.md"]
    );

    assert_eq!(kind(r.tag("pdf", "Stable", "1.0.0").await.unwrap_err()), "usage");
    assert_eq!(
        kind(r.tag("pdf", "stable", "9.0.0").await.unwrap_err()),
        "release_not_found"
    );
    assert_eq!(kind(r.yank("pdf", "9.0.0").await.unwrap_err()), "release_not_found");
    let read_only = Releases::new(Arc::clone(&t.backend), &Source::parse("/team").unwrap());
    assert_eq!(kind(read_only.yank("pdf", "1.0.0").await.unwrap_err()), "read_only");
    assert_eq!(
        kind(read_only.release("pdf", "1.0.1", None).await.unwrap_err()),
        "read_only"
    );
    assert_eq!(picked(&read_only, "pdf", "latest").await.as_deref(), Some("1.0.0"));
}

#[tokio::test]
async fn a_release_rewritten_in_storage_is_refused_on_read() {
    let t = tree(Kind::Memory);
    let b = &*t.backend;
    let r = releases(&t);
    put(b, "/team/pdf/SKILL.md", skill_md("pdf", "x", None)).await;
    let made = r.release("pdf", "1.0.0", None).await.unwrap().manifest;
    let file = format!("/team/.releases/pdf/1.0.0/{}/SKILL.md", made.files_id);
    // Create-only: a second put of the same file is refused.
    let again = b.put(&p(&file), Bytes::from_static(b"x"), PutMode::Create).await;
    assert_eq!(again.unwrap_err().kind(), skillstore_backends::ErrorKind::AlreadyExists);
    // Rewritten behind skillstore's back, it is refused, never served.
    put(b, &file, skill_md("pdf", "planted", None)).await;
    assert_eq!(
        r.read_file(&made, "SKILL.md").await.unwrap_err().kind(),
        "release_refused"
    );
    // A manifest that points elsewhere or disagrees with itself is refused.
    let manifest = "/team/.releases/pdf/1.0.0.json";
    let mut forged = made.clone();
    forged.files_id = "../../../pdf".into();
    put(b, manifest, serde_json::to_vec(&forged).unwrap()).await;
    assert_eq!(r.versions("pdf").await.unwrap_err().kind(), "release_refused");
    let mut forged = made.clone();
    forged.files[0].sha256 = "0".repeat(64);
    put(b, manifest, serde_json::to_vec(&forged).unwrap()).await;
    assert_eq!(r.versions("pdf").await.unwrap_err().kind(), "release_refused");
}

async fn racing_releases_of_one_version(kind: Kind) {
    let t = tree(kind);
    let b = &*t.backend;
    put(b, "/team/pdf/SKILL.md", skill_md("pdf", "x", None)).await;
    put(b, "/team/pdf/references/a.md", "a").await;
    put(b, "/team/pdf/references/b.md", "b").await;
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let r = releases(&t).with_author(format!("writer-{i}"));
            tokio::spawn(async move { r.release("pdf", "1.0.0", None).await })
        })
        .collect();
    let mut won = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(made) => won.push(made.manifest),
            Err(e) => assert_eq!(e.kind(), "already_exists", "{e}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one writer wins");
    let r = releases(&t);
    let kept = r.require_resolved("pdf", &sel("1.0.0")).await.unwrap();
    assert_eq!(kept, won[0]);
    for file in &kept.files {
        r.read_file(&kept, &file.path).await.unwrap();
    }
    assert_eq!(picked(&r, "pdf", "latest").await.as_deref(), Some("1.0.0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_releases_of_one_version_on_memory() {
    racing_releases_of_one_version(Kind::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_releases_of_one_version_on_a_directory() {
    racing_releases_of_one_version(Kind::Fs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_releases_of_one_version_on_s3() {
    racing_releases_of_one_version(Kind::S3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_tags_all_land() {
    let t = tree(Kind::Memory);
    put(&*t.backend, "/team/pdf/SKILL.md", skill_md("pdf", "x", None)).await;
    releases(&t).release("pdf", "1.0.0", None).await.unwrap();
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let r = releases(&t);
            tokio::spawn(async move { r.tag("pdf", &format!("c{i}"), "1.0.0").await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(releases(&t).channels("pdf").await.unwrap().channels.len(), 7);
}

#[derive(Debug, Clone)]
enum Step {
    /// The working copy's SKILL.md body changed.
    Edit(u8),
    /// A supporting file written.
    Write(u8),
    /// A release of the working copy at the next version.
    Release,
    /// A yank of the `n`th release.
    Yank(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<u8>().prop_map(Step::Edit),
        any::<u8>().prop_map(Step::Write),
        Just(Step::Release),
        Just(Step::Release),
        (0usize..8).prop_map(Step::Yank),
    ]
}

/// Runs `steps` and checks, after each, that every release made reads the
/// bytes it was made with.
async fn bytes_never_change(kind: Kind, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let t = tree(kind);
    let b = &*t.backend;
    let r = releases(&t);
    put(b, "/team/pdf/SKILL.md", skill_md("pdf", "start", None)).await;
    let mut made: Vec<(Manifest, Vec<(String, Bytes)>)> = Vec::new();
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Step::Edit(n) => put(b, "/team/pdf/SKILL.md", skill_md("pdf", &format!("body {n}"), None)).await,
            Step::Write(n) => put(b, &format!("/team/pdf/references/f{}.md", n % 3), format!("{n}")).await,
            Step::Release => {
                let version = format!("1.{i}.0");
                let mut files = Vec::new();
                for path in ["SKILL.md", "references/f0.md", "references/f1.md", "references/f2.md"] {
                    if let Ok(data) = b.read_all(&p(&format!("/team/pdf/{path}"))).await {
                        files.push((path.to_owned(), data));
                    }
                }
                let manifest = r.release("pdf", &version, None).await.unwrap().manifest;
                made.push((manifest, files));
            }
            Step::Yank(n) => {
                if let Some((m, _)) = made.get(n) {
                    r.yank("pdf", &m.version).await.unwrap();
                }
            }
        }
        for (manifest, files) in &made {
            let again = r.require_resolved("pdf", &sel(&manifest.version)).await.unwrap();
            prop_assert_eq!(&again, manifest);
            prop_assert_eq!(again.files.len(), files.len());
            for (path, data) in files {
                prop_assert_eq!(&r.read_file(&again, path).await.unwrap(), data);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// A release's bytes never change once made, whatever is written to the
    /// working copy or yanked afterwards: in memory.
    #[test]
    fn a_release_never_changes_in_memory(steps in prop::collection::vec(step(), 1..10)) {
        block_on(bytes_never_change(Kind::Memory, steps))?;
    }

    /// The same in a directory.
    #[test]
    fn a_release_never_changes_in_a_directory(steps in prop::collection::vec(step(), 1..10)) {
        block_on(bytes_never_change(Kind::Fs, steps))?;
    }

    /// The same on S3.
    #[test]
    fn a_release_never_changes_on_s3(steps in prop::collection::vec(step(), 1..10)) {
        block_on(bytes_never_change(Kind::S3, steps))?;
    }
}

/// A consumer whose configuration selects `select` for `csv-report` in the
/// base at `root`.
fn consumer(root: &std::path::Path, select: &str) -> crate::Namespace {
    let yaml = format!(
        "mounts:\n  - at: /\n    location: {}\nsources:\n  - path: /base\n    select: {{csv-report: \"{select}\"}}\n",
        root.display()
    );
    let mut config = crate::Config::parse(&yaml).unwrap();
    config.disable_cache();
    config.open().unwrap()
}

/// A layer whose selection matches no release any more (its only match
/// yanked) withholds the name: the lower layer it overrode is not served
/// in its place, and comes back only when the selection matches again.
#[tokio::test]
async fn a_yanked_selection_never_brings_back_the_layer_below() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let b = &*backend;
    let team = Releases::new(Arc::clone(&backend), &team());
    put(b, "/base/changelog/SKILL.md", skill_md("changelog", "BASE", None)).await;
    put(b, "/team/changelog/SKILL.md", skill_md("changelog", "TEAM", None)).await;
    team.release("changelog", "1.0.0", None).await.unwrap();
    let yaml = format!(
        "mounts:\n  - at: /\n    location: {}\nsources:\n  - path: /base\n  - path: /team\n    select: {{changelog: \"^1\"}}\n",
        dir.path().display()
    );
    let mut config = crate::Config::parse(&yaml).unwrap();
    config.disable_cache();
    let namespace = config.open().unwrap();
    let catalog = namespace.load().await;
    let served = catalog.read_skill("changelog").await.unwrap();
    assert!(String::from_utf8_lossy(&served).contains("TEAM"));

    team.yank("changelog", "1.0.0").await.unwrap();
    let yanked = catalog.refresh().await;
    assert!(yanked.get("changelog").is_none(), "the base's changelog came back");
    assert!(yanked.read_skill("changelog").await.is_err());
    assert!(
        yanked
            .diagnostics()
            .iter()
            .any(|d| d.kind.as_str() == "release_not_found"),
        "{:?}",
        yanked.diagnostics()
    );

    team.release("changelog", "1.0.1", None).await.unwrap();
    let again = yanked.refresh().await;
    let served = again.read_skill("changelog").await.unwrap();
    assert!(String::from_utf8_lossy(&served).contains("TEAM"));
}

#[tokio::test]
async fn a_source_serves_the_release_its_selection_picks() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let b = &*backend;
    let base = Releases::new(
        Arc::clone(&backend),
        &Source::parse("/base").unwrap().with_writable(true),
    );
    put(b, "/base/csv-report/references/format.md", "format").await;
    for (version, body) in [("1.0.0", "one"), ("1.1.0", "two"), ("2.0.0", "three")] {
        put(b, "/base/csv-report/SKILL.md", skill_md("csv-report", body, None)).await;
        base.release("csv-report", version, None).await.unwrap();
    }
    put(b, "/base/csv-report/SKILL.md", skill_md("csv-report", "working", None)).await;
    put(b, "/base/csv-report/references/draft.md", "draft").await;
    put(b, "/base/pdf/SKILL.md", skill_md("pdf", "pdf", None)).await;

    let text = |bytes: Bytes| String::from_utf8(bytes.to_vec()).unwrap();
    let ranged = consumer(dir.path(), "^1");
    let catalog = ranged.load().await;
    assert!(text(catalog.read_skill("csv-report").await.unwrap()).contains("two"));
    assert_eq!(ranged.served_release("base", "csv-report").as_deref(), Some("1.1.0"));
    assert_eq!(ranged.served_release("base", "pdf"), None);
    assert!(
        text(catalog.read_skill("pdf").await.unwrap()).contains("pdf"),
        "not selected: the working copy"
    );
    assert_eq!(
        text(catalog.read_file("csv-report", "references/format.md").await.unwrap()),
        "format"
    );
    assert!(
        catalog.read_file("csv-report", "references/draft.md").await.is_err(),
        "not released"
    );
    let listed = catalog
        .skill_files("csv-report", crate::FileLimits::default())
        .await
        .unwrap()
        .relatives();
    assert_eq!(listed, ["SKILL.md", "references/format.md"]);
    // Releases stay readable through the selecting source.
    assert!(ranged.releases_of("csv-report").await.unwrap().is_some());

    let following = consumer(dir.path(), "latest");
    let latest = following.load().await;
    assert!(text(latest.read_skill("csv-report").await.unwrap()).contains("three"));

    let nothing = consumer(dir.path(), "^3");
    let none = nothing.load().await;
    assert!(
        none.get("csv-report").is_none(),
        "a selection with no match serves nothing"
    );
    assert!(
        none.diagnostics()
            .iter()
            .any(|d| d.kind.as_str() == "release_not_found"),
        "{:?}",
        none.diagnostics()
    );

    base.yank("csv-report", "1.1.0").await.unwrap();
    let refreshed = catalog.refresh().await;
    assert!(text(refreshed.read_skill("csv-report").await.unwrap()).contains("one"));
    assert_eq!(ranged.served_release("base", "csv-report").as_deref(), Some("1.0.0"));

    // A planted file in a release's directory is not part of it; rewritten
    // bytes are refused.
    let m = base.require_resolved("csv-report", &sel("1.0.0")).await.unwrap();
    let files = format!("/base/.releases/csv-report/1.0.0/{}", m.files_id);
    put(b, &format!("{files}/references/planted.md"), "planted").await;
    put(b, &format!("{files}/SKILL.md"), skill_md("csv-report", "evil", None)).await;
    let again = refreshed.refresh().await;
    assert!(again.read_file("csv-report", "references/planted.md").await.is_err());
    let read = again.read_skill("csv-report").await;
    assert!(read.is_err() || !text(read.unwrap()).contains("evil"));

    let mut config =
        crate::Config::parse("sources:\n  - path: /base\n    writable: true\n    select: {\"*\": stable}\n").unwrap();
    config.disable_cache();
    assert_eq!(config.open().unwrap_err().kind(), "usage");
}

#[tokio::test]
async fn releases_tags_and_yanks_are_recorded_in_the_change_journal() {
    let t = tree(Kind::Memory);
    put(&*t.backend, "/team/pdf/SKILL.md", skill_md("pdf", "x", None)).await;
    let journal = crate::changes::Journal::new(Arc::clone(&t.backend), "memory");
    let r = releases(&t).with_journal(crate::changes::JournalWriter {
        journal: journal.clone(),
        path: p("/team"),
    });
    let generation = || async { journal.read().await.unwrap().map_or(0, |h| h.head.generation) };
    r.release("pdf", "1.0.0", None).await.unwrap();
    assert_eq!(generation().await, 1);
    r.tag("pdf", "stable", "1.0.0").await.unwrap();
    r.yank("pdf", "1.0.0").await.unwrap();
    assert_eq!(generation().await, 3);
    // A refused change records nothing.
    r.release("pdf", "0.1.0", None).await.unwrap_err();
    assert_eq!(generation().await, 3);
}

async fn selection_on(kind: Kind) {
    let t = tree(kind);
    let b = &*t.backend;
    let base = Releases::new(
        Arc::clone(&t.backend),
        &Source::parse("/base").unwrap().with_writable(true),
    );
    for (version, body) in [("1.0.0", "one"), ("1.1.0", "two"), ("2.0.0", "three")] {
        put(b, "/base/csv-report/SKILL.md", skill_md("csv-report", body, None)).await;
        put(b, "/base/csv-report/scripts/run.sh", format!("echo {body}")).await;
        base.release("csv-report", version, None).await.unwrap();
    }
    put(b, "/base/csv-report/SKILL.md", skill_md("csv-report", "working", None)).await;
    let select: std::collections::BTreeMap<String, String> = [("csv-report".into(), "^1".into())].into();
    let own = Arc::new(skillstore_backends::Subtree::new(Arc::clone(&t.backend), p("/base")));
    let served = Arc::new(SelectedReleases::new(own, Selection::parse(&select).unwrap()));
    let mut table = skillstore_backends::MountTable::new();
    table.mount(p("/base"), served.clone()).unwrap();
    let sources = SourceList::from_sources([Source::parse("/base").unwrap()]).unwrap();
    let catalog = Catalog::load(Arc::new(table), sources, LoadOptions::default()).await;
    let text = |bytes: Bytes| String::from_utf8(bytes.to_vec()).unwrap();
    assert!(
        text(catalog.read_skill("csv-report").await.unwrap()).contains("two"),
        "{kind:?}"
    );
    assert_eq!(
        text(catalog.read_file("csv-report", "scripts/run.sh").await.unwrap()),
        "echo two"
    );
    assert_eq!(served.served_version("csv-report").as_deref(), Some("1.1.0"));
    base.yank("csv-report", "1.1.0").await.unwrap();
    let refreshed = catalog.refresh().await;
    assert!(
        text(refreshed.read_skill("csv-report").await.unwrap()).contains("one"),
        "{kind:?}"
    );
    assert_eq!(
        text(refreshed.read_file("csv-report", "scripts/run.sh").await.unwrap()),
        "echo one"
    );
    let digest = refreshed.skill_digest("csv-report").await.unwrap();
    let pinned = base.require_resolved("csv-report", &sel("1.0.0")).await.unwrap();
    assert_eq!(
        digest.digest, pinned.digest,
        "the served skill's digest is the release's"
    );
}

#[tokio::test]
async fn selection_on_memory() {
    selection_on(Kind::Memory).await;
}

#[tokio::test]
async fn selection_on_a_directory() {
    selection_on(Kind::Fs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selection_on_s3() {
    selection_on(Kind::S3).await;
}

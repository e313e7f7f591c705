//! The change journal: writes through one namespace seen by another that
//! follows it, on a directory, in memory and on an S3 server; concurrent
//! writers lose no entry; a planted, malformed or oversized journal is
//! refused and the follower falls back.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
use skillstore::changes::journal::{HEAD_FILE, MAX_ENTRIES, MAX_HEAD_BYTES};
use skillstore::changes::{Follower, Journal, JournalError, Poll, concerns};
use skillstore::{Config, Error, Namespace};

use super::common::skill_md;

fn config(yaml: &str, dir: &Path) -> Config {
    let path = dir.join("skillstore.yaml");
    std::fs::write(&path, yaml).unwrap();
    Config::load(&path).unwrap()
}

const JOURNALED: &str = "mounts:\n  - at: /\n    location: store\n    changes: journal\nsources:\n  - path: /base\n  - path: /team\n    writable: true\n";

fn follower_of(namespace: &Namespace) -> (Follower, Vec<VPath>) {
    let feeds = namespace.change_feeds();
    assert_eq!(feeds.len(), 1, "one store, one journal");
    let paths = feeds[0].sources.iter().map(|(_, p)| p.clone()).collect();
    (Follower::new(feeds[0].journal.clone()), paths)
}

fn changed(poll: Poll) -> BTreeSet<String> {
    match poll {
        Poll::Changed(paths) => paths,
        other => panic!("expected changes, got {other:?}"),
    }
}

/// Writer and reader are two namespaces over one store, as two processes
/// would be: the reader learns from one read of the head which of its
/// sources changed, and its refresh then shows the skill.
async fn written_by_one_seen_by_another(writer: Namespace, reader: Namespace) {
    let (mut follower, watched) = follower_of(&reader);
    assert!(matches!(follower.poll().await, Poll::Baseline));
    let before = reader.load().await;
    assert!(before.get("fresh").is_none());
    assert!(matches!(follower.poll().await, Poll::Unchanged));

    writer
        .editor(Some("team"))
        .unwrap()
        .create("fresh", skill_md("fresh", "Written by the other one."))
        .await
        .unwrap();
    let paths = changed(follower.poll().await);
    assert_eq!(paths, BTreeSet::from(["/team".to_owned()]));
    assert!(paths.iter().any(|c| concerns(c, "/team")));
    assert!(
        !paths.iter().any(|c| concerns(c, watched[0].as_str())),
        "the base was not written"
    );
    let after = before.refresh().await;
    assert!(after.get("fresh").is_some());
    assert!(matches!(follower.poll().await, Poll::Unchanged));

    // Every kind of write records itself: edit, delete, rollback.
    let editor = writer.editor(Some("team")).unwrap();
    editor.edit("fresh", skill_md("fresh", "Edited."), None).await.unwrap();
    editor.delete("fresh", None).await.unwrap();
    editor.rollback("fresh", 2).await.unwrap();
    assert_eq!(changed(follower.poll().await), BTreeSet::from(["/team".to_owned()]));
    let head = reader.change_feeds()[0].journal.read().await.unwrap().unwrap().head;
    assert_eq!(head.generation, 4);
}

#[tokio::test]
async fn a_write_through_a_directory_is_seen_by_a_follower() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("store/base")).unwrap();
    std::fs::create_dir_all(dir.path().join("store/team")).unwrap();
    let writer = config(JOURNALED, dir.path()).open().unwrap();
    let reader = config(JOURNALED, dir.path()).open().unwrap();
    written_by_one_seen_by_another(writer, reader).await;
    // The journal is skillstore's own: never a skill, never listed.
    assert!(dir.path().join("store").join(HEAD_FILE).is_file());
    let catalog = config(JOURNALED, dir.path()).open().unwrap().load().await;
    assert!(catalog.skills().iter().all(|s| !s.name().starts_with('.')));
}

#[tokio::test]
async fn a_write_in_memory_is_seen_by_a_follower() {
    let files = MemoryBackend::new();
    files
        .put(&VPath::new("/base/.keep").unwrap(), "".into(), PutMode::Create)
        .await
        .unwrap();
    let open = || {
        let mut config = Config::parse("sources:\n  - path: /base\n  - path: /team\n    writable: true\n").unwrap();
        config.set_memory_mount("/", files.clone()).unwrap();
        config.mounts[0].changes = Some(skillstore::changes::ChangesConfig::Named(
            skillstore::changes::ChangesKind::Journal,
        ));
        config.open().unwrap()
    };
    written_by_one_seen_by_another(open(), open()).await;
}

#[tokio::test]
async fn a_mount_without_the_setting_keeps_no_journal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("store/team")).unwrap();
    let namespace = config(
        "mounts:\n  - at: /\n    location: store\nsources:\n  - path: /team\n    writable: true\n",
        dir.path(),
    )
    .open()
    .unwrap();
    assert!(namespace.change_feeds().is_empty());
    namespace
        .editor(None)
        .unwrap()
        .create("one", skill_md("one", "No journal."))
        .await
        .unwrap();
    assert!(!dir.path().join("store").join(HEAD_FILE).exists());
}

#[test]
fn the_setting_is_refused_where_it_cannot_work() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    let unknown =
        Config::parse("mounts:\n  - at: /\n    location: store\n    changes: webhook\nsources: [{path: /}]\n");
    assert!(matches!(unknown, Err(Error::Config(_))), "{unknown:?}");
    let sqs = config(
        "mounts:\n  - at: /\n    location: store\n    changes: {sqs: https://sqs.example/q}\nsources: [{path: /}]\n",
        dir.path(),
    )
    .open();
    assert!(
        matches!(&sqs, Err(Error::Usage(m)) if m.contains("sqs")),
        "{:?}",
        sqs.err()
    );
    let poll = config(
        "mounts:\n  - at: /\n    location: store\n    changes: poll\nsources: [{path: /}]\n",
        dir.path(),
    )
    .open()
    .unwrap();
    assert!(poll.change_feeds().is_empty());
}

/// Through an S3 server, two clients of one bucket (as two replicas
/// would hold): the journal is at the bucket's root and its entries name
/// the written source's whole key prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_on_an_s3_server_is_followed_by_another_client() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let writer = Journal::new(Arc::new(server.backend(&bucket, "")), format!("s3://{bucket}"));
    let reader = Journal::new(Arc::new(server.backend(&bucket, "")), format!("s3://{bucket}"));
    let mut follower = Follower::new(reader);
    assert!(matches!(follower.poll().await, Poll::Baseline));
    writer.record(&VPath::new("/tenants/acme/team").unwrap()).await.unwrap();
    writer
        .record(&VPath::new("/tenants/globex/team").unwrap())
        .await
        .unwrap();
    let paths = changed(follower.poll().await);
    assert_eq!(
        paths,
        BTreeSet::from(["/tenants/acme/team".to_owned(), "/tenants/globex/team".to_owned()])
    );
    assert!(matches!(follower.poll().await, Poll::Unchanged));
    concurrent_writers_lose_nothing(Arc::new(server.backend(&bucket, "")), 4, 6).await;
}

/// Runs `writers` tasks recording `each` entries at once (each writer its
/// own path), while a follower looks between them; afterwards the head
/// counts every entry, keeps every one, and the follower saw every path.
async fn concurrent_writers_lose_nothing(backend: Arc<dyn SkillBackend>, writers: usize, each: usize) {
    let journal = Journal::new(Arc::clone(&backend), "store");
    let mut follower = Follower::new(journal.clone());
    let start = follower.poll().await;
    let base = journal.read().await.unwrap().map_or(0, |r| r.head.generation);
    assert!(matches!(start, Poll::Baseline), "{start:?}");
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let journal = journal.clone();
            tokio::spawn(async move {
                for i in 0..each {
                    journal
                        .record(&VPath::new(format!("/w{w}/n{i}")).unwrap())
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    while !tasks.iter().all(|t| t.is_finished()) {
        match follower.poll().await {
            Poll::Changed(paths) => seen.extend(paths),
            Poll::Unchanged => {}
            other => panic!("unexpected look: {other:?}"),
        }
        tokio::task::yield_now().await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    if let Poll::Changed(paths) = follower.poll().await {
        seen.extend(paths);
    }
    let head = journal.read().await.unwrap().unwrap().head;
    let total = (writers * each) as u64;
    assert_eq!(head.generation, base + total, "an entry was lost");
    let expected: BTreeSet<String> = (0..writers)
        .flat_map(|w| (0..each).map(move |i| format!("/w{w}/n{i}")))
        .collect();
    let kept: BTreeSet<String> = head.entries.iter().map(|e| e.path.clone()).collect();
    assert!(expected.is_subset(&kept), "the head lost an entry");
    assert_eq!(seen, expected, "the follower missed an entry");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any number of writers, any number of entries each, interleaved as
    /// the scheduler pleases, in memory and in a directory.
    #[test]
    fn concurrent_writers_lose_no_entry(writers in 1usize..6, each in 1usize..8, on_disk in any::<bool>()) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn SkillBackend> = match on_disk {
            true => Arc::new(skillstore::backends::FsBackend::new(dir.path()).unwrap()),
            false => Arc::new(MemoryBackend::new()),
        };
        runtime.block_on(concurrent_writers_lose_nothing(backend, writers, each));
    }
}

async fn plant(backend: &MemoryBackend, bytes: Vec<u8>) {
    backend
        .put(
            &VPath::new(format!("/{HEAD_FILE}")).unwrap(),
            bytes.into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_malformed_oversized_or_planted_head_is_refused_and_a_writer_starts_again() {
    let backend = MemoryBackend::new();
    let journal = Journal::new(Arc::new(backend.clone()), "store");
    let mut follower = Follower::new(journal.clone());
    journal.record(&VPath::new("/team").unwrap()).await.unwrap();
    assert!(matches!(follower.poll().await, Poll::Baseline));

    let valid = |path: &str| {
        serde_json::to_vec(&serde_json::json!({
            "format": "skillstore-changes", "version": 1, "epoch": "planted", "generation": 1,
            "entries": [{"generation": 1, "path": path}],
        }))
        .unwrap()
    };
    for (bytes, kind) in [
        (b"{not json".to_vec(), "journal_refused"),
        (valid("/../../etc"), "journal_refused"),
        (valid("/team/.skillstore/changes"), "journal_refused"),
        (vec![b' '; MAX_HEAD_BYTES as usize + 1], "journal_too_large"),
    ] {
        plant(&backend, bytes).await;
        match follower.poll().await {
            Poll::Failed(e) => assert_eq!(e.kind(), kind),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    // A huge entry count in a well-formed shape is refused too.
    let many: Vec<serde_json::Value> = (1..=MAX_ENTRIES as u64 + 1)
        .map(|g| serde_json::json!({"generation": g, "path": "/x"}))
        .collect();
    plant(
        &backend,
        serde_json::to_vec(&serde_json::json!({
            "format": "skillstore-changes", "version": 1, "epoch": "planted",
            "generation": MAX_ENTRIES + 1, "entries": many,
        }))
        .unwrap(),
    )
    .await;
    assert!(matches!(follower.poll().await, Poll::Failed(JournalError::Refused(_))));

    // A writer replaces a head it cannot use with a new epoch, which tells
    // the follower to list everything again.
    plant(&backend, b"garbage".to_vec()).await;
    journal.record(&VPath::new("/team").unwrap()).await.unwrap();
    assert!(matches!(follower.poll().await, Poll::Everything(_)));
    assert!(matches!(follower.poll().await, Poll::Unchanged));

    // A well-formed head planted with another epoch names only paths; a
    // follower lists everything again rather than trust its generations.
    plant(&backend, valid("/other-tenant/team")).await;
    assert!(matches!(follower.poll().await, Poll::Everything(_)));
    // Removed: everything again, then quiet.
    backend
        .delete(&VPath::new(format!("/{HEAD_FILE}")).unwrap())
        .await
        .unwrap();
    assert!(matches!(follower.poll().await, Poll::Everything(_)));
    assert!(matches!(follower.poll().await, Poll::Unchanged));
}

#[tokio::test]
async fn a_follower_that_fell_behind_lists_everything() {
    let journal = Journal::new(Arc::new(MemoryBackend::new()), "store");
    let mut follower = Follower::new(journal.clone());
    assert!(matches!(follower.poll().await, Poll::Baseline));
    journal.record(&VPath::new("/a").unwrap()).await.unwrap();
    assert_eq!(changed(follower.poll().await), BTreeSet::from(["/a".to_owned()]));
    for _ in 0..=MAX_ENTRIES {
        journal.record(&VPath::new("/b").unwrap()).await.unwrap();
    }
    assert!(matches!(follower.poll().await, Poll::Everything(_)));
}

//! The audit log: every change the editor makes is one record chained to
//! the one before; removing, editing, reordering or garbling any record is
//! detected and the record named; concurrent writers lose no record; the
//! log is never a skill.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use skillstore::audit::record::{AuditRecord, digest};
use skillstore::audit::{AuditLog, BreachKind, Checkpoint, Verification};
use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, SkillBackendExt, VPath};
use skillstore::{Catalog, LoadOptions, Patch, SkillEditor, Source, SourceList};

use crate::common::{self, Kind, skill_md};

fn sources() -> SourceList {
    SourceList::from_sources([Source::parse("/team").unwrap().with_writable(true)]).unwrap()
}

fn editor(backend: &Arc<dyn SkillBackend>, author: &str) -> SkillEditor {
    let team = sources().get("team").unwrap().clone();
    SkillEditor::new(Arc::clone(backend), &team)
        .unwrap()
        .with_author(author)
}

fn log(backend: &Arc<dyn SkillBackend>) -> AuditLog {
    AuditLog::new(Arc::clone(backend), &VPath::new("/team").unwrap()).unwrap()
}

async fn stored(backend: &Arc<dyn SkillBackend>, seq: u64) -> AuditRecord {
    let bytes = log(backend).read_bytes(seq).await.unwrap().unwrap();
    AuditRecord::parse(&bytes).unwrap()
}

async fn overwrite(backend: &Arc<dyn SkillBackend>, seq: u64, bytes: Vec<u8>) {
    let path = log(backend).path_of(seq).unwrap();
    backend
        .put(&path, Bytes::from(bytes), PutMode::Overwrite)
        .await
        .unwrap();
}

async fn remove(backend: &Arc<dyn SkillBackend>, seq: u64) {
    let path = log(backend).path_of(seq).unwrap();
    backend.delete(&path).await.unwrap();
}

fn named(v: &Verification) -> (u64, BreachKind) {
    let breach = v.breach.as_ref().expect("the chain is broken");
    (breach.seq, breach.kind)
}

/// A few changes of every kind: nine records.
async fn some_changes(backend: &Arc<dyn SkillBackend>) {
    let e = editor(backend, "ada");
    e.create("pdf", skill_md("pdf", "Read PDFs.")).await.unwrap();
    e.write_file("pdf", "scripts/run.sh", "echo one\n", None).await.unwrap();
    e.patch("pdf", &Patch::new("Body.", "Body, longer.")).await.unwrap();
    e.edit("pdf", skill_md("pdf", "Read PDFs well."), None).await.unwrap();
    e.remove_file("pdf", "scripts/run.sh", None).await.unwrap();
    e.rollback("pdf", 2).await.unwrap();
    e.create("csv", skill_md("csv", "Read CSVs.")).await.unwrap();
    e.delete("csv", None).await.unwrap();
    let refused = e.edit("csv", skill_md("csv", "Gone."), None).await;
    assert!(refused.is_err(), "a refused change writes no record");
    editor(backend, "bob")
        .create("csv", skill_md("csv", "Again."))
        .await
        .unwrap();
}

async fn every_change_is_recorded_and_tampering_is_named(kind: Kind) {
    let tree = common::tree(kind, &[]).await;
    let backend = &tree.backend;
    some_changes(backend).await;
    let log = log(backend);

    let whole = log.verify(None).await.unwrap();
    assert!(whole.holds(), "{whole:?}");
    assert_eq!(whole.records, 9);
    let tail = whole.tail.clone().unwrap();
    assert_eq!(tail.seq, 9);

    let records = log.records(None).await.unwrap();
    let actions: Vec<&str> = records.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "create",
            "write_file",
            "patch",
            "edit",
            "remove_file",
            "rollback",
            "create",
            "delete",
            "create"
        ]
    );
    assert_eq!(records[8].actor, "bob");
    assert_eq!(records[5].rollback_to, Some(2));
    assert_eq!(records[0].prev, None);
    let create = &records[0].files[0];
    assert_eq!(create.path, "SKILL.md");
    assert_eq!(create.before, None);
    assert_eq!(
        create.after.as_deref(),
        Some(digest(&skill_md("pdf", "Read PDFs.")).as_str())
    );
    let removed = &records[4].files[0];
    assert_eq!(removed.before.as_deref(), Some(digest(b"echo one\n").as_str()));
    assert_eq!(removed.after, None);
    assert!(log.records(Some("2999-01-01T00:00:00.000Z")).await.unwrap().is_empty());
    assert_eq!(log.records(Some("2000-01-01T00:00:00.000Z")).await.unwrap().len(), 9);

    // An edit of record 4 that keeps it well formed is named at 4.
    let original = log.read_bytes(4).await.unwrap().unwrap();
    let mut edited = stored(backend, 4).await;
    edited.actor = "mallory".into();
    overwrite(backend, 4, edited.canonical()).await;
    assert_eq!(named(&log.verify(None).await.unwrap()), (4, BreachKind::HashMismatch));
    // Bytes that are no record.
    overwrite(backend, 4, b"{\"format\": 1}".to_vec()).await;
    assert_eq!(named(&log.verify(None).await.unwrap()), (4, BreachKind::Unparsable));
    overwrite(backend, 4, original.to_vec()).await;
    assert!(log.verify(None).await.unwrap().holds());

    // Record 5 removed.
    let fifth = log.read_bytes(5).await.unwrap().unwrap();
    remove(backend, 5).await;
    assert_eq!(named(&log.verify(None).await.unwrap()), (5, BreachKind::Missing));
    overwrite(backend, 5, fifth.to_vec()).await;

    // Cutting off the newest record is invisible to the chain alone, and
    // caught by a checkpoint kept from before.
    let ninth = log.read_bytes(9).await.unwrap().unwrap();
    remove(backend, 9).await;
    assert!(log.verify(None).await.unwrap().holds());
    assert_eq!(named(&log.verify(Some(&tail)).await.unwrap()), (9, BreachKind::Missing));
    overwrite(backend, 9, ninth.to_vec()).await;
    assert!(log.verify(Some(&tail)).await.unwrap().holds());

    // Writes go on after a verified log, chained to its tail.
    editor(backend, "ada")
        .patch("csv", &Patch::new("Again.", "Again and again."))
        .await
        .unwrap();
    let after = log.verify(Some(&tail)).await.unwrap();
    assert!(after.holds(), "{after:?}");
    assert_eq!(after.tail.unwrap().seq, 10);
    assert_eq!(stored(backend, 10).await.prev, Some(digest(&ninth)));
}

/// Two writers (as two replicas would) appending at once: every change is
/// one record, numbers consecutive, the chain whole.
async fn concurrent_writers_lose_no_record(kind: Kind) {
    let tree = common::tree(kind, &[]).await;
    let backend = &tree.backend;
    let writers: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|who| {
            let e = editor(backend, who);
            tokio::spawn(async move {
                e.create(who, skill_md(who, "Written at once.")).await.unwrap();
                for i in 0..6 {
                    let file = format!("references/{i}.md");
                    e.write_file(who, &file, format!("{who} {i}\n"), None).await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let log = log(backend);
    let verified = log.verify(None).await.unwrap();
    if !kind.atomic_conditionals() {
        // Two create-only puts of one number can both succeed on a store
        // that checks and then writes: the chain can only be trusted on a
        // store whose conditional writes are atomic.
        return;
    }
    assert!(verified.holds(), "{verified:?}");
    assert_eq!(verified.records, 14);
    let records = log.records(None).await.unwrap();
    for who in ["one", "two"] {
        assert_eq!(records.iter().filter(|r| r.actor == who).count(), 7, "{who}");
    }
}

/// `.audit/` sits at the source's root beside the skills and is neither
/// a skill nor a diagnostic.
async fn the_log_is_never_a_skill(kind: Kind) {
    let tree = common::tree(kind, &[]).await;
    some_changes(&tree.backend).await;
    assert!(
        tree.backend
            .exists(&VPath::new("/team/.audit/0000000000000001.json").unwrap())
            .await
            .unwrap()
    );
    let catalog = Catalog::load(Arc::clone(&tree.backend), sources(), LoadOptions::default()).await;
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["csv", "pdf"]);
    assert!(
        catalog
            .diagnostics()
            .iter()
            .all(|d| d.path.as_ref().is_none_or(|p| !p.as_str().contains(".audit"))),
        "{:?}",
        catalog.diagnostics()
    );
}

/// A log whose newest record cannot be read (larger than a record may
/// be) refuses every change before a byte of it is written; a record
/// that cannot be parsed is still chained to, by the hash of its bytes.
#[tokio::test]
async fn a_change_is_refused_rather_than_left_unrecorded() {
    let backend: Arc<dyn SkillBackend> = Arc::new(MemoryBackend::new());
    let e = editor(&backend, "ada");
    e.create("pdf", skill_md("pdf", "Read PDFs.")).await.unwrap();
    let huge = vec![b' '; skillstore::audit::record::MAX_RECORD_BYTES as usize + 1];
    overwrite(&backend, 2, huge).await;
    let err = e.create("csv", skill_md("csv", "Read CSVs.")).await.unwrap_err();
    assert_eq!(err.kind(), "audit", "{err}");
    assert!(
        !backend
            .exists(&VPath::new("/team/csv/SKILL.md").unwrap())
            .await
            .unwrap()
    );
    let verified = log(&backend).verify(None).await.unwrap();
    assert_eq!(named(&verified), (2, BreachKind::TooLarge));

    overwrite(&backend, 2, b"garbage".to_vec()).await;
    e.create("csv", skill_md("csv", "Read CSVs.")).await.unwrap();
    assert_eq!(stored(&backend, 3).await.prev, Some(digest(b"garbage")));
    assert_eq!(
        named(&log(&backend).verify(None).await.unwrap()),
        (2, BreachKind::Unparsable)
    );
}

macro_rules! on_every_writable_backend {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::Memory).await } )* }
        mod fs { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::Fs).await } )* }
        mod object_store { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::ObjectStore).await } )* }
        mod s3 { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::S3).await } )* }
        mod moto { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] #[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"] async fn $case() { super::$case(super::Kind::Moto).await } )* }
    };
}

on_every_writable_backend!(
    every_change_is_recorded_and_tampering_is_named,
    concurrent_writers_lose_no_record,
    the_log_is_never_a_skill,
);

/// A change through the editor, on one of three skills.
#[derive(Debug, Clone)]
enum Op {
    Create(usize),
    Edit(usize),
    WriteFile(usize, u8),
    RemoveFile(usize, u8),
    Delete(usize),
    Rollback(usize),
}

/// One thing done to the stored log behind the writers' backs.
#[derive(Debug, Clone)]
enum Tamper {
    /// Record `k` removed.
    Remove(usize),
    /// Record `k`'s actor changed, the record kept well formed.
    Edit(usize),
    /// Record `k`'s `prev` rewritten.
    EditPrev(usize),
    /// Record `k`'s bytes replaced by something else.
    Garble(usize),
    /// Records `j` and `k` exchanged as they are.
    Swap(usize, usize),
    /// Records `j` and `k` exchanged, each renumbered to its new place.
    SwapRenumbered(usize, usize),
}

const SKILLS: [&str; 3] = ["alpha", "beta", "gamma"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize).prop_map(Op::Create),
        2 => (0..3usize).prop_map(Op::Edit),
        3 => (0..3usize, 0..3u8).prop_map(|(s, f)| Op::WriteFile(s, f)),
        1 => (0..3usize, 0..3u8).prop_map(|(s, f)| Op::RemoveFile(s, f)),
        1 => (0..3usize).prop_map(Op::Delete),
        1 => (0..3usize).prop_map(Op::Rollback),
    ]
}

fn tamper() -> impl Strategy<Value = Tamper> {
    let any = 0..1000usize;
    prop_oneof![
        any.clone().prop_map(Tamper::Remove),
        any.clone().prop_map(Tamper::Edit),
        any.clone().prop_map(Tamper::EditPrev),
        any.clone().prop_map(Tamper::Garble),
        (any.clone(), any.clone()).prop_map(|(j, k)| Tamper::Swap(j, k)),
        (any.clone(), any).prop_map(|(j, k)| Tamper::SwapRenumbered(j, k)),
    ]
}

async fn apply(e: &SkillEditor, op: &Op) -> bool {
    let result = match op {
        Op::Create(s) => e.create(SKILLS[*s], skill_md(SKILLS[*s], "Made.")).await,
        Op::Edit(s) => e.edit(SKILLS[*s], skill_md(SKILLS[*s], "Edited."), None).await,
        Op::WriteFile(s, f) => {
            e.write_file(SKILLS[*s], &format!("references/{f}.md"), "text\n", None)
                .await
        }
        Op::RemoveFile(s, f) => e.remove_file(SKILLS[*s], &format!("references/{f}.md"), None).await,
        Op::Delete(s) => e.delete(SKILLS[*s], None).await,
        Op::Rollback(s) => e.rollback(SKILLS[*s], 1).await,
    };
    result.is_ok()
}

/// Applies `tamper` to a log of `n` records and returns the record and
/// kind a verification against `tail` must name.
async fn tamper_with(backend: &Arc<dyn SkillBackend>, n: u64, tamper: &Tamper) -> (u64, BreachKind) {
    let pick = |i: usize| i as u64 % n + 1;
    let bytes = |seq| async move { log(backend).read_bytes(seq).await.unwrap().unwrap().to_vec() };
    match *tamper {
        Tamper::Remove(k) => {
            let k = pick(k);
            remove(backend, k).await;
            (k, BreachKind::Missing)
        }
        Tamper::Edit(k) => {
            let k = pick(k);
            let mut record = stored(backend, k).await;
            record.actor.push_str(" (not really)");
            overwrite(backend, k, record.canonical()).await;
            let kind = if k == n {
                BreachKind::CheckpointMismatch
            } else {
                BreachKind::HashMismatch
            };
            (k, kind)
        }
        Tamper::EditPrev(k) => {
            let k = pick(k);
            let mut record = stored(backend, k).await;
            record.prev = Some(digest(b"forged"));
            overwrite(backend, k, record.canonical()).await;
            let kind = if k == n && k > 1 {
                BreachKind::CheckpointMismatch
            } else {
                BreachKind::HashMismatch
            };
            (k, kind)
        }
        Tamper::Garble(k) => {
            let k = pick(k);
            let mut garbled = bytes(k).await;
            garbled.truncate(garbled.len() / 2);
            overwrite(backend, k, garbled).await;
            (k, BreachKind::Unparsable)
        }
        Tamper::Swap(j, k) | Tamper::SwapRenumbered(j, k) => {
            let (j, k) = (pick(j), pick(k));
            let (j, k) = (j.min(k), j.max(k));
            if j == k {
                // Nothing to swap: cut the newest record instead.
                remove(backend, n).await;
                return (n, BreachKind::Missing);
            }
            let renumber = matches!(tamper, Tamper::SwapRenumbered(..));
            let (mut at_j, mut at_k) = (stored(backend, k).await, stored(backend, j).await);
            if renumber {
                (at_j.seq, at_k.seq) = (j, k);
                overwrite(backend, j, at_j.canonical()).await;
                overwrite(backend, k, at_k.canonical()).await;
                (j, BreachKind::HashMismatch)
            } else {
                let (bytes_j, bytes_k) = (bytes(j).await, bytes(k).await);
                overwrite(backend, j, bytes_k).await;
                overwrite(backend, k, bytes_j).await;
                (j, BreachKind::BadFormat)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Under any sequence of writes the chain verifies with one record per
    /// change that landed; any one record removed, edited, garbled or
    /// swapped is detected, and the record named is the one changed (the
    /// earlier of a swapped pair). Changes at the newest record are
    /// checked against a checkpoint of it, as the chain alone cannot see
    /// them.
    #[test]
    fn the_chain_names_the_first_record_tampered_with(ops in prop::collection::vec(op(), 1..16), tamper in tamper()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let backend: Arc<dyn SkillBackend> = Arc::new(MemoryBackend::new());
            let e = editor(&backend, "prop");
            let mut landed = 0;
            for op in &ops {
                landed += u64::from(apply(&e, op).await);
            }
            let log = log(&backend);
            let whole = log.verify(None).await.unwrap();
            prop_assert!(whole.holds(), "{:?}", whole);
            prop_assert_eq!(whole.records, landed);
            if landed == 0 {
                return Ok(());
            }
            let tail: Checkpoint = whole.tail.unwrap();
            let expected = tamper_with(&backend, landed, &tamper).await;
            let found = log.verify(Some(&tail)).await.unwrap();
            prop_assert_eq!(named(&found), expected, "{:?}", found);
            Ok::<(), TestCaseError>(())
        })?;
    }
}

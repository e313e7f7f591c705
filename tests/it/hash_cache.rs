//! File hashes kept on disk between processes: each "process" here is a
//! fresh backend and a fresh [`FileDigests::persistent`] store sharing
//! nothing but the cache directory. A file unchanged since the last run is
//! not read; a changed one always is, even with its size and modification
//! time put back; a racily clean entry is read again; a cache that is
//! corrupt, another user's or a link is ignored.

#![cfg(unix)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use proptest::prelude::*;
use skillstore::backends::{FsBackend, SkillBackend};
use skillstore::cache::CacheSettings;
use skillstore::cache::hashes::{FILE_NAME, read_moment};
use skillstore::integrity::{FileDigests, Integrity, Lock};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

use crate::common::{Watched, skill_md};

const SKILLS: usize = 6;

fn write_tree(root: &Path) {
    for i in 0..SKILLS {
        let dir = root.join(format!("skills/s{i}"));
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("SKILL.md"), skill_md(&format!("s{i}"), "A skill.")).unwrap();
        std::fs::write(dir.join("scripts/run.sh"), format!("#!/bin/sh\necho {i}\n")).unwrap();
    }
}

/// Every file under `root`.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Waits until every file under `root` was last changed before the moment
/// a read now keeps ([`read_moment`]), so its hash may be kept on disk.
fn settle(root: &Path) {
    let newest = files(root)
        .iter()
        .map(|f| {
            let meta = std::fs::metadata(f).unwrap();
            meta.mtime().max(meta.ctime())
        })
        .max()
        .unwrap();
    while read_moment() <= newest {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn sources() -> SourceList {
    SourceList::from_sources([Source::parse("/skills/").unwrap()]).unwrap()
}

fn settings(cache: &Path) -> CacheSettings {
    CacheSettings {
        dir: Some(cache.to_path_buf()),
        ..CacheSettings::default()
    }
}

/// One process's run: a fresh backend and store, every winner digested.
/// Returns the digests, how many files were read for them and how many
/// hashed. The store is dropped at the end, writing the cache.
async fn run(root: &Path, cache: &Path) -> (Vec<String>, usize, u64) {
    let watched = Watched::new(Arc::new(FsBackend::new(root).unwrap().read_only()));
    let digests = Arc::new(FileDigests::persistent(settings(cache)));
    let options = LoadOptions {
        digests: Arc::clone(&digests),
        ..LoadOptions::default()
    };
    let catalog = Catalog::load(watched.clone() as Arc<dyn SkillBackend>, sources(), options).await;
    let names: Vec<String> = catalog.skills().iter().map(|s| s.name().to_owned()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    watched.reset();
    let found: Vec<String> = catalog
        .skill_digests(&names)
        .await
        .into_iter()
        .map(|d| d.unwrap().digest)
        .collect();
    let reads = watched.reads();
    let hashed = digests.computed();
    drop(catalog);
    drop(digests);
    (found, reads, hashed)
}

/// The digests computed from scratch, with no cache.
async fn scratch(root: &Path) -> Vec<String> {
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(root).unwrap().read_only());
    let catalog = Catalog::load(backend, sources(), LoadOptions::default()).await;
    let names: Vec<String> = catalog.skills().iter().map(|s| s.name().to_owned()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    catalog
        .skill_digests(&names)
        .await
        .into_iter()
        .map(|d| d.unwrap().digest)
        .collect()
}

fn touch_mtime(path: &Path, seconds: i64, nanos: i64) {
    let status = Command::new("touch")
        .arg("-m")
        .arg("-d")
        .arg(format!("@{seconds}.{nanos:09}"))
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn unchanged_files_are_not_read_by_a_second_process() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());

    let (first, reads, hashed) = run(root.path(), &cache_dir).await;
    assert_eq!(reads, SKILLS * 2, "the first process reads every file");
    assert_eq!(hashed, (SKILLS * 2) as u64);
    let file = cache_dir.join(FILE_NAME);
    let meta = std::fs::symlink_metadata(&file).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&cache_dir).unwrap().mode() & 0o777, 0o700);

    let (second, reads, hashed) = run(root.path(), &cache_dir).await;
    assert_eq!(reads, 0, "a second process reads no unchanged file");
    assert_eq!(hashed, 0);
    assert_eq!(second, first);
    assert_eq!(second, scratch(root.path()).await);
}

#[tokio::test]
async fn a_locked_load_over_unchanged_files_reads_what_a_plain_load_reads() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(root.path()).unwrap().read_only());
    let plain = Catalog::load(backend, sources(), LoadOptions::default()).await;
    let lock = Arc::new(Lock::for_catalog(&plain).await.unwrap());

    let locked_run = || async {
        let watched = Watched::new(Arc::new(FsBackend::new(root.path()).unwrap().read_only()));
        let digests = Arc::new(FileDigests::persistent(settings(&cache_dir)));
        let options = LoadOptions {
            digests: Arc::clone(&digests),
            integrity: Some(Arc::new(Integrity {
                lock: Some(Arc::clone(&lock)),
                ..Integrity::default()
            })),
            ..LoadOptions::default()
        };
        let catalog = Catalog::load(watched.clone() as Arc<dyn SkillBackend>, sources(), options).await;
        assert!(catalog.withheld().next().is_none(), "a skill was withheld");
        assert_eq!(catalog.skills().len(), SKILLS);
        let reads = watched.reads();
        drop(catalog);
        (reads, digests.computed())
    };
    let plain_reads = {
        let watched = Watched::new(Arc::new(FsBackend::new(root.path()).unwrap().read_only()));
        Catalog::load(
            watched.clone() as Arc<dyn SkillBackend>,
            sources(),
            LoadOptions::default(),
        )
        .await;
        watched.reads()
    };
    let (_, first_hashed) = locked_run().await;
    assert!(first_hashed >= (SKILLS * 2) as u64);
    let (reads, hashed) = locked_run().await;
    assert_eq!(hashed, 0, "the second locked process hashes nothing");
    assert_eq!(reads, plain_reads, "it reads only what a plain load reads");
}

/// A plain load with a persistent store leaves the hash file alone, and
/// so does asking for a SKILL.md's hashed frontmatter (what a load asks of
/// an index or cache entry): the file is read at the first digest, so
/// what it holds then is what counts.
#[tokio::test]
async fn a_plain_load_leaves_the_hash_file_to_the_first_digest() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());
    run(root.path(), &cache_dir).await;

    // Loaded plainly, digested after: the kept hashes are used (the
    // control). Loaded plainly, the file removed, digested after: every
    // file is read, so the plain load had not taken the hashes.
    for remove_before_digest in [false, true] {
        let watched = Watched::new(Arc::new(FsBackend::new(root.path()).unwrap().read_only()));
        let digests = Arc::new(FileDigests::persistent(settings(&cache_dir)));
        let options = LoadOptions {
            digests: Arc::clone(&digests),
            ..LoadOptions::default()
        };
        let catalog = Catalog::load(watched.clone() as Arc<dyn SkillBackend>, sources(), options).await;
        let first = &catalog.skills()[0];
        assert!(
            digests.head(first.path.as_str(), &first.version).is_none(),
            "a head was taken from the hash file before any digest"
        );
        if remove_before_digest {
            std::fs::remove_file(cache_dir.join(FILE_NAME)).unwrap();
        }
        let names: Vec<String> = catalog.skills().iter().map(|s| s.name().to_owned()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        watched.reset();
        for digest in catalog.skill_digests(&names).await {
            digest.unwrap();
        }
        let expected = if remove_before_digest { SKILLS * 2 } else { 0 };
        assert_eq!(
            watched.reads(),
            expected,
            "file removed before the digest: {remove_before_digest}"
        );
    }
}

/// A check writes back what it hashed as soon as it is done, not only when
/// the store is dropped: a command that leaks its catalog at exit (as the
/// command line does) still leaves the hashes for the next one.
#[tokio::test]
async fn a_check_keeps_its_hashes_without_the_store_being_dropped() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(root.path()).unwrap().read_only());
    let plain = Catalog::load(backend, sources(), LoadOptions::default()).await;
    let lock = Arc::new(Lock::for_catalog(&plain).await.unwrap());
    let locked = |digests: &Arc<FileDigests>| LoadOptions {
        digests: Arc::clone(digests),
        integrity: Some(Arc::new(Integrity {
            lock: Some(Arc::clone(&lock)),
            ..Integrity::default()
        })),
        ..LoadOptions::default()
    };

    let first = Arc::new(FileDigests::persistent(settings(&cache_dir)));
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(root.path()).unwrap().read_only());
    let catalog = Catalog::load(backend, sources(), locked(&first)).await;
    assert_eq!(catalog.skills().len(), SKILLS);
    assert_eq!(first.computed(), (SKILLS * 2) as u64);
    assert!(cache_dir.join(FILE_NAME).is_file(), "the check kept no hashes");
    std::mem::forget(catalog);

    let second = Arc::new(FileDigests::persistent(settings(&cache_dir)));
    let watched = Watched::new(Arc::new(FsBackend::new(root.path()).unwrap().read_only()));
    let catalog = Catalog::load(watched.clone() as Arc<dyn SkillBackend>, sources(), locked(&second)).await;
    assert!(catalog.withheld().next().is_none(), "a skill was withheld");
    assert_eq!(second.computed(), 0, "the next check hashed again");
}

#[tokio::test]
async fn a_file_rewritten_with_its_size_and_mtime_put_back_is_hashed_again() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());
    let (first, _, _) = run(root.path(), &cache_dir).await;

    let target = root.path().join("skills/s3/scripts/run.sh");
    let before = std::fs::metadata(&target).unwrap();
    let old = std::fs::read(&target).unwrap();
    let mut new = old.clone();
    *new.last_mut().unwrap() = b'!';
    std::fs::write(&target, &new).unwrap();
    touch_mtime(&target, before.mtime(), before.mtime_nsec());
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec())
    );
    assert_eq!(after.ino(), before.ino(), "rewritten in place");

    let (second, reads, hashed) = run(root.path(), &cache_dir).await;
    assert_eq!(reads, 1, "only the rewritten file is read");
    assert_eq!(hashed, 1);
    assert_ne!(second, first);
    assert_eq!(second, scratch(root.path()).await);
}

#[tokio::test]
async fn a_racily_clean_entry_is_hashed_again() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());
    // Changed just before the first process reads it: its change time is
    // not older than the moment kept with its hash.
    let target = root.path().join("skills/s1/SKILL.md");
    std::fs::write(&target, skill_md("s1", "Changed just now.")).unwrap();
    let (first, reads, _) = run(root.path(), &cache_dir).await;
    assert_eq!(reads, SKILLS * 2);
    let ctime = std::fs::metadata(&target).unwrap().ctime();
    assert!(ctime >= read_moment(), "the test ran too slowly to be racy");

    let (second, reads, hashed) = run(root.path(), &cache_dir).await;
    assert_eq!(reads, 1, "the racily clean file is read again, the others not");
    assert_eq!(hashed, 1);
    assert_eq!(second, first);
}

/// Prepares a warm cache, lets `spoil` do something to it, and returns how
/// many files the next process reads (and checks its digests).
async fn after_spoiling(spoil: impl FnOnce(&Path)) -> usize {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    settle(root.path());
    run(root.path(), &cache_dir).await;
    spoil(&cache_dir);
    let (found, reads, _) = run(root.path(), &cache_dir).await;
    assert_eq!(found, scratch(root.path()).await);
    reads
}

#[tokio::test]
async fn a_corrupt_foreign_or_linked_cache_is_ignored() {
    // The control: left alone, the cache is used.
    assert_eq!(after_spoiling(|_| {}).await, 0);

    let corrupt = after_spoiling(|dir| {
        let file = dir.join(FILE_NAME);
        let mut data = std::fs::read(&file).unwrap();
        data.truncate(data.len() / 2);
        std::fs::write(&file, data).unwrap();
    })
    .await;
    assert_eq!(corrupt, SKILLS * 2, "a truncated cache is ignored");

    let forged = after_spoiling(|dir| {
        let file = dir.join(FILE_NAME);
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace("skillstore-file-hashes", "other-format")).unwrap();
    })
    .await;
    assert_eq!(forged, SKILLS * 2, "a cache of another format is ignored");

    if rustix::process::geteuid().is_root() {
        let others = after_spoiling(|dir| {
            let file = dir.join(FILE_NAME);
            std::os::unix::fs::chown(&file, Some(4242), Some(4242)).unwrap();
        })
        .await;
        assert_eq!(others, SKILLS * 2, "a cache file owned by another user is ignored");

        let others_dir = after_spoiling(|dir| {
            std::os::unix::fs::chown(dir, Some(4242), Some(4242)).unwrap();
        })
        .await;
        assert_eq!(
            others_dir,
            SKILLS * 2,
            "a cache directory owned by another user is ignored"
        );
    }

    let shared = after_spoiling(|dir| {
        use std::os::unix::fs::PermissionsExt;
        let file = dir.join(FILE_NAME);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    })
    .await;
    assert_eq!(shared, SKILLS * 2, "a cache file others may write is ignored");

    let linked = after_spoiling(|dir| {
        let file = dir.join(FILE_NAME);
        let elsewhere = dir.parent().unwrap().join("kept.json");
        std::fs::rename(&file, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    })
    .await;
    assert_eq!(linked, SKILLS * 2, "a cache file that is a link is ignored");

    let linked_dir = after_spoiling(|dir| {
        let elsewhere = dir.parent().unwrap().join("real");
        std::fs::rename(dir, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir).unwrap();
    })
    .await;
    assert_eq!(linked_dir, SKILLS * 2, "a cache directory that is a link is ignored");
}

/// An edit made between two runs.
#[derive(Debug, Clone)]
enum Edit {
    /// New bytes of the same length, the modification time put back.
    SameSizeMtimeBack(usize, u8),
    /// New bytes of another length.
    Rewrite(usize, Vec<u8>),
    /// Removed and written again (a new inode, perhaps the old one).
    Recreate(usize, Vec<u8>),
    /// Only the modification time moved.
    Touch(usize),
    /// Nothing.
    Nothing,
}

fn edit() -> impl Strategy<Value = Edit> {
    let file = 0..SKILLS * 2;
    prop_oneof![
        (file.clone(), any::<u8>()).prop_map(|(f, b)| Edit::SameSizeMtimeBack(f, b)),
        (file.clone(), proptest::collection::vec(any::<u8>(), 0..40)).prop_map(|(f, d)| Edit::Rewrite(f, d)),
        (file.clone(), proptest::collection::vec(any::<u8>(), 0..40)).prop_map(|(f, d)| Edit::Recreate(f, d)),
        file.prop_map(Edit::Touch),
        Just(Edit::Nothing),
    ]
}

/// The `n`th editable file: a skill's script (a skill file keeps its
/// frontmatter so the skill stays listed).
fn nth(root: &Path, n: usize) -> PathBuf {
    let skill = n % SKILLS;
    if n < SKILLS {
        root.join(format!("skills/s{skill}/scripts/run.sh"))
    } else {
        root.join(format!("skills/s{skill}/SKILL.md"))
    }
}

fn apply(root: &Path, edit: &Edit) {
    match edit {
        Edit::SameSizeMtimeBack(n, byte) => {
            let path = nth(root, *n);
            let meta = std::fs::metadata(&path).unwrap();
            let mut data = std::fs::read(&path).unwrap();
            let last = data.len() - 1;
            data[last] = *byte;
            std::fs::write(&path, data).unwrap();
            touch_mtime(&path, meta.mtime(), meta.mtime_nsec());
        }
        Edit::Rewrite(n, extra) | Edit::Recreate(n, extra) => {
            let path = nth(root, *n);
            let mut data = if *n < SKILLS {
                b"#!/bin/sh\n".to_vec()
            } else {
                skill_md(&format!("s{}", n % SKILLS), "Edited.")
            };
            data.extend_from_slice(extra);
            if matches!(edit, Edit::Recreate(..)) {
                std::fs::remove_file(&path).unwrap();
            }
            std::fs::write(&path, data).unwrap();
        }
        Edit::Touch(n) => {
            let path = nth(root, *n);
            let status = Command::new("touch").arg("-m").arg(&path).status().unwrap();
            assert!(status.success());
        }
        Edit::Nothing => {}
    }
}

#[test]
fn random_edits_between_runs_never_change_a_digest_from_a_fresh_computation() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    write_tree(root.path());
    // Settled once, so files no case edits are taken from the cache.
    settle(root.path());
    runtime.block_on(run(root.path(), &cache_dir));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(32));
    let used_the_cache = std::cell::Cell::new(false);
    runner
        .run(&proptest::collection::vec(edit(), 1..4), |edits| {
            for edit in &edits {
                apply(root.path(), edit);
            }
            let (found, reads, _) = runtime.block_on(run(root.path(), &cache_dir));
            used_the_cache.set(used_the_cache.get() || reads < SKILLS * 2);
            prop_assert_eq!(found, runtime.block_on(scratch(root.path())));
            Ok(())
        })
        .unwrap();
    assert!(used_the_cache.get(), "no run took a hash from the cache");
}

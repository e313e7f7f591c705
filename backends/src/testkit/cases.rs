//! The cases of the conformance suite. Each takes a fresh [`Fixture`].

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::future::join_all;

use super::Fixture;
use super::hostile::{lookalike_corpus, refused_corpus};
use crate::backend::{
    DEFAULT_READ_LIMIT, DeepLimits, EntryKind, PutMode, ReadOptions, SkillBackend, SkillBackendExt, Version,
};
use crate::error::{ErrorKind, Result};
use crate::vpath::VPath;
use crate::walk::{PassReason, Walk, WalkLimits};

fn p(s: &str) -> VPath {
    VPath::new(s).expect("test paths are valid")
}

async fn put(f: &Fixture, path: &str, data: impl Into<Bytes>) -> Version {
    f.backend
        .put(&p(path), data.into(), PutMode::Overwrite)
        .await
        .unwrap_or_else(|e| panic!("put {path}: {e}"))
}

async fn read(f: &Fixture, path: &str) -> crate::Blob {
    f.backend
        .read(&p(path), ReadOptions::default())
        .await
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
}

#[track_caller]
fn assert_kind<T: std::fmt::Debug>(result: Result<T>, kind: ErrorKind) {
    match result {
        Ok(v) => panic!("expected {kind}, got Ok({v:?})"),
        Err(e) => assert_eq!(e.kind(), kind, "unexpected error: {e}"),
    }
}

/// Names and kinds of a listing, sorted by name.
async fn names(f: &Fixture, dir: &str) -> Vec<(String, EntryKind)> {
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

fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
}

/// Listing shows files and directories, one level deep.
pub async fn list_root_shows_files_and_directories(f: Fixture) {
    put(&f, "/top.txt", "top").await;
    put(&f, "/dir/inner.txt", "inner").await;
    put(&f, "/dir/sub/deep.txt", "deep").await;
    assert_eq!(
        names(&f, "/").await,
        [("dir".into(), EntryKind::Dir), ("top.txt".into(), EntryKind::File)]
    );
    assert_eq!(
        names(&f, "/dir").await,
        [("inner.txt".into(), EntryKind::File), ("sub".into(), EntryKind::Dir)]
    );
    assert_eq!(names(&f, "/dir/sub").await, [("deep.txt".into(), EntryKind::File)]);
}

/// A listing's size for a file, and its version where the listing gives
/// one, are the ones a read returns.
pub async fn list_gives_the_size_and_version_reads_see(f: Fixture) {
    put(&f, "/d/a.md", "alpha").await;
    let entries = f.backend.list(&p("/d")).await.unwrap();
    let entry = entries.iter().find(|e| e.name == "a.md").expect("a.md listed");
    assert_eq!(entry.size, Some(5));
    let blob = read(&f, "/d/a.md").await;
    if let Some(listed) = &entry.version {
        assert_eq!(listed, &blob.version);
    }
}

/// Listing a directory that does not exist is `not_found`.
pub async fn list_missing_directory_is_not_found(f: Fixture) {
    put(&f, "/present/x", "x").await;
    assert_kind(f.backend.list(&p("/absent")).await, ErrorKind::NotFound);
    assert_kind(f.backend.list(&p("/present/absent")).await, ErrorKind::NotFound);
}

/// Listing a file is `not_a_directory`.
pub async fn list_file_is_not_a_directory(f: Fixture) {
    put(&f, "/file.txt", "x").await;
    assert_kind(f.backend.list(&p("/file.txt")).await, ErrorKind::NotADirectory);
}

/// `stat` tells files (with size and version) from directories and absence.
pub async fn stat_file_directory_and_missing(f: Fixture) {
    let version = put(&f, "/d/file.txt", "12345").await;
    let meta = f.backend.stat(&p("/d/file.txt")).await.unwrap();
    assert_eq!(meta.kind, EntryKind::File);
    assert_eq!(meta.size, Some(5));
    assert_eq!(meta.version, Some(version));
    assert_eq!(f.backend.stat(&p("/d")).await.unwrap().kind, EntryKind::Dir);
    assert_eq!(f.backend.stat(&VPath::root()).await.unwrap().kind, EntryKind::Dir);
    assert_kind(f.backend.stat(&p("/d/nothing")).await, ErrorKind::NotFound);
}

/// A read returns the whole file, its size and its version.
pub async fn read_whole_file(f: Fixture) {
    let data = pattern(70_000);
    let version = put(&f, "/a/b/c.bin", data.clone()).await;
    let blob = read(&f, "/a/b/c.bin").await;
    assert_eq!(blob.data, data);
    assert_eq!(blob.size, 70_000);
    assert!(blob.is_complete());
    assert_eq!(blob.version, version);
}

/// Reading nothing is `not_found`.
pub async fn read_missing_is_not_found(f: Fixture) {
    put(&f, "/a/x", "x").await;
    assert_kind(
        f.backend.read(&p("/a/y"), ReadOptions::default()).await,
        ErrorKind::NotFound,
    );
    assert_kind(
        f.backend.read(&p("/b/y"), ReadOptions::default()).await,
        ErrorKind::NotFound,
    );
}

/// Reading a directory is `is_a_directory`.
pub async fn read_directory_is_refused(f: Fixture) {
    put(&f, "/dir/x", "x").await;
    assert_kind(
        f.backend.read(&p("/dir"), ReadOptions::default()).await,
        ErrorKind::IsADirectory,
    );
}

/// Reading the root is `is_a_directory`.
pub async fn read_root_is_refused(f: Fixture) {
    put(&f, "/x", "x").await;
    assert_kind(
        f.backend.read(&VPath::root(), ReadOptions::default()).await,
        ErrorKind::IsADirectory,
    );
}

/// A path below a file reads nothing.
pub async fn read_below_a_file_fails(f: Fixture) {
    put(&f, "/file", "x").await;
    let err = f
        .backend
        .read(&p("/file/child"), ReadOptions::default())
        .await
        .expect_err("a file has no children");
    assert!(
        matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory),
        "{err}"
    );
}

/// An empty file reads as zero bytes.
pub async fn read_empty_file(f: Fixture) {
    put(&f, "/empty", Bytes::new()).await;
    let blob = read(&f, "/empty").await;
    assert!(blob.data.is_empty());
    assert_eq!(blob.size, 0);
    let prefix = f.backend.read(&p("/empty"), ReadOptions::prefix(16)).await.unwrap();
    assert!(prefix.data.is_empty());
    assert_eq!(prefix.size, 0);
}

/// A prefix read of a big object returns the prefix and the whole size.
pub async fn prefix_read_returns_prefix_and_whole_size(f: Fixture) {
    let data = pattern(1 << 20);
    put(&f, "/big.bin", data.clone()).await;
    let blob = f.backend.read(&p("/big.bin"), ReadOptions::prefix(4096)).await.unwrap();
    assert_eq!(blob.data, data.slice(..4096));
    assert_eq!(blob.size, 1 << 20);
    assert!(!blob.is_complete());
}

/// A prefix longer than the file returns the whole file.
pub async fn prefix_read_longer_than_the_file_is_complete(f: Fixture) {
    put(&f, "/small", "hello").await;
    let blob = f.backend.read(&p("/small"), ReadOptions::prefix(4096)).await.unwrap();
    assert_eq!(&blob.data[..], b"hello");
    assert_eq!(blob.size, 5);
    assert!(blob.is_complete());
}

/// A zero-byte prefix returns no bytes and the whole size.
pub async fn prefix_read_of_zero_bytes(f: Fixture) {
    put(&f, "/small", "hello").await;
    let blob = f.backend.read(&p("/small"), ReadOptions::prefix(0)).await.unwrap();
    assert!(blob.data.is_empty());
    assert_eq!(blob.size, 5);
}

/// An object of exactly the limit is read.
pub async fn size_guard_allows_exactly_the_limit(f: Fixture) {
    put(&f, "/at-limit", pattern(1000)).await;
    let blob = f
        .backend
        .read(&p("/at-limit"), ReadOptions::with_limit(1000))
        .await
        .unwrap();
    assert_eq!(blob.data.len(), 1000);
}

/// An object one byte over the limit is `too_large`.
pub async fn size_guard_refuses_one_byte_over(f: Fixture) {
    put(&f, "/over", pattern(1001)).await;
    assert_kind(
        f.backend.read(&p("/over"), ReadOptions::with_limit(1000)).await,
        ErrorKind::TooLarge,
    );
}

/// The limit is on the object, so a prefix read of an oversized one fails.
pub async fn size_guard_applies_to_prefix_reads(f: Fixture) {
    put(&f, "/over", pattern(1001)).await;
    let options = ReadOptions {
        prefix: Some(10),
        ..ReadOptions::with_limit(1000)
    };
    assert_kind(f.backend.read(&p("/over"), options).await, ErrorKind::TooLarge);
}

/// The default limit is 10 MiB = 10,485,760 bytes, inclusive.
pub async fn default_limit_is_ten_mebibytes(f: Fixture) {
    assert_eq!(DEFAULT_READ_LIMIT, 10_485_760);
    let limit = DEFAULT_READ_LIMIT as usize;
    put(&f, "/exact", pattern(limit)).await;
    put(&f, "/over", pattern(limit + 1)).await;
    assert_eq!(read(&f, "/exact").await.data.len(), limit);
    assert_kind(
        f.backend.read(&p("/over"), ReadOptions::default()).await,
        ErrorKind::TooLarge,
    );
    let prefix = f.backend.read(&p("/over"), ReadOptions::prefix(64)).await;
    assert_kind(prefix, ErrorKind::TooLarge);
}

/// A write of different bytes (even of the same length) changes the version.
pub async fn versions_change_when_content_changes(f: Fixture) {
    let first = put(&f, "/v", "one").await;
    let second = put(&f, "/v", "two").await;
    assert_ne!(first, second);
    assert_eq!(read(&f, "/v").await.version, second);
    assert_eq!(f.backend.stat(&p("/v")).await.unwrap().version, Some(second));
}

/// Reading does not change a version.
pub async fn versions_are_stable_between_reads(f: Fixture) {
    put(&f, "/v", "same").await;
    let a = read(&f, "/v").await.version;
    let b = read(&f, "/v").await.version;
    assert_eq!(a, b);
}

/// An overwrite replaces the bytes.
pub async fn put_overwrite_replaces_content(f: Fixture) {
    put(&f, "/o", "before, and longer").await;
    put(&f, "/o", "after").await;
    assert_eq!(&read(&f, "/o").await.data[..], b"after");
}

/// A create-only write makes a new object.
pub async fn put_create_only_creates(f: Fixture) {
    let v = f
        .backend
        .put(&p("/new/file"), "x".into(), PutMode::Create)
        .await
        .unwrap();
    assert_eq!(read(&f, "/new/file").await.version, v);
}

/// A create-only write over an existing object is `already_exists` and
/// leaves it as it was.
pub async fn put_create_only_refuses_an_existing_object(f: Fixture) {
    put(&f, "/c", "original").await;
    assert_kind(
        f.backend.put(&p("/c"), "new".into(), PutMode::Create).await,
        ErrorKind::AlreadyExists,
    );
    assert_eq!(&read(&f, "/c").await.data[..], b"original");
}

/// A conditional write on the current version succeeds.
pub async fn put_if_version_replaces_the_matching_version(f: Fixture) {
    let v1 = put(&f, "/u", "one").await;
    let v2 = f
        .backend
        .put(&p("/u"), "two".into(), PutMode::IfVersion(v1.clone()))
        .await
        .unwrap();
    assert_ne!(v1, v2);
    assert_eq!(&read(&f, "/u").await.data[..], b"two");
}

/// A conditional write on an old version is `version_conflict` and leaves
/// the newer bytes alone.
pub async fn put_if_version_refuses_a_stale_version(f: Fixture) {
    let v1 = put(&f, "/u", "one").await;
    put(&f, "/u", "two").await;
    assert_kind(
        f.backend.put(&p("/u"), "three".into(), PutMode::IfVersion(v1)).await,
        ErrorKind::VersionConflict,
    );
    assert_eq!(&read(&f, "/u").await.data[..], b"two");
}

/// A conditional write where nothing exists is `version_conflict`.
pub async fn put_if_version_refuses_a_missing_object(f: Fixture) {
    let v = put(&f, "/elsewhere", "x").await;
    assert_kind(
        f.backend.put(&p("/missing"), "x".into(), PutMode::IfVersion(v)).await,
        ErrorKind::VersionConflict,
    );
    assert_kind(f.backend.stat(&p("/missing")).await, ErrorKind::NotFound);
}

/// Writing deep creates the directories above.
pub async fn put_creates_parent_directories(f: Fixture) {
    put(&f, "/a/b/c/d/e.txt", "deep").await;
    assert_eq!(names(&f, "/a/b/c").await, [("d".into(), EntryKind::Dir)]);
    assert_eq!(f.backend.stat(&p("/a/b")).await.unwrap().kind, EntryKind::Dir);
}

/// The version a put returns is the one later reads and stats report.
pub async fn put_returns_the_version_reads_see(f: Fixture) {
    let v = put(&f, "/r", "content").await;
    assert_eq!(read(&f, "/r").await.version, v);
    assert_eq!(f.backend.stat(&p("/r")).await.unwrap().version, Some(v));
}

/// Of many simultaneous create-only writes to one path, exactly one wins,
/// every other is `already_exists`, and the file holds the winner's bytes.
///
/// On a server whose conditional writes are not atomic (moto: see
/// [`Fixture::atomic_conditionals`]) only this weaker property holds and is
/// asserted: at least one writer wins, every loser is `already_exists`
/// (never another error), the file holds the whole bytes of one of the
/// winners, and a create-only write after the race is refused.
pub async fn concurrent_create_only_has_one_winner(f: Fixture) {
    let path = p("/race/SKILL.md");
    let attempts = (0..16).map(|i| {
        let backend = f.backend.clone();
        let path = path.clone();
        async move { backend.put(&path, format!("writer {i}").into(), PutMode::Create).await }
    });
    let results = join_all(attempts).await;
    let winners: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, _)| i)
        .collect();
    if f.atomic_conditionals {
        assert_eq!(winners.len(), 1, "{results:?}");
    } else {
        assert!(!winners.is_empty(), "{results:?}");
    }
    for r in results.iter().filter(|r| r.is_err()) {
        assert_eq!(r.as_ref().unwrap_err().kind(), ErrorKind::AlreadyExists);
    }
    let text = read(&f, "/race/SKILL.md").await.data;
    assert!(
        winners.iter().any(|i| text == format!("writer {i}")),
        "the file holds {text:?}, not the whole bytes of a winner {winners:?}"
    );
    assert_kind(
        f.backend.put(&path, "late".into(), PutMode::Create).await,
        ErrorKind::AlreadyExists,
    );
}

/// Deleting a file removes it, and a directory left empty goes with it.
pub async fn delete_removes_the_file_and_empty_directories(f: Fixture) {
    put(&f, "/keep.txt", "k").await;
    put(&f, "/d/only.txt", "x").await;
    f.backend.delete(&p("/d/only.txt")).await.unwrap();
    assert_kind(f.backend.stat(&p("/d/only.txt")).await, ErrorKind::NotFound);
    assert_eq!(names(&f, "/").await, [("keep.txt".into(), EntryKind::File)]);
}

/// Deleting nothing is `not_found`.
pub async fn delete_missing_is_not_found(f: Fixture) {
    put(&f, "/x", "x").await;
    assert_kind(f.backend.delete(&p("/y")).await, ErrorKind::NotFound);
}

/// A conditional delete removes the file only at the expected version.
pub async fn delete_if_version_checks_the_version(f: Fixture) {
    let old = put(&f, "/d/f.txt", "one").await;
    let new = put(&f, "/d/f.txt", "two").await;
    assert_kind(
        f.backend.delete_if_version(&p("/d/f.txt"), &old).await,
        ErrorKind::VersionConflict,
    );
    assert_eq!(read(&f, "/d/f.txt").await.data, "two");
    f.backend.delete_if_version(&p("/d/f.txt"), &new).await.unwrap();
    assert_kind(f.backend.stat(&p("/d/f.txt")).await, ErrorKind::NotFound);
    assert_kind(
        f.backend.delete_if_version(&p("/d/f.txt"), &new).await,
        ErrorKind::VersionConflict,
    );
}

/// Non-ASCII and punctuation survive a round trip through names.
pub async fn unicode_and_punctuation_names_round_trip(f: Fixture) {
    let names_in = [
        "café-outil",
        "日本語",
        "emoji-🦀",
        "spaces and+plus",
        "hash#question?",
        "semi;colon=eq&amp",
        "quote'dq\"",
        "ümlaut",
    ];
    for (i, name) in names_in.iter().enumerate() {
        put(&f, &format!("/u/{name}/SKILL.md"), format!("body {i}")).await;
    }
    let listed: Vec<String> = names(&f, "/u").await.into_iter().map(|(n, _)| n).collect();
    let mut expected: Vec<String> = names_in.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    for (i, name) in names_in.iter().enumerate() {
        let blob = read(&f, &format!("/u/{name}/SKILL.md")).await;
        assert_eq!(blob.data, format!("body {i}").as_bytes());
    }
}

/// `%2e%2e` is a name of its own, never decoded into a parent step.
pub async fn percent_encoded_dots_are_literal_names(f: Fixture) {
    put(&f, "/top.txt", "top").await;
    put(&f, "/a/%2e%2e/top.txt", "inner").await;
    assert_eq!(&read(&f, "/a/%2e%2e/top.txt").await.data[..], b"inner");
    assert_eq!(&read(&f, "/top.txt").await.data[..], b"top");
    assert_eq!(names(&f, "/a").await, [("%2e%2e".into(), EntryKind::Dir)]);
    assert_kind(
        f.backend.read(&p("/%2e%2e"), ReadOptions::default()).await,
        ErrorKind::NotFound,
    );
}

/// Every hostile path string is refused by [`VPath`], so no backend call can
/// be made with it; and the backend's tree is untouched.
pub async fn hostile_paths_are_refused_before_any_backend_call(f: Fixture) {
    put(&f, "/inside/SKILL.md", "inside").await;
    let corpus = refused_corpus();
    assert!(corpus.len() >= 450);
    for raw in &corpus {
        let err = VPath::new(raw).expect_err(raw);
        assert_eq!(err.kind(), ErrorKind::InvalidPath, "{raw:?}");
        if let Some(relative) = raw.strip_prefix('/') {
            assert!(p("/inside").join(relative).is_err(), "join accepted {raw:?}");
        }
    }
    assert_eq!(names(&f, "/").await, [("inside".into(), EntryKind::Dir)]);
}

/// Paths that only look like steps up (unicode dots, percent-encoding,
/// padded dots, very long names) are literal names: reading them is a clear
/// `not_found` (or `invalid_path` where the store cannot hold the name),
/// never another file.
pub async fn lookalike_paths_are_literal_names(f: Fixture) {
    put(&f, "/inside/SKILL.md", "inside").await;
    put(&f, "/skills/x/SKILL.md", "x").await;
    for raw in lookalike_corpus() {
        let path = VPath::new(&raw).unwrap();
        for result in [
            f.backend.read(&path, ReadOptions::default()).await.map(|_| ()),
            f.backend.stat(&path).await.map(|_| ()),
        ] {
            let err = result.expect_err(&raw);
            assert!(
                matches!(err.kind(), ErrorKind::NotFound | ErrorKind::InvalidPath),
                "{raw:?}: {err}"
            );
        }
    }
    assert_eq!(read(&f, "/skills/x/SKILL.md").await.data, "x");
}

/// Many simultaneous reads see the same bytes.
pub async fn concurrent_reads_agree(f: Fixture) {
    let mut expected = BTreeMap::new();
    for i in 0..20 {
        let data = format!("skill {i} {}", "x".repeat(i * 100));
        put(&f, &format!("/many/s{i}/SKILL.md"), data.clone()).await;
        expected.insert(i, data);
    }
    let reads = (0..20).flat_map(|i| std::iter::repeat_n(i, 3)).map(|i| {
        let backend = f.backend.clone();
        async move {
            let blob = backend
                .read(&p(&format!("/many/s{i}/SKILL.md")), ReadOptions::default())
                .await
                .unwrap();
            (i, blob.data)
        }
    });
    for (i, data) in join_all(reads).await {
        assert_eq!(data, expected[&i].as_bytes());
    }
}

/// A FIFO is listed as `Other`, and reading it is `not_regular_file` at
/// once (never waiting for a writer). A backend without special files must
/// say it cannot hold symbolic links either.
pub async fn fifo_is_refused_not_waited_on(f: Fixture) {
    let Some(specials) = &f.specials else {
        assert!(
            !f.backend.capabilities().symlinks,
            "a backend with special files needs a Specials maker"
        );
        return;
    };
    put(&f, "/d/regular", "r").await;
    specials.make_fifo(&p("/d/pipe"));
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        f.backend.read(&p("/d/pipe"), ReadOptions::default()),
    )
    .await
    .expect("reading a FIFO must not block");
    assert_kind(read, ErrorKind::NotRegularFile);
    assert_eq!(f.backend.stat(&p("/d/pipe")).await.unwrap().kind, EntryKind::Other);
    assert!(names(&f, "/d").await.contains(&("pipe".into(), EntryKind::Other)));
}

/// Under the default policy, a link out of the root is `symlink_escape` for
/// read and stat, whether it points at a file or a directory.
pub async fn symlink_out_of_the_root_is_refused(f: Fixture) {
    let Some(specials) = &f.specials else {
        assert!(
            !f.backend.capabilities().symlinks,
            "a backend with symlinks needs a Specials maker"
        );
        return;
    };
    put(&f, "/d/regular", "r").await;
    let outside = specials.outside_file();
    specials.make_symlink(&p("/d/file-link"), &outside);
    specials.make_symlink(&p("/d/dir-link"), "../../outside");
    assert_kind(
        f.backend.read(&p("/d/file-link"), ReadOptions::default()).await,
        ErrorKind::SymlinkEscape,
    );
    assert_kind(
        f.backend
            .read(&p("/d/dir-link/secret.txt"), ReadOptions::default())
            .await,
        ErrorKind::SymlinkEscape,
    );
    assert_kind(f.backend.list(&p("/d/dir-link")).await, ErrorKind::SymlinkEscape);
    assert_kind(f.backend.stat(&p("/d/file-link")).await, ErrorKind::SymlinkEscape);
}

/// The outcome of a read as comparable data: bytes, size and version, or
/// the error kind.
fn outcome(result: &Result<crate::Blob>) -> std::result::Result<(Bytes, u64, Version), ErrorKind> {
    match result {
        Ok(blob) => Ok((blob.data.clone(), blob.size, blob.version.clone())),
        Err(e) => Err(e.kind()),
    }
}

/// A batched read gives, path by path and in order, what single reads give,
/// guards included (size limit, directories, absence), with and without a
/// prefix.
pub async fn read_many_matches_read(f: Fixture) {
    put(&f, "/a/SKILL.md", pattern(300)).await;
    put(&f, "/b/SKILL.md", pattern(999)).await;
    put(&f, "/big/SKILL.md", pattern(1001)).await;
    put(&f, "/empty/SKILL.md", Bytes::new()).await;
    let paths: Vec<VPath> = [
        "/a/SKILL.md",
        "/missing/SKILL.md",
        "/a",
        "/big/SKILL.md",
        "/b/SKILL.md",
        "/empty/SKILL.md",
        "/a/SKILL.md",
    ]
    .into_iter()
    .map(p)
    .collect();
    for options in [
        ReadOptions::with_limit(1000),
        ReadOptions {
            prefix: Some(64),
            ..ReadOptions::with_limit(1000)
        },
        ReadOptions::default(),
        ReadOptions::prefix(2048),
    ] {
        let batch = f.backend.read_many(&paths, options).await;
        assert_eq!(batch.len(), paths.len());
        for (path, got) in paths.iter().zip(&batch) {
            let single = f.backend.read(path, options).await;
            assert_eq!(outcome(got), outcome(&single), "{path} with {options:?}");
        }
        assert_eq!(
            outcome(&batch[3]).map(|_| ()),
            if options.limit == 1000 {
                Err(ErrorKind::TooLarge)
            } else {
                Ok(())
            }
        );
    }
}

/// A batched stat gives, in order, what single stats give.
pub async fn stat_many_matches_stat(f: Fixture) {
    put(&f, "/a/SKILL.md", "a").await;
    let paths: Vec<VPath> = ["/a/SKILL.md", "/a", "/missing", "/a/SKILL.md/below"]
        .into_iter()
        .map(p)
        .collect();
    let batch = f.backend.stat_many(&paths).await;
    assert_eq!(batch.len(), paths.len());
    for (path, got) in paths.iter().zip(batch) {
        let single = f.backend.stat(path).await;
        match (got, single) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{path}"),
            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "{path}"),
            (a, b) => panic!("{path}: batch {a:?}, single {b:?}"),
        }
    }
}

/// A batched listing gives, in order, what single listings give, and a
/// batched walk what single walks give.
pub async fn list_many_matches_list(f: Fixture) {
    put(&f, "/a/SKILL.md", "a").await;
    put(&f, "/a/references/r.md", "r").await;
    put(&f, "/b/SKILL.md", "b").await;
    let dirs: Vec<VPath> = ["/a", "/b", "/a/references", "/missing", "/a/SKILL.md"]
        .into_iter()
        .map(p)
        .collect();
    let batch = f.backend.list_many(&dirs).await;
    assert_eq!(batch.len(), dirs.len());
    for (dir, got) in dirs.iter().zip(batch) {
        let single = f.backend.list(dir).await;
        match (got, single) {
            (Ok(mut a), Ok(mut b)) => {
                a.sort_by(|x, y| x.name.cmp(&y.name));
                b.sort_by(|x, y| x.name.cmp(&y.name));
                assert_eq!(a, b, "{dir}");
            }
            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "{dir}"),
            (a, b) => panic!("{dir}: batch {a:?}, single {b:?}"),
        }
    }
    let walks = f.backend.walk_many(&dirs, WalkLimits::default()).await;
    assert_eq!(walks.len(), dirs.len());
    for (dir, got) in dirs.iter().zip(walks) {
        let single = f.backend.walk(dir, WalkLimits::default()).await;
        match (got, single) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{dir}"),
            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "{dir}"),
            (a, b) => panic!("{dir}: batch {a:?}, single {b:?}"),
        }
    }
}

/// Batched reads refuse FIFOs and links out of the root just as single
/// reads do (a backend without special files must say so).
pub async fn read_many_refuses_special_files(f: Fixture) {
    let Some(specials) = &f.specials else {
        assert!(
            !f.backend.capabilities().symlinks,
            "a backend with special files needs a Specials maker"
        );
        return;
    };
    put(&f, "/ok/SKILL.md", "fine").await;
    put(&f, "/pipe/README.md", "the directory holding the FIFO").await;
    specials.make_fifo(&p("/pipe/SKILL.md"));
    specials.make_symlink(&p("/escape"), "../outside");
    let paths: Vec<VPath> = ["/ok/SKILL.md", "/pipe/SKILL.md", "/escape/secret.txt"]
        .into_iter()
        .map(p)
        .collect();
    for options in [ReadOptions::prefix(2048), ReadOptions::default()] {
        let batch = tokio::time::timeout(std::time::Duration::from_secs(10), f.backend.read_many(&paths, options))
            .await
            .expect("a batch with a FIFO must not block");
        assert_eq!(outcome(&batch[0]).map(|(d, _, _)| d), Ok(Bytes::from_static(b"fine")));
        assert_eq!(outcome(&batch[1]).err(), Some(ErrorKind::NotRegularFile));
        assert_eq!(outcome(&batch[2]).err(), Some(ErrorKind::SymlinkEscape));
    }
}

/// A confined read reads what an unconfined one does when no link is in
/// the way; a confinement that is not a proper ancestor of the path is
/// `invalid_path`, in a single read and in a batch.
pub async fn confined_read_stays_in_its_directory(f: Fixture) {
    put(&f, "/team/pdf/SKILL.md", "pdf").await;
    put(&f, "/team/pdf/references/a.md", "a").await;
    let confined = ReadOptions::default().confined(2);
    for path in ["/team/pdf/SKILL.md", "/team/pdf/references/a.md"] {
        let got = f.backend.read(&p(path), confined).await;
        let plain = f.backend.read(&p(path), ReadOptions::default()).await;
        assert_eq!(outcome(&got), outcome(&plain), "{path}");
    }
    assert_kind(
        f.backend
            .read(&p("/team/pdf/SKILL.md"), ReadOptions::default().confined(3))
            .await,
        ErrorKind::InvalidPath,
    );
    let root_confined = f
        .backend
        .read(&p("/team/pdf/SKILL.md"), ReadOptions::default().confined(0))
        .await;
    assert_eq!(
        outcome(&root_confined).map(|(d, _, _)| d),
        Ok(Bytes::from_static(b"pdf"))
    );
    let batch = f
        .backend
        .read_many(
            &[p("/team/pdf/SKILL.md"), p("/team/pdf/references/a.md"), p("/team")],
            confined,
        )
        .await;
    assert_eq!(outcome(&batch[0]).map(|(d, _, _)| d), Ok(Bytes::from_static(b"pdf")));
    assert_eq!(outcome(&batch[1]).map(|(d, _, _)| d), Ok(Bytes::from_static(b"a")));
    assert_eq!(outcome(&batch[2]).err(), Some(ErrorKind::InvalidPath));
}

/// `team/evil/references -> ../../base/secret`: readable unconfined (the
/// link stays inside the root), refused as a symlink kind when the read is
/// confined to `team/evil`, in single and batched reads; a link that stays
/// inside the skill still reads.
pub async fn confined_read_through_a_link_out_of_the_skill_is_refused(f: Fixture) {
    let Some(specials) = &f.specials else {
        assert!(
            !f.backend.capabilities().symlinks,
            "a backend with symlinks needs a Specials maker"
        );
        return;
    };
    put(&f, "/base/secret/SKILL.md", "SECRET").await;
    put(&f, "/team/evil/SKILL.md", "evil").await;
    put(&f, "/team/evil/docs/guide.md", "guide").await;
    specials.make_symlink(&p("/team/evil/references"), "../../base/secret");
    specials.make_symlink(&p("/team/evil/alias"), "docs");
    specials.make_symlink(&p("/team/evil/up-and-back"), "../evil/docs/guide.md");
    let through = p("/team/evil/references/SKILL.md");
    assert_eq!(read(&f, "/team/evil/references/SKILL.md").await.data, "SECRET");
    let confined = ReadOptions::default().confined(2);
    let err = f.backend.read(&through, confined).await.expect_err("confined");
    assert!(
        matches!(err.kind(), ErrorKind::SymlinkEscape | ErrorKind::SymlinkRefused),
        "{err}"
    );
    assert_eq!(
        f.backend
            .read(&p("/team/evil/alias/guide.md"), confined)
            .await
            .unwrap()
            .data,
        "guide"
    );
    // Up out of the skill's directory and back in is a step outside it.
    assert_kind(
        f.backend.read(&p("/team/evil/up-and-back"), confined).await,
        ErrorKind::SymlinkEscape,
    );
    let batch = f
        .backend
        .read_many(
            &[
                p("/team/evil/SKILL.md"),
                through.clone(),
                p("/team/evil/alias/guide.md"),
            ],
            confined,
        )
        .await;
    assert_eq!(outcome(&batch[0]).map(|(d, _, _)| d), Ok(Bytes::from_static(b"evil")));
    assert_eq!(outcome(&batch[1]).err(), Some(err.kind()));
    assert_eq!(outcome(&batch[2]).map(|(d, _, _)| d), Ok(Bytes::from_static(b"guide")));
    // Confined to the whole of /team, the link still leads out.
    assert_kind(
        f.backend.read(&through, ReadOptions::default().confined(1)).await,
        err.kind(),
    );
}

/// `team/evil/references -> ../../base/secret`: a write, delete or
/// conditional delete through the link, or of a link itself, is
/// `write_through_symlink` and changes nothing on the other side.
pub async fn writes_never_follow_a_link(f: Fixture) {
    let Some(specials) = &f.specials else {
        assert!(
            !f.backend.capabilities().symlinks,
            "a backend with symlinks needs a Specials maker"
        );
        return;
    };
    let secret = put(&f, "/base/secret/SKILL.md", "SECRET").await;
    put(&f, "/team/evil/SKILL.md", "evil").await;
    specials.make_symlink(&p("/team/evil/references"), "../../base/secret");
    specials.make_symlink(&p("/team/evil/linked.md"), "../../base/secret/SKILL.md");
    for mode in [PutMode::Overwrite, PutMode::Create] {
        assert_kind(
            f.backend
                .put(&p("/team/evil/references/x.md"), "planted".into(), mode.clone())
                .await,
            ErrorKind::WriteThroughSymlink,
        );
        assert_kind(
            f.backend
                .put(&p("/team/evil/references/deep/x.md"), "planted".into(), mode.clone())
                .await,
            ErrorKind::WriteThroughSymlink,
        );
    }
    assert_kind(
        f.backend
            .put(
                &p("/team/evil/references/SKILL.md"),
                "replaced".into(),
                PutMode::IfVersion(secret.clone()),
            )
            .await,
        ErrorKind::WriteThroughSymlink,
    );
    assert_kind(
        f.backend
            .put(&p("/team/evil/linked.md"), "replaced".into(), PutMode::Overwrite)
            .await,
        ErrorKind::WriteThroughSymlink,
    );
    assert_kind(
        f.backend.delete(&p("/team/evil/references/SKILL.md")).await,
        ErrorKind::WriteThroughSymlink,
    );
    assert_kind(
        f.backend
            .delete_if_version(&p("/team/evil/references/SKILL.md"), &secret)
            .await,
        ErrorKind::WriteThroughSymlink,
    );
    assert_kind(
        f.backend.delete(&p("/team/evil/linked.md")).await,
        ErrorKind::WriteThroughSymlink,
    );
    assert_eq!(names(&f, "/base/secret").await, [("SKILL.md".into(), EntryKind::File)]);
    assert_eq!(read(&f, "/base/secret/SKILL.md").await.data, "SECRET");
    assert_eq!(read(&f, "/base/secret/SKILL.md").await.version, secret);
    // The link itself is still there and still a link.
    assert_eq!(read(&f, "/team/evil/linked.md").await.data, "SECRET");
}

fn walked(walk: &Walk) -> Vec<&str> {
    walk.files.iter().map(|f| f.relative.as_str()).collect()
}

fn passed(walk: &Walk) -> Vec<(&str, PassReason)> {
    walk.passed_over.iter().map(|p| (p.path.as_str(), p.reason)).collect()
}

/// A walk returns every file below a directory, depth first and sorted,
/// with full and relative paths; it stops at the depth and count limits and
/// says so.
pub async fn walk_returns_every_file_within_its_limits(f: Fixture) {
    for path in [
        "/w/top.md",
        "/w/a/one.md",
        "/w/a/b/two.md",
        "/w/a/b/c/three.md",
        "/w/d/four.md",
        "/other.md",
    ] {
        put(&f, path, "x").await;
    }
    let all = f.backend.walk(&p("/w"), WalkLimits::default()).await.unwrap();
    assert_eq!(
        walked(&all),
        ["top.md", "a/one.md", "a/b/two.md", "a/b/c/three.md", "d/four.md"]
    );
    assert_eq!(all.files[2].path, p("/w/a/b/two.md"));
    assert_eq!(all.files[2].entry.size, Some(1));
    assert!(all.files.iter().all(|f| !f.entry.symlink));
    assert!(all.passed_over.is_empty() && !all.truncated);
    let shallow = f
        .backend
        .walk(
            &p("/w"),
            WalkLimits {
                max_depth: 1,
                ..WalkLimits::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(walked(&shallow), ["top.md", "a/one.md", "d/four.md"]);
    assert_eq!(passed(&shallow), [("/w/a/b", PassReason::TooDeep)]);
    let few = f
        .backend
        .walk(
            &p("/w"),
            WalkLimits {
                max_files: 2,
                ..WalkLimits::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(walked(&few), ["top.md", "a/one.md"]);
    assert!(few.truncated);
    let exact = f
        .backend
        .walk(
            &p("/w"),
            WalkLimits {
                max_files: 5,
                ..WalkLimits::default()
            },
        )
        .await
        .unwrap();
    assert!(!exact.truncated);
    assert_kind(
        f.backend.walk(&p("/missing"), WalkLimits::default()).await,
        ErrorKind::NotFound,
    );
}

/// A deep listing (the backend's own, or the walk it falls back to) holds
/// the files a walk finds, with the sizes and versions reads give; cut
/// short by its file limit, it says so.
pub async fn deep_listing_agrees_with_the_walk(f: Fixture) {
    for path in [
        "/d/top.md",
        "/d/a/one.md",
        "/d/a/b/two.md",
        "/d/c/SKILL.md",
        "/other.md",
    ] {
        put(&f, path, path.as_bytes().to_vec()).await;
    }
    let deep = f.backend.list_deep(&p("/d"), DeepLimits::default()).await.unwrap();
    assert!(!deep.truncated);
    let mut listed: Vec<_> = deep.files.iter().map(|f| (f.relative.clone(), f.size)).collect();
    listed.sort();
    let walk = f.backend.walk(&p("/d"), WalkLimits::default()).await.unwrap();
    let mut walked: Vec<_> = walk.files.iter().map(|f| (f.relative.clone(), f.entry.size)).collect();
    walked.sort();
    assert_eq!(listed, walked);
    assert_eq!(listed.len(), 4);
    for file in &deep.files {
        let blob = read(&f, &format!("/d/{}", file.relative)).await;
        assert_eq!(file.size, Some(blob.size), "{}", file.relative);
        if let Some(version) = &file.version {
            assert_eq!(version, &blob.version, "{}", file.relative);
        }
    }
    let few = f
        .backend
        .list_deep(
            &p("/d"),
            DeepLimits {
                max_files: 2,
                ..DeepLimits::default()
            },
        )
        .await
        .unwrap();
    assert!(few.truncated && few.files.len() <= 2, "{few:?}");
    // A skipped directory's files are not listed.
    for i in 0..3 {
        put(&f, &format!("/d/.log/{i}.json"), b"{}".to_vec()).await;
    }
    let skipping = f
        .backend
        .list_deep(
            &p("/d"),
            DeepLimits {
                skip: &[".log"],
                ..DeepLimits::default()
            },
        )
        .await
        .unwrap();
    let mut names: Vec<_> = skipping.files.iter().map(|f| f.relative.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a/b/two.md", "a/one.md", "c/SKILL.md", "top.md"]);
}

/// `a/up -> ..` and `b -> .` make a tree without end for a walk that
/// follows directory links; the walk lists each real directory once,
/// returns links to files as files, and reports the links it passed over.
pub async fn walk_never_descends_into_directory_links(f: Fixture) {
    let Some(specials) = &f.specials else {
        assert!(
            !f.backend.capabilities().symlinks,
            "a backend with symlinks needs a Specials maker"
        );
        return;
    };
    put(&f, "/t/SKILL.md", "skill").await;
    put(&f, "/t/a/x.md", "x").await;
    specials.make_symlink(&p("/t/a/up"), "..");
    specials.make_symlink(&p("/t/b"), ".");
    specials.make_symlink(&p("/t/file-link"), "SKILL.md");
    specials.make_symlink(&p("/t/out"), "../../outside");
    let listed = f.backend.list(&p("/t")).await.unwrap();
    let b = listed.iter().find(|e| e.name == "b").expect("b listed");
    assert!(b.symlink && b.kind == EntryKind::Dir, "{b:?}");
    assert!(!listed.iter().find(|e| e.name == "a").unwrap().symlink);
    let started = std::time::Instant::now();
    let walk = f.backend.walk(&p("/t"), WalkLimits::default()).await.unwrap();
    eprintln!("walk over a/up -> .. and b -> .: {:?}", started.elapsed());
    assert_eq!(walked(&walk), ["SKILL.md", "file-link", "a/x.md"]);
    assert!(walk.files[1].entry.symlink);
    assert!(!walk.truncated);
    assert_eq!(
        passed(&walk),
        [
            ("/t/b", PassReason::DirectoryLink),
            ("/t/out", PassReason::UnresolvedLink),
            ("/t/a/up", PassReason::DirectoryLink),
        ]
    );
}

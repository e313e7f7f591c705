//! Guards only a real filesystem can exercise: every shape of symbolic link,
//! special files, races, and the three symlink policies, each under both
//! path resolvers (the module `openat2` and the module `per_component`).

#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use skillstore_backends::{
    EntryKind, ErrorKind, FsBackend, PathResolver, PutMode, ReadOptions, SkillBackend, SkillBackendExt, SymlinkPolicy,
    VPath,
};

/// `tmp/root` (the backend's root) beside `tmp/outside/secret.txt`.
struct Tree {
    tmp: tempfile::TempDir,
    resolver: PathResolver,
}

impl Tree {
    fn new(resolver: PathResolver) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("root/skills/real")).unwrap();
        std::fs::write(tmp.path().join("root/skills/real/SKILL.md"), "inside").unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/secret.txt"), "SECRET").unwrap();
        std::fs::write(tmp.path().join("outside/SKILL.md"), "SECRET SKILL").unwrap();
        Tree { tmp, resolver }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn backend(&self, policy: SymlinkPolicy) -> FsBackend {
        FsBackend::with_resolver(self.root(), policy, self.resolver).unwrap()
    }

    /// Asserts an error message names no host path.
    fn assert_no_host_path(&self, err: &skillstore_backends::Error) {
        let shown = err.to_string();
        let host = self.tmp.path().to_string_lossy();
        assert!(!shown.contains(host.as_ref()), "host path leaked: {shown}");
    }
}

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

async fn read_kind(backend: &FsBackend, path: &str) -> ErrorKind {
    backend
        .read(&p(path), ReadOptions::default())
        .await
        .expect_err("the read must be refused")
        .kind()
}

async fn fs_file_symlink_out_of_root_is_an_escape(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink(tree.outside().join("secret.txt"), tree.at("skills/leak")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let err = backend
        .read(&p("/skills/leak"), ReadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SymlinkEscape);
    tree.assert_no_host_path(&err);
}

async fn fs_relative_directory_symlink_out_of_root_is_an_escape(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink("../../outside", tree.at("skills/evil")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(
        read_kind(&backend, "/skills/evil/SKILL.md").await,
        ErrorKind::SymlinkEscape
    );
    assert_eq!(
        backend.list(&p("/skills/evil")).await.unwrap_err().kind(),
        ErrorKind::SymlinkEscape
    );
    let listed = backend.list(&p("/skills")).await.unwrap();
    let evil = listed.iter().find(|e| e.name == "evil").unwrap();
    assert_eq!(
        evil.kind,
        EntryKind::Other,
        "an escaping link is not listed as a directory"
    );
}

async fn fs_link_loop_has_its_own_kind(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink("b", tree.at("skills/a")).unwrap();
    symlink("a", tree.at("skills/b")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(read_kind(&backend, "/skills/a").await, ErrorKind::SymlinkLoop);
    assert_eq!(read_kind(&backend, "/skills/a/SKILL.md").await, ErrorKind::SymlinkLoop);
    let follow = tree.backend(SymlinkPolicy::Follow);
    assert_eq!(read_kind(&follow, "/skills/a").await, ErrorKind::SymlinkLoop);
}

async fn fs_dangling_link_has_its_own_kind(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink("nowhere", tree.at("skills/dangling")).unwrap();
    symlink("gone-dir", tree.at("skills/dangling-dir")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(
        read_kind(&backend, "/skills/dangling").await,
        ErrorKind::DanglingSymlink
    );
    assert_eq!(
        read_kind(&backend, "/skills/dangling-dir/SKILL.md").await,
        ErrorKind::DanglingSymlink
    );
    assert_eq!(
        backend.stat(&p("/skills/dangling")).await.unwrap_err().kind(),
        ErrorKind::DanglingSymlink
    );
    // A plain missing file is still just missing.
    assert_eq!(
        read_kind(&backend, "/skills/real/missing.md").await,
        ErrorKind::NotFound
    );
    assert_eq!(
        read_kind(&backend, "/skills/missing/SKILL.md").await,
        ErrorKind::NotFound
    );
}

async fn fs_link_to_dev_zero_is_refused_under_every_policy(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink("/dev/zero", tree.at("skills/zero")).unwrap();
    let within = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(read_kind(&within, "/skills/zero").await, ErrorKind::SymlinkEscape);
    let deny = tree.backend(SymlinkPolicy::Deny);
    assert_eq!(read_kind(&deny, "/skills/zero").await, ErrorKind::SymlinkRefused);
    // Followed, it is a character device: refused for its type, at once.
    let follow = tree.backend(SymlinkPolicy::Follow);
    assert_eq!(read_kind(&follow, "/skills/zero").await, ErrorKind::NotRegularFile);
}

async fn fs_unix_socket_is_not_a_regular_file(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let _listener = std::os::unix::net::UnixListener::bind(tree.at("skills/sock")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(read_kind(&backend, "/skills/sock").await, ErrorKind::NotRegularFile);
    assert_eq!(backend.stat(&p("/skills/sock")).await.unwrap().kind, EntryKind::Other);
}

async fn fs_file_that_grows_past_the_limit_while_read_is_refused(resolver: PathResolver) {
    // procfs files report size 0 and then yield bytes: exactly a file that
    // "grew" after its size was checked.
    let tree = Tree::new(resolver);
    symlink("/proc/self/status", tree.at("skills/growing")).unwrap();
    let backend = tree.backend(SymlinkPolicy::Follow);
    let err = backend
        .read(&p("/skills/growing"), ReadOptions::with_limit(10))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    let whole = backend
        .read(&p("/skills/growing"), ReadOptions::default())
        .await
        .unwrap();
    assert!(whole.data.len() > 10);
    assert_eq!(whole.size, whole.data.len() as u64, "the size is what was read");
}

async fn fs_directory_swapped_for_a_symlink_after_listing_is_not_followed_out(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let listed = backend.list(&p("/skills")).await.unwrap();
    assert!(listed.iter().any(|e| e.name == "real" && e.kind == EntryKind::Dir));
    // Between listing and reading, the directory becomes a link out.
    std::fs::rename(tree.at("skills/real"), tree.at("skills/moved")).unwrap();
    symlink(tree.outside(), tree.at("skills/real")).unwrap();
    let err = backend
        .read(&p("/skills/real/SKILL.md"), ReadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SymlinkEscape);
    // And a relative link out is refused the same way.
    std::fs::remove_file(tree.at("skills/real")).unwrap();
    symlink("../../outside", tree.at("skills/real")).unwrap();
    assert_eq!(
        read_kind(&backend, "/skills/real/SKILL.md").await,
        ErrorKind::SymlinkEscape
    );
}

async fn fs_within_root_follows_internal_links(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink("real", tree.at("skills/alias")).unwrap();
    symlink("../skills/real/SKILL.md", tree.at("skills/file-alias")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(
        backend.read_to_string(&p("/skills/alias/SKILL.md")).await.unwrap(),
        "inside"
    );
    assert_eq!(
        backend.read_to_string(&p("/skills/file-alias")).await.unwrap(),
        "inside"
    );
    let listed = backend.list(&p("/skills")).await.unwrap();
    let alias = listed.iter().find(|e| e.name == "alias").unwrap();
    assert_eq!(alias.kind, EntryKind::Dir);
    let file_alias = listed.iter().find(|e| e.name == "file-alias").unwrap();
    assert_eq!(file_alias.kind, EntryKind::File);
    assert_eq!(file_alias.size, Some(6));
}

async fn fs_absolute_links_are_escapes_even_when_they_point_inside(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let canonical_target = std::fs::canonicalize(tree.at("skills/real")).unwrap();
    symlink(&canonical_target, tree.at("skills/absolute")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(
        read_kind(&backend, "/skills/absolute/SKILL.md").await,
        ErrorKind::SymlinkEscape
    );
}

async fn fs_deny_refuses_every_link_even_internal_ones(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink("real", tree.at("skills/alias")).unwrap();
    let backend = tree.backend(SymlinkPolicy::Deny);
    assert_eq!(
        read_kind(&backend, "/skills/alias/SKILL.md").await,
        ErrorKind::SymlinkRefused
    );
    assert_eq!(
        backend.stat(&p("/skills/alias")).await.unwrap_err().kind(),
        ErrorKind::SymlinkRefused
    );
    assert_eq!(
        backend.list(&p("/skills/alias")).await.unwrap_err().kind(),
        ErrorKind::SymlinkRefused
    );
    let listed = backend.list(&p("/skills")).await.unwrap();
    assert_eq!(
        listed.iter().find(|e| e.name == "alias").unwrap().kind,
        EntryKind::Other
    );
    // Plain files still read.
    assert_eq!(
        backend.read_to_string(&p("/skills/real/SKILL.md")).await.unwrap(),
        "inside"
    );
}

async fn fs_follow_follows_links_out_of_the_root(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink(tree.outside(), tree.at("skills/external")).unwrap();
    let backend = tree.backend(SymlinkPolicy::Follow);
    assert_eq!(
        backend.read_to_string(&p("/skills/external/SKILL.md")).await.unwrap(),
        "SECRET SKILL"
    );
    // The size guard still holds through a followed link.
    let err = backend
        .read(&p("/skills/external/secret.txt"), ReadOptions::with_limit(3))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
}

async fn fs_root_given_through_a_symlink_is_canonicalized_once(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let link = tree.tmp.path().join("root-link");
    symlink(tree.root(), &link).unwrap();
    let backend = FsBackend::with_resolver(&link, SymlinkPolicy::default(), tree.resolver).unwrap();
    // Repointing the link afterwards changes nothing: the root was opened.
    std::fs::remove_file(&link).unwrap();
    symlink(tree.outside(), &link).unwrap();
    assert_eq!(
        backend.read_to_string(&p("/skills/real/SKILL.md")).await.unwrap(),
        "inside"
    );
}

async fn fs_missing_or_file_root_is_refused(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let missing =
        FsBackend::with_resolver(tree.tmp.path().join("nope"), SymlinkPolicy::default(), resolver).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    tree.assert_no_host_path(&missing);
    let file =
        FsBackend::with_resolver(tree.outside().join("secret.txt"), SymlinkPolicy::default(), resolver).unwrap_err();
    assert_eq!(file.kind(), ErrorKind::NotADirectory);
}

async fn fs_read_only_refuses_writes(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let backend = tree.backend(SymlinkPolicy::WithinRoot).read_only();
    assert!(!backend.capabilities().write);
    let err = backend
        .put(&p("/skills/new/SKILL.md"), "x".into(), PutMode::Create)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly);
    assert_eq!(
        backend.delete(&p("/skills/real/SKILL.md")).await.unwrap_err().kind(),
        ErrorKind::ReadOnly
    );
    assert!(tree.at("skills/real/SKILL.md").exists());
}

async fn fs_writes_never_follow_a_link_out_of_the_root(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    symlink(tree.outside(), tree.at("skills/out")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let err = backend
        .put(&p("/skills/out/SKILL.md"), "overwritten".into(), PutMode::Overwrite)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WriteThroughSymlink);
    assert_eq!(
        std::fs::read_to_string(tree.outside().join("SKILL.md")).unwrap(),
        "SECRET SKILL"
    );
}

async fn fs_names_that_are_not_valid_segments_are_not_listed(resolver: PathResolver) {
    use std::os::unix::ffi::OsStrExt;
    let tree = Tree::new(resolver);
    let raw = std::ffi::OsStr::from_bytes(b"latin1-\xe9");
    std::fs::write(tree.at("skills").join(raw), "x").unwrap();
    std::fs::write(tree.at("skills/back\\slash"), "x").unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let names: Vec<String> = backend
        .list(&p("/skills"))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["real"]);
}

async fn fs_put_leaves_no_temporary_files_behind(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let v1 = backend
        .put(&p("/skills/w/SKILL.md"), "one".into(), PutMode::Create)
        .await
        .unwrap();
    let stale = backend
        .put(&p("/skills/w/SKILL.md"), "two".into(), PutMode::IfVersion(v1.clone()))
        .await
        .unwrap();
    assert_ne!(v1, stale);
    let err = backend
        .put(&p("/skills/w/SKILL.md"), "three".into(), PutMode::IfVersion(v1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::VersionConflict);
    let left: Vec<_> = std::fs::read_dir(tree.at("skills/w"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("SKILL.md")]);
    assert_eq!(std::fs::read_to_string(tree.at("skills/w/SKILL.md")).unwrap(), "two");
}

#[test]
fn fs_policy_names_parse() {
    assert_eq!("deny".parse::<SymlinkPolicy>().unwrap(), SymlinkPolicy::Deny);
    assert_eq!(
        "within_root".parse::<SymlinkPolicy>().unwrap(),
        SymlinkPolicy::WithinRoot
    );
    assert_eq!("follow".parse::<SymlinkPolicy>().unwrap(), SymlinkPolicy::Follow);
    assert!("maybe".parse::<SymlinkPolicy>().is_err());
    assert_eq!(SymlinkPolicy::default(), SymlinkPolicy::WithinRoot);
}

/// A file swapped again and again for a link out of the root, while being
/// read: every read gives the file or an error, never the outside bytes.
async fn a_file_swapped_for_a_link_while_read_is_never_followed_out(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let target = tree.outside().join("secret.txt");
    let dir = tree.at("skills/real");
    use std::sync::atomic::Ordering::Relaxed;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapped = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let stop = std::sync::Arc::clone(&stop);
        let swapped = std::sync::Arc::clone(&swapped);
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                let _ = std::fs::remove_file(dir.join("link.tmp"));
                symlink(&target, dir.join("link.tmp")).unwrap();
                std::fs::rename(dir.join("link.tmp"), dir.join("SKILL.md")).unwrap();
                std::fs::write(dir.join("file.tmp"), "inside").unwrap();
                std::fs::rename(dir.join("file.tmp"), dir.join("SKILL.md")).unwrap();
                swapped.fetch_add(1, Relaxed);
            }
        })
    };
    let path = p("/skills/real/SKILL.md");
    let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
    for policy in [SymlinkPolicy::WithinRoot, SymlinkPolicy::Deny] {
        let backend = tree.backend(policy);
        let start = swapped.load(Relaxed);
        // At least 1500 rounds, and on until the swapper (which may be
        // starved by other tests) has swapped 100 times during them.
        let mut round = 0u64;
        while round < 1500 || (swapped.load(Relaxed) - start < 100 && round < 2_000_000) {
            round += 1;
            let results = if round.is_multiple_of(2) {
                vec![backend.read(&path, ReadOptions::default()).await]
            } else {
                backend
                    .read_many(&[path.clone(), path.clone()], ReadOptions::prefix(64))
                    .await
            };
            for result in results {
                let key = match result {
                    Ok(blob) => {
                        assert_eq!(blob.data, "inside", "read {:?} under {policy:?}", blob.data);
                        "read".to_owned()
                    }
                    Err(e) => {
                        tree.assert_no_host_path(&e);
                        e.kind().as_str().to_owned()
                    }
                };
                *outcomes.entry(key).or_default() += 1;
            }
            let _ = backend.stat(&path).await;
        }
    }
    stop.store(true, Relaxed);
    swapper.join().unwrap();
    let swaps = swapped.load(Relaxed);
    eprintln!("{swaps} swaps; outcomes {outcomes:?}");
    assert!(swaps > 100, "the race was not exercised: {swaps} swaps");
    assert!(outcomes.get("read").copied().unwrap_or(0) > 0);
    assert!(
        outcomes.keys().any(|k| k != "read"),
        "no read met the link: {outcomes:?}"
    );
}

/// Writers of a directory take turns under a `flock` the kernel drops when
/// its holder dies: a writer that crashed holding it never wedges the next.
async fn the_write_lock_is_released_when_its_holder_crashes(resolver: PathResolver) {
    let tree = Tree::new(resolver);
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    // Another process takes the directory's lock and holds it.
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork")
        .arg(tree.at("skills/real"))
        .args(["sleep", "60"])
        .spawn()
        .expect("util-linux flock");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let path = p("/skills/real/SKILL.md");
    let mut write = Box::pin(backend.put(&path, "after".into(), PutMode::Overwrite));
    let blocked = tokio::time::timeout(std::time::Duration::from_millis(300), &mut write).await;
    assert!(blocked.is_err(), "the write waited for the lock");
    // The holder dies without unlocking; the write goes through.
    holder.kill().unwrap();
    holder.wait().unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), write)
        .await
        .expect("the lock was released by the crash")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.at("skills/real/SKILL.md")).unwrap(),
        "after"
    );
}

/// `team/evil/references -> ../../base/secret`, with the base layer's
/// secret beside it; and `team/evil/alias -> docs`, a link inside the skill.
fn layered_tree(tree: &Tree) {
    std::fs::create_dir_all(tree.at("base/secret")).unwrap();
    std::fs::write(tree.at("base/secret/SKILL.md"), "BASE SECRET").unwrap();
    std::fs::create_dir_all(tree.at("team/evil/docs")).unwrap();
    std::fs::write(tree.at("team/evil/SKILL.md"), "evil").unwrap();
    std::fs::write(tree.at("team/evil/docs/guide.md"), "guide").unwrap();
    symlink("../../base/secret", tree.at("team/evil/references")).unwrap();
    symlink("docs", tree.at("team/evil/alias")).unwrap();
}

/// A link inside the root carries no write across skills or layers, under
/// every policy: nothing is written, replaced or deleted on the other side.
async fn link_inside_the_root_carries_no_write_across_layers(resolver: PathResolver) {
    for policy in [SymlinkPolicy::Deny, SymlinkPolicy::WithinRoot, SymlinkPolicy::Follow] {
        let tree = Tree::new(resolver);
        layered_tree(&tree);
        let backend = tree.backend(policy);
        for path in ["/team/evil/references/x.md", "/team/evil/references/SKILL.md"] {
            let err = backend
                .put(&p(path), "planted".into(), PutMode::Overwrite)
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::WriteThroughSymlink, "{path} under {policy:?}");
            assert_eq!(err.kind().as_str(), "write_through_symlink");
            tree.assert_no_host_path(&err);
        }
        let err = backend.delete(&p("/team/evil/references/SKILL.md")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WriteThroughSymlink, "{policy:?}");
        let left: Vec<_> = std::fs::read_dir(tree.at("base/secret"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("SKILL.md")], "{policy:?}");
        assert_eq!(
            std::fs::read_to_string(tree.at("base/secret/SKILL.md")).unwrap(),
            "BASE SECRET"
        );
        // Writes that meet no link still work.
        backend
            .put(&p("/team/evil/docs/new.md"), "fine".into(), PutMode::Create)
            .await
            .unwrap();
    }
}

/// A link inside the root carries no read confined to a skill out of it,
/// under every policy, directly and through a mount table that re-counts
/// the confinement from its mount point; a link inside the skill reads.
async fn link_inside_the_root_carries_no_confined_read_across_layers(resolver: PathResolver) {
    use skillstore_backends::MountTable;
    use std::sync::Arc;
    let tree = Tree::new(resolver);
    layered_tree(&tree);
    for policy in [SymlinkPolicy::Deny, SymlinkPolicy::WithinRoot, SymlinkPolicy::Follow] {
        let backend = tree.backend(policy);
        let refused = if policy == SymlinkPolicy::Deny {
            ErrorKind::SymlinkRefused
        } else {
            ErrorKind::SymlinkEscape
        };
        let confined = ReadOptions::default().confined(2);
        let err = backend
            .read(&p("/team/evil/references/SKILL.md"), confined)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), refused, "{policy:?}");
        tree.assert_no_host_path(&err);
        if policy != SymlinkPolicy::Deny {
            assert_eq!(
                backend
                    .read_to_string(&p("/team/evil/references/SKILL.md"))
                    .await
                    .unwrap(),
                "BASE SECRET",
                "unconfined, the link stays inside the root"
            );
            let inside = backend.read(&p("/team/evil/alias/guide.md"), confined).await.unwrap();
            assert_eq!(inside.data, "guide");
        }
        let ns = MountTable::new().with(p("/layers"), Arc::new(backend)).unwrap();
        let through = p("/layers/team/evil/references/SKILL.md");
        let err = ns.read(&through, ReadOptions::default().confined(3)).await.unwrap_err();
        assert_eq!(err.kind(), refused, "{policy:?} through the mount");
        assert_eq!(err.path(), Some(&through));
        let batch = ns
            .read_many(
                &[through.clone(), p("/layers/team/evil/SKILL.md")],
                ReadOptions::default().confined(3),
            )
            .await;
        assert_eq!(batch[0].as_ref().unwrap_err().kind(), refused);
        assert_eq!(batch[1].as_ref().unwrap().data, "evil");
        // Confined at the mount point: the mounted backend's root, where the
        // link stays inside (followed unless the policy refuses links).
        let at_mount = ns.read(&through, ReadOptions::default().confined(1)).await;
        match policy {
            SymlinkPolicy::Deny => assert_eq!(at_mount.unwrap_err().kind(), ErrorKind::SymlinkRefused),
            _ => assert_eq!(at_mount.unwrap().data, "BASE SECRET"),
        }
    }
}

/// A version is what a cache trusts not to have changed: a rewrite in place
/// that keeps the size and puts the old modification time back (as `touch
/// -r` or an archiver does) must still give a new one.
async fn fs_a_rewrite_in_place_keeping_size_and_mtime_has_a_new_version(resolver: PathResolver) {
    use std::io::Write as _;
    let tree = Tree::new(resolver);
    let backend = tree.backend(SymlinkPolicy::Deny);
    let file = p("/skills/real/SKILL.md");
    let before = backend.stat(&file).await.unwrap().version.unwrap();
    let listed_before = backend.list_detailed(&p("/skills/real")).await.unwrap().entries[0]
        .version
        .clone();
    let host = tree.at("skills/real/SKILL.md");
    let mtime = std::fs::metadata(&host).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut open = std::fs::OpenOptions::new().write(true).open(&host).unwrap();
    open.write_all(b"INSIDE").unwrap();
    open.set_modified(mtime).unwrap();
    drop(open);
    assert_eq!(std::fs::metadata(&host).unwrap().modified().unwrap(), mtime);
    let after = backend.stat(&file).await.unwrap().version.unwrap();
    assert_ne!(
        before, after,
        "same size, same mtime, other bytes: the version must change"
    );
    let listed_after = backend.list_detailed(&p("/skills/real")).await.unwrap().entries[0]
        .version
        .clone();
    assert_ne!(listed_before, listed_after);
    assert_eq!(
        backend.read(&file, ReadOptions::default()).await.unwrap().data,
        "INSIDE"
    );
}

/// Expands each guard into one test per path resolver.
macro_rules! on_every_resolver {
    ($($name:ident),+ $(,)?) => {
        mod openat2 {
            $(
                #[cfg(target_os = "linux")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(skillstore_backends::PathResolver::Openat2).await
                }
            )+
        }
        mod per_component {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(skillstore_backends::PathResolver::PerComponent).await
                }
            )+
        }
    };
}

on_every_resolver!(
    link_inside_the_root_carries_no_write_across_layers,
    link_inside_the_root_carries_no_confined_read_across_layers,
    fs_file_symlink_out_of_root_is_an_escape,
    fs_relative_directory_symlink_out_of_root_is_an_escape,
    fs_link_loop_has_its_own_kind,
    fs_dangling_link_has_its_own_kind,
    fs_link_to_dev_zero_is_refused_under_every_policy,
    fs_unix_socket_is_not_a_regular_file,
    fs_file_that_grows_past_the_limit_while_read_is_refused,
    fs_directory_swapped_for_a_symlink_after_listing_is_not_followed_out,
    fs_within_root_follows_internal_links,
    fs_absolute_links_are_escapes_even_when_they_point_inside,
    fs_deny_refuses_every_link_even_internal_ones,
    fs_follow_follows_links_out_of_the_root,
    fs_root_given_through_a_symlink_is_canonicalized_once,
    fs_missing_or_file_root_is_refused,
    fs_read_only_refuses_writes,
    fs_writes_never_follow_a_link_out_of_the_root,
    fs_names_that_are_not_valid_segments_are_not_listed,
    fs_put_leaves_no_temporary_files_behind,
    a_file_swapped_for_a_link_while_read_is_never_followed_out,
    the_write_lock_is_released_when_its_holder_crashes,
    fs_a_rewrite_in_place_keeping_size_and_mtime_has_a_new_version,
);

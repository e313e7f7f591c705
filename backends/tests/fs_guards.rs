//! Guards only a real filesystem can exercise: every shape of symbolic link,
//! special files, races, and the three symlink policies.

#![cfg(target_os = "linux")]

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use skillstore_backends::{
    EntryKind, ErrorKind, FsBackend, PutMode, ReadOptions, SkillBackend, SkillBackendExt, SymlinkPolicy, VPath,
};

/// `tmp/root` (the backend's root) beside `tmp/outside/secret.txt`.
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("root/skills/real")).unwrap();
        std::fs::write(tmp.path().join("root/skills/real/SKILL.md"), "inside").unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/secret.txt"), "SECRET").unwrap();
        std::fs::write(tmp.path().join("outside/SKILL.md"), "SECRET SKILL").unwrap();
        Tree { tmp }
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
        FsBackend::with_policy(self.root(), policy).unwrap()
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

#[tokio::test]
async fn fs_file_symlink_out_of_root_is_an_escape() {
    let tree = Tree::new();
    symlink(tree.outside().join("secret.txt"), tree.at("skills/leak")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let err = backend
        .read(&p("/skills/leak"), ReadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SymlinkEscape);
    tree.assert_no_host_path(&err);
}

#[tokio::test]
async fn fs_relative_directory_symlink_out_of_root_is_an_escape() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_link_loop_has_its_own_kind() {
    let tree = Tree::new();
    symlink("b", tree.at("skills/a")).unwrap();
    symlink("a", tree.at("skills/b")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(read_kind(&backend, "/skills/a").await, ErrorKind::SymlinkLoop);
    assert_eq!(read_kind(&backend, "/skills/a/SKILL.md").await, ErrorKind::SymlinkLoop);
    let follow = tree.backend(SymlinkPolicy::Follow);
    assert_eq!(read_kind(&follow, "/skills/a").await, ErrorKind::SymlinkLoop);
}

#[tokio::test]
async fn fs_dangling_link_has_its_own_kind() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_link_to_dev_zero_is_refused_under_every_policy() {
    let tree = Tree::new();
    symlink("/dev/zero", tree.at("skills/zero")).unwrap();
    let within = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(read_kind(&within, "/skills/zero").await, ErrorKind::SymlinkEscape);
    let deny = tree.backend(SymlinkPolicy::Deny);
    assert_eq!(read_kind(&deny, "/skills/zero").await, ErrorKind::SymlinkRefused);
    // Followed, it is a character device: refused for its type, at once.
    let follow = tree.backend(SymlinkPolicy::Follow);
    assert_eq!(read_kind(&follow, "/skills/zero").await, ErrorKind::NotRegularFile);
}

#[tokio::test]
async fn fs_unix_socket_is_not_a_regular_file() {
    let tree = Tree::new();
    let _listener = std::os::unix::net::UnixListener::bind(tree.at("skills/sock")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(read_kind(&backend, "/skills/sock").await, ErrorKind::NotRegularFile);
    assert_eq!(backend.stat(&p("/skills/sock")).await.unwrap().kind, EntryKind::Other);
}

#[tokio::test]
async fn fs_file_that_grows_past_the_limit_while_read_is_refused() {
    // procfs files report size 0 and then yield bytes: exactly a file that
    // "grew" after its size was checked.
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_directory_swapped_for_a_symlink_after_listing_is_not_followed_out() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_within_root_follows_internal_links() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_absolute_links_are_escapes_even_when_they_point_inside() {
    let tree = Tree::new();
    let canonical_target = std::fs::canonicalize(tree.at("skills/real")).unwrap();
    symlink(&canonical_target, tree.at("skills/absolute")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    assert_eq!(
        read_kind(&backend, "/skills/absolute/SKILL.md").await,
        ErrorKind::SymlinkEscape
    );
}

#[tokio::test]
async fn fs_deny_refuses_every_link_even_internal_ones() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_follow_follows_links_out_of_the_root() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_root_given_through_a_symlink_is_canonicalized_once() {
    let tree = Tree::new();
    let link = tree.tmp.path().join("root-link");
    symlink(tree.root(), &link).unwrap();
    let backend = FsBackend::new(&link).unwrap();
    // Repointing the link afterwards changes nothing: the root was opened.
    std::fs::remove_file(&link).unwrap();
    symlink(tree.outside(), &link).unwrap();
    assert_eq!(
        backend.read_to_string(&p("/skills/real/SKILL.md")).await.unwrap(),
        "inside"
    );
}

#[tokio::test]
async fn fs_missing_or_file_root_is_refused() {
    let tree = Tree::new();
    let missing = FsBackend::new(tree.tmp.path().join("nope")).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    tree.assert_no_host_path(&missing);
    let file = FsBackend::new(tree.outside().join("secret.txt")).unwrap_err();
    assert_eq!(file.kind(), ErrorKind::NotADirectory);
}

#[tokio::test]
async fn fs_read_only_refuses_writes() {
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_writes_never_follow_a_link_out_of_the_root() {
    let tree = Tree::new();
    symlink(tree.outside(), tree.at("skills/out")).unwrap();
    let backend = tree.backend(SymlinkPolicy::WithinRoot);
    let err = backend
        .put(&p("/skills/out/SKILL.md"), "overwritten".into(), PutMode::Overwrite)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SymlinkEscape);
    assert_eq!(
        std::fs::read_to_string(tree.outside().join("SKILL.md")).unwrap(),
        "SECRET SKILL"
    );
}

#[tokio::test]
async fn fs_names_that_are_not_valid_segments_are_not_listed() {
    use std::os::unix::ffi::OsStrExt;
    let tree = Tree::new();
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

#[tokio::test]
async fn fs_put_leaves_no_temporary_files_behind() {
    let tree = Tree::new();
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_swapped_for_a_link_while_read_is_never_followed_out() {
    let tree = Tree::new();
    let target = tree.outside().join("secret.txt");
    let dir = tree.at("skills/real");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swaps = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(dir.join("link.tmp"));
                symlink(&target, dir.join("link.tmp")).unwrap();
                std::fs::rename(dir.join("link.tmp"), dir.join("SKILL.md")).unwrap();
                std::fs::write(dir.join("file.tmp"), "inside").unwrap();
                std::fs::rename(dir.join("file.tmp"), dir.join("SKILL.md")).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let path = p("/skills/real/SKILL.md");
    let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
    for policy in [SymlinkPolicy::WithinRoot, SymlinkPolicy::Deny] {
        let backend = tree.backend(policy);
        for round in 0..1500 {
            let results = if round % 2 == 0 {
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
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_lock_is_released_when_its_holder_crashes() {
    let tree = Tree::new();
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

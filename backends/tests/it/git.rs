//! `GitBackend` against the real `git`: listings and reads compared with
//! `git ls-tree` and `git cat-file` on the same commit, the read-only
//! contract, and hostile trees built object by object.
#![cfg(all(feature = "git", feature = "testkit", unix))]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use skillstore_backends::testkit::git_repo::{git, git_command};
use skillstore_backends::{
    EntryKind, ErrorKind, GitBackend, PutMode, ReadOptions, SkillBackend, SkillBackendExt, SymlinkPolicy, VPath,
    WalkLimits,
};

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A repository with layered skills, an executable, a link and a tag.
fn layered_repo(dir: &Path) {
    let files: &[(&str, &str)] = &[
        (
            "base/pdf/SKILL.md",
            "---\nname: pdf\ndescription: Base PDF.\n---\nBody\n",
        ),
        ("base/pdf/references/forms.md", "# Forms\n"),
        (
            "team/pdf/SKILL.md",
            "---\nname: pdf\ndescription: Team PDF.\n---\nTeam body\n",
        ),
        ("team/docx/SKILL.md", "---\nname: docx\ndescription: Word files.\n---\n"),
        ("team/docx/scripts/run.sh", "#!/bin/sh\necho hi\n"),
        ("README.md", "top\n"),
    ];
    for (path, text) in files {
        let host = dir.join(path);
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        std::fs::write(host, text).unwrap();
    }
    std::os::unix::fs::symlink("../../base/pdf/references", dir.join("team/docx/references")).unwrap();
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["update-index", "--chmod=+x", "team/docx/scripts/run.sh"]);
    git(dir, &["commit", "-q", "-m", "layered"]);
    git(dir, &["tag", "v1"]);
}

/// `git ls-tree -r -l` of `rev`: path -> (mode, id, size).
fn ls_tree(dir: &Path, rev: &str) -> BTreeMap<String, (String, String, String)> {
    git(dir, &["ls-tree", "-r", "-l", rev])
        .lines()
        .map(|line| {
            let (meta, path) = line.split_once('\t').unwrap();
            let fields: Vec<&str> = meta.split_whitespace().collect();
            (
                path.to_owned(),
                (fields[0].to_owned(), fields[2].to_owned(), fields[3].to_owned()),
            )
        })
        .collect()
}

#[test]
fn listings_and_reads_match_git_ls_tree_and_cat_file() {
    let dir = tempfile::tempdir().unwrap();
    layered_repo(dir.path());
    let backend = GitBackend::open(&dir.path().join(".git"), "v1", SymlinkPolicy::WithinRoot).unwrap();
    assert_eq!(backend.commit(), git(dir.path(), &["rev-parse", "v1^{commit}"]).trim());
    let rt = runtime();
    let walk = rt
        .block_on(backend.walk(&VPath::root(), WalkLimits::default()))
        .unwrap();
    let tree = ls_tree(dir.path(), "v1");
    let regular: Vec<&String> = tree
        .iter()
        .filter(|(_, (mode, _, _))| mode != "120000")
        .map(|(path, _)| path)
        .collect();
    let mut walked: Vec<&String> = walk
        .files
        .iter()
        .filter(|f| !f.entry.symlink)
        .map(|f| &f.relative)
        .collect();
    walked.sort();
    assert_eq!(walked, regular);
    for (path, (mode, id, size)) in &tree {
        let vpath = p(&format!("/{path}"));
        if mode == "120000" {
            let listed = rt.block_on(backend.list(&vpath.parent().unwrap())).unwrap();
            let entry = listed
                .iter()
                .find(|e| Some(e.name.as_str()) == vpath.file_name())
                .unwrap();
            assert!(entry.symlink && entry.kind == EntryKind::Dir, "{entry:?}");
            continue;
        }
        let blob = rt.block_on(backend.read(&vpath, ReadOptions::default())).unwrap();
        let expected = git_command(dir.path())
            .args(["cat-file", "blob", id])
            .output()
            .unwrap()
            .stdout;
        assert_eq!(blob.data, expected, "{path}");
        assert_eq!(blob.version.as_str(), id, "{path}");
        assert_eq!(blob.size.to_string(), *size, "{path}");
        let meta = rt.block_on(backend.stat(&vpath)).unwrap();
        assert_eq!(meta.size, Some(blob.size));
        assert_eq!(meta.version.as_ref(), Some(&blob.version));
    }
    // The link inside the tree reads through to its target...
    let through = rt
        .block_on(backend.read(&p("/team/docx/references/forms.md"), ReadOptions::default()))
        .unwrap();
    assert_eq!(through.data, "# Forms\n");
    // ...but not when the read is confined to the skill.
    let confined = rt.block_on(backend.read(&p("/team/docx/references/forms.md"), ReadOptions::default().confined(2)));
    assert_eq!(confined.unwrap_err().kind(), ErrorKind::SymlinkEscape);
}

#[test]
fn writes_are_refused_as_read_only() {
    let dir = tempfile::tempdir().unwrap();
    layered_repo(dir.path());
    let backend = GitBackend::open(&dir.path().join(".git"), "HEAD", SymlinkPolicy::WithinRoot).unwrap();
    assert!(!backend.capabilities().write);
    let rt = runtime();
    for mode in [PutMode::Overwrite, PutMode::Create] {
        let err = rt
            .block_on(backend.put(&p("/team/new/SKILL.md"), "x".into(), mode))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ReadOnly);
    }
    let err = rt.block_on(backend.delete(&p("/README.md"))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly);
    assert_eq!(rt.block_on(backend.read_to_string(&p("/README.md"))).unwrap(), "top\n");
}

#[test]
fn the_deny_policy_refuses_every_link() {
    let dir = tempfile::tempdir().unwrap();
    layered_repo(dir.path());
    let backend = GitBackend::open(&dir.path().join(".git"), "HEAD", SymlinkPolicy::Deny).unwrap();
    let rt = runtime();
    let err = rt
        .block_on(backend.read(&p("/team/docx/references/forms.md"), ReadOptions::default()))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SymlinkRefused);
    let listed = rt.block_on(backend.list(&p("/team/docx"))).unwrap();
    let link = listed.iter().find(|e| e.name == "references").unwrap();
    assert!(link.symlink && link.kind == EntryKind::Other);
}

#[test]
fn an_unknown_revision_is_not_found_and_names_no_host_path() {
    let dir = tempfile::tempdir().unwrap();
    layered_repo(dir.path());
    let err = GitBackend::open(&dir.path().join(".git"), "no-such-branch", SymlinkPolicy::WithinRoot).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("no-such-branch"), "{err}");
    assert!(!err.to_string().contains(&*dir.path().to_string_lossy()), "{err}");
    let err = GitBackend::open(&dir.path().join("nothing"), "HEAD", SymlinkPolicy::WithinRoot).unwrap_err();
    assert!(!err.to_string().contains(&*dir.path().to_string_lossy()), "{err}");
}

/// Writes `data` as a blob and returns its id.
fn blob(dir: &Path, data: &[u8]) -> String {
    use std::io::Write;
    let mut child = git_command(dir)
        .args(["hash-object", "-w", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Writes a tree of raw `(mode, type, id, name)` entries (names as bytes,
/// unchecked, as a hostile repository could hold them) and returns its id.
fn tree(dir: &Path, entries: &[(&str, &str, &str, &[u8])]) -> String {
    use std::io::Write;
    let mut input = Vec::new();
    for (mode, kind, id, name) in entries {
        input.extend_from_slice(format!("{mode} {kind} {id}\t").as_bytes());
        input.extend_from_slice(name);
        input.push(0);
    }
    let mut child = git_command(dir)
        .args(["mktree", "-z", "--missing"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn commit_tree(dir: &Path, tree: &str) -> String {
    git(dir, &["commit-tree", tree, "-m", "hostile"]).trim().to_owned()
}

fn bare(dir: &Path) {
    git(dir, &["init", "-q", "--bare"]);
}

#[test]
fn hostile_names_are_reported_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    bare(repo);
    let skill = blob(repo, b"---\nname: ok\ndescription: Fine.\n---\n");
    let inner = tree(repo, &[("100644", "blob", &skill, b"SKILL.md")]);
    let root = tree(
        repo,
        &[
            ("040000", "tree", &inner, b".."),
            ("040000", "tree", &inner, b"."),
            ("040000", "tree", &inner, b"a\\b"),
            ("040000", "tree", &inner, b"ctl\x07"),
            ("040000", "tree", &inner, b"not-utf8-\xff\xfe"),
            ("040000", "tree", &inner, b"Skill"),
            ("040000", "tree", &inner, b"skill"),
            ("040000", "tree", &inner, b"ok"),
        ],
    );
    let commit = commit_tree(repo, &root);
    let backend = GitBackend::open(repo, &commit, SymlinkPolicy::WithinRoot).unwrap();
    let rt = runtime();
    let listing = rt.block_on(backend.list_detailed(&VPath::root())).unwrap();
    let mut names: Vec<&str> = listing.entries.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    // Case collisions are two names, each served as itself.
    assert_eq!(names, ["Skill", "ok", "skill"]);
    assert_eq!(listing.invalid.len(), 5, "{:?}", listing.invalid);
    assert!(listing.invalid.iter().all(|n| !n.chars().any(char::is_control)));
    for name in ["Skill", "skill", "ok"] {
        let read = rt
            .block_on(backend.read(&p(&format!("/{name}/SKILL.md")), ReadOptions::default()))
            .unwrap();
        assert_eq!(read.version.as_str(), skill);
    }
}

#[test]
fn links_out_of_the_tree_and_submodules_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    bare(repo);
    let skill = blob(repo, b"---\nname: s\ndescription: S.\n---\n");
    let up = blob(repo, b"../../..");
    let absolute = blob(repo, b"/etc/passwd");
    let looping = blob(repo, b"loop");
    let dangling = blob(repo, b"nothing-here");
    let long = blob(repo, "a/".repeat(3000).as_bytes());
    let lfs = blob(
        repo,
        b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n",
    );
    let inner = tree(
        repo,
        &[
            ("100644", "blob", &skill, b"SKILL.md"),
            ("120000", "blob", &up, b"up"),
            ("120000", "blob", &absolute, b"abs"),
            ("120000", "blob", &looping, b"loop"),
            ("120000", "blob", &dangling, b"dangling"),
            ("120000", "blob", &long, b"long"),
            ("100644", "blob", &lfs, b"big.bin"),
            ("160000", "commit", &"1".repeat(40), b"vendored"),
        ],
    );
    let root = tree(repo, &[("040000", "tree", &inner, b"s")]);
    let commit = commit_tree(repo, &root);
    let backend = GitBackend::open(repo, &commit, SymlinkPolicy::Follow).unwrap();
    let rt = runtime();
    let kind = |path: &str| {
        rt.block_on(backend.read(&p(path), ReadOptions::default()))
            .unwrap_err()
            .kind()
    };
    assert_eq!(kind("/s/up/x"), ErrorKind::SymlinkEscape);
    assert_eq!(kind("/s/abs"), ErrorKind::SymlinkEscape);
    assert_eq!(kind("/s/loop"), ErrorKind::SymlinkLoop);
    assert_eq!(kind("/s/dangling"), ErrorKind::DanglingSymlink);
    assert_eq!(kind("/s/long"), ErrorKind::SymlinkLoop);
    assert_eq!(kind("/s/vendored"), ErrorKind::NotRegularFile);
    assert_eq!(kind("/s/vendored/SKILL.md"), ErrorKind::Unsupported);
    assert_eq!(kind("/s/big.bin"), ErrorKind::NotRegularFile);
    assert_eq!(
        rt.block_on(backend.stat(&p("/s/big.bin"))).unwrap().kind,
        EntryKind::Other
    );
    let listed = rt.block_on(backend.list(&p("/s"))).unwrap();
    let by_name: BTreeMap<&str, (EntryKind, bool)> =
        listed.iter().map(|e| (e.name.as_str(), (e.kind, e.symlink))).collect();
    assert_eq!(by_name["vendored"], (EntryKind::Other, false));
    assert_eq!(by_name["big.bin"], (EntryKind::Other, false));
    for link in ["up", "abs", "loop", "dangling", "long"] {
        assert_eq!(by_name[link], (EntryKind::Other, true), "{link}");
    }
    let walk = rt.block_on(backend.walk(&p("/s"), WalkLimits::default())).unwrap();
    let files: Vec<&str> = walk.files.iter().map(|f| f.relative.as_str()).collect();
    assert_eq!(files, ["SKILL.md"]);
    assert_eq!(walk.passed_over.len(), 7);
}

#[test]
fn deep_trees_and_a_hundred_thousand_entries_stay_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    bare(repo);
    // 100,000 entries in one directory and a chain 300 directories deep.
    let x = blob(repo, b"x");
    let names: Vec<String> = (0..100_000).map(|i| format!("e{i:06}")).collect();
    let entries: Vec<(&str, &str, &str, &[u8])> = names
        .iter()
        .map(|n| ("100644", "blob", x.as_str(), n.as_bytes()))
        .collect();
    let many = tree(repo, &entries);
    let leaf = blob(repo, b"leaf");
    let mut chain = tree(repo, &[("100644", "blob", &leaf, b"leaf.md")]);
    let deep: Vec<String> = (0..300).map(|i| format!("d{i}")).collect();
    for name in deep.iter().rev() {
        chain = tree(repo, &[("040000", "tree", &chain, name.as_bytes())]);
    }
    let root = tree(
        repo,
        &[("040000", "tree", &many, b"many"), ("040000", "tree", &chain, b"deep")],
    );
    git(repo, &["update-ref", "refs/heads/main", &commit_tree(repo, &root)]);
    let backend = GitBackend::open(repo, "main", SymlinkPolicy::WithinRoot).unwrap();
    let rt = runtime();
    let many = rt.block_on(backend.list(&p("/many"))).unwrap();
    assert_eq!(many.len(), 100_000);
    let bounded = rt
        .block_on(backend.walk(
            &p("/many"),
            WalkLimits {
                max_files: 1000,
                ..WalkLimits::default()
            },
        ))
        .unwrap();
    assert!(bounded.truncated);
    assert_eq!(bounded.files.len(), 1000);
    let deep_path = p(&format!("/deep/{}/leaf.md", deep.join("/")));
    assert_eq!(rt.block_on(backend.read_to_string(&deep_path)).unwrap(), "leaf");
    let walk = rt.block_on(backend.walk(&p("/deep"), WalkLimits::default())).unwrap();
    assert!(walk.files.is_empty());
    assert_eq!(walk.passed_over[0].reason, skillstore_backends::PassReason::TooDeep);
    assert_eq!(walk.passed_over.len(), 1, "{:?}", walk.passed_over);
}

/// A small repository whose trees repeat one subtree a thousand times at
/// each of three levels (a billion paths, no file, or one file at the
/// bottom): the one-walk listing gives up within its bounds (an empty
/// directory sends the tree to the listing by directory; a repeated
/// subtree's entries count against the listing's budget) rather than visit
/// every path. The walk runs with a deadline so a regression fails, not hangs.
#[test]
fn a_tree_repeating_one_subtree_cannot_hold_the_deep_listing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    bare(repo);
    let empty = tree(repo, &[]);
    let x = blob(repo, b"x");
    let with_file = tree(repo, &[("100644", "blob", &x, b"x.md")]);
    let names: Vec<String> = (0..1000).map(|i| format!("d{i:04}")).collect();
    let rt = runtime();
    for (leaf, has_file) in [(empty, false), (with_file, true)] {
        let mut level = leaf;
        for _ in 0..3 {
            let entries: Vec<(&str, &str, &str, &[u8])> = names
                .iter()
                .map(|n| ("040000", "tree", level.as_str(), n.as_bytes()))
                .collect();
            level = tree(repo, &entries);
        }
        let root = tree(repo, &[("040000", "tree", &level, b"bomb")]);
        git(repo, &["update-ref", "refs/heads/main", &commit_tree(repo, &root)]);
        let backend = GitBackend::open(repo, "main", SymlinkPolicy::WithinRoot).unwrap();
        let listed = rt.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(300),
                backend.list_deep(&VPath::root(), skillstore_backends::DeepLimits::default()),
            )
            .await
            .expect("the deep listing gave up within its bounds")
        });
        if has_file {
            assert!(listed.unwrap().truncated, "a billion paths listed whole?");
        } else {
            // An empty directory: listed by directory, where a SKILL.md
            // that is one is reported as a read of it reports it.
            assert_eq!(listed.unwrap_err().kind(), ErrorKind::Unsupported);
        }
    }
}

/// A loose object whose header claims 10 bytes and whose zlib stream
/// inflates to 20 MiB: the read fails, never serving or holding the rest.
#[test]
fn a_blob_that_inflates_past_its_header_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    bare(repo);
    let fake = "ab".repeat(20);
    let object = repo.join("objects").join(&fake[..2]);
    std::fs::create_dir_all(&object).unwrap();
    let script = "import sys, zlib\nsys.stdout.buffer.write(zlib.compress(b'blob 10\\0' + b'\\0' * (20 << 20)))";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(object.join(&fake[2..]), out.stdout).unwrap();
    let root = tree(repo, &[("100644", "blob", &fake, b"claims-small")]);
    let commit = commit_tree(repo, &root);
    let backend = GitBackend::open(repo, &commit, SymlinkPolicy::WithinRoot).unwrap();
    let rt = runtime();
    let meta = rt.block_on(backend.stat(&p("/claims-small"))).unwrap();
    assert_eq!(meta.size, Some(10));
    let read = rt.block_on(backend.read(&p("/claims-small"), ReadOptions::default()));
    match read {
        Ok(blob) => assert!(blob.data.len() <= 10, "{} bytes served", blob.data.len()),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Other, "{e}"),
    }
}

mod property {
    use proptest::prelude::*;
    use skillstore_backends::FsBackend;

    use super::*;

    /// A tree: files at paths of one to three segments, any bytes.
    fn files() -> impl Strategy<Value = BTreeMap<Vec<String>, Vec<u8>>> {
        let segment = prop::sample::select(vec!["a", "b", "SKILL.md", "ü", "x y", "%2e%2e", "-n", "A"]);
        let path = prop::collection::vec(segment.prop_map(str::to_owned), 1..4);
        prop::collection::btree_map(path, prop::collection::vec(any::<u8>(), 0..300), 1..12)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// The committed tree reads as its checkout does: the same files,
        /// sizes and bytes, and versions that are the blob ids `git`
        /// computes.
        #[test]
        fn a_commit_reads_as_its_checkout(files in files()) {
            let dir = tempfile::tempdir().unwrap();
            let work = dir.path();
            let mut written = Vec::new();
            for (segments, data) in &files {
                let path = segments.join("/");
                // A file where another needs a directory is left out.
                if written.iter().any(|w: &String| path.starts_with(&format!("{w}/")) || w.starts_with(&format!("{path}/"))) {
                    continue;
                }
                let host = work.join(&path);
                std::fs::create_dir_all(host.parent().unwrap()).unwrap();
                std::fs::write(&host, data).unwrap();
                written.push(path);
            }
            git(work, &["init", "-q"]);
            git(work, &["add", "-A"]);
            git(work, &["commit", "-q", "--allow-empty", "-m", "p"]);
            let from_git = GitBackend::open(&work.join(".git"), "HEAD", SymlinkPolicy::WithinRoot).unwrap();
            let from_fs = FsBackend::new(work).unwrap().read_only();
            let rt = runtime();
            let walk = rt.block_on(from_git.walk(&VPath::root(), WalkLimits::default())).unwrap();
            let mut relatives: Vec<&str> = walk.files.iter().map(|f| f.relative.as_str()).collect();
            relatives.sort();
            let mut expected: Vec<&str> = written.iter().map(String::as_str).collect();
            expected.sort();
            prop_assert_eq!(relatives, expected);
            for path in &written {
                let vpath = p(&format!("/{path}"));
                let a = rt.block_on(from_git.read(&vpath, ReadOptions::default())).unwrap();
                let b = rt.block_on(from_fs.read(&vpath, ReadOptions::default())).unwrap();
                prop_assert_eq!(&a.data, &b.data);
                prop_assert_eq!(a.size, b.size);
                let id = git(work, &["rev-parse", &format!("HEAD:{path}")]);
                prop_assert_eq!(a.version.as_str(), id.trim());
            }
        }
    }
}

/// A `.git` directory inside a tree (in any case) is never listed, read or
/// reached through a link: synced, its config and hooks would run in the
/// synced tree the first time someone runs `git` there.
#[test]
fn a_dot_git_directory_in_the_tree_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    bare(repo);
    let skill = blob(repo, b"---\nname: evil\ndescription: Carries a .git.\n---\n");
    let config = blob(repo, b"[core]\n\tfsmonitor = touch /tmp/pwned\n");
    let dotgit = tree(repo, &[("100644", "blob", &config, b"config")]);
    let link = blob(repo, b".git/config");
    let inner = tree(
        repo,
        &[
            ("100644", "blob", &skill, b"SKILL.md"),
            ("040000", "tree", &dotgit, b".git"),
            ("040000", "tree", &dotgit, b".GIT"),
            ("120000", "blob", &link, b"config-link"),
        ],
    );
    let root = tree(repo, &[("040000", "tree", &inner, b"evil")]);
    let commit = commit_tree(repo, &root);
    let backend = GitBackend::open(repo, &commit, SymlinkPolicy::WithinRoot).unwrap();
    let rt = runtime();
    let listing = rt.block_on(backend.list_detailed(&p("/evil"))).unwrap();
    let names: Vec<&str> = listing.entries.iter().map(|e| e.name.as_str()).collect();
    assert!(!names.iter().any(|n| n.eq_ignore_ascii_case(".git")), "{names:?}");
    for path in ["/evil/.git/config", "/evil/.GIT/config", "/evil/config-link"] {
        let read = rt.block_on(backend.read(&p(path), ReadOptions::default()));
        assert!(read.is_err(), "{path} was served");
    }
}

/// A remote that accepts a connection and never speaks (a hung `git
/// daemon` or SSH server) is given up after the fetch timeout; while
/// another fetch holds a repository of the cache, a pinned commit is served
/// without waiting for it, a branch as fetched before, and a reference
/// never fetched is unavailable, never a wait.
#[test]
fn a_silent_remote_or_a_held_cache_never_hangs_an_open() {
    use skillstore_backends::{GitCache, GitRemote, GitResolution};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let cache = GitCache::new(dir.path().join("cache"))
        .unwrap()
        .with_fetch_timeout(Duration::from_secs(1));
    // Never accepted: the kernel completes each connection, nobody answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    for url in [
        format!("git://127.0.0.1:{port}/r.git"),
        format!("ssh://127.0.0.1:{port}/r.git"),
    ] {
        let remote = GitRemote::new(&url).unwrap();
        let (done, outcome) = std::sync::mpsc::channel();
        let cache = cache.clone();
        std::thread::spawn(move || {
            let opened = cache.open(&remote, Some("main"), SymlinkPolicy::WithinRoot);
            let _ = done.send(opened.map(|_| ()).map_err(|e| e.kind()));
        });
        let outcome = outcome
            .recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|_| panic!("an open of {url} must give up by its fetch timeout"));
        assert_eq!(outcome, Err(ErrorKind::Unavailable), "{url}");
    }
    drop(silent);

    let work = dir.path().join("work");
    layered_repo(&work);
    let commit = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    let remote = GitRemote::new(&format!("file://{}", work.display())).unwrap();
    let policy = SymlinkPolicy::WithinRoot;
    let (_, resolution) = cache.open(&remote, Some("main"), policy).unwrap();
    assert_eq!(resolution, GitResolution::Fetched);
    // Another process's fetch holds the repository (as a hung one would).
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(cache.repository_dir(&remote).with_extension("lock"))
        .unwrap();
    held.lock().unwrap();
    let (pinned, resolution) = cache.open(&remote, Some(&commit), policy).unwrap();
    assert_eq!((pinned.commit(), resolution), (commit.clone(), GitResolution::Pinned));
    let (branch, resolution) = cache.open(&remote, Some("main"), policy).unwrap();
    assert_eq!((branch.commit(), resolution), (commit.clone(), GitResolution::Stale));
    let never = cache.open(&remote, Some("v1"), policy).unwrap_err();
    assert_eq!(never.kind(), ErrorKind::Unavailable, "{never}");
    drop(held);
    let (tag, resolution) = cache.open(&remote, Some("v1"), policy).unwrap();
    assert_eq!((tag.commit(), resolution), (commit, GitResolution::Fetched));
}

#[test]
fn a_fetch_bringing_more_than_the_bound_is_given_up_and_kept_nowhere() {
    use skillstore_backends::{GitCache, GitRemote};
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_repo(&work);
    // 8 MiB that do not compress: the pack is about as large.
    let mut noise = vec![0u8; 8 * 1024 * 1024];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for chunk in noise.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    std::fs::write(work.join("base/pdf/assets.bin"), &noise).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "large asset"]);
    let remote = GitRemote::new(&format!("file://{}", work.display())).unwrap();
    let bounded = GitCache::new(dir.path().join("cache"))
        .unwrap()
        .with_max_fetch_bytes(256 * 1024);
    let refused = bounded
        .open(&remote, Some("main"), SymlinkPolicy::WithinRoot)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::TooLarge, "{refused}");
    assert!(refused.to_string().contains("262144 bytes"), "{refused}");
    let packs = bounded.repository_dir(&remote).join("objects/pack");
    let kept: u64 = std::fs::read_dir(&packs)
        .map(|d| d.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0);
    assert!(kept < 256 * 1024, "{kept} bytes of the refused pack were kept");
    // With room for it, the same fetch serves the asset.
    let roomy = bounded.clone().with_max_fetch_bytes(64 * 1024 * 1024);
    let (backend, _) = roomy.open(&remote, Some("main"), SymlinkPolicy::WithinRoot).unwrap();
    let read = runtime()
        .block_on(backend.read(&p("/base/pdf/assets.bin"), ReadOptions::with_limit(16 * 1024 * 1024)))
        .unwrap();
    assert_eq!(read.data.len(), noise.len());
}

#[test]
fn lock_files_a_killed_fetch_left_do_not_block_the_next_fetch() {
    use skillstore_backends::{GitCache, GitRemote, GitResolution};
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_repo(&work);
    let remote = GitRemote::new(&format!("file://{}", work.display())).unwrap();
    let cache = GitCache::new(dir.path().join("cache")).unwrap();
    let policy = SymlinkPolicy::WithinRoot;
    cache.open(&remote, Some("main"), policy).unwrap();
    // What Git leaves behind when the process fetching is killed.
    let repo = cache.repository_dir(&remote);
    std::fs::write(repo.join("shallow.lock"), "").unwrap();
    let refs = repo.join("refs/skillstore");
    std::fs::create_dir_all(&refs).unwrap();
    let stale_ref_lock = std::fs::read_dir(&refs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().with_extension("lock"))
        .next()
        .expect("the fetched reference is there");
    std::fs::write(&stale_ref_lock, "").unwrap();
    std::fs::write(work.join("base/pdf/moved.md"), "moved\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "moved"]);
    let head = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    let (backend, resolution) = cache.open(&remote, Some("main"), policy).unwrap();
    assert_eq!((backend.commit(), resolution), (head, GitResolution::Fetched));
    assert!(!repo.join("shallow.lock").exists());
    assert!(!stale_ref_lock.exists());
}

#[test]
fn the_cache_keeps_one_repository_per_identity_and_names_none() {
    use skillstore_backends::{GitCache, GitRemote};
    let dir = tempfile::tempdir().unwrap();
    let cache = GitCache::new(dir.path().join("cache")).unwrap();
    let dirs: Vec<String> = [
        "https://host.example/skills.git",
        "https://alice:s3cret@host.example/skills.git",
        "https://bob:s3cret@host.example/skills.git",
        "ssh://alice@host.example/skills.git",
        "ssh://bob@host.example/skills.git",
    ]
    .iter()
    .map(|url| {
        let dir = cache.repository_dir(&GitRemote::new(url).unwrap());
        dir.file_name().unwrap().to_string_lossy().into_owned()
    })
    .collect();
    let distinct: std::collections::BTreeSet<_> = dirs.iter().collect();
    assert_eq!(distinct.len(), dirs.len(), "{dirs:?}");
    for name in &dirs {
        for secret in ["alice", "bob", "s3cret", "host"] {
            assert!(!name.contains(secret), "{name}");
        }
    }
}

#[test]
fn a_cached_repository_that_is_a_link_is_refused_and_left_alone() {
    use skillstore_backends::{GitCache, GitRemote};
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_repo(&work);
    let remote = GitRemote::new(&format!("file://{}", work.display())).unwrap();
    let cache = GitCache::new(dir.path().join("cache")).unwrap();
    // Someone else's repository, and a link to it where the cache keeps
    // this remote's.
    let victim = dir.path().join("victim.git");
    git(dir.path(), &["init", "-q", "--bare", victim.to_str().unwrap()]);
    std::fs::write(victim.join("HEAD.lock"), "in use").unwrap();
    std::os::unix::fs::symlink(&victim, cache.repository_dir(&remote)).unwrap();
    let refused = cache
        .open(&remote, Some("main"), SymlinkPolicy::WithinRoot)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::PermissionDenied, "{refused}");
    assert!(
        victim.join("HEAD.lock").exists(),
        "a lock file behind the link was removed"
    );
    assert!(
        !victim.join("refs/skillstore").exists(),
        "a fetch went into the repository behind the link"
    );
}

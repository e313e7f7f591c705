//! A real FUSE mount of a namespace with a filesystem and an S3 layer:
//! `ls`, `cat`, `find` and `grep -r` through it equal a synced tree of the
//! same catalog; a change in S3 shows after a refresh; the read guards
//! hold; the tree is read-only and unmounts on shutdown. These tests mount
//! for real: on a machine that cannot, they fail and say why.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{FsBackend, MountTable, ObjectStoreBackend, PutMode, SkillBackend, VPath};
use skillstore::sync::{SyncOptions, sync};
use skillstore::{Catalog, LoadOptions, SharedCatalog, Source, SourceList};
use skillstore_fuse::{MountOptions, Mounted};

use crate::common::{Served, is_mounted};

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody.\n")
}

fn write(root: &Path, relative: &str, data: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

async fn put(backend: &dyn SkillBackend, path: &str, data: impl Into<bytes::Bytes>) {
    backend
        .put(&VPath::new(path).unwrap(), data.into(), PutMode::Overwrite)
        .await
        .unwrap();
}

struct Fixture {
    _sources: tempfile::TempDir,
    team: Arc<ObjectStoreBackend>,
    catalog: SharedCatalog,
}

/// A base layer on disk and a team layer in S3, with a link out of a
/// skill, a directory link, and a file over the read limit.
async fn fixture() -> Fixture {
    let sources = tempfile::tempdir().unwrap();
    let base = sources.path().join("base");
    write(&base, "pdf/SKILL.md", skill_md("pdf", "Base PDFs.").as_bytes());
    write(&base, "pdf/references/base-only.md", b"shadowed\n");
    write(&base, "csv/SKILL.md", skill_md("csv", "CSV files.").as_bytes());
    write(
        &base,
        "csv/scripts/split.py",
        b"#!/usr/bin/env python3\nprint('split')\n",
    );
    write(&base, "csv/assets/deep/er/table.bin", &(0..=255u8).collect::<Vec<u8>>());
    write(&base, "csv/big.bin", &vec![b'x'; 4096]);
    // The signature is the skill's; nothing else below `.skillstore/` is.
    write(&base, "csv/.skillstore/signature", b"a signature\n");
    write(&base, "csv/.skillstore/planted.sh", b"echo planted\n");
    // What the content rule refuses: never a file of the skill.
    write(&base, "csv/.git/config", b"[core]\n\tfsmonitor = touch planted\n");
    write(&base, "csv/.git/HEAD", b"ref: refs/heads/main\n");
    write(&base, "csv/scripts/.GIT/HEAD", b"ref: refs/heads/main\n");
    write(&base, "csv/.env", b"SECRET=1\n");
    symlink("../pdf/SKILL.md", base.join("csv/leak.md")).unwrap();
    symlink("..", base.join("csv/up")).unwrap();

    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let team = Arc::new(ObjectStoreBackend::new(server.store(&bucket), "").unwrap());
    put(&*team, "/pdf/SKILL.md", skill_md("pdf", "Team PDFs.")).await;
    put(&*team, "/pdf/references/forms.md", "# Forms\n\nFill them in.\n").await;
    put(&*team, "/pdf/scripts/fill.sh", "#!/bin/sh\necho fill\n").await;
    put(&*team, "/slides/SKILL.md", skill_md("slides", "Slides.")).await;
    put(&*team, "/slides/assets/logo.svg", vec![0u8, 1, 2, 0xff, b'\n']).await;

    let namespace = MountTable::new()
        .with(VPath::new("/base").unwrap(), Arc::new(FsBackend::new(&base).unwrap()))
        .unwrap()
        .with(VPath::new("/team").unwrap(), team.clone())
        .unwrap();
    let list = SourceList::from_sources([Source::parse("/base/").unwrap(), Source::parse("/team/").unwrap()]).unwrap();
    let options = LoadOptions {
        read_limit: 1024,
        ..LoadOptions::default()
    };
    let catalog = Catalog::load(Arc::new(namespace), list, options).await;
    assert_eq!(catalog.skills().len(), 3, "{:?}", catalog.diagnostics());
    Fixture {
        _sources: sources,
        team,
        catalog: SharedCatalog::new(catalog),
    }
}

fn mount_options() -> MountOptions {
    MountOptions {
        attr_ttl: Duration::ZERO,
        read_limit: 1024,
        refresh_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    }
}

fn sync_options() -> SyncOptions {
    SyncOptions {
        read_limit: 1024,
        ..SyncOptions::default()
    }
}

/// Mounts, or fails the test saying why this machine cannot.
fn mount(catalog: &SharedCatalog, at: &Path) -> Mounted {
    std::fs::create_dir_all(at).unwrap();
    Mounted::mount(catalog.clone(), at, mount_options())
        .unwrap_or_else(|e| panic!("this test needs a real FUSE mount and got none: {e}"))
}

/// Runs a command in `dir` and returns its standard output, failing on a
/// non-zero exit.
fn run(dir: &Path, program: &str, args: &[&str]) -> Vec<u8> {
    let output = Command::new(program).args(args).current_dir(dir).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn sorted_lines(bytes: Vec<u8>) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(&bytes).lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_cat_find_and_grep_through_the_mount_equal_the_synced_tree() {
    let f = fixture().await;
    let out = tempfile::tempdir().unwrap();
    let synced = out.path().join("synced");
    let report = sync(&f.catalog.snapshot(), &synced, &sync_options()).await.unwrap();
    assert!(!report.refused.is_empty(), "the fixture's guards were not met");
    let mounted_at = out.path().join("mnt");
    let mounted = mount(&f.catalog, &mounted_at);

    let both = |program: &str, args: &[&str]| {
        let a = tokio::task::block_in_place(|| run(&mounted_at, program, args));
        let b = tokio::task::block_in_place(|| run(&synced, program, args));
        (a, b)
    };
    let (m, s) = both("ls", &["-1", "-R"]);
    assert_eq!(String::from_utf8_lossy(&m), String::from_utf8_lossy(&s));
    let (m, s) = both("find", &[".", "-type", "f", "-printf", "%s %p\\n"]);
    assert_eq!(sorted_lines(m), sorted_lines(s));
    let (m, s) = both("find", &[".", "-type", "d"]);
    assert_eq!(sorted_lines(m), sorted_lines(s));
    let (m, s) = both("grep", &["-r", "-n", "-a", "."]);
    assert_eq!(sorted_lines(m), sorted_lines(s));

    let files = sorted_lines(tokio::task::block_in_place(|| {
        run(&synced, "find", &[".", "-type", "f"])
    }));
    assert_eq!(files.len(), 9, "{files:?}");
    assert!(
        files.iter().any(|f| f.ends_with("csv/.skillstore/signature")),
        "{files:?}"
    );
    assert!(!mounted_at.join("csv/.skillstore/planted.sh").exists());
    for refused in ["csv/.git", "csv/.git/config", "csv/scripts/.GIT/HEAD", "csv/.env"] {
        assert!(!mounted_at.join(refused).exists(), "{refused} is in the mount");
        assert!(std::fs::read(mounted_at.join(refused)).is_err(), "{refused} was read");
    }
    let listed: Vec<String> = std::fs::read_dir(mounted_at.join("csv/.skillstore"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, ["signature"]);
    for file in &files {
        let (m, s) = both("cat", &[file]);
        assert_eq!(m, s, "{file} differs");
        assert_eq!(m, std::fs::read(synced.join(file)).unwrap());
    }
    mounted.unmount().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_s3_shows_in_the_mount_after_a_refresh() {
    let f = fixture().await;
    let out = tempfile::tempdir().unwrap();
    let mounted_at = out.path().join("mnt");
    let mounted = mount(&f.catalog, &mounted_at);
    let cat = |p: &str| tokio::task::block_in_place(|| run(&mounted_at, "cat", &[p]));
    assert_eq!(cat("pdf/references/forms.md"), b"# Forms\n\nFill them in.\n");

    put(&*f.team, "/pdf/references/forms.md", "# Forms, second edition\n").await;
    put(&*f.team, "/notes/SKILL.md", skill_md("notes", "Notes.")).await;
    mounted.refresh().await;
    assert_eq!(cat("pdf/references/forms.md"), b"# Forms, second edition\n");
    let listed = tokio::task::block_in_place(|| run(&mounted_at, "ls", &["-1"]));
    assert_eq!(String::from_utf8(listed).unwrap(), "csv\nnotes\npdf\nslides\n");
    assert_eq!(cat("notes/SKILL.md"), skill_md("notes", "Notes.").as_bytes());
    mounted.unmount().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mount_applies_every_read_guard_and_is_read_only() {
    let f = fixture().await;
    let out = tempfile::tempdir().unwrap();
    let mounted_at = out.path().join("mnt");
    let mounted = mount(&f.catalog, &mounted_at);
    let at = mounted_at.clone();
    tokio::task::block_in_place(move || {
        // A link out of the skill, and a file over the read limit: not
        // shown, and not readable by name.
        for name in ["csv/leak.md", "csv/big.bin"] {
            let err = std::fs::read(at.join(name)).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{name}: {err}");
        }
        let listed = std::fs::read_dir(at.join("csv"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>();
        assert_eq!(listed.len(), 4, "{listed:?}");
        assert_eq!(
            std::fs::read(at.join("csv/scripts/split.py")).unwrap(),
            b"#!/usr/bin/env python3\nprint('split')\n"
        );
        // A directory link is never shown, so nothing loops.
        assert!(!at.join("csv/up").exists());
        // A shadowed skill's file is not in the winner's directory.
        assert!(!at.join("pdf/references/base-only.md").exists());
        // Read-only.
        let err = std::fs::write(at.join("pdf/new.md"), b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(30), "{err}");
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open(at.join("pdf/SKILL.md"))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(30), "{err}");
    });
    mounted.unmount().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_unmounts_when_shut_down() {
    let f = fixture().await;
    let out = tempfile::tempdir().unwrap();
    let mounted_at = out.path().join("mnt");
    std::fs::create_dir_all(&mounted_at).unwrap();
    let served = Served::start(f.catalog, mounted_at.clone(), mount_options()).await;
    assert!(is_mounted(&mounted_at));
    let listed = tokio::task::block_in_place(|| run(&mounted_at, "ls", &["-1"]));
    assert_eq!(String::from_utf8(listed).unwrap(), "csv\npdf\nslides\n");
    served.stop().await.unwrap();
    assert!(!is_mounted(&mounted_at));
}

/// A locked skill shows in the mount as its check saw it: a file added
/// after the check is not listed, and once a checked file is gone the
/// skill cannot be listed at all (as a sync or an archive withholds it),
/// rather than showing the rest of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_skill_shows_whole_or_not_at_all() {
    use skillstore::integrity::{Integrity, Lock};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("skills");
    write(&root, "pdf/SKILL.md", skill_md("pdf", "PDFs.").as_bytes());
    write(&root, "pdf/scripts/guard.sh", b"#!/bin/sh\nexit 1\n");
    write(&root, "pdf/references/forms.md", b"# Forms\n");
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(&root).unwrap());
    let list = || SourceList::from_sources([Source::parse("/").unwrap()]).unwrap();
    let plain = Catalog::load(Arc::clone(&fs), list(), LoadOptions::default()).await;
    let lock = Arc::new(Lock::for_catalog(&plain).await.unwrap());
    let options = LoadOptions {
        integrity: Some(Arc::new(Integrity {
            lock: Some(lock),
            ..Integrity::default()
        })),
        ..LoadOptions::default()
    };
    let catalog = SharedCatalog::new(Catalog::load(fs, list(), options).await);
    assert_eq!(catalog.snapshot().skills().len(), 1);
    let at = dir.path().join("mnt");
    let mounted = mount(&catalog, &at);

    write(&root, "pdf/a/b/added.sh", b"echo added\n");
    let found = sorted_lines(run(&at, "find", &["pdf", "-type", "f"]));
    assert_eq!(
        found,
        ["pdf/SKILL.md", "pdf/references/forms.md", "pdf/scripts/guard.sh"],
        "only the checked files are listed"
    );
    // A copy the first mount keeps, read before the loss, and a file held
    // open (not read yet) across it.
    assert!(
        String::from_utf8(run(&at, "cat", &["pdf/SKILL.md"]))
            .unwrap()
            .contains("PDFs.")
    );
    let mut held = std::fs::File::open(at.join("pdf/references/forms.md")).unwrap();
    let mut held_across_refresh = std::fs::File::open(at.join("pdf/SKILL.md")).unwrap();
    std::fs::remove_file(root.join("pdf/scripts/guard.sh")).unwrap();
    // A second mount of the same catalog lists afresh (the first keeps its
    // listings until a refresh).
    let again = dir.path().join("mnt2");
    let second = mount(&catalog, &again);
    let listing = Command::new("ls").arg(again.join("pdf")).output().unwrap();
    assert!(
        !listing.status.success(),
        "a skill that lost a checked file is listed: {}",
        String::from_utf8_lossy(&listing.stdout)
    );
    // The loss is known now: the first mount serves nothing of the skill
    // either, not its kept copy, and its root no longer lists it.
    let kept = Command::new("cat").arg(at.join("pdf/SKILL.md")).output().unwrap();
    assert!(
        !kept.status.success(),
        "a withdrawn skill's kept copy is served: {}",
        String::from_utf8_lossy(&kept.stdout)
    );
    let mut from_handle = Vec::new();
    assert!(
        std::io::Read::read_to_end(&mut held, &mut from_handle).is_err(),
        "a file opened before the skill was withdrawn is read: {}",
        String::from_utf8_lossy(&from_handle)
    );
    let root_listing = Command::new("ls").arg(&at).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&root_listing.stdout).contains("pdf"),
        "a withdrawn skill is listed: {}",
        String::from_utf8_lossy(&root_listing.stdout)
    );
    // A refresh withholds the skill: a handle opened while it was checked
    // reads nothing either, although the new catalog pins nothing of it.
    catalog.refresh().await;
    assert_eq!(catalog.snapshot().withheld().count(), 1);
    let mut after_refresh = Vec::new();
    assert!(
        std::io::Read::read_to_end(&mut held_across_refresh, &mut after_refresh).is_err(),
        "a file opened before the skill was withheld is read: {}",
        String::from_utf8_lossy(&after_refresh)
    );
    drop(second);
    drop(mounted);
}

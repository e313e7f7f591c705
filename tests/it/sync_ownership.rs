//! `sync` only ever removes what it wrote itself: planted state, a
//! directory on a reused inode, a file written or a directory swapped in
//! during a sync, a source that cannot be listed, a target that is a mount
//! point (synced, its files kept), a skill too large, a file changed in place, and a catalog that
//! has not changed. Each test is named after the rule it holds.
//!
//! Some need root (a second user's files, real bind mounts): the suite runs
//! as root, and on a machine where it does not they fail and say why.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::skill_md;
use bytes::Bytes;
use skillstore::backends::{
    Blob, Capabilities, Entry, Error, ErrorKind, FsBackend, MemoryBackend, Metadata, PutMode, ReadOptions,
    SkillBackend, VPath,
};
use skillstore::sync::{SyncOptions, sync, watch};
use skillstore::{Catalog, LoadOptions, SharedCatalog, Source, SourceList};

/// The user id files of "another user" are given (`nobody`).
const OTHER_UID: u32 = 65534;

async fn put(backend: &dyn SkillBackend, path: &str, data: impl Into<Bytes>) {
    backend
        .put(&VPath::new(path).unwrap(), data.into(), PutMode::Overwrite)
        .await
        .unwrap();
}

fn write(root: &Path, relative: &str, data: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

async fn load(backend: Arc<dyn SkillBackend>, sources: &[&str]) -> Catalog {
    let sources = SourceList::from_sources(sources.iter().map(|s| Source::parse(s).unwrap())).unwrap();
    Catalog::load(backend, sources, LoadOptions::default()).await
}

/// A memory layer `/team/` holding `pdf` with two files.
async fn team() -> (Arc<MemoryBackend>, Catalog) {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    put(&*memory, "/team/pdf/a.md", "a\n").await;
    let catalog = load(memory.clone(), &["/team/"]).await;
    (memory, catalog)
}

/// Every entry under `root` with a regular file's bytes (`None` for a
/// directory), following no link.
fn snapshot(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn visit(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                out.insert(relative, None);
                visit(root, &path, out);
            } else {
                out.insert(relative, Some(std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(root, root, &mut out);
    out
}

/// Fails the test unless it runs as root (it needs a second user's files or
/// a real mount).
fn need_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root for {what}; the suite runs as root"
    );
}

fn chown_other(path: &Path) {
    std::os::unix::fs::lchown(path, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
}

#[tokio::test]
async fn finding_1_state_planted_by_another_user_is_refused() {
    need_root("a second user's files");
    let (_memory, catalog) = team().await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    write(&target, "mine.txt", b"the user's own file\n");

    // Another user made the state directory before any sync: world-writable,
    // with a manifest named after the target's device and inode, a FIFO for
    // the lock and a build directory that is a link to a place it chose.
    let state = out.path().join(".skills.skillstore");
    std::fs::create_dir(&state).unwrap();
    let meta = std::fs::metadata(&target).unwrap();
    let forged = state.join(format!("manifest-{:x}-{:x}.json", meta.dev(), meta.ino()));
    std::fs::write(&forged, br#"{"format":1,"keep_modes":false,"skills":{}}"#).unwrap();
    let elsewhere = out.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, state.join("retired")).unwrap();
    for path in [&forged, &state.join("retired"), &elsewhere, &state] {
        chown_other(path);
    }
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = snapshot(&target);

    for _ in 0..2 {
        let err = sync(&catalog, &target, &SyncOptions::default()).await.unwrap_err();
        assert_eq!(err.kind(), "usage", "{err}");
        assert!(err.to_string().contains("state"), "{err}");
        assert!(!err.to_string().contains(out.path().to_str().unwrap()), "{err}");
        assert_eq!(snapshot(&target), before, "the user's directory changed");
    }
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "wrote where the link led"
    );

    // Owned by the caller but open to others: refused too.
    std::os::unix::fs::lchown(&state, Some(0), Some(0)).unwrap();
    let err = sync(&catalog, &target, &SyncOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), "usage", "{err}");
    assert_eq!(snapshot(&target), before);
}

#[test]
fn finding_1_a_lock_that_is_not_a_regular_file_is_refused_without_waiting() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let state = out.path().join(".skills.skillstore");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        state.join("lock"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();

    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let result = runtime.block_on(async {
            let (_memory, catalog) = team().await;
            sync(&catalog, &target, &SyncOptions::default()).await
        });
        let _ = done.send(result.map(|_| ()).map_err(|e| (e.kind().to_string(), e.to_string())));
    });
    let result = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("sync hung on a FIFO in place of its lock");
    let (kind, message) = result.expect_err("a FIFO was used as the lock");
    assert_eq!(kind, "usage", "{message}");
    assert!(message.contains("lock"), "{message}");
}

#[tokio::test]
async fn finding_2_a_directory_of_the_user_on_a_skill_directory_s_inode_is_not_the_skill() {
    let (memory, catalog) = team().await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();

    // The user empties the skill's directory and keeps a file of their own
    // in it: the same inode, none of sync's files. It is never taken for
    // the skill's.
    let ino = std::fs::metadata(target.join("pdf")).unwrap().ino();
    std::fs::remove_file(target.join("pdf/SKILL.md")).unwrap();
    std::fs::remove_file(target.join("pdf/a.md")).unwrap();
    write(&target, "pdf/mine.txt", b"mine\n");
    assert_eq!(std::fs::metadata(target.join("pdf")).unwrap().ino(), ino);
    put(&*memory, "/team/pdf/a.md", "a, second\n").await;
    for _ in 0..2 {
        let err = sync(&catalog, &target, &SyncOptions::default()).await.unwrap_err();
        assert_eq!(err.kind(), "usage", "{err}");
        assert!(err.to_string().contains("mine.txt"), "{err}");
        assert_eq!(
            snapshot(&target),
            BTreeMap::from([
                ("pdf".to_owned(), None),
                ("pdf/mine.txt".to_owned(), Some(b"mine\n".to_vec()))
            ])
        );
    }

    // The user removes it and makes a new one, which the filesystem may
    // put on the inode just freed (ext4 and tmpfs often do).
    std::fs::remove_dir_all(target.join("pdf")).unwrap();
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    let mut reused = false;
    for _ in 0..20 {
        let ino = std::fs::metadata(target.join("pdf")).unwrap().ino();
        std::fs::remove_dir_all(target.join("pdf")).unwrap();
        std::fs::create_dir(target.join("pdf")).unwrap();
        if std::fs::metadata(target.join("pdf")).unwrap().ino() == ino {
            reused = true;
            break;
        }
        std::fs::remove_dir(target.join("pdf")).unwrap();
        sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    }
    if !reused {
        // No reuse seen: a directory of the user's all the same.
        std::fs::remove_dir_all(target.join("pdf")).unwrap();
        std::fs::create_dir(target.join("pdf")).unwrap();
    }
    write(&target, "pdf/mine.txt", b"mine\n");
    for _ in 0..2 {
        let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        let refusal = report
            .refused
            .iter()
            .find(|r| r.skill == "pdf")
            .expect("pdf is reported");
        assert_eq!(refusal.kind, "name_taken");
        assert_eq!(
            snapshot(&target),
            BTreeMap::from([
                ("pdf".to_owned(), None),
                ("pdf/mine.txt".to_owned(), Some(b"mine\n".to_vec()))
            ])
        );
    }
}

/// A backend that runs a hook once, when a file whose name ends with
/// `trigger` is read, and can refuse listings under `/team/` as a source
/// the caller may not list would.
struct Hooked {
    inner: Arc<dyn SkillBackend>,
    trigger: &'static str,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    deny_lists: AtomicBool,
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooked")
    }
}

impl Hooked {
    fn new(inner: Arc<dyn SkillBackend>, trigger: &'static str) -> Arc<Hooked> {
        Arc::new(Hooked {
            inner,
            trigger,
            hook: Mutex::new(None),
            deny_lists: AtomicBool::new(false),
        })
    }

    fn arm(&self, hook: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }
}

#[async_trait::async_trait]
impl SkillBackend for Hooked {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> skillstore::backends::Result<Vec<Entry>> {
        if self.deny_lists.load(Ordering::SeqCst) && dir.as_str().starts_with("/team") {
            return Err(Error::at(ErrorKind::PermissionDenied, dir).with_detail("injected"));
        }
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> skillstore::backends::Result<Metadata> {
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> skillstore::backends::Result<Blob> {
        if path.as_str().ends_with(self.trigger) {
            let hook = self.hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        self.inner.read(path, options).await
    }
}

#[tokio::test]
async fn finding_3_a_file_written_during_a_sync_is_never_moved() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    put(&*memory, "/team/pdf/hook.md", "first\n").await;
    let hooked = Hooked::new(memory.clone(), "hook.md");
    let catalog = load(hooked.clone(), &["/team/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();

    // A file appears in the tree while the next generation is built.
    put(&*memory, "/team/pdf/hook.md", "second\n").await;
    let late = target.join("pdf/late.txt");
    let at = late.clone();
    hooked.arm(move || std::fs::write(at, b"written during the sync\n").unwrap());
    let err = sync(&catalog, &target, &SyncOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("late.txt"), "{err}");
    assert_eq!(std::fs::read(&late).unwrap(), b"written during the sync\n");
    assert_eq!(std::fs::read(target.join("pdf/hook.md")).unwrap(), b"first\n");
    // It stays where the user put it, sync after sync.
    assert!(sync(&catalog, &target, &SyncOptions::default()).await.is_err());
    assert_eq!(std::fs::read(&late).unwrap(), b"written during the sync\n");
    std::fs::remove_file(&late).unwrap();
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert_eq!(std::fs::read(target.join("pdf/hook.md")).unwrap(), b"second\n");

    // The whole directory replaced by the user's own during a sync.
    put(&*memory, "/team/pdf/hook.md", "third\n").await;
    let (dir, aside) = (target.clone(), out.path().join("aside"));
    hooked.arm(move || {
        std::fs::rename(&dir, &aside).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("mine.txt"), b"mine\n").unwrap();
    });
    let err = sync(&catalog, &target, &SyncOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), "usage", "{err}");
    assert!(err.to_string().contains("moved or replaced"), "{err}");
    assert_eq!(
        snapshot(&target),
        BTreeMap::from([("mine.txt".to_owned(), Some(b"mine\n".to_vec()))])
    );
    assert_eq!(
        std::fs::read(out.path().join("aside/pdf/hook.md")).unwrap(),
        b"second\n"
    );
    // The new directory is the user's: synced into, their file kept.
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert_eq!(std::fs::read(target.join("mine.txt")).unwrap(), b"mine\n");
    assert_eq!(std::fs::read(target.join("pdf/hook.md")).unwrap(), b"third\n");
}

#[tokio::test]
async fn finding_4_watch_keeps_the_skills_of_a_source_it_cannot_list() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/base/csv/SKILL.md", skill_md("csv", "CSV.")).await;
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    let hooked = Hooked::new(memory.clone(), "never");
    let shared = SharedCatalog::new(load(hooked.clone(), &["/base/", "/team/"]).await);
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let rounds = AtomicUsize::new(0);
    let mut results = Vec::new();
    watch(
        &shared,
        &target,
        &SyncOptions::default(),
        std::time::Duration::from_millis(1),
        std::future::pending::<()>(),
        |result| {
            // From the second round on, `/team/` cannot be listed.
            hooked.deny_lists.store(true, Ordering::SeqCst);
            results.push(result.map_err(|e| e.to_string()));
            if rounds.fetch_add(1, Ordering::SeqCst) == 3 {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        },
    )
    .await;
    assert_eq!(results[0].as_ref().unwrap().added, ["csv", "pdf"]);
    for later in &results[1..] {
        let message = later.as_ref().expect_err("a round synced a catalog missing a source");
        assert!(message.contains("team"), "{message}");
    }
    assert!(
        target.join("pdf/SKILL.md").is_file(),
        "the unlisted source's skill was removed"
    );
    assert!(target.join("csv/SKILL.md").is_file());
}

/// A real bind mount, unmounted (lazily) when dropped.
struct BindMount(PathBuf);

impl BindMount {
    fn new(from: &Path, at: &Path) -> BindMount {
        need_root("mount --bind");
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount").arg("--bind").arg(from).arg(at).status().unwrap();
        assert!(
            status.success(),
            "mount --bind failed: this test needs a real bind mount"
        );
        BindMount(at.to_path_buf())
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn finding_5_a_bind_mount_of_the_parent_sees_every_generation() {
    let (memory, catalog) = team().await;
    let out = tempfile::tempdir().unwrap();
    // The recipe: a directory sync never renames, holding the target.
    let parent = out.path().join("skillstore");
    std::fs::create_dir(&parent).unwrap();
    let target = parent.join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    let mounted = out.path().join("container");
    let _mount = BindMount::new(&parent, &mounted);
    let seen = mounted.join("skills");
    assert_eq!(snapshot(&seen), snapshot(&target));

    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut walks = 0;
            let list = || -> Vec<_> {
                std::fs::read_dir(&seen)
                    .expect("the mounted tree is always there")
                    .map(|e| e.unwrap().file_name())
                    .collect()
            };
            while !stop.load(Ordering::SeqCst) {
                // A listing whose directory was opened before two switches
                // reads a retired generation, which may be emptied by then;
                // the path opened again must show a whole one at once.
                let names = list();
                if names != ["pdf"] {
                    assert_eq!(list(), ["pdf"], "the mounted tree was empty or partial");
                }
                walks += 1;
            }
            walks
        })
    };
    for round in 0..20 {
        put(&*memory, "/team/pdf/a.md", format!("round {round}\n")).await;
        assert!(sync(&catalog, &target, &SyncOptions::default()).await.unwrap().switched);
        assert_eq!(
            std::fs::read(seen.join("pdf/a.md")).unwrap(),
            format!("round {round}\n").as_bytes(),
            "the mount does not show the new generation"
        );
    }
    stop.store(true, Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
}

#[tokio::test]
async fn finding_5_a_target_that_is_a_mount_point_is_synced_and_its_files_kept() {
    let (memory, catalog) = team().await;
    let out = tempfile::tempdir().unwrap();
    let theirs = out.path().join("theirs");
    write(&theirs, "mine.txt", b"mine\n");
    let target = out.path().join("skills");
    // A generation first, then a mount over it: the mounted directory is
    // the target now, with state of its own inside it.
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    let mount = BindMount::new(&theirs, &target);
    for round in 0..3 {
        put(&*memory, "/team/pdf/a.md", format!("round {round}\n")).await;
        let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(report.switched);
        assert_eq!(
            std::fs::read(target.join("pdf/a.md")).unwrap(),
            format!("round {round}\n").as_bytes()
        );
        assert_eq!(std::fs::read(target.join("mine.txt")).unwrap(), b"mine\n");
    }
    assert!(
        theirs.join("..skillstore").is_dir(),
        "the state is not inside the mount point"
    );
    drop(mount);
    // The directory under the mount kept its own generation.
    assert_eq!(std::fs::read(target.join("pdf/a.md")).unwrap(), b"a\n");
    assert!(!target.join("mine.txt").exists());
}

#[tokio::test]
async fn finding_6_a_skill_over_the_default_byte_bound_is_refused_and_the_others_synced() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    write(&base, "small/SKILL.md", &skill_md("small", "Small."));
    write(
        &base,
        "huge/SKILL.md",
        &skill_md("huge", "Hard links to one large file."),
    );
    // One 10 MiB file and hard links to it: 70 MiB in the tree, 10 on disk.
    write(&base, "huge/data.bin", &vec![b'x'; 10 << 20]);
    for i in 0..6 {
        std::fs::hard_link(base.join("huge/data.bin"), base.join(format!("huge/link-{i}.bin"))).unwrap();
    }
    let catalog = load(Arc::new(FsBackend::new(&base).unwrap()), &["/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert_eq!(report.added, ["small"]);
    let refusal = report
        .refused
        .iter()
        .find(|r| r.skill == "huge")
        .expect("huge is reported");
    assert!(refusal.whole_skill);
    assert_eq!(refusal.kind, "too_many_bytes");
    assert!(!target.join("huge").exists());
    assert_eq!(
        report.bytes_copied,
        std::fs::metadata(target.join("small/SKILL.md")).unwrap().len()
    );
}

#[tokio::test]
async fn finding_7_a_file_changed_in_place_with_its_mtime_restored_is_repaired() {
    let (_memory, catalog) = team().await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    let file = target.join("pdf/a.md");
    let meta = std::fs::metadata(&file).unwrap();
    std::fs::write(&file, b"b\n").unwrap();
    let mtime = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: meta.atime(),
            tv_nsec: meta.atime_nsec() as _,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: meta.mtime(),
            tv_nsec: meta.mtime_nsec() as _,
        },
    };
    rustix::fs::utimensat(rustix::fs::CWD, &file, &mtime, rustix::fs::AtFlags::empty()).unwrap();

    let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert!(report.switched, "a changed file was taken for the one written");
    assert_eq!(std::fs::read(&file).unwrap(), b"a\n");
    let again = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert!(!again.switched);
}

#[tokio::test]
async fn finding_8_an_unchanged_catalog_with_links_and_refused_files_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    write(&base, "secret/SKILL.md", &skill_md("secret", "Other."));
    write(&base, "good/SKILL.md", &skill_md("good", "Fine."));
    write(&base, "good/ok.md", b"ok\n");
    // A link inside the skill (served), one out of it (refused at read).
    symlink("ok.md", base.join("good/alias.md")).unwrap();
    symlink("../secret/SKILL.md", base.join("good/leak.md")).unwrap();
    let catalog = load(Arc::new(FsBackend::new(&base).unwrap()), &["/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let first = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert!(first.switched);
    assert_eq!(std::fs::read(target.join("good/alias.md")).unwrap(), b"ok\n");
    assert!(
        first.refused.iter().any(|r| r.kind == "symlink_escape"),
        "{:?}",
        first.refused
    );
    for _ in 0..3 {
        let again = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(!again.switched, "an unchanged catalog built a new generation");
        assert_eq!(again.refused, first.refused);
    }
    // A change behind the link is still seen.
    std::fs::write(base.join("good/ok.md"), b"ok, changed\n").unwrap();
    let changed = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert!(changed.switched);
    assert_eq!(std::fs::read(target.join("good/alias.md")).unwrap(), b"ok, changed\n");
}

/// A process spawned by another thread shares the lock's open file
/// description until its exec; the lock is released explicitly, so the
/// next sync is never told another one is running.
#[tokio::test]
async fn back_to_back_syncs_beside_a_thread_spawning_processes_never_see_a_held_lock() {
    let (memory, catalog) = team().await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let stop = Arc::new(AtomicBool::new(false));
    let spawner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut spawned = 0;
            while !stop.load(Ordering::SeqCst) {
                Command::new("true").status().unwrap();
                spawned += 1;
            }
            spawned
        })
    };
    for round in 0..100 {
        put(&*memory, "/team/pdf/a.md", format!("round {round}\n")).await;
        let report = sync(&catalog, &target, &SyncOptions::default()).await;
        assert!(report.is_ok(), "round {round}: {report:?}");
    }
    stop.store(true, Ordering::SeqCst);
    assert!(spawner.join().unwrap() > 0);
}

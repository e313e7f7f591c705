//! `sync`: the winners of a namespace materialized on disk, compared with
//! catalog reads byte for byte; incremental generations; readers that
//! never see two generations at once; guards that write nothing outside.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::common::{Watched, skill_md};
use bytes::Bytes;
use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{FsBackend, MemoryBackend, MountTable, ObjectStoreBackend, PutMode, SkillBackend, VPath};
use skillstore::sync::{SyncOptions, sync, watch};
use skillstore::{Catalog, LoadOptions, SharedCatalog, Source, SourceList};

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

/// Every regular file under `root`, by relative path; panics on anything
/// else (a link or special file in a synced tree is a defect).
fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn visit(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            let path = entry.path();
            if kind.is_dir() {
                visit(root, &path, out);
            } else {
                assert!(kind.is_file(), "not a regular file in the synced tree: {path:?}");
                let relative = path.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(root, root, &mut out);
    out
}

/// The same tree as the catalog serves it: every winner's files through
/// `list_files` and `read_file`.
async fn files_of_catalog(catalog: &Catalog) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for skill in catalog.enabled() {
        let (files, truncated) = catalog.list_files(skill.name(), 32, 10_000).await.unwrap();
        assert!(!truncated);
        for relative in files {
            let data = catalog.read_file(skill.name(), &relative).await.unwrap();
            out.insert(format!("{}/{relative}", skill.name()), data.to_vec());
        }
    }
    out
}

/// A base layer on a local directory and a team layer in S3, the team
/// overriding one skill.
async fn fs_and_s3() -> (tempfile::TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    write(&base, "pdf/SKILL.md", &skill_md("pdf", "Base PDFs."));
    write(&base, "pdf/references/base-only.md", b"only in the shadowed skill\n");
    write(&base, "csv/SKILL.md", &skill_md("csv", "CSV files."));
    write(
        &base,
        "csv/scripts/split.py",
        b"#!/usr/bin/env python3\nprint('split')\n",
    );
    write(&base, "csv/assets/deep/er/table.bin", &(0..=255u8).collect::<Vec<u8>>());

    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let team = ObjectStoreBackend::new(server.store(&bucket), "").unwrap();
    put(&team, "/pdf/SKILL.md", skill_md("pdf", "Team PDFs.")).await;
    put(&team, "/pdf/references/forms.md", "# Forms\n\nFill them in.\n").await;
    put(&team, "/pdf/scripts/fill.sh", "#!/bin/sh\necho fill\n").await;
    put(&team, "/slides/SKILL.md", skill_md("slides", "Slides.")).await;
    put(&team, "/slides/assets/logo.svg", vec![0u8, 1, 2, 0xff, b'\n']).await;

    let namespace = MountTable::new()
        .with(VPath::new("/base").unwrap(), Arc::new(FsBackend::new(&base).unwrap()))
        .unwrap()
        .with(VPath::new("/team").unwrap(), Arc::new(team))
        .unwrap();
    let catalog = load(Arc::new(namespace), &["/base/", "/team/"]).await;
    assert_eq!(catalog.skills().len(), 3, "{:?}", catalog.diagnostics());
    (dir, catalog)
}

#[tokio::test]
async fn sync_of_fs_and_s3_layers_equals_catalog_reads() {
    let (_sources, catalog) = fs_and_s3().await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();

    let synced = files_under(&target);
    assert_eq!(synced, files_of_catalog(&catalog).await);
    assert!(synced.contains_key("pdf/references/forms.md"));
    assert!(
        !synced.contains_key("pdf/references/base-only.md"),
        "a shadowed skill's file leaked in"
    );
    assert!(report.switched);
    assert_eq!(report.added, ["csv", "pdf", "slides"]);
    assert_eq!(report.files_copied, synced.len());
    assert_eq!(
        report.bytes_copied,
        synced.values().map(|d| d.len() as u64).sum::<u64>()
    );
    assert!(report.refused.is_empty(), "{:?}", report.refused);

    // No execute bits unless asked for; then only on `#!` files.
    let mode = |p: &str| std::fs::metadata(target.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("pdf/scripts/fill.sh"), 0o644);
    assert_eq!(mode("pdf"), 0o755);
    let options = SyncOptions {
        keep_modes: true,
        ..SyncOptions::default()
    };
    let report = sync(&catalog, &target, &options).await.unwrap();
    assert!(
        report.switched && report.files_linked == 0,
        "a change of modes rewrites every file"
    );
    assert_eq!(report.files_updated, ["csv/scripts/split.py", "pdf/scripts/fill.sh"]);
    assert_eq!(mode("pdf/scripts/fill.sh"), 0o755);
    assert_eq!(mode("csv/scripts/split.py"), 0o755);
    assert_eq!(mode("pdf/references/forms.md"), 0o644);
    assert_eq!(files_under(&target), synced);
}

#[tokio::test]
async fn second_sync_copies_nothing_and_then_only_the_changed_file() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    put(&*memory, "/team/pdf/references/a.md", "a, first\n").await;
    put(&*memory, "/team/pdf/references/b.md", "b\n").await;
    put(&*memory, "/team/csv/SKILL.md", skill_md("csv", "CSV.")).await;
    let watched = Watched::new(memory.clone());
    let catalog = load(watched.clone(), &["/team/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let options = SyncOptions::default();

    let first = sync(&catalog, &target, &options).await.unwrap();
    assert_eq!(first.files_copied, 4);

    watched.reset();
    let second = sync(&catalog, &target, &options).await.unwrap();
    assert_eq!(watched.reads(), 0, "an unchanged tree is read again");
    assert!(!second.switched);
    assert_eq!((second.files_copied, second.files_linked), (0, 0));
    assert!(second.added.is_empty() && second.updated.is_empty() && second.removed.is_empty());
    assert_eq!(second.skills, 2);

    put(&*memory, "/team/pdf/references/a.md", "a, second\n").await;
    watched.reset();
    let third = sync(&catalog, &target, &options).await.unwrap();
    assert_eq!(watched.reads(), 1);
    assert_eq!(third.files_copied, 1);
    assert_eq!(third.files_linked, 3);
    assert_eq!(third.files_updated, ["pdf/references/a.md"]);
    assert_eq!(third.updated, ["pdf"]);
    assert!(third.files_added.is_empty() && third.files_removed.is_empty());
    assert_eq!(
        std::fs::read(target.join("pdf/references/a.md")).unwrap(),
        b"a, second\n"
    );
    assert_eq!(files_under(&target), files_of_catalog(&catalog).await);

    // A file and a skill gone, a file added: reported, and the tree follows.
    memory
        .delete(&VPath::new("/team/pdf/references/b.md").unwrap())
        .await
        .unwrap();
    memory.delete(&VPath::new("/team/csv/SKILL.md").unwrap()).await.unwrap();
    put(&*memory, "/team/pdf/references/c.md", "c\n").await;
    let catalog = catalog.refresh().await;
    let fourth = sync(&catalog, &target, &options).await.unwrap();
    assert_eq!(fourth.removed, ["csv"]);
    assert_eq!(fourth.files_added, ["pdf/references/c.md"]);
    assert_eq!(fourth.files_removed, ["pdf/references/b.md", "csv/SKILL.md"]);
    assert_eq!(fourth.files_copied, 1);
    assert_eq!(files_under(&target), files_of_catalog(&catalog).await);
}

/// The generation a reader finds: every file must carry the same marker
/// and the file set must be that generation's whole set.
fn read_generation(dir: &rustix::fd::OwnedFd, relative: &str, out: &mut BTreeMap<String, String>) -> Option<()> {
    use rustix::fs::{Dir, FileType, Mode, OFlags, openat};
    let listing = Dir::read_from(dir).ok()?;
    for entry in listing {
        let entry = entry.ok()?;
        let name = entry.file_name().to_str().unwrap().to_owned();
        if name == "." || name == ".." {
            continue;
        }
        let below = if relative.is_empty() {
            name.clone()
        } else {
            format!("{relative}/{name}")
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if entry.file_type() == FileType::Directory {
            let sub = openat(dir, name.as_str(), flags | OFlags::DIRECTORY, Mode::empty()).ok()?;
            read_generation(&sub, &below, out)?;
        } else {
            let fd = openat(dir, name.as_str(), flags, Mode::empty()).ok()?;
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).ok()?;
            out.insert(below, text);
        }
    }
    Some(())
}

/// A reader thread walks the synced tree over and over while 100 syncs
/// switch it between two generations. Every walk that no finished sync
/// could have spoiled is checked, and the checks must include at least 20
/// walks made while a sync was running (the invariant holds during a
/// switch, not only between syncs) and walks that saw each generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_walking_during_100_syncs_never_sees_a_skill_of_two_generations() {
    let memory = Arc::new(MemoryBackend::new());
    let contents = |marker: &str| -> Vec<(String, String)> {
        let mut files = vec![
            (
                "/team/alpha/SKILL.md".to_owned(),
                format!("---\nname: alpha\ndescription: {marker}\n---\n"),
            ),
            (
                "/team/beta/SKILL.md".to_owned(),
                format!("---\nname: beta\ndescription: {marker}\n---\n"),
            ),
        ];
        for i in 0..8 {
            files.push((format!("/team/alpha/references/{i}.md"), format!("{marker}\n")));
            files.push((format!("/team/beta/nested/dir/{i}.txt"), format!("{marker}\n")));
        }
        files.push((format!("/team/alpha/only-{marker}.md"), format!("{marker}\n")));
        files
    };
    let both = [contents("A"), contents("B")];
    for (path, text) in &both[0] {
        put(&*memory, path, text.clone()).await;
    }
    let catalog = load(memory.clone(), &["/team/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();

    let expected = |marker: &str| -> BTreeMap<String, String> {
        let files = if marker.contains('A') { &both[0] } else { &both[1] };
        files
            .iter()
            .map(|(p, t)| (p.strip_prefix("/team/").unwrap().to_owned(), t.clone()))
            .collect()
    };
    let generations = [expected("A"), expected("B")];
    let stop = Arc::new(AtomicBool::new(false));
    let complete = Arc::new(AtomicUsize::new(0));
    // Syncs finished so far: a generation is deleted only by the second
    // sync after the one that retired it, so a walk during which no sync
    // finished read a generation nothing was deleting.
    let finished = Arc::new(AtomicUsize::new(0));
    // Syncs begun so far: more than finished while one runs.
    let begun = Arc::new(AtomicUsize::new(0));
    // Checked walks that began while a sync was running.
    let during = Arc::new(AtomicUsize::new(0));
    // Checked walks by the generation of alpha's SKILL.md they saw (A, B).
    let saw = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let reader = {
        let (stop, complete, target) = (stop.clone(), complete.clone(), target.clone());
        let (finished, begun, during, saw) = (finished.clone(), begun.clone(), during.clone(), saw.clone());
        let generations = generations.clone();
        std::thread::spawn(move || {
            let walk = || -> Option<BTreeMap<String, String>> {
                // The target is always there: a switch is one step.
                let root = rustix::fs::open(
                    &target,
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
                    rustix::fs::Mode::empty(),
                )
                .expect("the synced directory is always there");
                let mut seen = BTreeMap::new();
                read_generation(&root, "", &mut seen)?;
                Some(seen)
            };
            // Each skill directory is switched whole, one after the other:
            // a walk may meet one skill of each generation, never a skill
            // mixing two.
            let of_skill = |tree: &BTreeMap<String, String>, skill: &str| -> BTreeMap<String, String> {
                let below = format!("{skill}/");
                tree.iter()
                    .filter(|(p, _)| p.starts_with(&below))
                    .map(|(p, t)| (p.clone(), t.clone()))
                    .collect()
            };
            let check = |seen: BTreeMap<String, String>, quiet: bool, running: bool| {
                let whole = ["alpha", "beta"]
                    .iter()
                    .all(|skill| generations.iter().any(|g| of_skill(g, skill) == of_skill(&seen, skill)))
                    && seen.keys().all(|p| p.starts_with("alpha/") || p.starts_with("beta/"));
                if whole {
                    complete.fetch_add(1, Ordering::SeqCst);
                    if quiet && running {
                        during.fetch_add(1, Ordering::SeqCst);
                    }
                    let alpha = seen.get("alpha/SKILL.md").map(String::as_str).unwrap_or_default();
                    saw[usize::from(alpha.contains("description: B"))].fetch_add(1, Ordering::SeqCst);
                } else {
                    // Over a walk that spans two syncs, the handle may hold a
                    // retired skill directory being emptied: that proves nothing.
                    assert!(!quiet, "a reader saw a skill that is neither generation's: {seen:#?}");
                }
            };
            while !stop.load(Ordering::SeqCst) {
                let before = finished.load(Ordering::SeqCst);
                let running = begun.load(Ordering::SeqCst) > before;
                // A walk that met a file removed under it proves nothing either.
                if let Some(seen) = walk() {
                    check(seen, finished.load(Ordering::SeqCst) == before, running);
                }
            }
            check(walk().expect("the final tree is readable"), true, false);
        })
    };
    for round in 1..=100 {
        for (path, text) in &both[round % 2] {
            put(&*memory, path, text.clone()).await;
        }
        let gone = &both[1 - round % 2].last().unwrap().0;
        memory.delete(&VPath::new(gone).unwrap()).await.unwrap();
        begun.fetch_add(1, Ordering::SeqCst);
        let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(report.switched);
        finished.fetch_add(1, Ordering::SeqCst);
    }
    stop.store(true, Ordering::SeqCst);
    reader.join().expect("the reader saw each skill of one generation");
    let (complete, during) = (complete.load(Ordering::SeqCst), during.load(Ordering::SeqCst));
    let saw = [saw[0].load(Ordering::SeqCst), saw[1].load(Ordering::SeqCst)];
    eprintln!("walks checked whole: {complete}, of which during a sync: {during}; by alpha's generation: {saw:?}");
    assert!(
        during >= 20,
        "only {during} checked walks fell during a sync: the invariant was hardly checked during switches"
    );
    assert!(
        saw.iter().all(|&n| n > 0),
        "the reader did not see both generations: {saw:?}"
    );
    assert_eq!(files_under(&target).len(), generations[0].len());
    // Only the live generation, the state beside it, and nothing else.
    let mut names: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [".skills.skillstore", "skills"]);
}

/// Entries of `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn refusals_write_nothing_outside_and_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    write(&base, "secret/SKILL.md", &skill_md("secret", "Not for this tree."));
    write(&base, "good/SKILL.md", &skill_md("good", "Fine."));
    write(&base, "good/ok.md", b"ok\n");
    // A link out of the skill (still inside the source's root).
    symlink("../secret/SKILL.md", base.join("good/leak.md")).unwrap();
    // A link to a directory, and a loop: never entered.
    symlink("..", base.join("good/up")).unwrap();
    // A special file.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        base.join("good/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    // A file over the read limit.
    write(&base, "good/big.bin", &vec![b'x'; 2048]);
    // A skill whose name is not a directory name.
    write(
        &base,
        "evil/SKILL.md",
        b"---\nname: ../../escape\ndescription: Tries to leave.\n---\n",
    );
    write(&base, "evil/payload.md", b"planted\n");
    // Too many files.
    for i in 0..5 {
        write(&base, &format!("crowded/f{i}.md"), b"x\n");
    }
    write(&base, "crowded/SKILL.md", &skill_md("crowded", "Many files."));

    // A name no virtual path can hold, in an S3 layer.
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let team = server.backend(&bucket, "");
    put(&team, "/odd/SKILL.md", skill_md("odd", "An odd key beside it.")).await;
    server.put_raw(&bucket, "odd/evil\u{7f}.md", b"x\n");

    let namespace = MountTable::new()
        .with(VPath::new("/base").unwrap(), Arc::new(FsBackend::new(&base).unwrap()))
        .unwrap()
        .with(VPath::new("/team").unwrap(), Arc::new(team))
        .unwrap();
    let catalog = load(Arc::new(namespace), &["/base/", "/team/"]).await;
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name()).collect();
    assert!(names.contains(&"../../escape"), "{names:?}");

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let options = SyncOptions {
        read_limit: 1024,
        max_files_per_skill: 5,
        ..SyncOptions::default()
    };
    let report = sync(&catalog, &target, &options).await.unwrap();
    let kinds: BTreeMap<String, (String, bool)> = report
        .refused
        .iter()
        .map(|r| (r.path.clone(), (r.kind.clone(), r.whole_skill)))
        .collect();
    let kind = |path: &str| kinds.get(path).map(|(k, whole)| (k.as_str(), *whole));
    assert_eq!(
        kind("/base/good/leak.md"),
        Some(("symlink_escape", false)),
        "{kinds:#?}"
    );
    assert_eq!(kind("/base/good/up"), Some(("directory_link", false)));
    assert_eq!(kind("/base/good/fifo"), Some(("not_regular_file", false)));
    assert_eq!(kind("/base/good/big.bin"), Some(("too_large", false)));
    assert_eq!(kind("/team/odd/evil\\u{7f}.md"), Some(("invalid_name", false)));
    assert_eq!(kind("/base/evil"), Some(("invalid_name", true)));
    assert_eq!(kind("/base/crowded"), Some(("too_many_files", true)));
    assert_eq!(report.refused.len(), 7, "{:#?}", report.refused);

    // Only what passed every guard is there; nothing beside the target.
    assert_eq!(names_in(out.path()), [".skills.skillstore", "skills"]);
    assert_eq!(names_in(&target), ["good", "odd", "secret"]);
    let synced = files_under(&target);
    let paths: Vec<&str> = synced.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        ["good/SKILL.md", "good/ok.md", "odd/SKILL.md", "secret/SKILL.md"]
    );
    assert!(!dir.path().join("escape").exists() && !out.path().join("escape").exists());
}

/// A backend whose reads fail as an outage would, on demand.
#[derive(Debug)]
struct Outage {
    inner: Arc<dyn SkillBackend>,
    down: AtomicBool,
}

#[async_trait::async_trait]
impl SkillBackend for Outage {
    fn capabilities(&self) -> skillstore::backends::Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> skillstore::backends::Result<Vec<skillstore::backends::Entry>> {
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> skillstore::backends::Result<skillstore::backends::Metadata> {
        self.inner.stat(path).await
    }
    async fn read(
        &self,
        path: &VPath,
        options: skillstore::backends::ReadOptions,
    ) -> skillstore::backends::Result<skillstore::backends::Blob> {
        if self.down.load(Ordering::SeqCst) && path.as_str().ends_with("b.md") {
            return Err(
                skillstore::backends::Error::at(skillstore::backends::ErrorKind::Unavailable, path)
                    .with_detail("injected outage"),
            );
        }
        self.inner.read(path, options).await
    }
}

#[tokio::test]
async fn a_failed_sync_leaves_the_live_generation() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    put(&*memory, "/team/pdf/a.md", "a, first\n").await;
    put(&*memory, "/team/pdf/b.md", "b, first\n").await;
    let outage = Arc::new(Outage {
        inner: memory.clone(),
        down: AtomicBool::new(false),
    });
    let catalog = load(outage.clone(), &["/team/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    let before = files_under(&target);

    put(&*memory, "/team/pdf/a.md", "a, second\n").await;
    put(&*memory, "/team/pdf/b.md", "b, second\n").await;
    outage.down.store(true, Ordering::SeqCst);
    let err = sync(&catalog, &target, &SyncOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), "unavailable", "{err}");
    assert!(!err.to_string().contains(out.path().to_str().unwrap()), "{err}");
    assert_eq!(files_under(&target), before, "a failed sync changed the live tree");
    let state = names_in(&out.path().join(".skills.skillstore"));
    assert!(state.iter().all(|n| !n.starts_with("build-")), "{state:?}");

    outage.down.store(false, Ordering::SeqCst);
    let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert_eq!(report.files_updated, ["pdf/a.md", "pdf/b.md"]);
    assert_eq!(std::fs::read(target.join("pdf/b.md")).unwrap(), b"b, second\n");
}

#[tokio::test]
async fn a_directory_of_the_user_keeps_its_files_and_is_never_replaced() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    put(
        &*memory,
        "/team/home/SKILL.md",
        skill_md("home", "A name the user has."),
    )
    .await;
    let catalog = load(memory, &["/team/"]).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("home");
    write(&target, "precious.txt", b"mine\n");
    write(&target, "home/notes.md", b"my notes\n");
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&target).unwrap());
    let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert_eq!(report.added, ["pdf"]);
    assert_eq!(report.refused.len(), 1, "{:?}", report.refused);
    assert_eq!(report.refused[0].kind, "name_taken");
    assert_eq!(std::fs::read(target.join("precious.txt")).unwrap(), b"mine\n");
    assert_eq!(std::fs::read(target.join("home/notes.md")).unwrap(), b"my notes\n");
    assert!(target.join("pdf/SKILL.md").is_file());
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&target).unwrap()),
        ino,
        "the directory was replaced"
    );
    assert_eq!(names_in(&target), ["home", "pdf", "precious.txt"]);

    // An empty directory is synced into.
    let empty = out.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    sync(&catalog, &empty, &SyncOptions::default()).await.unwrap();
    assert!(empty.join("pdf/SKILL.md").is_file());

    // A link in place of the target is refused too.
    let link = out.path().join("link");
    symlink(&empty, &link).unwrap();
    assert_eq!(
        sync(&catalog, &link, &SyncOptions::default()).await.unwrap_err().kind(),
        "usage"
    );
}

#[tokio::test]
async fn watch_follows_the_sources_until_shut_down() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs.")).await;
    let shared = SharedCatalog::new(load(memory.clone(), &["/team/"]).await);
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut stop = Some(stop);
    let mut reports = Vec::new();
    let memory_for_loop = memory.clone();
    let (changed_tx, mut changed_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let changer = tokio::spawn(async move {
        changed_rx.recv().await;
        put(&*memory_for_loop, "/team/csv/SKILL.md", skill_md("csv", "CSV.")).await;
    });
    watch(
        &shared,
        &target,
        &SyncOptions::default(),
        std::time::Duration::from_millis(5),
        async {
            let _ = stopped.await;
        },
        |result| {
            let report = result.unwrap();
            if reports.is_empty() {
                changed_tx.send(()).unwrap();
            }
            if report.added.contains(&"csv".to_owned()) {
                stop.take().unwrap().send(()).unwrap();
            }
            reports.push(report);
            std::ops::ControlFlow::Continue(())
        },
    )
    .await;
    changer.await.unwrap();
    assert_eq!(reports[0].added, ["pdf"]);
    assert_eq!(reports.last().unwrap().added, ["csv"]);
    assert!(target.join("csv/SKILL.md").is_file());
}

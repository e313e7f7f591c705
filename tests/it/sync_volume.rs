//! `sync` into a volume root and under a bind mount of the target, as a
//! sidecar and an agent container use it: a target that is a mount point
//! (a tmpfs) is synced every time and keeps the files its user put there;
//! a bind mount of the target, seen from another mount namespace with the
//! host side hidden, shows every new generation, and a reader looping
//! through it during syncs never finds a file missing or a directory
//! empty; random catalogs and user files always leave exactly the winners
//! beside the user's files.
//!
//! They need root (mounts, `unshare -m`): the suite runs as root, and
//! elsewhere these tests fail and say why.

#[path = "../support/volume_reader.rs"]
mod volume_reader;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use volume_reader::{Mounted, Reader, counts};

use crate::common::skill_md;
use bytes::Bytes;
use proptest::prelude::*;
use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
use skillstore::sync::{SyncOptions, sync};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

async fn put(backend: &dyn SkillBackend, path: &str, data: impl Into<Bytes>) {
    backend
        .put(&VPath::new(path).unwrap(), data.into(), PutMode::Overwrite)
        .await
        .unwrap();
}

async fn load(backend: Arc<dyn SkillBackend>) -> Catalog {
    let sources = SourceList::from_sources([Source::parse("/team/").unwrap()]).unwrap();
    Catalog::load(backend, sources, LoadOptions::default()).await
}

/// Every entry under `root` (a directory as `None`, a file with its
/// bytes), following no link and leaving out the state (`..skillstore`).
fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn visit(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() == "..skillstore" {
                continue;
            }
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                out.insert(relative, None);
                visit(root, &path, out);
            } else {
                assert!(kind.is_file(), "not a regular file: {path:?}");
                out.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(root, root, &mut out);
    out
}

/// The names at the top of `dir`, without hidden ones.
fn visible(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_target_that_is_a_tmpfs_mount_point_syncs_every_time_and_keeps_the_user_s_files() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "PDFs, first.")).await;
    put(&*memory, "/team/pdf/forms.md", "forms, first\n").await;
    put(&*memory, "/team/csv/SKILL.md", skill_md("csv", "CSV.")).await;
    put(
        &*memory,
        "/team/taken/SKILL.md",
        skill_md("taken", "A name the user has."),
    )
    .await;
    let catalog = load(memory.clone()).await;

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    let _volume = Mounted::tmpfs(&target);
    // What the volume held before any sync: the user's.
    std::fs::write(target.join("mine.txt"), b"the user's file\n").unwrap();
    std::fs::create_dir_all(target.join("taken")).unwrap();
    std::fs::write(target.join("taken/notes.md"), b"the user's notes\n").unwrap();
    let user = tree(&target);

    let first = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    assert!(first.switched);
    assert_eq!(first.added, ["csv", "pdf"]);
    let taken = first.refused.iter().find(|r| r.skill == "taken").expect("reported");
    assert_eq!((taken.kind.as_str(), taken.whole_skill), ("name_taken", true));
    assert_eq!(
        std::fs::read(target.join("pdf/SKILL.md")).unwrap(),
        skill_md("pdf", "PDFs, first.")
    );
    // The state is inside the volume, private; nothing was written beside it.
    let state = std::fs::metadata(target.join("..skillstore")).unwrap();
    assert_eq!(state.permissions().mode() & 0o777, 0o700);
    assert!(
        std::fs::read_dir(out.path())
            .unwrap()
            .all(|e| e.unwrap().file_name() == "skills")
    );

    for round in 1..=5 {
        put(
            &*memory,
            "/team/pdf/SKILL.md",
            skill_md("pdf", &format!("PDFs, round {round}.")),
        )
        .await;
        put(&*memory, "/team/pdf/forms.md", format!("forms, round {round}\n")).await;
        if round == 2 {
            memory.delete(&VPath::new("/team/csv/SKILL.md").unwrap()).await.unwrap();
        }
        if round == 4 {
            put(&*memory, "/team/slides/SKILL.md", skill_md("slides", "Slides.")).await;
        }
        let catalog = catalog.refresh().await;
        let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(report.switched, "round {round}: {report:?}");
        assert_eq!(
            std::fs::read(target.join("pdf/SKILL.md")).unwrap(),
            skill_md("pdf", &format!("PDFs, round {round}.")),
            "round {round}"
        );
        assert_eq!(
            std::fs::read(target.join("pdf/forms.md")).unwrap(),
            format!("forms, round {round}\n").as_bytes()
        );
        let mut expected = vec!["mine.txt", "pdf", "taken"];
        if round < 2 {
            expected.push("csv");
        }
        if round >= 4 {
            expected.push("slides");
        }
        expected.sort_unstable();
        assert_eq!(visible(&target), expected, "round {round}");
        let now = tree(&target);
        for (path, bytes) in &user {
            assert_eq!(
                now.get(path),
                Some(bytes),
                "round {round}: the user's {path} changed or went"
            );
        }
        let again = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(!again.switched, "round {round}: an unchanged catalog switched");
    }
}

#[tokio::test]
async fn a_bind_mount_of_the_target_with_the_host_side_hidden_sees_every_sync() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "Round 0.")).await;
    put(&*memory, "/team/pdf/forms.md", "forms 0\n").await;
    let catalog = load(memory.clone()).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("skills");
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
    std::fs::write(target.join("mine.txt"), b"mine\n").unwrap();

    let mut reader = Reader::start(&target, &out.path().join("container"), "pdf");
    let shown = |text: Vec<u8>| String::from_utf8(text).unwrap().escape_debug().to_string();
    assert_eq!(reader.ask("read pdf"), shown(skill_md("pdf", "Round 0.")));
    for round in 1..=30 {
        put(
            &*memory,
            "/team/pdf/SKILL.md",
            skill_md("pdf", &format!("Round {round}.")),
        )
        .await;
        put(&*memory, "/team/pdf/forms.md", format!("forms {round}\n")).await;
        if round == 10 {
            put(&*memory, "/team/csv/SKILL.md", skill_md("csv", "CSV.")).await;
        }
        if round == 20 {
            memory.delete(&VPath::new("/team/csv/SKILL.md").unwrap()).await.unwrap();
        }
        let catalog = catalog.refresh().await;
        let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(report.switched, "round {round}");
        assert_eq!(
            reader.ask("read pdf"),
            shown(skill_md("pdf", &format!("Round {round}."))),
            "round {round}: the bind mount does not show the new generation"
        );
        let csv = reader.ask("read csv");
        if (10..20).contains(&round) {
            assert_eq!(csv, shown(skill_md("csv", "CSV.")), "round {round}");
        } else {
            assert_eq!(csv, "missing", "round {round}: a removed skill is still seen");
        }
    }
    let answer = reader.ask("stop");
    eprintln!("the reader through the bind mount: {answer}");
    let (reads, failures) = counts(&answer);
    assert!(reads > 0);
    assert_eq!(
        failures, 0,
        "a reader through the bind mount found a file missing or a directory empty: {answer}"
    );
    assert_eq!(std::fs::read(target.join("mine.txt")).unwrap(), b"mine\n");
}

#[tokio::test]
async fn a_tmpfs_target_bound_into_another_namespace_sees_every_sync() {
    let memory = Arc::new(MemoryBackend::new());
    put(&*memory, "/team/pdf/SKILL.md", skill_md("pdf", "Round 0.")).await;
    let catalog = load(memory.clone()).await;
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("volume");
    let _volume = Mounted::tmpfs(&target);
    std::fs::write(target.join("mine.txt"), b"mine\n").unwrap();
    sync(&catalog, &target, &SyncOptions::default()).await.unwrap();

    let mut reader = Reader::start(&target, &out.path().join("container"), "pdf");
    for round in 1..=20 {
        put(
            &*memory,
            "/team/pdf/SKILL.md",
            skill_md("pdf", &format!("Round {round}.")),
        )
        .await;
        let report = sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
        assert!(report.switched);
        let expected = String::from_utf8(skill_md("pdf", &format!("Round {round}.")))
            .unwrap()
            .escape_debug()
            .to_string();
        assert_eq!(reader.ask("read pdf"), expected, "round {round}");
    }
    let answer = reader.ask("stop");
    eprintln!("the reader through the bind mount: {answer}");
    let (reads, failures) = counts(&answer);
    assert!(reads > 0);
    assert_eq!(failures, 0, "{answer}");
    assert_eq!(std::fs::read(target.join("mine.txt")).unwrap(), b"mine\n");
}

#[derive(Debug, Clone)]
enum Step {
    /// Skill `i` is added or its files change.
    Write(usize),
    /// Skill `i` leaves the catalog.
    Remove(usize),
    /// The user puts a file (or a directory) of theirs at the top of the
    /// target, named like skill `i` or not.
    UserEntry(usize, bool, bool),
    Sync,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0usize..5).prop_map(Step::Write),
        1 => (0usize..5).prop_map(Step::Remove),
        1 => (0usize..5, any::<bool>(), any::<bool>()).prop_map(|(i, named, dir)| Step::UserEntry(i, named, dir)),
        3 => Just(Step::Sync),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// After every sync the target shows exactly the winners (less the
    /// names the user holds) beside the user's entries, each skill with
    /// its source's files, and no entry of the user's changed or went.
    #[test]
    fn the_target_shows_exactly_the_winners_and_every_user_entry(steps in proptest::collection::vec(step(), 1..16)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let memory = Arc::new(MemoryBackend::new());
            // The layer stays listable when its last skill goes.
            put(&*memory, "/team/README.md", "the team's layer\n").await;
            let mut catalog = load(memory.clone()).await;
            let out = tempfile::tempdir().unwrap();
            let target = out.path().join("skills");
            std::fs::create_dir(&target).unwrap();
            let mut source: BTreeMap<String, u32> = BTreeMap::new();
            let mut written: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let mut user: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
            let mut version = 0u32;
            for step in steps.iter().chain([&Step::Sync]) {
                match step {
                    Step::Write(i) => {
                        version += 1;
                        let name = format!("skill-{i}");
                        let files = written.entry(name.clone()).or_default();
                        for (path, text) in [
                            (format!("/team/{name}/SKILL.md"), skill_md(&name, &format!("v{version}"))),
                            (format!("/team/{name}/refs/{}.md", version % 3), format!("{version}\n").into_bytes()),
                        ] {
                            put(&*memory, &path, text).await;
                            files.insert(path);
                        }
                        source.insert(name, version);
                    }
                    Step::Remove(i) => {
                        let name = format!("skill-{i}");
                        for path in written.remove(&name).unwrap_or_default() {
                            memory.delete(&VPath::new(&path).unwrap()).await.unwrap();
                        }
                        source.remove(&name);
                    }
                    Step::UserEntry(i, named, dir) => {
                        let name = if *named { format!("skill-{i}") } else { format!("mine-{i}") };
                        if target.join(&name).exists() {
                            continue;
                        }
                        if *dir {
                            std::fs::create_dir(target.join(&name)).unwrap();
                            std::fs::write(target.join(&name).join("notes.md"), b"notes\n").unwrap();
                            user.insert(name.clone(), None);
                            user.insert(format!("{name}/notes.md"), Some(b"notes\n".to_vec()));
                        } else {
                            std::fs::write(target.join(&name), name.as_bytes()).unwrap();
                            user.insert(name.clone(), Some(name.clone().into_bytes()));
                        }
                    }
                    Step::Sync => {
                        catalog = catalog.refresh().await;
                        sync(&catalog, &target, &SyncOptions::default()).await.unwrap();
                        let now = tree(&target);
                        for (path, bytes) in &user {
                            assert_eq!(now.get(path), Some(bytes), "the user's {path} changed or went");
                        }
                        let tops: BTreeSet<&str> = user.keys().filter(|p| !p.contains('/')).map(String::as_str).collect();
                        let shown: BTreeSet<String> = visible(&target).into_iter().collect();
                        let mut expected: BTreeSet<String> = tops.iter().map(|s| (*s).to_owned()).collect();
                        expected.extend(source.keys().filter(|n| !tops.contains(n.as_str())).cloned());
                        assert_eq!(shown, expected);
                        for (name, version) in &source {
                            if tops.contains(name.as_str()) {
                                continue;
                            }
                            let text = std::fs::read(target.join(name).join("SKILL.md")).unwrap();
                            assert_eq!(text, skill_md(name, &format!("v{version}")));
                        }
                    }
                }
            }
        });
    }
}

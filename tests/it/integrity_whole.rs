//! A skill under a lock is handed on whole or not at all: when a file its
//! check digested is gone, is no longer a file, or reads at another
//! version by the time a sync writes it, the skill is withheld from that
//! sync (a `changed` refusal, named in the report's `withheld`), and a
//! copy an earlier sync wrote stays as it was.

#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;

use skillstore::backends::{FsBackend, SkillBackend};
use skillstore::integrity::{Integrity, Lock};
use skillstore::sync::{SyncOptions, SyncReport, sync};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

const GUARD: &str = "#!/bin/sh\n# guard: refuse to run on prod\nexit 1\n";

fn write_skill(root: &Path, name: &str) {
    let dir = root.join("skills").join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    let skill_md = format!("---\nname: {name}\ndescription: Skill {name}.\n---\nSteps.\n");
    std::fs::write(dir.join("SKILL.md"), skill_md).unwrap();
    std::fs::write(dir.join("scripts/guard.sh"), GUARD).unwrap();
    std::fs::write(dir.join("scripts/run.sh"), "echo run\n").unwrap();
}

fn sources() -> SourceList {
    SourceList::from_sources([Source::parse("/skills/").unwrap()]).unwrap()
}

/// The tree's lock, and a catalog checked against it.
async fn locked(fs: &Arc<dyn SkillBackend>) -> Catalog {
    let plain = Catalog::load(Arc::clone(fs), sources(), LoadOptions::default()).await;
    let lock = Lock::for_catalog(&plain).await.unwrap();
    let options = LoadOptions {
        integrity: Some(Arc::new(Integrity {
            lock: Some(Arc::new(lock)),
            ..Integrity::default()
        })),
        ..LoadOptions::default()
    };
    let catalog = Catalog::load(Arc::clone(fs), sources(), options).await;
    assert_eq!(catalog.withheld().count(), 0, "{:?}", catalog.diagnostics());
    assert!(catalog.checked_files("pdf").is_some());
    catalog
}

fn withheld_refusals(report: &SyncReport) -> Vec<(&str, &str, bool)> {
    report
        .refused
        .iter()
        .filter(|r| r.kind == "changed")
        .map(|r| (r.skill.as_str(), r.path.as_str(), r.whole_skill))
        .collect()
}

/// What the check saw of `scripts/guard.sh` is replaced, after the check,
/// by each of: nothing, a directory, a link to another file of the skill.
fn tamper(skill: &Path, how: &str) {
    let guard = skill.join("scripts/guard.sh");
    std::fs::remove_file(&guard).unwrap();
    match how {
        "deleted" => {}
        "directory" => std::fs::create_dir(&guard).unwrap(),
        "link" => std::os::unix::fs::symlink("run.sh", &guard).unwrap(),
        "changed" => std::fs::write(&guard, "echo EVIL\n").unwrap(),
        other => unreachable!("{other}"),
    }
}

#[tokio::test]
async fn a_checked_file_lost_after_the_check_withholds_the_skill_from_sync() {
    for how in ["deleted", "directory", "link", "changed"] {
        let dir = tempfile::tempdir().unwrap();
        write_skill(dir.path(), "pdf");
        write_skill(dir.path(), "xls");
        let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
        let catalog = locked(&fs).await;
        tamper(&dir.path().join("skills/pdf"), how);

        let out = dir.path().join("out");
        let report = sync(&catalog, &out, &SyncOptions::default()).await.unwrap();
        assert_eq!(report.withheld, ["pdf"], "{how}: {report:?}");
        assert_eq!(
            withheld_refusals(&report),
            [("pdf", "/skills/pdf", true)],
            "{how}: {:?}",
            report.refused
        );
        assert!(!out.join("pdf").exists(), "{how}: no part of the skill is written");
        assert_eq!(
            std::fs::read_to_string(out.join("xls/scripts/guard.sh")).unwrap(),
            GUARD,
            "{how}: the others are synced"
        );
    }
}

#[tokio::test]
async fn a_skill_withheld_from_a_sync_keeps_the_copy_synced_before() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    write_skill(dir.path(), "xls");
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let out = dir.path().join("out");
    let first = sync(&locked(&fs).await, &out, &SyncOptions::default()).await.unwrap();
    assert!(first.withheld.is_empty() && first.added == ["pdf", "xls"], "{first:?}");

    // The next load checks the skill as it is; then a file goes.
    let catalog = locked(&fs).await;
    std::fs::write(dir.path().join("skills/xls/scripts/run.sh"), "echo two\n").unwrap();
    let catalog_with_update = locked(&fs).await;
    drop(catalog);
    tamper(&dir.path().join("skills/pdf"), "deleted");
    let report = sync(&catalog_with_update, &out, &SyncOptions::default()).await.unwrap();
    assert_eq!(report.withheld, ["pdf"], "{report:?}");
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.updated, ["xls"], "{report:?}");
    assert_eq!(
        std::fs::read_to_string(out.join("pdf/scripts/guard.sh")).unwrap(),
        GUARD,
        "the copy synced before is kept whole"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("xls/scripts/run.sh")).unwrap(),
        "echo two\n"
    );
}

#[tokio::test]
async fn a_file_added_after_the_check_is_not_synced() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    // Below `.skillstore/` only the signature belongs to a skill.
    std::fs::create_dir_all(dir.path().join("skills/pdf/.skillstore")).unwrap();
    std::fs::write(dir.path().join("skills/pdf/.skillstore/notes"), "x").unwrap();
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let catalog = locked(&fs).await;
    std::fs::write(dir.path().join("skills/pdf/added.sh"), "echo EVIL\n").unwrap();
    let out = dir.path().join("out");
    let report = sync(&catalog, &out, &SyncOptions::default()).await.unwrap();
    assert!(report.withheld.is_empty(), "{report:?}");
    assert_eq!(withheld_refusals(&report), [("pdf", "/skills/pdf/added.sh", false)]);
    let foreign = report
        .refused
        .iter()
        .find(|r| r.path == "/skills/pdf/.skillstore/notes")
        .expect("the reserved file is reported");
    assert_eq!((foreign.kind.as_str(), foreign.whole_skill), ("not_found", false));
    assert!(!out.join("pdf/added.sh").exists());
    assert!(!out.join("pdf/.skillstore/notes").exists());
    assert_eq!(
        std::fs::read_to_string(out.join("pdf/scripts/guard.sh")).unwrap(),
        GUARD
    );
}

#[tokio::test]
async fn a_copy_synced_before_is_kept_only_while_the_lock_still_pins_it() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let out = dir.path().join("out");
    sync(&locked(&fs).await, &out, &SyncOptions::default()).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("pdf/scripts/run.sh")).unwrap(),
        "echo run\n"
    );

    // A new version is published and locked (a fix, say); a checked file
    // of it goes before the sync reads it.
    std::fs::write(dir.path().join("skills/pdf/scripts/run.sh"), "echo fixed\n").unwrap();
    let relocked = locked(&fs).await;
    tamper(&dir.path().join("skills/pdf"), "deleted");
    let report = sync(&relocked, &out, &SyncOptions::default()).await.unwrap();
    assert_eq!(report.withheld, ["pdf"], "{report:?}");
    assert!(
        !out.join("pdf").exists(),
        "the copy the lock no longer pins is kept: {:?}",
        std::fs::read_to_string(out.join("pdf/scripts/run.sh"))
    );
}

/// Once a read or a listing finds a checked file changed or gone, the
/// skill is withdrawn: none of its files is read any more, those still as
/// checked included, the served skills leave it out, and every refusal
/// names the file found changed or gone. The other skills are untouched.
#[tokio::test]
async fn a_skill_found_changed_is_withdrawn_whole() {
    let is_changed = |e: &skillstore::Error| skillstore::integrity::pin::is_changed(e);
    for how in ["deleted", "directory", "link", "changed"] {
        for notice in ["read", "listing"] {
            let dir = tempfile::tempdir().unwrap();
            write_skill(dir.path(), "pdf");
            write_skill(dir.path(), "xls");
            let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
            let catalog = locked(&fs).await;
            assert_eq!(catalog.read_file("pdf", "scripts/run.sh").await.unwrap(), "echo run\n");
            assert_eq!(catalog.withdrawn_count(), 0);
            tamper(&dir.path().join("skills/pdf"), how);
            // Unnoticed yet: a read of a file still as checked is served.
            assert!(!catalog.is_withdrawn("pdf"), "{how}/{notice}");

            match notice {
                "read" => {
                    let refused = catalog.read_file("pdf", "scripts/guard.sh").await.unwrap_err();
                    assert!(!refused.to_string().contains("EVIL"), "{how}: {refused}");
                }
                _ => {
                    let refused = catalog
                        .skill_files("pdf", skillstore::FileLimits::default())
                        .await
                        .unwrap_err();
                    assert!(is_changed(&refused), "{how}/{notice}: {refused}");
                }
            }
            assert!(catalog.is_withdrawn("pdf"), "{how}/{notice}");
            assert_eq!(catalog.withdrawn_count(), 1, "{how}/{notice}");
            for refused in [
                catalog.read_file("pdf", "scripts/run.sh").await.unwrap_err(),
                catalog.read_skill("pdf").await.unwrap_err(),
                catalog
                    .skill_files("pdf", skillstore::FileLimits::default())
                    .await
                    .map(|_| ())
                    .unwrap_err(),
                catalog.confirm_whole("pdf").await.unwrap_err(),
            ] {
                assert!(is_changed(&refused), "{how}/{notice}: {refused}");
                assert!(
                    refused.to_string().contains("/skills/pdf/scripts/guard.sh"),
                    "{how}/{notice}: {refused}"
                );
            }
            let served: Vec<&str> = catalog.enabled().map(|s| s.name()).collect();
            assert_eq!(served, ["xls"], "{how}/{notice}");
            assert_eq!(catalog.read_file("xls", "scripts/guard.sh").await.unwrap(), GUARD);
            catalog.confirm_whole("xls").await.unwrap();

            let out = dir.path().join("out");
            let report = sync(&catalog, &out, &SyncOptions::default()).await.unwrap();
            assert!(!out.join("pdf").exists(), "{how}/{notice}: {report:?}");
            assert!(out.join("xls/scripts/guard.sh").exists(), "{how}/{notice}");

            // A refresh checks it again and withholds it for good.
            let refreshed = catalog.refresh().await;
            assert_eq!(refreshed.withheld().count(), 1, "{how}/{notice}");
            let served: Vec<&str> = refreshed.enabled().map(|s| s.name()).collect();
            assert_eq!(served, ["xls"], "{how}/{notice}");
            assert_eq!(refreshed.withdrawn_count(), 0);
        }
    }
}

/// A skill with no check behind it is never withdrawn, whatever happens
/// to its files, and confirming it lists nothing.
#[tokio::test]
async fn a_skill_no_check_digested_is_never_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let catalog = Catalog::load(Arc::clone(&fs), sources(), LoadOptions::default()).await;
    tamper(&dir.path().join("skills/pdf"), "deleted");
    let missing = catalog.read_file("pdf", "scripts/guard.sh").await.unwrap_err();
    assert!(!skillstore::integrity::pin::is_changed(&missing), "{missing}");
    assert!(!catalog.is_withdrawn("pdf"));
    catalog.confirm_whole("pdf").await.unwrap();
    assert_eq!(catalog.read_file("pdf", "scripts/run.sh").await.unwrap(), "echo run\n");
}

/// A backend whose versions never move: every file is always version
/// `v`, as an ETag that collides (an MD5 twin) or a coarse timestamp
/// gives.
#[derive(Debug)]
struct FixedVersions(Arc<dyn SkillBackend>);

#[async_trait::async_trait]
impl SkillBackend for FixedVersions {
    fn capabilities(&self) -> skillstore::backends::Capabilities {
        self.0.capabilities()
    }
    async fn list(
        &self,
        dir: &skillstore::backends::VPath,
    ) -> skillstore::backends::Result<Vec<skillstore::backends::Entry>> {
        let mut entries = self.0.list(dir).await?;
        for entry in &mut entries {
            if entry.version.is_some() {
                entry.version = Some(skillstore::backends::Version::new("v"));
            }
        }
        Ok(entries)
    }
    async fn stat(
        &self,
        path: &skillstore::backends::VPath,
    ) -> skillstore::backends::Result<skillstore::backends::Metadata> {
        let mut meta = self.0.stat(path).await?;
        if meta.version.is_some() {
            meta.version = Some(skillstore::backends::Version::new("v"));
        }
        Ok(meta)
    }
    async fn read(
        &self,
        path: &skillstore::backends::VPath,
        options: skillstore::backends::ReadOptions,
    ) -> skillstore::backends::Result<skillstore::backends::Blob> {
        let mut blob = self.0.read(path, options).await?;
        blob.version = skillstore::backends::Version::new("v");
        Ok(blob)
    }
}

/// Bytes changed under a version that did not move are refused on a
/// whole read, withdraw the skill, and the hash kept for that version is
/// forgotten: the next refresh reads the file again and withholds the
/// skill, rather than passing it on the kept hash.
#[tokio::test]
async fn other_bytes_under_an_unchanged_version_are_caught_and_the_next_refresh_withholds_the_skill() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    write_skill(dir.path(), "xls");
    let fs: Arc<dyn SkillBackend> = Arc::new(FixedVersions(Arc::new(FsBackend::new(dir.path()).unwrap())));
    let catalog = locked(&fs).await;
    std::fs::write(
        dir.path().join("skills/pdf/scripts/guard.sh"),
        "#!/bin/sh\n# guard: EVIL!! to run on prod\nexit 0\n",
    )
    .unwrap();
    assert_eq!(
        std::fs::metadata(dir.path().join("skills/pdf/scripts/guard.sh"))
            .unwrap()
            .len(),
        GUARD.len() as u64
    );
    let refused = catalog.read_file("pdf", "scripts/guard.sh").await.unwrap_err();
    assert!(skillstore::integrity::pin::is_changed(&refused), "{refused}");
    assert!(catalog.is_withdrawn("pdf"));
    let refreshed = catalog.refresh().await;
    let served: Vec<&str> = refreshed.enabled().map(|s| s.name()).collect();
    assert_eq!(served, ["xls"], "{:?}", refreshed.diagnostics());
    assert!(
        refreshed
            .diagnostics()
            .iter()
            .any(|d| d.kind == skillstore::DiagnosticKind::LockMismatch),
        "{:?}",
        refreshed.diagnostics()
    );
}

/// A file the check left out (over the read limit, or a link) answers
/// what the guards say of it, not a change to refresh for, and withdraws
/// nothing; a read with a limit below a checked file's size withdraws
/// nothing either.
#[tokio::test]
async fn a_file_the_check_left_out_answers_what_the_guards_say() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    let big = vec![b'x'; 10 * 1024 * 1024 + 1];
    std::fs::write(dir.path().join("skills/pdf/big.bin"), big).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("skills/pdf/out")).unwrap();
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let catalog = locked(&fs).await;
    let big = catalog.read_file("pdf", "big.bin").await.unwrap_err();
    assert_eq!(big.kind().as_str(), "too_large", "{big}");
    let out = catalog.read_file("pdf", "out").await.unwrap_err();
    assert!(!skillstore::integrity::pin::is_changed(&out), "{out}");
    let small = catalog
        .read_served_path(
            &skillstore::backends::VPath::new("/skills/pdf/scripts/run.sh").unwrap(),
            1,
        )
        .await
        .unwrap_err();
    assert_eq!(small.kind().as_str(), "too_large", "{small}");
    assert!(!catalog.is_withdrawn("pdf"));
    assert_eq!(catalog.read_file("pdf", "scripts/run.sh").await.unwrap(), "echo run\n");
}

/// A checked file grown past the read limit is a change: a read under the
/// catalog's limit finds it too large and withdraws the skill.
#[tokio::test]
async fn a_checked_file_grown_past_the_read_limit_withdraws_its_skill() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf");
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(dir.path()).unwrap());
    let catalog = locked(&fs).await;
    std::fs::write(
        dir.path().join("skills/pdf/scripts/run.sh"),
        vec![b'x'; 10 * 1024 * 1024 + 1],
    )
    .unwrap();
    let grown = catalog.read_file("pdf", "scripts/run.sh").await.unwrap_err();
    assert_eq!(grown.kind().as_str(), "too_large", "{grown}");
    assert!(catalog.is_withdrawn("pdf"));
    let rest = catalog.read_skill("pdf").await.unwrap_err();
    assert!(skillstore::integrity::pin::is_changed(&rest), "{rest}");
}

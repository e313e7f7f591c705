//! The invariant of a checked skill, under any sequence of changes behind
//! the catalog's back and reads, listings and confirmations through it: a
//! read returns only the bytes the check digested for that file, and once
//! any read or listing has refused the skill as changed or found a checked
//! file gone, no read of any of its files succeeds again. A skill no
//! change touched is served throughout.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
use skillstore::integrity::{Integrity, Lock};
use skillstore::{Catalog, FileLimits, LoadOptions, Source, SourceList};

const FILES: [&str; 4] = ["SKILL.md", "scripts/run.sh", "scripts/guard.sh", "references/a.md"];

#[derive(Debug, Clone)]
enum Step {
    /// Behind the catalog's back: file `i` rewritten.
    Rewrite(usize),
    /// Behind the catalog's back: file `i` deleted.
    Delete(usize),
    /// Behind the catalog's back: a new file added.
    Add,
    /// Through the catalog: a read of file `i`.
    Read(usize),
    /// Through the catalog: the skill's files listed.
    List,
    /// Through the catalog: the skill confirmed whole.
    Confirm,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..FILES.len()).prop_map(Step::Rewrite),
        (0..FILES.len()).prop_map(Step::Delete),
        Just(Step::Add),
        (0..FILES.len()).prop_map(Step::Read),
        (0..FILES.len()).prop_map(Step::Read),
        Just(Step::List),
        Just(Step::Confirm),
    ]
}

fn path(name: &str, relative: &str) -> VPath {
    VPath::new(format!("/skills/{name}/{relative}")).unwrap()
}

fn original(name: &str, relative: &str) -> Bytes {
    if relative == "SKILL.md" {
        Bytes::from(format!("---\nname: {name}\ndescription: Skill {name}.\n---\nSteps.\n"))
    } else {
        Bytes::from(format!("{name} {relative}\n"))
    }
}

async fn put(backend: &MemoryBackend, p: &VPath, data: Bytes) {
    backend.put(p, data, PutMode::Overwrite).await.unwrap();
}

async fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let memory = MemoryBackend::new();
    for name in ["pdf", "xls"] {
        for relative in FILES {
            put(&memory, &path(name, relative), original(name, relative)).await;
        }
    }
    let backend: Arc<dyn SkillBackend> = Arc::new(memory.clone());
    let sources = || SourceList::from_sources([Source::parse("/skills/").unwrap()]).unwrap();
    let plain = Catalog::load(Arc::clone(&backend), sources(), LoadOptions::default()).await;
    let lock = Lock::for_catalog(&plain).await.unwrap();
    let options = LoadOptions {
        integrity: Some(Arc::new(Integrity {
            lock: Some(Arc::new(lock)),
            ..Integrity::default()
        })),
        ..LoadOptions::default()
    };
    let catalog = Catalog::load(Arc::clone(&backend), sources(), options).await;
    prop_assert_eq!(catalog.enabled().count(), 2);

    let checked: BTreeMap<&str, Bytes> = FILES.iter().map(|r| (*r, original("pdf", r))).collect();
    let mut touched = false;
    let mut refused_as_changed = false;
    let mut added = 0;
    for step in steps {
        match step {
            Step::Rewrite(i) => {
                put(&memory, &path("pdf", FILES[i]), Bytes::from(format!("EVIL {i}\n"))).await;
                touched = true;
            }
            Step::Delete(i) => {
                let _ = memory.delete(&path("pdf", FILES[i])).await;
                touched = true;
            }
            Step::Add => {
                added += 1;
                put(
                    &memory,
                    &path("pdf", &format!("added{added}.sh")),
                    Bytes::from("EVIL\n"),
                )
                .await;
            }
            Step::Read(i) => match catalog.read_file("pdf", FILES[i]).await {
                Ok(bytes) => {
                    prop_assert!(!refused_as_changed, "read {} after the skill was refused", FILES[i]);
                    prop_assert_eq!(&bytes, &checked[FILES[i]], "{}", FILES[i]);
                }
                Err(e) => {
                    prop_assert!(touched, "{} refused with nothing changed: {e}", FILES[i]);
                    refused_as_changed = true;
                }
            },
            Step::List => match catalog.skill_files("pdf", FileLimits::default()).await {
                Ok(listed) => {
                    prop_assert!(!refused_as_changed, "listed after the skill was refused");
                    for file in &listed.files {
                        prop_assert!(checked.contains_key(file.relative.as_str()), "{}", file.relative);
                    }
                }
                Err(e) => {
                    prop_assert!(touched, "listing refused with nothing changed: {e}");
                    refused_as_changed = true;
                }
            },
            Step::Confirm => match catalog.confirm_whole("pdf").await {
                Ok(()) => prop_assert!(!refused_as_changed, "confirmed after the skill was refused"),
                Err(e) => {
                    prop_assert!(touched, "confirmation refused with nothing changed: {e}");
                    refused_as_changed = true;
                }
            },
        }
        prop_assert_eq!(catalog.is_withdrawn("pdf"), refused_as_changed);
        // The untouched skill is served throughout.
        prop_assert_eq!(
            catalog.read_file("xls", "scripts/guard.sh").await.unwrap(),
            original("xls", "scripts/guard.sh")
        );
    }
    let served: Vec<&str> = catalog.enabled().map(|s| s.name()).collect();
    prop_assert_eq!(
        served,
        if refused_as_changed {
            vec!["xls"]
        } else {
            vec!["pdf", "xls"]
        }
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_checked_skill_serves_checked_bytes_or_nothing(steps in proptest::collection::vec(step(), 1..16)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(run(steps))?;
    }
}

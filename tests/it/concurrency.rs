//! 64 catalog loads and refreshes at once while skills change underneath:
//! no panic, no deadlock, and every skill whole from one version of its file.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::common;
use crate::common::Kind;
use skillstore::backends::{PutMode, SkillBackend, VPath};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

const SKILLS: usize = 12;

fn sources() -> SourceList {
    SourceList::from_sources([Source::parse("/base").unwrap(), Source::parse("/team").unwrap()]).unwrap()
}

/// A SKILL.md whose frontmatter and body all carry generation `g`; a read
/// that mixed two versions would disagree with itself.
fn version(name: &str, g: u64) -> String {
    let filler = "x".repeat((g as usize * 37) % 3000);
    format!(
        "---\nname: {name}\ndescription: generation {g} of {name}\nmetadata:\n  generation: \"{g}\"\n---\n\n{filler}\ngeneration {g}\n"
    )
}

fn generation_of(text: &str) -> Option<u64> {
    text.trim_end().rsplit("generation ").next()?.parse().ok()
}

async fn many_loads_and_refreshes_while_skills_change(kind: Kind) {
    // Changes made underneath before the readers may stop (fewer over HTTP,
    // where each is a request competing with 64 readers).
    let min_writes: u64 = if matches!(kind, Kind::S3 | Kind::Moto) { 40 } else { 200 };
    let mut files = Vec::new();
    for layer in ["base", "team"] {
        for i in 0..SKILLS {
            files.push((
                format!("/{layer}/skill-{i}/SKILL.md"),
                version(&format!("skill-{i}"), 0),
            ));
        }
    }
    let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(p, t)| (p.as_str(), t.as_bytes())).collect();
    let tree = common::tree(kind, &borrowed).await;
    let backend = Arc::clone(&tree.backend);
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));

    let writer = {
        let backend = Arc::clone(&backend);
        let stop = Arc::clone(&stop);
        let writes = Arc::clone(&writes);
        tokio::spawn(async move {
            let mut g = 1;
            while !stop.load(Ordering::Relaxed) {
                let layer = if g % 2 == 0 { "base" } else { "team" };
                let name = format!("skill-{}", g as usize % SKILLS);
                let path = VPath::new(format!("/{layer}/{name}/SKILL.md")).unwrap();
                if g % 7 == 0 {
                    let _ = backend.delete(&path).await;
                } else {
                    backend
                        .put(&path, version(&name, g).into(), PutMode::Overwrite)
                        .await
                        .unwrap();
                }
                g += 1;
                writes.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
            g
        })
    };

    let readers: Vec<_> = (0..64)
        .map(|_| {
            let backend = Arc::clone(&backend);
            let writes = Arc::clone(&writes);
            tokio::spawn(async move {
                let min_writes = min_writes;
                let mut checked = 0;
                let mut catalog = Catalog::load(backend, sources(), LoadOptions::default()).await;
                // At least four rounds, and on until the skills have changed
                // a good many times underneath.
                let mut round = 0;
                while round < 4 || (writes.load(Ordering::Relaxed) < min_writes && round < 10_000) {
                    round += 1;
                    for skill in catalog.skills() {
                        let g = skill
                            .metadata
                            .metadata
                            .get("generation")
                            .expect("every version has one");
                        assert_eq!(
                            skill.metadata.description,
                            format!("generation {g} of {}", skill.name())
                        );
                        if round % 2 == 1
                            && let Ok(body) = catalog.read_skill(skill.name()).await
                        {
                            let text = String::from_utf8(body.to_vec()).unwrap();
                            let in_frontmatter = text.split("generation: \"").nth(1).and_then(|t| t.split('"').next());
                            assert_eq!(
                                in_frontmatter.and_then(|t| t.parse().ok()),
                                generation_of(&text),
                                "a torn read"
                            );
                        }
                        checked += 1;
                    }
                    catalog = catalog.refresh().await;
                }
                checked
            })
        })
        .collect();

    let all = async {
        let mut checked = 0;
        for reader in readers {
            checked += reader.await.expect("no reader panicked");
        }
        checked
    };
    let checked = tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("64 loads and refreshes finish: no deadlock");
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.unwrap();
    assert!(checked > 64 * SKILLS, "{checked} skills checked");
    assert!(written > min_writes, "skills changed underneath only {written} times");
}

macro_rules! on_backends {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::Memory).await } )* }
        mod fs { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::Fs).await } )* }
        mod s3 { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::S3).await } )* }
        mod moto { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] #[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"] async fn $case() { super::$case(super::Kind::Moto).await } )* }
    };
}

on_backends!(many_loads_and_refreshes_while_skills_change);

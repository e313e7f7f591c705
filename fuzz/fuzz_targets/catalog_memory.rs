//! A catalog loaded from files the fuzzer writes: no panic, every skill
//! comes from a source directory and a skill file (`SKILL.md`, or the
//! lowercase `skill.md` a catalog also takes), and every level-2/3 read
//! stays inside the skill's own directory.
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
use skillstore::skill::is_skill_file_name;
use skillstore::{Catalog, LoadOptions, Source, SourceList};

#[derive(Debug, Arbitrary)]
struct Input {
    files: Vec<(u8, String, Vec<u8>)>,
    relative_reads: Vec<String>,
}

const SOURCES: [&str; 3] = ["/base", "/user", "/team"];

fuzz_target!(|input: Input| {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let backend = MemoryBackend::new();
        for (source, relative, data) in input.files.iter().take(64) {
            let root = SOURCES[*source as usize % SOURCES.len()];
            let Ok(path) = VPath::new(root).unwrap().join(relative) else {
                continue;
            };
            let _ = backend.put(&path, data.clone().into(), PutMode::Overwrite).await;
        }
        let sources = SourceList::from_sources(SOURCES.map(|s| Source::parse(s).unwrap())).unwrap();
        let catalog = Catalog::load(Arc::new(backend), sources, LoadOptions::default()).await;
        for skill in catalog.skills() {
            assert!(SOURCES.iter().any(|s| skill.path.starts_with(&VPath::new(s).unwrap())));
            assert!(skill.path.file_name().is_some_and(is_skill_file_name), "{}", skill.path);
            assert!(catalog.read_skill(skill.name()).await.is_ok());
            for relative in input.relative_reads.iter().take(8) {
                if let Err(skillstore::Error::Backend(e)) = catalog.read_file(skill.name(), relative).await
                    && let Some(path) = e.path()
                {
                    assert!(path.starts_with(&skill.dir()), "{path} outside {}", skill.dir());
                }
            }
        }
        let again = catalog.refresh().await;
        assert_eq!(again.skills().len(), catalog.skills().len());
    });
});

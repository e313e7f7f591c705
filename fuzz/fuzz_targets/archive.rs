//! The archive reader never panics, and what it accepts is a skill: one
//! directory name, distinct safe paths in order, a SKILL.md, within limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillstore::backends::{VPath, is_valid_segment};
use skillstore::{ArchiveLimits, SkillArchive};

fuzz_target!(|data: &[u8]| {
    let limits = ArchiveLimits::default();
    let Ok(archive) = SkillArchive::read(data, &limits) else {
        return;
    };
    assert!(is_valid_segment(archive.name()));
    assert!(!archive.skill_md().is_empty());
    let root = VPath::root().join(archive.name()).unwrap();
    for pair in archive.files().windows(2) {
        assert!(pair[0].path < pair[1].path);
    }
    for file in archive.files() {
        assert!(root.join(&file.path).is_ok(), "{:?}", file.path);
        assert!(file.data.len() as u64 <= limits.max_file_bytes);
    }
    assert!(archive.total_bytes() <= limits.max_total_bytes);
});

//! SKILL.md parsing never panics, and strict validity implies lenient
//! validity with the same metadata.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillstore::{Strictness, parse_skill_md};

fuzz_target!(|data: &[u8]| {
    let lenient = parse_skill_md(data, Some("fuzz-skill"), Strictness::Lenient);
    let strict = parse_skill_md(data, Some("fuzz-skill"), Strictness::Strict);
    if strict.is_valid() {
        assert!(lenient.is_valid());
        assert_eq!(strict.skill, lenient.skill);
    }
    if let Some(skill) = &lenient.skill {
        assert!(!skill.name.is_empty());
    }
});

//! The fast YAML path against serde_yaml: on any text, parsing a
//! frontmatter gives what serde_yaml alone gives (the same metadata and
//! problems), so the fast path can never accept what serde_yaml refuses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillstore::{Strictness, parse_frontmatter};

fuzz_target!(|data: &[u8]| {
    let Ok(yaml) = std::str::from_utf8(data) else { return };
    let both = parse_frontmatter(yaml, Some("fuzz-skill"), Strictness::Lenient);
    let reference = skillstore::parse_frontmatter_reference(yaml, Some("fuzz-skill"), Strictness::Lenient);
    assert_eq!(both, reference, "{yaml:?}");
});

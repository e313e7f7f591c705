//! Any string either fails `VPath::new` or gives a path that cannot climb:
//! absolute, no `.`/`..`/empty segments, and stable when parsed again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillstore::backends::{VPath, is_valid_segment};

fuzz_target!(|input: (&str, &str)| {
    let (text, relative) = input;
    if let Ok(path) = VPath::new(text) {
        assert!(path.as_str().starts_with('/'));
        for segment in path.segments() {
            assert!(is_valid_segment(segment), "{segment:?}");
            assert!(segment != "." && segment != "..");
        }
        assert_eq!(VPath::new(path.as_str()).unwrap(), path);
        if let Ok(joined) = path.join(relative) {
            assert!(joined.starts_with(&path), "{joined} escaped {path}");
            assert_eq!(
                joined.strip_prefix(&path).map(|r| r.rebase(&path).unwrap()),
                Some(joined.clone())
            );
        }
    }
});

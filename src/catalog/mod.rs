//! The catalog: skills from an ordered source list, merged, with
//! provenance and diagnostics.
//!
//! Loading lists every source, then reads the head of every candidate
//! SKILL.md concurrently (bounded), parses the frontmatter, and merges:
//! the key is the frontmatter name; a later source wins; a winner keeps the
//! position where its name first appeared; within a source, directories are
//! taken in ascending order of `"<name>/"`. That is the order LangChain
//! deepagents produces, so on a spec-valid tree both give the same list.

mod check;
mod digests;
mod listing;
mod load;
mod merge;
mod parse;
mod read;
mod report;
mod state;
mod types;

pub use report::{REPORT_LIMITS, SkillReport};
pub(crate) use state::SourceState;
pub(crate) use types::SharedStates;
pub use types::{
    Catalog, LoadOptions, Passed, Shadowed, SharedSources, Skill, SkillFilter, SkillRecord, Verdict, WinnerCheck,
};

pub use crate::skill::SKILL_FILE;

#[cfg(test)]
mod tests {
    use super::listing::slash_order;

    #[test]
    fn directories_sort_as_their_paths_with_a_slash() {
        let mut names = vec!["foo", "foo-kit", "fo", "foo.d", "foo0", "a", "", "Foo", "été", "e"];
        names.sort_by(|a, b| slash_order(a, b));
        let mut by_path: Vec<String> = names.iter().map(|n| format!("{n}/")).collect();
        by_path.sort();
        let expected: Vec<&str> = by_path.iter().map(|p| p.strip_suffix('/').unwrap()).collect();
        assert_eq!(names, expected);
        assert_eq!(names[..3], ["", "Foo", "a"]);
        assert!(names.iter().position(|n| *n == "foo-kit") < names.iter().position(|n| *n == "foo"));
        assert_eq!(slash_order("same", "same"), std::cmp::Ordering::Equal);
    }
}

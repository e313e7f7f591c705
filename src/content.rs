//! What a skill may contain: the one rule every source kind and every
//! front end applies to the paths inside a skill's directory.
//!
//! A path relative to a skill's directory is part of the skill unless
//! [`refusal`] names a reason:
//!
//! - **`.git`** ([`ContentRefusal::GitEntry`]): a segment `.git` in any
//!   case (or `git~1`, its short name on Windows volumes), anywhere. Copied
//!   out by `sync`, a mount or an install, such a directory is a working
//!   repository whose `config` and hooks run commands (`core.fsmonitor`)
//!   for whoever runs `git` there. A file named `HEAD` (in any case) is
//!   refused alike: beside `objects/` and `refs/` it makes its directory a
//!   bare repository, whose `config` Git honours just as well.
//! - **hidden paths** ([`ContentRefusal::Hidden`]): any other segment that
//!   starts with `.` (`.env`, `scripts/.cache/x`, `.github/`). Tools keep
//!   their own state under such names; a skill's files are what its body
//!   can point an agent to, and nothing an agent is pointed to is hidden.
//!   The one exception is the skill's signature, `.skillstore/signature`.
//! - **reserved** ([`ContentRefusal::Reserved`]): anything else below
//!   `.skillstore/`, skillstore's own directory.
//!
//! A refused path is never listed, read, digested, synced, mounted, packed
//! or served; an archive or install holding one is refused whole; a
//! directory source's listing leaves it out with a diagnostic naming its
//! path and the refusal's kind.

use crate::integrity::signature::SIGNATURE_FILE;

/// Skillstore's own directory inside a skill, which holds the signature.
pub const RESERVED_DIR: &str = ".skillstore";

/// Why a path inside a skill is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ContentRefusal {
    /// A `.git` or `HEAD` segment, in any case (`git_entry`).
    GitEntry,
    /// A segment starting with `.` other than the signature's
    /// (`hidden_path`).
    Hidden,
    /// Below `.skillstore/` and not the signature (`reserved`).
    Reserved,
}

impl ContentRefusal {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentRefusal::GitEntry => "git_entry",
            ContentRefusal::Hidden => "hidden_path",
            ContentRefusal::Reserved => "reserved",
        }
    }

    /// A sentence for a person, naming no path.
    pub fn describe(self) -> &'static str {
        match self {
            ContentRefusal::GitEntry => {
                "a `.git` entry, or a `HEAD` that would make a directory a Git repository, is never part of a skill"
            }
            ContentRefusal::Hidden => {
                "a hidden name (starting with `.`) is not part of a skill; only `.skillstore/signature` is"
            }
            ContentRefusal::Reserved => "below `.skillstore/` only `.skillstore/signature` belongs to a skill",
        }
    }
}

/// True for a segment that makes a Git repository: `.git` in any case,
/// `git~1` (its 8.3 short name), or `HEAD` in any case (with `objects/`
/// and `refs/` beside it, a bare repository).
pub fn is_git_segment(segment: &str) -> bool {
    segment.eq_ignore_ascii_case(".git")
        || segment.eq_ignore_ascii_case("git~1")
        || segment.eq_ignore_ascii_case("HEAD")
}

/// Why `relative`, a `/`-separated path relative to a skill's directory,
/// is not part of the skill, or `None` when it is. The empty path (the
/// directory itself) is part of it.
pub fn refusal(relative: &str) -> Option<ContentRefusal> {
    if relative.is_empty() {
        return None;
    }
    let mut segments = relative.split('/');
    if segments.clone().any(is_git_segment) {
        return Some(ContentRefusal::GitEntry);
    }
    if relative == SIGNATURE_FILE {
        return None;
    }
    let first = segments.next().unwrap_or_default();
    if first == RESERVED_DIR {
        return Some(ContentRefusal::Reserved);
    }
    let hidden = std::iter::once(first).chain(segments).any(|s| s.starts_with('.'));
    hidden.then_some(ContentRefusal::Hidden)
}

/// True when a directory named `name` inside a skill holds nothing that is
/// part of the skill, so a walk need not enter it: every hidden directory
/// but `.skillstore` (which holds the signature).
pub fn skips_directory(name: &str) -> bool {
    name.starts_with('.') && name != RESERVED_DIR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_names_each_refusal() {
        for (path, expected) in [
            ("SKILL.md", None),
            ("scripts/run.py", None),
            ("a.b/c..d", None),
            (".skillstore/signature", None),
            (".git", Some(ContentRefusal::GitEntry)),
            (".GiT/config", Some(ContentRefusal::GitEntry)),
            ("scripts/.git/hooks/pre-commit", Some(ContentRefusal::GitEntry)),
            ("GIT~1/config", Some(ContentRefusal::GitEntry)),
            ("HEAD", Some(ContentRefusal::GitEntry)),
            ("assets/repo/head", Some(ContentRefusal::GitEntry)),
            ("refs/heads/main", None),
            ("objects/header.txt", None),
            (".skillstore/.git", Some(ContentRefusal::GitEntry)),
            (".env", Some(ContentRefusal::Hidden)),
            ("scripts/.cache/x", Some(ContentRefusal::Hidden)),
            (".gitignore", Some(ContentRefusal::Hidden)),
            (".skillstore/history", Some(ContentRefusal::Reserved)),
            (".skillstore", Some(ContentRefusal::Reserved)),
            ("refs/.skillstore/signature", Some(ContentRefusal::Hidden)),
        ] {
            assert_eq!(refusal(path), expected, "{path}");
        }
    }

    #[test]
    fn only_hidden_directories_other_than_the_reserved_one_are_skipped() {
        assert!(skips_directory(".git"));
        assert!(skips_directory(".cache"));
        assert!(!skips_directory(".skillstore"));
        assert!(!skips_directory("scripts"));
    }
}

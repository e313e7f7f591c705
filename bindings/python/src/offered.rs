//! What the package offers of a namespace: every listing, search and path
//! read leaves out what the library's content rule says no skill offers
//! ([`skillstore::skill_files::is_foreign`]).

use skillstore::SourceList;
use skillstore::integrity::signature::SIGNATURE_FILE;
use skillstore::skill_files::is_foreign;
use skillstore_backends::{ErrorKind, ReadOptions, VPath};

/// True when `path` is never named, searched or read by the package's
/// listings (`ls`, `walk`, `stat`, `grep`) and path reads: the library's
/// rule ([`skillstore::skill_files::is_foreign`]) says it is no file of a
/// skill.
///
/// A path below a source's directory is judged as the rule is written,
/// relative to its skill's directory (`SOURCE/NAME/rest` by `rest`), and
/// the skill directory's own name by itself (so `SOURCE/.git` is judged
/// like a `.git` in a skill); any other path is judged by its whole path
/// below the root. Of several sources holding a path, the deepest decides.
/// A directory (`dir`) holding the skill's signature (`.skillstore`) is
/// not withheld itself: the rule then judges each entry in it.
pub fn is_withheld(sources: &SourceList, path: &VPath, dir: bool) -> bool {
    let segments: Vec<&str> = path.segments().collect();
    let base = sources
        .iter()
        .map(|s| s.path())
        .filter(|dir| path.starts_with(dir))
        .map(|dir| dir.segments().count())
        .filter(|&depth| depth < segments.len())
        .max();
    let Some(depth) = base else {
        return is_foreign(path.relative_str());
    };
    if is_foreign(segments[depth]) {
        return true;
    }
    let rest = segments[depth + 1..].join("/");
    if rest.is_empty() || (dir && holds_signature(&rest)) {
        return false;
    }
    is_foreign(&rest)
}

/// True when `relative` is a directory the skill's signature lies in.
fn holds_signature(relative: &str) -> bool {
    SIGNATURE_FILE
        .strip_prefix(relative)
        .is_some_and(|below| below.starts_with('/'))
}

/// The error a withheld path is answered with: not found, as if nothing
/// were there.
pub fn withheld_error(path: &VPath) -> skillstore_backends::Error {
    skillstore_backends::Error::at(ErrorKind::NotFound, path).with_public_detail("not a file any skill offers")
}

/// `options` for a read of `path` as a skill serves it: a path inside a
/// skill's directory (below a source, one level down) is read confined to
/// that directory, so no link leads out of the skill or to a hidden name
/// (`notes.txt -> .env`); any other path is read as asked.
pub fn confined(sources: &SourceList, path: &VPath, options: ReadOptions) -> ReadOptions {
    let segments = path.segments().count();
    sources
        .iter()
        .map(|s| s.path())
        .filter(|dir| path.starts_with(dir))
        .map(|dir| dir.segments().count() + 1)
        .filter(|&skill_depth| skill_depth < segments)
        .max()
        .map_or(options, |skill_depth| options.confined(skill_depth))
}

/// Reads `paths`, each as [`confined`] says, concurrently; results in
/// order.
pub async fn read_confined(
    backend: &dyn skillstore_backends::SkillBackend,
    sources: &SourceList,
    paths: &[VPath],
    options: ReadOptions,
) -> Vec<skillstore_backends::Result<skillstore_backends::Blob>> {
    futures::future::join_all(paths.iter().map(|p| backend.read(p, confined(sources, p, options)))).await
}

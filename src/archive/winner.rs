//! A catalog's winner as an archive: what `skill override` copies into a
//! writable source, and what `install` takes from any location.

use crate::archive::{ArchiveFile, ArchiveLimits, SkillArchive, pack_rooted};
use crate::catalog::Catalog;
use crate::diagnostic::Diagnostic;
use crate::skill_files::FileLimits;

use super::ArchiveError;

/// What [`winner_archive`] found of a skill.
#[derive(Debug)]
pub enum WinnerArchive {
    /// Every file a confined read of the winner serves, as one archive; its
    /// signature left out (it signed the skill where it is, not a copy).
    Whole(SkillArchive),
    /// The winner holds files a confined read does not serve, each named
    /// by a diagnostic: a copy would not be the skill, so none is made.
    Incomplete(Vec<Diagnostic>),
}

/// The winner `name` of `catalog` as an archive, through the checks every
/// archive passes (strict SKILL.md validation, the content rule, the
/// limits). `skill_not_found` when the catalog has no such winner.
pub async fn winner_archive(catalog: &Catalog, name: &str) -> Result<WinnerArchive, ArchiveError> {
    let winner = catalog
        .get(name)
        .ok_or_else(|| crate::Error::SkillNotFound(name.to_owned()))?;
    let listed = catalog.skill_files(name, FileLimits::default()).await?;
    if listed.left_out_count > 0 || listed.truncated {
        return Ok(WinnerArchive::Incomplete(listed.diagnostics(&winner.source)));
    }
    let mut files = Vec::new();
    for relative in listed.relatives() {
        if crate::integrity::digest::is_reserved(&relative) {
            continue;
        }
        let data = catalog.read_file(name, &relative).await?;
        files.push(ArchiveFile { path: relative, data });
    }
    let limits = ArchiveLimits::default();
    let bytes = pack_rooted(name, &files, &limits)?;
    Ok(WinnerArchive::Whole(SkillArchive::read_rooted(&bytes, name, &limits)?))
}

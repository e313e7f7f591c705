//! `pack` and `install`: skills as `.skill` archives.

use std::path::Path;

use skillstore::integrity::SignatureStatus;
use skillstore::integrity::policy::{check_archive, signature_message};
use skillstore::location::read_local_file;
use skillstore::{ArchiveError, ArchiveLimits, InstallOptions, SkillArchive, pack_dir};

use super::namespace::build;
use super::skill::{EditArgs, author, report};
use super::terminal::shown;
use super::{Failure, Global, emit};

impl From<ArchiveError> for Failure {
    fn from(err: ArchiveError) -> Self {
        match err {
            ArchiveError::Skill(e) => e.into(),
            refused => Failure::failed(format!("[{}] {refused}", refused.kind())),
        }
    }
}

/// Packs a local skill directory into `output` (default `NAME.skill` in
/// the working directory), written whole or not at all.
pub async fn pack(dir: &Path, output: Option<&Path>) -> Result<(), Failure> {
    let (name, bytes) = pack_dir(dir, &ArchiveLimits::default()).await?;
    let output = output.map_or_else(|| Path::new(&format!("{name}.skill")).to_path_buf(), Path::to_path_buf);
    skillstore::archive::save(&output, &bytes)
        .map_err(|e| Failure::failed(format!("cannot write `{}`: {e}", output.display())))?;
    emit(
        format!(
            "packed {} into {} ({} bytes)\n",
            shown(&name),
            output.display(),
            bytes.len()
        )
        .as_bytes(),
    )
}

/// Installs an archive into a writable source through the editor.
pub async fn install(global: &Global, file: &Path, replace: bool, args: &EditArgs) -> Result<(), Failure> {
    let limits = ArchiveLimits::default();
    let bytes = read_local_file(file, limits.max_archive_bytes, "archive")?;
    let archive = SkillArchive::read(&bytes, &limits)?;
    let namespace = build(global)?;
    // The target source's signature policy, checked before anything is
    // written: what it would withhold once installed is not installed.
    let target = namespace.write_target(args.to.as_deref())?;
    if let Some(policy) = namespace.integrity().and_then(|i| i.signature_policy(target.name()))
        && let SignatureStatus::Refused(refused) = check_archive(&archive, policy)
    {
        return Err(Failure::failed(format!(
            "[{}] `{}`: {}",
            refused.as_str(),
            shown(archive.name()),
            signature_message(refused).replace("it is not served", "it is not installed")
        )));
    }
    let editor = namespace.editor(args.to.as_deref())?.with_author(author(args));
    let options = if replace {
        InstallOptions::replacing()
    } else {
        InstallOptions::default()
    };
    let change = editor.install(&archive, options).await?;
    report(args, change)
}

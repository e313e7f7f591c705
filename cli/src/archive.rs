//! `pack` and `install`: skills as `.skill` archives.

use std::path::Path;

use skillstore::integrity::SignatureStatus;
use skillstore::integrity::policy::{check_archive, signature_message};
use skillstore::location::read_local_file;
use skillstore::{ArchiveError, ArchiveLimits, InstallOptions, SkillArchive, pack_dir};

use super::namespace::build;
use super::skill::{EditArgs, author, report_skill};
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

/// Installs into a writable source through the editor: the archive `from`
/// names when it is a local file; else the skills of the location `from`
/// names (a directory of skills or one skill's directory, `git+URL`, a
/// discovery endpoint, `s3://...`), every one or those `only` names.
pub async fn install(
    global: &Global,
    from: &str,
    only: &[String],
    replace: bool,
    args: &EditArgs,
) -> Result<(), Failure> {
    let path = Path::new(from);
    if path.is_file() {
        if !only.is_empty() {
            return Err(Failure::usage(
                "--skill chooses among the skills of a location; an archive holds one skill",
            ));
        }
        let limits = ArchiveLimits::default();
        let bytes = read_local_file(path, limits.max_archive_bytes, "archive")?;
        let archive = SkillArchive::read(&bytes, &limits)?;
        return install_archive(global, archive, replace, args).await;
    }
    // One skill's directory stands for that skill of its parent.
    let (location, only) = match path.join(skillstore::SKILL_FILE).is_file() {
        true => {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if only.iter().any(|n| *n != name) {
                return Err(Failure::usage(format!(
                    "`{}` is the directory of one skill, `{}`; --skill chooses among the skills of a directory of skills",
                    shown(from),
                    shown(&name)
                )));
            }
            (parent.to_string_lossy().into_owned(), vec![name])
        }
        false => (from.to_owned(), only.to_vec()),
    };
    let catalog = location_catalog(global, &location).await?;
    let names: Vec<String> = if only.is_empty() {
        catalog.skills().iter().map(|s| s.name().to_owned()).collect()
    } else {
        for name in &only {
            if catalog.get(name).is_none() {
                let hint = skillstore::suggest::did_you_mean(name, catalog.skills().iter().map(|s| s.name()));
                return Err(Failure::failed(format!(
                    "`{}` has no skill named `{}`{hint}",
                    shown(from),
                    shown(name)
                )));
            }
        }
        only
    };
    if names.is_empty() {
        return Err(Failure::failed(format!(
            "no skills found at `{}`: a skill there is a directory NAME/ holding SKILL.md at the top of the location",
            shown(from)
        )));
    }
    if !replace {
        refuse_installed(global, &names, args).await?;
    }
    // Every skill is copied out, validated and held to the target's
    // signature policy before the first is written.
    let mut archives = Vec::with_capacity(names.len());
    for name in &names {
        let archive = whole_winner(&catalog, name).await?;
        check_signature(global, &archive, args)?;
        archives.push(archive);
    }
    for archive in archives {
        install_archive(global, archive, replace, args).await?;
    }
    Ok(())
}

/// Fails, before anything is written, when the target source already has
/// one of `names` (without `--replace`, installing it would fail half-way).
async fn refuse_installed(global: &Global, names: &[String], args: &EditArgs) -> Result<(), Failure> {
    let editor = build(global)?.editor(args.to.as_deref())?;
    for name in names {
        if editor.holds(name).await? {
            return Err(Failure::failed(format!(
                "`{}` already has `{}`; nothing was installed (--replace overwrites it)",
                shown(editor.source().name()),
                shown(name)
            )));
        }
    }
    Ok(())
}

/// The skills of `location`, read as one read-only layer; a location that
/// cannot be read fails with what its diagnostic says.
async fn location_catalog(global: &Global, location: &str) -> Result<skillstore::Catalog, Failure> {
    let mut config = skillstore::Config::default();
    config.set_mount("/", location, Path::new("."))?;
    config.set_sources(["/"])?;
    if global.no_cache {
        config.disable_cache();
    }
    let catalog = config.open()?.load().await;
    if !catalog.unlisted_sources().is_empty() {
        let why = catalog
            .diagnostics()
            .iter()
            .map(|d| shown(&d.message).into_owned())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Failure::failed(format!("cannot read `{}`: {why}", shown(location))));
    }
    Ok(catalog)
}

/// The winner `name` of `catalog` as an archive of every file a read of it
/// serves; refused, with what a read leaves out, when that is not all of it.
pub async fn whole_winner(catalog: &skillstore::Catalog, name: &str) -> Result<SkillArchive, Failure> {
    match skillstore::archive::winner_archive(catalog, name).await? {
        skillstore::archive::WinnerArchive::Whole(archive) => Ok(archive),
        skillstore::archive::WinnerArchive::Incomplete(diagnostics) => Err(Failure::failed(format!(
            "`{}` holds files a read does not serve ({}); nothing was written",
            shown(name),
            diagnostics
                .iter()
                .map(|d| shown(&d.message).into_owned())
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

/// Fails when the target source's signature policy would withhold
/// `archive` once installed: what it would not serve is not installed.
fn check_signature(global: &Global, archive: &SkillArchive, args: &EditArgs) -> Result<(), Failure> {
    let namespace = build(global)?;
    let target = namespace.write_target(args.to.as_deref())?;
    if let Some(policy) = namespace.integrity().and_then(|i| i.signature_policy(target.name()))
        && let SignatureStatus::Refused(refused) = check_archive(archive, policy)
    {
        return Err(Failure::failed(format!(
            "[{}] `{}`: {}; nothing was installed",
            refused.as_str(),
            shown(archive.name()),
            signature_message(refused).replace("it is not served", "it is not installed")
        )));
    }
    Ok(())
}

/// Installs one archive into a writable source through the editor, after
/// [`check_signature`]; the report names the skill.
async fn install_archive(
    global: &Global,
    archive: SkillArchive,
    replace: bool,
    args: &EditArgs,
) -> Result<(), Failure> {
    check_signature(global, &archive, args)?;
    let namespace = build(global)?;
    let editor = namespace.editor(args.to.as_deref())?.with_author(author(args));
    let options = if replace {
        InstallOptions::replacing()
    } else {
        InstallOptions::default()
    };
    let change = editor.install(&archive, options).await?;
    report_skill(args, Some(archive.name()), change)
}

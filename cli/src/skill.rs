//! `skill new|create|override|edit|patch|delete|write-file|remove-file|history|rollback|release|tag|yank`.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::Serialize;
use skillstore::backends::Version;
use skillstore::{Change, Namespace, Patch, Record, SkillEditor, Source};

use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, emit};

/// Options of every `skill` subcommand.
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// The writable source to change (default: the highest-priority writable source).
    #[arg(long, value_name = "SOURCE", add = clap_complete::ArgValueCandidates::new(crate::completion::source_labels))]
    pub to: Option<String>,
    /// Who makes the change, as recorded in the history.
    #[arg(long, env = "SKILLSTORE_AUTHOR", value_name = "NAME")]
    pub author: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Create a skill from a SKILL.md (fails if the source has it).
    Create {
        /// The new skill's name (its SKILL.md's `name`).
        name: String,
        /// The SKILL.md to store (default: standard input).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Start a skill: a valid SKILL.md skeleton (frontmatter, a body with headings), written and recorded as `create`.
    New {
        /// The new skill's name (lowercase letters, digits and hyphens).
        name: String,
        /// What the skill does and when to use it (default: a sentence to replace).
        #[arg(long, value_name = "TEXT")]
        description: Option<String>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Copy the winning skill NAME of another source into the writable source, to change it there (recorded as `override`).
    Override {
        /// The skill to take over.
        name: String,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Replace a skill's SKILL.md whole.
    Edit {
        /// The skill whose SKILL.md is replaced.
        name: String,
        /// The new SKILL.md (default: standard input).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Change only this version of SKILL.md.
        #[arg(long, value_name = "VERSION")]
        if_version: Option<String>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Find and replace text in SKILL.md or a supporting file.
    Patch {
        /// The skill to change.
        name: String,
        /// The exact text to find.
        #[arg(long)]
        find: String,
        /// What replaces it.
        #[arg(long)]
        replace: String,
        /// How many occurrences there must be.
        #[arg(long, default_value_t = 1)]
        count: usize,
        /// The file inside the skill.
        #[arg(long, default_value = "SKILL.md", value_name = "RELPATH")]
        file: String,
        /// Change only this version of the file.
        #[arg(long, value_name = "VERSION", conflicts_with = "retry")]
        if_version: Option<String>,
        /// Re-apply the patch to the new version this many times when another writer changed the file first.
        #[arg(long, value_name = "N", default_value_t = 0)]
        retry: u32,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Delete a skill from the source (its history stays, for a rollback).
    Delete {
        /// The skill to delete.
        name: String,
        /// Delete only while SKILL.md is at this version.
        #[arg(long, value_name = "VERSION")]
        if_version: Option<String>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Write a supporting file (references/x.md, LICENSE.txt; never a hidden path).
    WriteFile {
        /// The skill to write into.
        name: String,
        /// The file's path inside the skill (e.g. references/forms.md).
        relpath: String,
        /// The content (default: standard input).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Replace only this version of the file.
        #[arg(long, value_name = "VERSION")]
        if_version: Option<String>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Remove a supporting file.
    RemoveFile {
        /// The skill to remove a file from.
        name: String,
        /// The file's path inside the skill (e.g. references/forms.md).
        relpath: String,
        /// Remove only this version of the file.
        #[arg(long, value_name = "VERSION")]
        if_version: Option<String>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// List a skill's history.
    History {
        /// The skill whose history is listed.
        name: String,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Restore a skill to how it was right after a history entry.
    Rollback {
        /// The skill to restore.
        name: String,
        /// The history entry's number.
        id: u64,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Release a skill's working copy as an immutable version (MAJOR.MINOR.PATCH[-PRE]); `latest` moves to it.
    Release {
        /// The skill to release.
        name: String,
        /// The version, greater than every earlier release of the skill.
        version: String,
        /// Release notes.
        #[arg(long, value_name = "TEXT")]
        notes: Option<String>,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Point a channel (stable, beta, ...) of a skill at one of its releases.
    Tag {
        /// The skill.
        name: String,
        /// The channel: a lowercase letter, then lowercase letters, digits and hyphens.
        channel: String,
        /// The release it points to.
        version: String,
        #[command(flatten)]
        args: EditArgs,
    },
    /// Yank a release: still readable as NAME@VERSION, out of every channel and range.
    Yank {
        /// The skill.
        name: String,
        /// The release to yank.
        version: String,
        #[command(flatten)]
        args: EditArgs,
    },
}

pub async fn run(global: &Global, command: SkillCommand) -> Result<(), Failure> {
    use SkillCommand as C;
    let version = |v: Option<String>| v.map(Version::new);
    match command {
        C::Create { name, from, args } => {
            let data = input(from.as_deref())?;
            report(&args, editor(global, &args)?.create(&name, data).await?)
        }
        C::New {
            name,
            description,
            args,
        } => {
            let data = skeleton(&name, description.as_deref());
            report(&args, editor(global, &args)?.create(&name, data).await?)
        }
        C::Override { name, args } => override_skill(global, &name, &args).await,
        C::Edit {
            name,
            from,
            if_version,
            args,
        } => {
            let data = input(from.as_deref())?;
            let editor = editor(global, &args)?;
            let change = editor.edit(&name, data, version(if_version).as_ref()).await;
            report(&args, not_here(global, &editor, &name, change).await?)
        }
        C::Patch {
            name,
            find,
            replace,
            count,
            file,
            if_version,
            retry,
            args,
        } => {
            let patch = Patch {
                file,
                find,
                replace,
                count,
                expected: version(if_version),
            };
            let editor = editor(global, &args)?;
            let change = if retry > 0 {
                editor.patch_with_retry(&name, &patch, retry + 1).await
            } else {
                editor.patch(&name, &patch).await
            };
            report(&args, not_here(global, &editor, &name, change).await?)
        }
        C::Delete { name, if_version, args } => {
            let change = editor(global, &args)?
                .delete(&name, version(if_version).as_ref())
                .await?;
            report(&args, change)
        }
        C::WriteFile {
            name,
            relpath,
            from,
            if_version,
            args,
        } => {
            let data = input(from.as_deref())?;
            let editor = editor(global, &args)?;
            let change = editor
                .write_file(&name, &relpath, data, version(if_version).as_ref())
                .await;
            report(&args, not_here(global, &editor, &name, change).await?)
        }
        C::RemoveFile {
            name,
            relpath,
            if_version,
            args,
        } => {
            let editor = editor(global, &args)?;
            let change = editor.remove_file(&name, &relpath, version(if_version).as_ref()).await;
            report(&args, not_here(global, &editor, &name, change).await?)
        }
        C::History { name, args } => {
            let records = history(global, &args, &name).await?;
            if args.json {
                let mut text = serde_json::to_vec(&records).map_err(|e| Failure::failed(e.to_string()))?;
                text.push(b'\n');
                return emit(&text);
            }
            emit(history_table(&records).as_bytes())
        }
        C::Rollback { name, id, args } => report(&args, editor(global, &args)?.rollback(&name, id).await?),
        C::Release {
            name,
            version,
            notes,
            args,
        } => crate::release::release(global, &name, &version, notes.as_deref(), &args).await,
        C::Tag {
            name,
            channel,
            version,
            args,
        } => crate::release::tag(global, &name, &channel, &version, &args).await,
        C::Yank { name, version, args } => crate::release::yank(global, &name, &version, &args).await,
    }
}

/// A change aimed at a skill the source does not hold: when another
/// source's winner has that name, say so and name `skill override`.
async fn not_here(
    global: &Global,
    editor: &SkillEditor,
    name: &str,
    change: skillstore::Result<Change>,
) -> Result<Change, Failure> {
    let err = match change {
        Ok(change) => return Ok(change),
        Err(err) => err,
    };
    // `remove-file` looks for the file first: not found may mean the skill.
    let missing = match &err {
        skillstore::Error::NotInSource { .. } => true,
        skillstore::Error::Backend(e) => e.kind() == skillstore::backends::ErrorKind::NotFound,
        _ => false,
    };
    if !missing {
        return Err(err.into());
    }
    let source = editor.source().name();
    let catalog = build(global)?.load().await;
    match catalog.get(name) {
        Some(winner) if winner.source != source && !winner.shadowed.iter().any(|s| s.source == source) => {
            Err(Failure::failed(format!(
                "no skill `{}` in the source `{}`: it comes from the source `{}`; \
                 `skillstore skill override {} --to {}` copies it into `{}` to change it there",
                shown(name),
                shown(source),
                shown(&winner.source),
                shown(name),
                shown(source),
                shown(source)
            )))
        }
        _ => Err(err.into()),
    }
}

/// A new skill's SKILL.md: valid frontmatter and a body with the
/// headings a skill usually has.
fn skeleton(name: &str, description: Option<&str>) -> Vec<u8> {
    let description = description
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| skillstore::skill::placeholder_description(name));
    let quoted = serde_json::to_string(&description).unwrap_or_else(|_| "\"\"".to_owned());
    let title: Vec<String> = name
        .split('-')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect())
                .unwrap_or_default()
        })
        .collect();
    format!(
        "---\nname: {name}\ndescription: {quoted}\n---\n\n# {}\n\n## When to use\n\n{description}\n\n\
         ## Steps\n\n1. The first step.\n\n## Files\n\n\
         Put scripts in `scripts/`, longer documents in `references/` and templates in `assets/`\n\
         (`skillstore skill write-file {name} references/NAME.md`), and name them here.\n",
        title.join(" ")
    )
    .into_bytes()
}

/// `skill override NAME`: the winner of another source, as a confined
/// read serves it, copied into the target source through the editor.
async fn override_skill(global: &Global, name: &str, args: &EditArgs) -> Result<(), Failure> {
    let namespace = build(global)?;
    let source = target(&namespace, args)?.name().to_owned();
    let catalog = namespace.load().await;
    let Some(winner) = catalog.get(name) else {
        let hint = skillstore::suggest::did_you_mean(name, catalog.skills().iter().map(|s| s.name()));
        return Err(Failure::failed(format!(
            "no skill named `{}` in the catalog to override{hint}",
            shown(name)
        )));
    };
    if winner.source == source {
        return Err(Failure::failed(format!(
            "the source `{}` already holds `{}`: change it there",
            shown(&source),
            shown(name)
        )));
    }
    let archive = crate::archive::whole_winner(&catalog, name).await?;
    let editor = namespace.editor(Some(&source))?.with_author(author(args));
    let change = editor.override_with(&archive).await?;
    report(args, change)
}

/// The history of `name` in the chosen source (which may be read-only), or
/// in the highest-priority writable one.
async fn history(global: &Global, args: &EditArgs, name: &str) -> Result<Vec<Record>, Failure> {
    let namespace = build(global)?;
    let source = target(&namespace, args)?;
    let path = skillstore::edit::history::history_path(source.path(), name)?;
    Ok(skillstore::edit::history::read(&*namespace.backend(), &path).await?)
}

/// The source named by `--to`, or the highest-priority writable one.
fn target<'a>(namespace: &'a Namespace, args: &EditArgs) -> Result<&'a Source, Failure> {
    if args.to.is_none() && !namespace.sources().iter().any(Source::is_writable) {
        return Err(Failure::failed(
            "no source is writable: mark one `writable: true` in the configuration, or pass --writable NAME \
             (`skill history --to SOURCE` reads the history of a read-only source)",
        ));
    }
    Ok(namespace.write_target(args.to.as_deref())?)
}

/// The editor of the chosen source, or of the highest-priority writable one.
fn editor(global: &Global, args: &EditArgs) -> Result<SkillEditor, Failure> {
    let namespace = build(global)?;
    let source = target(&namespace, args)?;
    Ok(namespace.editor(Some(source.name()))?.with_author(author(args)))
}

/// Who makes a change: `--author`, `SKILLSTORE_AUTHOR`, then `USER`.
pub fn author(args: &EditArgs) -> String {
    args.author
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn input(from: Option<&Path>) -> Result<Vec<u8>, Failure> {
    match from {
        Some(path) if path != Path::new("-") => {
            std::fs::read(path).map_err(|e| Failure::usage(format!("cannot read `{}`: {e}", path.display())))
        }
        _ => {
            let mut data = Vec::new();
            std::io::stdin()
                .read_to_end(&mut data)
                .map_err(|e| Failure::usage(format!("cannot read standard input: {e}")))?;
            Ok(data)
        }
    }
}

#[derive(Serialize)]
struct ChangeOutput<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    skill: Option<&'a str>,
    id: u64,
    action: &'a str,
    files: Vec<FileOutput<'a>>,
    warnings: &'a [String],
}

#[derive(Serialize)]
struct FileOutput<'a> {
    path: &'a str,
    previous_version: Option<&'a Version>,
    new_version: Option<&'a Version>,
}

pub fn report(args: &EditArgs, change: Change) -> Result<(), Failure> {
    report_skill(args, None, change)
}

/// As [`report`], naming the skill changed (`skill` in JSON, after the
/// action in text) when one command changes several.
pub fn report_skill(args: &EditArgs, skill: Option<&str>, change: Change) -> Result<(), Failure> {
    let record = &change.record;
    if args.json {
        let output = ChangeOutput {
            skill,
            id: record.id,
            action: record.action.as_str(),
            files: record
                .files
                .iter()
                .map(|f| FileOutput {
                    path: &f.path,
                    previous_version: f.previous_version.as_ref(),
                    new_version: f.new_version.as_ref(),
                })
                .collect(),
            warnings: &change.warnings,
        };
        let mut text = serde_json::to_vec(&output).map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        return emit(&text);
    }
    for warning in &change.warnings {
        eprintln!("warning: {}", shown(warning));
    }
    let named = skill.map(|s| format!(" {}", shown(s))).unwrap_or_default();
    let mut out = format!("{}{named} (history entry {})\n", record.action.as_str(), record.id);
    for f in &record.files {
        let version = f
            .new_version
            .as_ref()
            .map_or("removed".to_owned(), |v| format!("version {v}"));
        out.push_str(&format!("  {}: {}\n", shown(&f.path), shown(&version)));
    }
    emit(out.as_bytes())
}

fn history_table(records: &[Record]) -> String {
    if records.is_empty() {
        return "no history\n".to_owned();
    }
    let author_width = records
        .iter()
        .map(|r| shown(&r.author).chars().count())
        .max()
        .unwrap_or(0)
        .max("AUTHOR".len());
    let mut out = format!(
        "ID  TIME                      ACTION       {:<author_width$}  FILES\n",
        "AUTHOR"
    );
    for r in records {
        let files: Vec<&str> = r.files.iter().map(|f| f.path.as_str()).collect();
        let action = match r.rollback_to {
            Some(to) => format!("rollback:{to}"),
            None => r.action.as_str().to_owned(),
        };
        out.push_str(&format!(
            "{:<2}  {:<24}  {:<11}  {:<author_width$}  {}\n",
            r.id,
            shown(&r.time),
            action,
            shown(&r.author),
            shown(&files.join(", "))
        ));
    }
    out
}

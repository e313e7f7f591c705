//! A merged catalog on disk: the winning skills of any namespace
//! materialized as `DIR/NAME/...`, for a sandbox or container that reads
//! skills as files.
//!
//! Guarantees of [`sync`]:
//! - **atomic for readers**: a new generation is built beside `DIR` and
//!   switched in with one rename, so a path resolved under `DIR` sees one
//!   generation whole; the generation replaced stays beside `DIR` until the
//!   next sync (so a reader that opened it can finish) and is removed then.
//!   A sync that fails leaves the live generation as it was;
//! - **incremental**: each generation keeps a manifest of the source
//!   version of every file; a file whose version is unchanged is hard-linked
//!   from the live generation instead of read again, and when nothing
//!   changed no generation is built at all;
//! - **guarded**: nothing is written outside `DIR` and its state directory
//!   `.NAME.skillstore` beside it; skill names and file paths are `VPath`
//!   segments; every read goes through the backend under the read limit,
//!   confined to the skill's directory once links resolve; walks never
//!   enter a directory link and stop at a file limit per skill; files are
//!   written `0644` (see [`SyncOptions::keep_modes`]) and directories `0755`.
//!   What a guard refuses is left out and reported, never written.
//!
//! ```
//! use std::sync::Arc;
//! use skillstore::{Catalog, LoadOptions, Source, SourceList};
//! use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
//! use skillstore::sync::{SyncOptions, sync};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let files = MemoryBackend::new();
//! let skill_md = "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps...";
//! files.put(&VPath::new("/team/pdf/SKILL.md")?, skill_md.into(), PutMode::Create).await?;
//! let sources = SourceList::from_sources([Source::parse("/team/")?])?;
//! let catalog = Catalog::load(Arc::new(files), sources, LoadOptions::default()).await;
//!
//! let dir = tempfile::tempdir()?;
//! let report = sync(&catalog, &dir.path().join("skills"), &SyncOptions::default()).await?;
//! assert_eq!(report.added, ["pdf"]);
//! assert_eq!(std::fs::read_to_string(dir.path().join("skills/pdf/SKILL.md"))?, skill_md);
//!
//! let again = sync(&catalog, &dir.path().join("skills"), &SyncOptions::default()).await?;
//! assert!(!again.switched && again.files_copied == 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod manifest;
mod name;
mod tree;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use skillstore_backends::{
    DEFAULT_READ_LIMIT, EntryKind, ErrorKind, ReadOptions, SkillBackend, VPath, Version, is_valid_segment,
};

use crate::catalog::{Catalog, SKILL_FILE, Skill};
use crate::error::Result;
use crate::shared_catalog::SharedCatalog;
use manifest::{FileRecord, Manifest, SkillRecord};
pub use name::{MAX_DIR_NAME_BYTES, dir_name};
use tree::{Live, Target};

/// The longest file or directory name written, in bytes (the usual limit
/// of Linux filesystems).
const MAX_NAME_BYTES: usize = 255;

/// How a sync runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOptions {
    /// Materialize disabled skills too (by default only enabled ones).
    pub all_skills: bool,
    /// The most files one skill may hold; a skill with more is left out
    /// whole and reported (`too_many_files`).
    pub max_files_per_skill: usize,
    /// How many directory levels below a skill's directory are entered;
    /// deeper ones are left out and reported (`too_deep`).
    pub max_depth: usize,
    /// The largest file read, in bytes (the namespace's read limit).
    pub read_limit: u64,
    /// The source is trusted to ship programs: a file whose bytes start
    /// with `#!` is written `0755`. Backends report no permission bits, so
    /// this is the only execute bit a sync ever writes; without it every
    /// file is `0644`.
    pub keep_modes: bool,
    /// How many reads are in flight at once.
    pub concurrency: usize,
}

impl Default for SyncOptions {
    /// Enabled skills, 10,000 files and 32 levels per skill, the default
    /// 10 MiB read limit, no execute bits, 16 reads at once.
    fn default() -> Self {
        SyncOptions {
            all_skills: false,
            max_files_per_skill: 10_000,
            max_depth: 32,
            read_limit: DEFAULT_READ_LIMIT,
            keep_modes: false,
            concurrency: 16,
        }
    }
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// True when a new generation replaced the live one (false when nothing
    /// changed).
    pub switched: bool,
    /// How many skills the live tree holds now.
    pub skills: usize,
    /// Skills new in this generation.
    pub added: Vec<String>,
    /// Skills present before whose files or source changed.
    pub updated: Vec<String>,
    /// Skills gone since the last generation.
    pub removed: Vec<String>,
    /// Files new in this generation, as `NAME/RELPATH`.
    pub files_added: Vec<String>,
    /// Files whose source version changed, as `NAME/RELPATH`.
    pub files_updated: Vec<String>,
    /// Files gone since the last generation, as `NAME/RELPATH`.
    pub files_removed: Vec<String>,
    /// Files read from the sources and written.
    pub files_copied: usize,
    /// Files reused from the live generation by hard link.
    pub files_linked: usize,
    /// Bytes read from the sources and written.
    pub bytes_copied: u64,
    /// What the guards left out, each with why.
    pub refused: Vec<SyncRefusal>,
}

/// Something a sync left out of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncRefusal {
    /// The skill concerned (escaped for display).
    pub skill: String,
    /// The virtual path concerned (escaped for display).
    pub path: String,
    /// A stable snake_case kind: `invalid_name`, `too_many_files`,
    /// `too_deep`, `directory_link`, `unresolved_link`,
    /// `not_regular_file`, or a storage kind such as `too_large` or
    /// `symlink_escape`.
    pub kind: String,
    /// What happened.
    pub message: String,
    /// True when the whole skill was left out, not just this path.
    pub whole_skill: bool,
}

/// Materializes the winning skills of `catalog` into `dir` as
/// `dir/NAME/...` (see the module documentation for the guarantees). `dir`
/// is created if absent; an existing `dir` must be a generation an earlier
/// sync wrote, or empty. Fails, leaving the live generation in place, when
/// a source could not be listed for `catalog` (see
/// [`Catalog::unlisted_sources`]) or fails a read in a way that may pass
/// (unavailable), when writing fails, or when another sync of `dir` is
/// running.
pub async fn sync(catalog: &Catalog, dir: &Path, options: &SyncOptions) -> Result<SyncReport> {
    // A source that could not be listed contributes no skills; syncing
    // would delete its skills from the tree for as long as it is away.
    if let Some(source) = catalog.unlisted_sources().first() {
        return Err(skillstore_backends::Error::at(ErrorKind::Unavailable, source.path())
            .with_detail(format!(
                "the source `{}` could not be listed, so the synced tree keeps its generation",
                source.name()
            ))
            .into());
    }
    let target = Target::open(dir)?;
    let live = target.live()?;
    let previous = match &live {
        Live::Ours(manifest) => Some(manifest),
        Live::Absent | Live::Empty => None,
    };
    let reusable = previous.filter(|m| m.keep_modes == options.keep_modes);

    let mut refused = Vec::new();
    let plans = plan(catalog, options, &mut refused).await?;

    if let Some(manifest) = reusable
        && unchanged(&plans, manifest, target.live_path())
    {
        return Ok(SyncReport {
            skills: manifest.skills.len(),
            refused,
            ..SyncReport::default()
        });
    }

    let mut build = target.build()?;
    let mut next = Manifest::new(options.keep_modes);
    let mut report = SyncReport::default();
    let mut reads = Vec::new();
    for plan in &plans {
        build.skill_dir(&plan.name)?;
        next.skills.insert(
            plan.name.clone(),
            SkillRecord {
                source: plan.source.clone(),
                dir: plan.dir.as_str().to_owned(),
                files: BTreeMap::new(),
            },
        );
        let old_skill = reusable
            .and_then(|m| m.skills.get(&plan.name))
            .filter(|s| s.dir == plan.dir.as_str());
        for file in &plan.files {
            let local = format!("{}/{}", plan.name, file.relative);
            let reuse = old_skill
                .and_then(|s| s.files.get(&file.relative))
                .filter(|record| !file.symlink && file.version.as_ref().is_some_and(|v| v.as_str() == record.version));
            if let Some(record) = reuse
                && let Some(written) = build.link_from(target.live_path(), &local, record)
            {
                report.files_linked += 1;
                insert(
                    &mut next,
                    &plan.name,
                    &file.relative,
                    record.version.clone(),
                    record.size,
                    record.mode,
                    written,
                );
                continue;
            }
            reads.push((plan, file, local));
        }
    }

    let backend = catalog.backend();
    let mut results = futures::stream::iter(reads)
        .map(|(plan, file, local)| {
            let options = ReadOptions::with_limit(options.read_limit).confined(plan.dir.segments().count());
            async move { (plan, file, local, backend.read(&file.path, options).await) }
        })
        .buffer_unordered(options.concurrency.max(1));
    let mut dropped: Vec<String> = Vec::new();
    while let Some((plan, file, local, read)) = results.next().await {
        match read {
            Ok(blob) => {
                let mode = if options.keep_modes && blob.data.starts_with(b"#!") {
                    0o755
                } else {
                    0o644
                };
                let written = build.write(&local, &blob.data, mode)?;
                report.files_copied += 1;
                report.bytes_copied += blob.data.len() as u64;
                insert(
                    &mut next,
                    &plan.name,
                    &file.relative,
                    blob.version.to_string(),
                    blob.size,
                    mode,
                    written,
                );
            }
            Err(e) if is_refusal(e.kind()) => {
                let whole = file.relative == SKILL_FILE;
                refused.push(refusal(&plan.name, &file.path, e.kind().as_str(), e.to_string(), whole));
                if whole {
                    dropped.push(plan.name.clone());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    drop(results);
    for name in dropped {
        build.remove_skill(&name);
        next.skills.remove(&name);
    }

    diff(previous, &next, &mut report);
    report.skills = next.skills.len();
    report.refused = refused;
    report.switched = true;
    target.switch(build, &next, &live)?;
    Ok(report)
}

/// Keeps `dir` in step with `catalog`: syncs, hands the result to
/// `on_report`, waits `interval`, refreshes the catalog, and again, until
/// `shutdown` completes or `on_report` breaks. A failed sync is handed to
/// `on_report` like a report and leaves the live generation in place; the
/// loop goes on unless `on_report` breaks. A sync cut short by `shutdown`
/// leaves nothing behind.
pub async fn watch<S, F>(
    catalog: &SharedCatalog,
    dir: &Path,
    options: &SyncOptions,
    interval: Duration,
    shutdown: S,
    mut on_report: F,
) where
    S: Future<Output = ()>,
    F: FnMut(Result<SyncReport>) -> ControlFlow<()>,
{
    tokio::pin!(shutdown);
    loop {
        let snapshot = catalog.snapshot();
        let result = tokio::select! {
            () = &mut shutdown => return,
            result = sync(&snapshot, dir, options) => result,
        };
        if on_report(result).is_break() {
            return;
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = catalog.refresh() => {}
        }
    }
}

/// One skill to materialize.
#[derive(Debug)]
struct Plan {
    name: String,
    source: String,
    dir: VPath,
    files: Vec<PlannedFile>,
}

/// One file of a skill, as its listing gave it.
#[derive(Debug)]
struct PlannedFile {
    relative: String,
    path: VPath,
    version: Option<Version>,
    symlink: bool,
}

/// Walks every skill to materialize, concurrently, keeping catalog order.
async fn plan(catalog: &Catalog, options: &SyncOptions, refused: &mut Vec<SyncRefusal>) -> Result<Vec<Plan>> {
    let skills: Vec<&Skill> = catalog
        .skills()
        .iter()
        .filter(|s| options.all_skills || s.enabled)
        .collect();
    let backend = catalog.backend();
    let walked: Vec<Result<(Option<Plan>, Vec<SyncRefusal>)>> = futures::stream::iter(skills)
        .map(|skill| walk_skill(&**backend, skill, options))
        .buffered(options.concurrency.max(1))
        .collect()
        .await;
    let mut plans = Vec::new();
    for result in walked {
        let (plan, found) = result?;
        refused.extend(found);
        plans.extend(plan);
    }
    Ok(plans)
}

/// Lists one skill's files: bounded, never into a directory link, with
/// every name checked. `None` when the whole skill is refused.
async fn walk_skill(
    backend: &dyn SkillBackend,
    skill: &Skill,
    options: &SyncOptions,
) -> Result<(Option<Plan>, Vec<SyncRefusal>)> {
    let name = skill.name();
    let dir = skill.dir();
    let mut refused = Vec::new();
    if !is_valid_segment(name) || name.len() > MAX_NAME_BYTES {
        let message = "the skill's name cannot be a directory name".to_owned();
        refused.push(refusal(name, &dir, "invalid_name", message, true));
        return Ok((None, refused));
    }
    let mut files = Vec::new();
    let mut pending = vec![(dir.clone(), String::new(), 0usize)];
    while let Some((current, relative, depth)) = pending.pop() {
        let listing = match backend.list_detailed(&current).await {
            Ok(listing) => listing,
            Err(e) if is_refusal(e.kind()) => {
                let whole = current == dir;
                refused.push(refusal(name, &current, e.kind().as_str(), e.to_string(), whole));
                if whole {
                    return Ok((None, refused));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for odd in listing.invalid {
            refused.push(SyncRefusal {
                skill: name.escape_debug().to_string(),
                path: format!("{current}/{odd}"),
                kind: "invalid_name".into(),
                message: "the name is not a valid path segment".into(),
                whole_skill: false,
            });
        }
        let mut entries = listing.entries;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subdirs = Vec::new();
        for entry in entries {
            let path = current.join(&entry.name)?;
            let below = if relative.is_empty() {
                entry.name.clone()
            } else {
                format!("{relative}/{}", entry.name)
            };
            if entry.name.len() > MAX_NAME_BYTES {
                let message = format!("the name is longer than {MAX_NAME_BYTES} bytes");
                refused.push(refusal(name, &path, "invalid_name", message, false));
                continue;
            }
            let (kind, message) = match (entry.kind, entry.symlink) {
                (EntryKind::File, _) => {
                    if files.len() == options.max_files_per_skill {
                        let message = format!("the skill holds more than {} files", options.max_files_per_skill);
                        refused.push(refusal(name, &dir, "too_many_files", message, true));
                        return Ok((None, refused));
                    }
                    files.push(PlannedFile {
                        relative: below,
                        path,
                        version: entry.version,
                        symlink: entry.symlink,
                    });
                    continue;
                }
                (EntryKind::Dir, true) => ("directory_link", "a link to a directory is never followed"),
                (EntryKind::Dir, false) if depth < options.max_depth => {
                    subdirs.push((path, below, depth + 1));
                    continue;
                }
                (EntryKind::Dir, false) => ("too_deep", "deeper than the depth limit"),
                (EntryKind::Other, true) => ("unresolved_link", "a link the source's policy does not resolve"),
                (EntryKind::Other, false) => ("not_regular_file", "neither a file nor a directory"),
            };
            refused.push(refusal(name, &path, kind, message.to_owned(), false));
        }
        pending.extend(subdirs.into_iter().rev());
    }
    if !files.iter().any(|f| f.relative == SKILL_FILE) {
        let message = format!("no {SKILL_FILE} is listed in the skill's directory now");
        refused.push(refusal(name, &dir, "not_found", message, true));
        return Ok((None, refused));
    }
    Ok((
        Some(Plan {
            name: name.to_owned(),
            source: skill.source.clone(),
            dir,
            files,
        }),
        refused,
    ))
}

/// True when the plans describe exactly the live generation of `manifest`
/// and every live file is still the one written.
fn unchanged(plans: &[Plan], manifest: &Manifest, live: &Path) -> bool {
    plans.len() == manifest.skills.len()
        && plans.iter().all(|plan| {
            let Some(old) = manifest.skills.get(&plan.name) else {
                return false;
            };
            old.source == plan.source
                && old.dir == plan.dir.as_str()
                && old.files.len() == plan.files.len()
                && plan.files.iter().all(|file| {
                    old.files.get(&file.relative).is_some_and(|record| {
                        !file.symlink
                            && file.version.as_ref().is_some_and(|v| v.as_str() == record.version)
                            && tree::live_matches(live, &format!("{}/{}", plan.name, file.relative), record)
                    })
                })
        })
}

/// Fills the report's added, updated and removed lists.
fn diff(previous: Option<&Manifest>, next: &Manifest, report: &mut SyncReport) {
    let empty = Manifest::default();
    let previous = previous.unwrap_or(&empty);
    for (name, skill) in &next.skills {
        let Some(old) = previous.skills.get(name) else {
            report.added.push(name.clone());
            report
                .files_added
                .extend(skill.files.keys().map(|f| format!("{name}/{f}")));
            continue;
        };
        let before = report.files_added.len() + report.files_updated.len() + report.files_removed.len();
        for (relative, record) in &skill.files {
            match old.files.get(relative) {
                None => report.files_added.push(format!("{name}/{relative}")),
                Some(was) if was.version != record.version || was.mode != record.mode => {
                    report.files_updated.push(format!("{name}/{relative}"));
                }
                Some(_) => {}
            }
        }
        for relative in old.files.keys().filter(|f| !skill.files.contains_key(*f)) {
            report.files_removed.push(format!("{name}/{relative}"));
        }
        let after = report.files_added.len() + report.files_updated.len() + report.files_removed.len();
        if after != before || old.source != skill.source || old.dir != skill.dir {
            report.updated.push(name.clone());
        }
    }
    for (name, old) in &previous.skills {
        if !next.skills.contains_key(name) {
            report.removed.push(name.clone());
            report
                .files_removed
                .extend(old.files.keys().map(|f| format!("{name}/{f}")));
        }
    }
}

fn insert(
    next: &mut Manifest,
    name: &str,
    relative: &str,
    version: String,
    size: u64,
    mode: u32,
    written: tree::Written,
) {
    let skill = next.skills.get_mut(name).expect("the skill was recorded first");
    skill.files.insert(
        relative.to_owned(),
        FileRecord {
            version,
            size,
            mode,
            ino: written.ino,
            mtime: written.mtime,
        },
    );
}

/// Kinds of a read or listing that a guard refused, or that are settled
/// (the file is gone): left out and reported. Every other kind fails the
/// sync, since it may pass on a later try.
fn is_refusal(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::NotFound
            | ErrorKind::NotADirectory
            | ErrorKind::IsADirectory
            | ErrorKind::InvalidPath
            | ErrorKind::PermissionDenied
            | ErrorKind::TooLarge
            | ErrorKind::NotRegularFile
            | ErrorKind::SymlinkRefused
            | ErrorKind::SymlinkEscape
            | ErrorKind::SymlinkLoop
            | ErrorKind::DanglingSymlink
    )
}

fn refusal(skill: &str, path: &VPath, kind: &str, message: String, whole_skill: bool) -> SyncRefusal {
    SyncRefusal {
        skill: skill.escape_debug().to_string(),
        path: path.as_str().escape_debug().to_string(),
        kind: kind.to_owned(),
        message,
        whole_skill,
    }
}

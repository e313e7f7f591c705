//! What a sync would write: every winning skill's files as its listing
//! gives them, with every name checked, bounded in files, depth and bytes.

use futures::StreamExt;
use skillstore_backends::{EntryKind, ErrorKind, SkillBackend, VPath, Version};

use super::{SyncOptions, SyncRefusal};
use crate::catalog::{Catalog, SKILL_FILE, Skill};
use crate::dir_name::{MAX_DIR_NAME_BYTES as MAX_NAME_BYTES, dir_name};
use crate::error::Result;

/// One skill to materialize.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) name: String,
    pub(crate) source: String,
    pub(crate) dir: VPath,
    pub(crate) files: Vec<PlannedFile>,
    /// True when a lock or signature check digested the skill: it is
    /// written whole, at the versions checked, or not at all.
    pub(crate) checked: bool,
}

/// The kind of a refusal of a checked skill that cannot be written as it
/// was checked: a file the check digested is gone, is no longer a file, or
/// reads at another version.
pub(crate) const CHANGED: &str = "changed";

/// One file of a skill, as its listing gave it.
#[derive(Debug)]
pub(crate) struct PlannedFile {
    pub(crate) relative: String,
    pub(crate) path: VPath,
    pub(crate) version: Option<Version>,
    pub(crate) size: Option<u64>,
    pub(crate) symlink: bool,
}

impl Plan {
    /// The bytes its listing gives (files whose size it does not give
    /// count when read).
    fn listed_bytes(&self) -> u64 {
        self.files.iter().filter_map(|f| f.size).sum()
    }
}

/// Walks every skill to materialize, concurrently, keeping catalog order;
/// then admits skills in that order while they fit the byte bounds, as
/// their listings give their sizes.
pub(crate) async fn plan(
    catalog: &Catalog,
    options: &SyncOptions,
    refused: &mut Vec<SyncRefusal>,
) -> Result<Vec<Plan>> {
    let skills: Vec<&Skill> = catalog
        .skills()
        .iter()
        .filter(|s| options.all_skills || s.enabled)
        .collect();
    let backend = catalog.backend();
    let walked: Vec<Result<(Option<Plan>, Vec<SyncRefusal>)>> = futures::stream::iter(skills)
        .map(|skill| async move {
            let (plan, mut found) = walk_skill(&**backend, skill, options).await?;
            match (plan, catalog.checked_files(skill.name())) {
                (Some(plan), Some(checked)) => Ok((hold_to_check(plan, checked, &mut found), found)),
                (plan, _) => Ok((plan, found)),
            }
        })
        .buffered(options.concurrency.max(1))
        .collect()
        .await;
    let mut plans = Vec::new();
    let mut total = 0u64;
    for result in walked {
        let (plan, found) = result?;
        refused.extend(found);
        let Some(plan) = plan else { continue };
        let bytes = plan.listed_bytes();
        if let Some(refusal) = over_bounds(&plan.name, &plan.dir, bytes, total, options) {
            refused.push(refusal);
            continue;
        }
        total += bytes;
        plans.push(plan);
    }
    Ok(plans)
}

/// The refusal of a skill of `bytes` when `total` bytes are already
/// admitted, or `None` when it fits.
pub(crate) fn over_bounds(
    name: &str,
    dir: &VPath,
    bytes: u64,
    total: u64,
    options: &SyncOptions,
) -> Option<SyncRefusal> {
    if bytes > options.max_skill_bytes {
        let message = format!(
            "the skill holds {bytes} bytes, more than the {} a skill may hold",
            options.max_skill_bytes
        );
        return Some(refusal(name, dir, "too_many_bytes", message, true));
    }
    if total.saturating_add(bytes) > options.max_total_bytes {
        let message = format!(
            "the skill's {bytes} bytes would take the tree past its {} bytes",
            options.max_total_bytes
        );
        return Some(refusal(name, dir, "over_total_bytes", message, true));
    }
    None
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
    if dir_name(name).is_none() {
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
                        size: entry.size,
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
            checked: false,
        }),
        refused,
    ))
}

/// `plan` held to the files its skill's check digested (`checked`): a
/// file added since is left out (it is not part of the skill), and when a
/// checked file is not listed as a file now, the whole skill is withheld
/// (`None`, with a [`CHANGED`] refusal), since what would be written is
/// not what was checked.
fn hold_to_check(mut plan: Plan, checked: &[VPath], refused: &mut Vec<SyncRefusal>) -> Option<Plan> {
    let checked: std::collections::HashSet<&VPath> = checked.iter().collect();
    let listed: std::collections::HashSet<VPath> = plan.files.iter().map(|f| f.path.clone()).collect();
    let mut missing: Vec<&VPath> = checked.iter().copied().filter(|p| !listed.contains(*p)).collect();
    missing.sort();
    if let Some(first) = missing.first() {
        let message = format!(
            "{} of its {} checked files cannot be read as checked (first: {first}); \
             the skill is withheld from this sync until a refresh checks it again",
            missing.len(),
            checked.len()
        );
        refused.push(refusal(&plan.name, &plan.dir, CHANGED, message, true));
        return None;
    }
    plan.files.retain(|f| {
        let keep = checked.contains(&f.path);
        if !keep && crate::skill_files::is_foreign(&f.relative) {
            // Never part of a skill, checked or not.
            let message = "below `.skillstore/` only `.skillstore/signature` belongs to a skill".to_owned();
            refused.push(refusal(
                &plan.name,
                &f.path,
                ErrorKind::NotFound.as_str(),
                message,
                false,
            ));
        } else if !keep {
            let message = "added since the skill was checked: not part of it".to_owned();
            refused.push(refusal(&plan.name, &f.path, CHANGED, message, false));
        }
        keep
    });
    plan.checked = true;
    Some(plan)
}

/// Kinds of a read or listing that a guard refused, or that are settled
/// (the file is gone): left out and reported. Every other kind fails the
/// sync, since it may pass on a later try.
pub(crate) fn is_refusal(kind: ErrorKind) -> bool {
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

/// A refusal of `path` in the skill `skill`, escaped for display.
pub(crate) fn refusal(skill: &str, path: &VPath, kind: &str, message: String, whole_skill: bool) -> SyncRefusal {
    SyncRefusal {
        skill: skill.escape_debug().to_string(),
        path: path.as_str().escape_debug().to_string(),
        kind: kind.to_owned(),
        message,
        whole_skill,
    }
}

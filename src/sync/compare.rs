//! A plan compared with the live generation's manifest: whether a sync
//! would change anything, and what it changed.

use std::collections::HashMap;

use futures::StreamExt;
use skillstore_backends::{Blob, ReadOptions, VPath};

use super::manifest::{Manifest, digest};
use super::plan::{Plan, PlannedFile, is_refusal, refusal};
use super::{SyncOptions, SyncRefusal, SyncReport, file_mode};
use crate::catalog::Catalog;
use crate::error::Result;

/// True when writing `plans` would give exactly the generation `manifest`
/// describes (the caller has checked that the tree is still whole). A file
/// reached through a link, and one refused when read last time, is read
/// again, since its listing does not say what a read would give: it is
/// unchanged when the read gives the recorded version and bytes, or the
/// recorded refusal (added to `refused`). A file listed at another version
/// (touched, or written again with the same bytes) is read too: it is
/// unchanged when its bytes and mode are the recorded ones, and its new
/// version is added to `reversioned` as `(NAME/RELPATH, VERSION)`. What
/// such a read gave is left in `read_ahead` (by path), for the sync that
/// follows a `false` to use rather than read the file twice.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn unchanged(
    catalog: &Catalog,
    plans: &[Plan],
    manifest: &Manifest,
    options: &SyncOptions,
    refused: &mut Vec<SyncRefusal>,
    reversioned: &mut Vec<(String, String)>,
    read_ahead: &mut HashMap<VPath, Blob>,
) -> Result<bool> {
    if plans.len() != manifest.skills.len() {
        return Ok(false);
    }
    // (plan, file, whether its content alone is compared)
    let mut again: Vec<(&Plan, &PlannedFile, bool)> = Vec::new();
    for plan in plans {
        let Some(old) = manifest.skills.get(&plan.name) else {
            return Ok(false);
        };
        if old.source != plan.source
            || old.dir != plan.dir.as_str()
            || old.files.len() + old.refused.len() != plan.files.len()
        {
            return Ok(false);
        }
        for file in &plan.files {
            let same_version = old
                .files
                .get(&file.relative)
                .is_some_and(|r| file.version.as_ref().is_some_and(|v| v.as_str() == r.version));
            if file.symlink || old.refused.contains_key(&file.relative) {
                again.push((plan, file, false));
            } else if !same_version {
                if !old.files.contains_key(&file.relative) {
                    return Ok(false);
                }
                again.push((plan, file, true));
            }
        }
    }
    let backend = catalog.backend();
    let mut reads = futures::stream::iter(again)
        .map(|(plan, file, content_only)| {
            let read = ReadOptions::with_limit(options.read_limit).confined(plan.dir.segments().count());
            async move { (plan, file, content_only, backend.read(&file.path, read).await) }
        })
        .buffer_unordered(options.concurrency.max(1));
    let mut found = Vec::new();
    let mut new_versions = Vec::new();
    while let Some((plan, file, content_only, read)) = reads.next().await {
        let old = &manifest.skills[&plan.name];
        match read {
            Ok(blob) => {
                if content_only {
                    read_ahead.insert(file.path.clone(), blob.clone());
                }
                let same = old.files.get(&file.relative).is_some_and(|r| {
                    (content_only || r.version == blob.version.as_str())
                        && r.mode == file_mode(options, &blob.data)
                        && r.sha256 == digest(&blob.data)
                });
                if !same {
                    return Ok(false);
                }
                if content_only {
                    new_versions.push((format!("{}/{}", plan.name, file.relative), blob.version.to_string()));
                }
            }
            Err(e) if is_refusal(e.kind()) => {
                if old.refused.get(&file.relative).map(String::as_str) != Some(e.kind().as_str()) {
                    return Ok(false);
                }
                found.push(refusal(&plan.name, &file.path, e.kind().as_str(), e.to_string(), false));
            }
            Err(e) => return Err(e.into()),
        }
    }
    refused.extend(found);
    reversioned.extend(new_versions);
    Ok(true)
}

/// Fills the report's added, updated and removed lists.
pub(crate) fn diff(previous: Option<&Manifest>, next: &Manifest, report: &mut SyncReport) {
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
                // Content, not versions: a file touched or written again
                // with the same bytes is not an update.
                Some(was) if was.mode != record.mode || was.sha256 != record.sha256 => {
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

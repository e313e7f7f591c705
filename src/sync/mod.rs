//! A merged catalog on disk: the winning skills of any namespace
//! materialized as `DIR/NAME/...`, for a sandbox or container that reads
//! skills as files.
//!
//! Guarantees of [`sync`]:
//! - **atomic for readers, `DIR` never moved**: a new generation is built
//!   in the private state and each skill directory is switched in with one
//!   `renameat2` (`RENAME_EXCHANGE` with the one it replaces), so a path
//!   resolved under `DIR/NAME` sees one version of that skill whole, never
//!   a mix and never an empty directory; a skill gone from the catalog is
//!   moved out in one step. `DIR` itself is never replaced: a bind mount
//!   of `DIR` (`docker run -v DIR:/mnt/skills`) sees every switch, and a
//!   `DIR` that is a mount point (a volume's root) is synced like any
//!   other. `DIR`'s entries are real directories and files, never links.
//!   The directories replaced stay in the state until the next switch (so
//!   a reader that opened one can finish). A sync that fails leaves the
//!   live skills as they were;
//! - **the user's files in `DIR` are theirs**: anything at `DIR`'s top
//!   level no sync made is left where it is, and a skill whose name it
//!   holds is left out and reported (`name_taken`);
//! - **only its own files**: a tree is taken for a generation only when
//!   its files are the ones the generation's manifest recorded (inode,
//!   size, mode, change time or SHA-256), never by its place or its
//!   directory's inode alone (a skill directory's birth is recorded too). A
//!   skill directory holding anything no sync wrote makes the sync refuse,
//!   leaving it as it is; anything that appears in one during a sync undoes
//!   the switch. A file of the generation changed since (even with its
//!   modification time put back) is rewritten from the source, and the
//!   tree holding the changed copy is kept. Old trees are removed file by
//!   file, only where each file is still what sync wrote; a tree that
//!   keeps anything is renamed `kept-ID` in the state and reported;
//! - **private state**: the state directory (`.NAME.skillstore` beside
//!   `DIR`, on its filesystem; `DIR/..skillstore` when `DIR` is a mount
//!   point) must be a directory of the caller with no group or other
//!   permissions, and its lock a regular file of the caller's, or the sync
//!   is refused; every file is created relative to directory handles
//!   opened without following links;
//! - **incremental**: a file whose source version is unchanged is
//!   hard-linked from the live generation instead of read again; when
//!   nothing changed (files behind links and files refused when read are
//!   read again to know) no generation is built at all;
//! - **complete or not at all**: a catalog missing a source (one that
//!   could not be listed, or is served from an earlier load) is never
//!   synced, since its skills would be removed from the tree;
//! - **guarded and bounded**: skill names and file paths are `VPath`
//!   segments; every read goes through the backend under the read limit,
//!   confined to the skill's directory once links resolve; walks never
//!   enter a directory link; a skill over its file or byte bound, or one
//!   that would take the tree over its byte bound, is left out whole and
//!   reported while the others are synced; files are written `0644` (see
//!   [`SyncOptions::keep_modes`]) and directories `0755`. What a guard
//!   refuses is left out and reported, never written.
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

mod build;
mod compare;
mod fsx;
mod manifest;
mod plan;
mod state;
mod survey;
mod switch;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use skillstore_backends::{DEFAULT_READ_LIMIT, ErrorKind, ReadOptions};

use crate::catalog::{Catalog, SKILL_FILE};
use crate::diagnostic::DiagnosticKind;
pub use crate::dir_name::{MAX_DIR_NAME_BYTES, dir_name};
use crate::error::Result;
use crate::shared_catalog::SharedCatalog;
use build::Build;
use manifest::{FileRecord, Manifest, SkillRecord, digest};
use plan::{CHANGED, Plan, PlannedFile, is_refusal, over_bounds, refusal};
use state::{Live, State};

/// The default bound on one skill's bytes: 64 MiB.
pub const DEFAULT_MAX_SKILL_BYTES: u64 = 64 << 20;

/// The default bound on the bytes of the whole tree: 1 GiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 1 << 30;

/// How a sync runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOptions {
    /// Materialize disabled skills too (by default only enabled ones).
    pub all_skills: bool,
    /// The most files one skill may hold; a skill with more is left out
    /// whole and reported (`too_many_files`).
    pub max_files_per_skill: usize,
    /// The most bytes one skill's files may hold in all (each link to a
    /// file counts its bytes again, as a reader sees them); a skill with
    /// more is left out whole and reported (`too_many_bytes`).
    pub max_skill_bytes: u64,
    /// The most bytes the whole tree may hold. Skills are admitted in
    /// catalog order; one that would take the tree past the bound is left
    /// out whole and reported (`over_total_bytes`), and later, smaller ones
    /// may still fit.
    pub max_total_bytes: u64,
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
    /// Enabled skills, 10,000 files, 64 MiB and 32 levels per skill, 1 GiB
    /// in all, the default 10 MiB read limit, no execute bits, 16 reads at
    /// once.
    fn default() -> Self {
        SyncOptions {
            all_skills: false,
            max_files_per_skill: 10_000,
            max_skill_bytes: DEFAULT_MAX_SKILL_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
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
    /// Files whose bytes or mode changed, as `NAME/RELPATH` (a file whose
    /// version alone changed, as a `touch` makes, is not one).
    pub files_updated: Vec<String>,
    /// Files gone since the last generation, as `NAME/RELPATH`.
    pub files_removed: Vec<String>,
    /// Files of the tree that were changed since sync wrote them, written
    /// again from the source, as `NAME/RELPATH`; the changed copies are in
    /// a kept tree once the replaced generation is retired.
    pub repaired: Vec<String>,
    /// The tree in the state directory holding the `repaired` files as
    /// they were found (`.NAME.skillstore/retired-ID`, then `NAME/RELPATH`
    /// in it): the next sync that switches keeps it as a `kept-ID` tree
    /// (reported in `kept_now` then).
    pub repaired_copies: Option<String>,
    /// Files read from the sources and written.
    pub files_copied: usize,
    /// Files reused from the live generation by hard link (a file whose
    /// version changed but whose bytes did not is read, compared and
    /// linked, not written again).
    pub files_linked: usize,
    /// Bytes read from the sources and written.
    pub bytes_copied: u64,
    /// What the guards left out, each with why.
    pub refused: Vec<SyncRefusal>,
    /// Skills a lock or signature check passed that could not be written
    /// as it digested them (one of its files gone, no longer a file, or
    /// changed since): left out of this sync with a `changed` refusal, a
    /// copy an earlier sync wrote kept as it was. A command exits 3 when
    /// there is one.
    pub withheld: Vec<String>,
    /// Trees in the state directory (`.NAME.skillstore/kept-ID`, or `NAME/..skillstore/kept-ID`) kept
    /// because they hold files sync did not write or that were changed:
    /// look through them and remove them.
    pub kept: Vec<String>,
    /// The trees of `kept` this sync kept (the others were kept by an
    /// earlier one).
    pub kept_now: Vec<String>,
}

/// Something a sync left out of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncRefusal {
    /// The skill concerned (escaped for display).
    pub skill: String,
    /// The virtual path concerned (escaped for display).
    pub path: String,
    /// A stable snake_case kind: `invalid_name`, `too_many_files`,
    /// `too_many_bytes`, `over_total_bytes`, `too_deep`, `name_taken`,
    /// `directory_link`, `unresolved_link`, `not_regular_file`, or a
    /// storage kind such as `too_large` or `symlink_escape`.
    pub kind: String,
    /// What happened.
    pub message: String,
    /// True when the whole skill was left out, not just this path.
    pub whole_skill: bool,
}

/// Materializes the winning skills of `catalog` into `dir` as
/// `dir/NAME/...` (see the module documentation for the guarantees). `dir`
/// is created if absent; an existing `dir` may be a mount point and may
/// hold files of its own, which are kept. Fails, leaving the live skills
/// in place, when a source could not be listed for
/// `catalog` or is stale (see [`Catalog::unlisted_sources`]), when a read
/// fails in a way that may pass (unavailable), when writing fails, when
/// `dir`, the state or a skill directory holding files no sync wrote is
/// refused, when `dir` changed during the sync, or when another sync of
/// `dir` is running.
pub async fn sync(catalog: &Catalog, dir: &Path, options: &SyncOptions) -> Result<SyncReport> {
    refuse_incomplete(catalog)?;
    let state = State::open(dir)?;
    let manifests = state.manifests()?;
    switch::recover(&state, &manifests)?;
    let live = state.live(&manifests)?;

    let mut refused = Vec::new();
    let mut plans = plan::plan(catalog, options, &mut refused).await?;
    leave_out_taken(&state, &live, &mut plans, &mut refused);

    let kept_before = state.kept()?;
    let mut reversioned = Vec::new();
    let mut read_ahead = std::collections::HashMap::new();
    if live.single
        && live.keep_modes == Some(options.keep_modes)
        && live.survey.is_whole(&live.manifest)
        && compare::unchanged(
            catalog,
            &plans,
            &live.manifest,
            options,
            &mut refused,
            &mut reversioned,
            &mut read_ahead,
        )
        .await?
    {
        if (!live.survey.refreshed.is_empty() || !reversioned.is_empty())
            && let Some(mut fresh) = manifests.iter().find(|m| m.id == live.manifest.id).cloned()
        {
            for (local, ctime) in &live.survey.refreshed {
                if let Some(record) = fresh.file_mut(local) {
                    record.ctime = *ctime;
                }
            }
            // Same bytes at a new version: the next sync need not read
            // them again.
            for (local, version) in reversioned {
                if let Some(record) = fresh.file_mut(&local) {
                    record.version = version;
                }
            }
            state.write_manifest(&fresh)?;
        }
        refused.sort_by(|a, b| (&a.skill, &a.path).cmp(&(&b.skill, &b.path)));
        return Ok(SyncReport {
            skills: live.manifest.skills.len(),
            withheld: withheld(&refused),
            refused,
            kept: state.kept()?,
            ..SyncReport::default()
        });
    }

    let mut next = Manifest::new(options.keep_modes);
    let mut build = Build::new(&state, &next.id)?;
    let mut report = fill(
        catalog,
        &plans,
        &state,
        &live,
        &mut build,
        &mut next,
        options,
        &mut refused,
        read_ahead,
    )
    .await?;
    next.dirs = build.dirs().clone();
    next.births = build.births().clone();
    next.root_birth = fsx::birth(build.root());
    report.repaired = live.survey.altered.clone();
    compare::diff(Some(&live.manifest), &next, &mut report);
    refused.sort_by(|a, b| (&a.skill, &a.path).cmp(&(&b.skill, &b.path)));
    report.skills = next.skills.len();
    report.withheld = withheld(&refused);
    report.refused = refused;
    report.switched = true;

    state.write_manifest(&next)?;
    let retired = switch::switch_in(&state, &mut build, &next, &live)?;
    if !report.repaired.is_empty() && !retired.skills.is_empty() {
        report.repaired_copies = Some(state.shown(&format!("retired-{}", retired.id)));
    }
    switch::clean_up(&state, &build, &mut next, retired);
    report.kept = state.kept().unwrap_or_default();
    report.kept_now = report
        .kept
        .iter()
        .filter(|k| !kept_before.contains(k))
        .cloned()
        .collect();
    Ok(report)
}

/// The kind of a refusal of a skill whose name `DIR` already holds as a
/// file or directory no sync made.
pub(crate) const NAME_TAKEN: &str = "name_taken";

/// Leaves out, and reports, every skill whose name `DIR` holds as
/// something sync did not make (the user's own file or directory, or the
/// state): it is never replaced.
fn leave_out_taken(state: &State, live: &Live, plans: &mut Vec<Plan>, refused: &mut Vec<SyncRefusal>) {
    plans.retain(|plan| {
        if live.manifest.skills.contains_key(&plan.name) {
            return true;
        }
        match fsx::stat_at(state.root(), &plan.name) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            _ => {
                let message = format!(
                    "the synced directory already holds `{}`, which no sync made; it is kept, and the skill left out",
                    plan.name.escape_debug()
                );
                refused.push(refusal(&plan.name, &plan.dir, NAME_TAKEN, message, true));
                false
            }
        }
    });
}

/// Writes the files of `plans` into `build`: hard links to live files that
/// are still as written and whose version is unchanged, reads for the
/// rest. Records every file in `next`; leaves out, and reports, files
/// refused when read and skills over their byte bounds.
#[allow(clippy::too_many_arguments)]
async fn fill(
    catalog: &Catalog,
    plans: &[Plan],
    state: &State,
    live: &Live,
    build: &mut Build<'_>,
    next: &mut Manifest,
    options: &SyncOptions,
    refused: &mut Vec<SyncRefusal>,
    mut read_ahead: std::collections::HashMap<skillstore_backends::VPath, skillstore_backends::Blob>,
) -> Result<SyncReport> {
    let root = state.root();
    let reusable = (live.keep_modes == Some(options.keep_modes)).then_some((&root, &live.manifest, &live.survey));
    let mut report = SyncReport::default();
    let mut linked: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut bytes: BTreeMap<&str, u64> = BTreeMap::new();
    let mut reads: Vec<(&Plan, &PlannedFile, String)> = Vec::new();
    for plan in plans {
        build.dir(&plan.name)?;
        next.skills.insert(
            plan.name.clone(),
            SkillRecord {
                source: plan.source.clone(),
                dir: plan.dir.as_str().to_owned(),
                ..SkillRecord::default()
            },
        );
        for file in &plan.files {
            let local = format!("{}/{}", plan.name, file.relative);
            if let Some((root, manifest, survey)) = reusable
                && !file.symlink
                && let Some(record) = manifest.file(&local)
                && file.version.as_ref().is_some_and(|v| v.as_str() == record.version)
                && survey.intact.contains(&local)
                && let Some(written) = build.link_from(*root, &local, record)
            {
                linked.insert(local);
                *bytes.entry(&plan.name).or_default() += record.size;
                let record = FileRecord {
                    ino: written.ino,
                    ctime: written.ctime,
                    ..record.clone()
                };
                insert(next, &plan.name, &file.relative, record);
                continue;
            }
            reads.push((plan, file, local));
        }
    }

    let backend = catalog.backend();
    let reads: Vec<_> = reads
        .into_iter()
        .map(|(plan, file, local)| (plan, file, local, read_ahead.remove(&file.path)))
        .collect();
    let mut results = futures::stream::iter(reads)
        .map(|(plan, file, local, ahead)| {
            let read = ReadOptions::with_limit(options.read_limit).confined(plan.dir.segments().count());
            async move {
                let blob = match ahead {
                    Some(blob) => Ok(blob),
                    None => backend.read(&file.path, read).await,
                };
                (plan, file, local, blob)
            }
        })
        .buffer_unordered(options.concurrency.max(1));
    let mut dropped: BTreeMap<String, SyncRefusal> = BTreeMap::new();
    while let Some((plan, file, local, read)) = results.next().await {
        if dropped.contains_key(&plan.name) {
            continue;
        }
        match read {
            Ok(blob) => {
                let held = bytes.entry(&plan.name).or_default();
                *held += blob.data.len() as u64;
                if *held > options.max_skill_bytes {
                    // Grown since it was listed.
                    let refusal = over_bounds(&plan.name, &plan.dir, *held, 0, options).expect("over its bound");
                    dropped.insert(plan.name.clone(), refusal);
                    continue;
                }
                let mode = file_mode(options, &blob.data);
                let sha256 = digest(&blob.data);
                // At a new version with the same bytes (touched): the live
                // copy, when still as written, is linked, not written again.
                let same = reusable.and_then(|(root, manifest, survey)| {
                    let record = manifest.file(&local)?;
                    let fits = !file.symlink
                        && survey.intact.contains(&local)
                        && record.sha256 == sha256
                        && record.mode == mode;
                    fits.then(|| build.link_from(*root, &local, record)).flatten()
                });
                let written = match same {
                    Some(written) => {
                        linked.insert(local.clone());
                        written
                    }
                    None => build.write(&local, &blob.data, mode)?,
                };
                let record = FileRecord {
                    version: blob.version.to_string(),
                    size: blob.data.len() as u64,
                    mode,
                    ino: written.ino,
                    ctime: written.ctime,
                    sha256,
                };
                insert(next, &plan.name, &file.relative, record);
            }
            Err(e) if plan.checked && (is_refusal(e.kind()) || e.kind() == ErrorKind::VersionConflict) => {
                // Not at the version its check digested: the skill is
                // withheld whole rather than written partly.
                let message = format!(
                    "{} cannot be read as checked ({}); the skill is withheld from this sync until a refresh checks it again",
                    file.relative.escape_debug(),
                    e.kind().as_str()
                );
                dropped.insert(
                    plan.name.clone(),
                    refusal(&plan.name, &plan.dir, CHANGED, message, true),
                );
            }
            Err(e) if is_refusal(e.kind()) => {
                let kind = e.kind().as_str();
                if file.relative == SKILL_FILE {
                    dropped.insert(
                        plan.name.clone(),
                        refusal(&plan.name, &file.path, kind, e.to_string(), true),
                    );
                    continue;
                }
                refused.push(refusal(&plan.name, &file.path, kind, e.to_string(), false));
                if let Some(skill) = next.skills.get_mut(&plan.name) {
                    skill.refused.insert(file.relative.clone(), kind.to_owned());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    drop(results);

    // The whole tree's bound, on the bytes read, in catalog order.
    let mut total = 0u64;
    for plan in plans {
        if dropped.contains_key(&plan.name) {
            continue;
        }
        let held = bytes.get(plan.name.as_str()).copied().unwrap_or(0);
        if let Some(refusal) = over_bounds(&plan.name, &plan.dir, held, total, options) {
            dropped.insert(plan.name.clone(), refusal);
            continue;
        }
        total += held;
    }
    for (name, refusal) in dropped {
        next.skills.remove(&name);
        build.remove_skill(&name);
        refused.push(refusal);
    }
    if let Some((root, manifest, survey)) = reusable {
        for name in withheld(refused) {
            let Some(old) = manifest.skills.get(&name) else {
                continue;
            };
            if next.skills.contains_key(&name) {
                continue;
            }
            // The copy is kept only while it is what the current check
            // accepts: a lock updated since pins other content.
            let accepted = catalog.get(&name).and_then(|s| s.digest.as_deref());
            if accepted.is_none_or(|digest| old.digest().as_deref() != Some(digest)) {
                build.remove_skill(&name);
                continue;
            }
            match carry_over(build, *root, &name, old, survey, &mut linked)? {
                Some(kept) => {
                    next.skills.insert(name, kept);
                }
                None => build.remove_skill(&name),
            }
        }
    }
    for (local, record) in next.files() {
        if linked.contains(&local) {
            report.files_linked += 1;
        } else {
            report.files_copied += 1;
            report.bytes_copied += record.size;
        }
    }
    Ok(report)
}

/// The names of the skills withheld from this sync because they cannot be
/// written as their check digested them.
fn withheld(refused: &[SyncRefusal]) -> Vec<String> {
    let mut names: Vec<String> = refused
        .iter()
        .filter(|r| r.whole_skill && r.kind == CHANGED)
        .map(|r| r.skill.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The copy of the skill `name` the live generation holds (`old`), linked
/// whole into the new generation, so a skill withheld from this sync keeps
/// what an earlier sync wrote; `None` (and nothing kept) unless every one
/// of its files is still as sync wrote it.
fn carry_over(
    build: &mut Build<'_>,
    live: rustix::fd::BorrowedFd<'_>,
    name: &str,
    old: &SkillRecord,
    survey: &survey::Survey,
    linked: &mut std::collections::HashSet<String>,
) -> Result<Option<SkillRecord>> {
    if !old.files.keys().all(|r| survey.intact.contains(&format!("{name}/{r}"))) {
        return Ok(None);
    }
    build.dir(name)?;
    let mut kept = SkillRecord {
        files: BTreeMap::new(),
        ..old.clone()
    };
    for (relative, record) in &old.files {
        let local = format!("{name}/{relative}");
        let Some(written) = build.link_from(live, &local, record) else {
            return Ok(None);
        };
        linked.insert(local);
        let record = FileRecord {
            ino: written.ino,
            ctime: written.ctime,
            ..record.clone()
        };
        kept.files.insert(relative.clone(), record);
    }
    Ok(Some(kept))
}

/// The mode a file is written with.
pub(crate) fn file_mode(options: &SyncOptions, data: &[u8]) -> u32 {
    if options.keep_modes && data.starts_with(b"#!") {
        0o755
    } else {
        0o644
    }
}

/// Refuses a catalog that is not the whole namespace: a source that could
/// not be listed contributes no skills, and one served from an earlier
/// load (stale) may not even have the skills it lists; syncing either would
/// remove or empty that source's skills in the tree for as long as it is
/// away.
fn refuse_incomplete(catalog: &Catalog) -> Result<()> {
    let unlisted = catalog
        .unlisted_sources()
        .first()
        .map(|s| (s.name().to_owned(), s.path().clone()));
    let stale = catalog
        .diagnostics()
        .iter()
        .find(|d| d.kind == DiagnosticKind::SourceStale)
        .and_then(|d| Some((d.source.clone()?, d.path.clone()?)));
    let Some((name, path)) = unlisted.or(stale) else {
        return Ok(());
    };
    Err(skillstore_backends::Error::at(ErrorKind::Unavailable, &path)
        .with_detail(format!(
            "the source `{}` could not be listed now, so the synced tree keeps its generation",
            name.escape_debug()
        ))
        .into())
}

/// Keeps `dir` in step with `catalog`: syncs, hands the result to
/// `on_report`, waits `interval`, refreshes the catalog, and again, until
/// `shutdown` completes or `on_report` breaks. A failed sync (also one
/// refused because a source could not be listed at the last refresh) is
/// handed to `on_report` like a report and leaves the live generation in
/// place; the loop goes on unless `on_report` breaks. A sync cut short by
/// `shutdown` leaves nothing behind.
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
        // `biased`: `shutdown` is polled first, so it is listening before a
        // sync that ends at once (one refused) hands over its result.
        let result = tokio::select! {
            biased;
            () = &mut shutdown => return,
            result = sync(&snapshot, dir, options) => result,
        };
        if on_report(result).is_break() {
            return;
        }
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            () = catalog.refresh() => {}
        }
    }
}

fn insert(next: &mut Manifest, name: &str, relative: &str, record: FileRecord) {
    let skill = next.skills.get_mut(name).expect("the skill was recorded first");
    skill.files.insert(relative.to_owned(), record);
}

//! Switching a built generation in, one skill directory at a time, and
//! what becomes of the directories it replaces: each `DIR/NAME` is
//! exchanged with the new one in one `renameat2`, so a reader resolving
//! `DIR/NAME/...` sees one version of that skill whole, and `DIR` itself
//! never moves (a bind mount of it, or a mount point, sees every switch).
//! The directories replaced gather in the build's tree, which becomes the
//! retired generation: checked at once (anything sync did not write in it
//! undoes the whole switch), kept until the next switch, then removed file
//! by file, only where each file is still what sync wrote; a tree that
//! keeps anything is renamed `kept-ID` and reported. A sync that was
//! killed is settled here by the next one.

use std::collections::HashSet;

use rustix::fd::{AsFd, BorrowedFd};

use super::build::Build;
use super::manifest::{FORMAT, Manifest, fresh_id};
use super::state::{Live, State};
use super::survey::{Known, Survey, refresh, survey};
use crate::error::{Error, Result};

/// One step of a switch, undone in reverse order when the switch fails.
#[derive(Debug)]
enum Step {
    /// `DIR/NAME` exchanged with the build's `NAME`.
    Exchanged(String),
    /// The build's `NAME` moved to `DIR/NAME`, where nothing was.
    MovedIn(String),
    /// `DIR/NAME` (a skill gone from the catalog) moved into the build.
    MovedOut(String),
}

/// Settles the builds an interrupted sync left: one with no manifest was
/// never switched and is removed; one with a manifest may have been
/// switched in part, so what it holds (its own directories not switched
/// yet, and those it replaced) is removed as far as the manifests
/// recognize it, and kept otherwise.
pub(crate) fn recover(state: &State, manifests: &[Manifest]) -> Result<()> {
    let known = Known::of(manifests);
    for id in state.trees("build-")? {
        let name = format!("build-{id}");
        match manifests.iter().find(|m| m.id == id) {
            None => state.remove_unseen(&name),
            Some(own) => {
                state.remove_tree(&name, Some(own), manifests, &known, &id);
            }
        }
    }
    Ok(())
}

/// Switches the skill directories of `build` (described by `next`, already
/// written) in for those `live` found: every skill of `next` exchanged
/// with `DIR`'s or moved in, every skill gone moved out into the build's
/// tree. The directories replaced are surveyed right after; when they hold
/// anything sync did not write (written while the generation was built),
/// or a step fails, every step is undone and the sync fails. Returns the
/// retired generation: the manifest of what the build's tree now holds.
pub(crate) fn switch_in(state: &State, build: &mut Build<'_>, next: &Manifest, live: &Live) -> Result<Manifest> {
    if let Err(e) = state.check_in_place() {
        state.remove_manifest(&next.id);
        return Err(e);
    }
    let tree = match state.open_tree(build.name()) {
        Ok(tree) => tree,
        Err(e) => {
            state.remove_manifest(&next.id);
            return Err(super::fsx::io_error("cannot open the new generation", e));
        }
    };
    let tree_fd = tree.as_fd();
    let mut done: Vec<Step> = Vec::new();
    let mut failed: Option<Error> = None;
    build.keep();
    for name in next.skills.keys() {
        let exchange = live.manifest.skills.contains_key(name);
        match state.swap_in(tree_fd, name, exchange) {
            Ok(()) if exchange => done.push(Step::Exchanged(name.clone())),
            Ok(()) => done.push(Step::MovedIn(name.clone())),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if failed.is_none() {
        for name in live.manifest.skills.keys().filter(|n| !next.skills.contains_key(*n)) {
            match state.move_out(tree_fd, name) {
                Ok(()) => done.push(Step::MovedOut(name.clone())),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
    }
    let mut retired = live.manifest.clone();
    retired.format = FORMAT;
    retired.id = fresh_id();
    retired.dirs.insert(String::new(), next.dirs[""]);
    retired.root_birth = next.root_birth;
    let failed = match failed {
        Some(e) => e,
        None => {
            let known = Known::of([next, &retired]);
            let check: Option<Survey> = survey(tree_fd, &retired, &known).ok();
            if check.as_ref().is_some_and(Survey::is_own) {
                return Ok(retired);
            }
            let what = check.map_or_else(
                || "a skill directory was replaced by something else".to_owned(),
                |s| s.foreign_list(),
            );
            Error::Usage(format!(
                "the sync target changed while the generation was built ({what}); nothing was switched: sync \
                 again once it is as sync left it"
            ))
        }
    };
    if undo(state, tree_fd, &done) {
        // The build's tree holds only its own directories again.
        build.discard();
        state.remove_manifest(&next.id);
        return Err(failed);
    }
    // What was live may be in the build's tree: kept whole.
    let _ = state.rename(build.name(), &format!("kept-{}", next.id));
    Err(Error::Usage(format!(
        "{failed}; the switch could not be undone whole, and what it held is kept in the sync state"
    )))
}

/// Undoes `done` in reverse; true when every step was undone.
fn undo(state: &State, tree: BorrowedFd<'_>, done: &[Step]) -> bool {
    let mut whole = true;
    for step in done.iter().rev() {
        let undone = match step {
            Step::Exchanged(name) => state.swap_in(tree, name, true),
            Step::MovedIn(name) => state.move_out(tree, name),
            Step::MovedOut(name) => state.swap_in(tree, name, false),
        };
        if let Err(e) = undone {
            tracing::warn!(error = %e, "cannot undo a step of a failed switch");
            whole = false;
        }
    }
    whole
}

/// After a switch: the build's tree becomes `retired-ID` (described by
/// `retired`), the generations retired before it are removed, keeping
/// whatever sync did not write, the manifests no tree needs are dropped,
/// and the change times recorded for `next` (live, in `DIR`) and
/// `retired` are brought up to date where removing a link moved them. The
/// switch has landed, so nothing here fails the sync: what cannot be done
/// is logged, and the next sync tries again.
pub(crate) fn clean_up(state: &State, build: &Build<'_>, next: &mut Manifest, retired: Manifest) {
    if let Err(e) = try_clean_up(state, build, next, retired) {
        tracing::warn!(error = %e, "cannot remove old generations after a switch");
    }
}

fn try_clean_up(state: &State, build: &Build<'_>, next: &mut Manifest, mut retired: Manifest) -> Result<()> {
    let retired_name = format!("retired-{}", retired.id);
    if retired.skills.is_empty() {
        // Nothing was replaced: the tree is empty.
        let _ = rustix::fs::unlinkat(state.fd(), build.name(), rustix::fs::AtFlags::REMOVEDIR);
    } else {
        state.write_manifest(&retired)?;
        state
            .rename(build.name(), &retired_name)
            .map_err(|e| super::fsx::io_error("cannot retire the replaced generation", e))?;
    }
    let manifests = state.manifests()?;
    let known = Known::of(&manifests);
    let mut unlinked: HashSet<u64> = HashSet::new();
    for id in state.trees("retired-")? {
        if id == retired.id {
            continue;
        }
        let manifest = manifests.iter().find(|m| m.id == id);
        let (_, gone) = state.remove_tree(&format!("retired-{id}"), manifest, &manifests, &known, &id);
        unlinked.extend(gone);
    }
    if !unlinked.is_empty() {
        if refresh(state.root(), next, &unlinked) {
            state.write_manifest(next)?;
        }
        if !retired.skills.is_empty()
            && let Ok(tree) = state.open_tree(&retired_name)
            && refresh(tree.as_fd(), &mut retired, &unlinked)
        {
            state.write_manifest(&retired)?;
        }
    }
    let needed: HashSet<String> = state
        .trees("retired-")?
        .into_iter()
        .chain(state.trees("build-")?)
        .chain([next.id.clone()])
        .collect();
    for manifest in state.manifests()? {
        if !needed.contains(&manifest.id) {
            state.remove_manifest(&manifest.id);
        }
    }
    Ok(())
}

//! Switching a built generation in, and what becomes of the trees it
//! replaces: the one replaced is checked at once (anything sync did not
//! write in it puts it back), kept until the next switch, then removed
//! file by file, only where each file is still what sync wrote; a tree
//! that keeps anything is renamed `kept-ID` and reported. A sync that was
//! killed is finished here by the next one.

use std::collections::HashSet;

use rustix::fd::AsFd;

use super::build::Build;
use super::manifest::Manifest;
use super::state::{Live, State};
use super::survey::{Known, Survey, refresh, survey};
use crate::error::{Error, Result};

/// Settles the builds an interrupted sync left: one with no manifest was
/// never switched in and is removed; one whose manifest describes the live
/// tree was switched in, so it holds the tree it replaced, which becomes
/// the retired generation; any other is removed as far as its manifest
/// allows.
pub(crate) fn recover(state: &State, live: &Live, manifests: &[Manifest]) -> Result<()> {
    let live_id = match live {
        Live::Ours { manifest, .. } => Some(manifest.id.as_str()),
        Live::Absent | Live::Empty { .. } => None,
    };
    let known = Known::of(manifests);
    for id in state.trees("build-")? {
        let name = format!("build-{id}");
        let Some(own) = manifests.iter().find(|m| m.id == id) else {
            state.remove_unseen(&name);
            continue;
        };
        if Some(id.as_str()) != live_id {
            state.remove_tree(&name, Some(own), &known, &id);
            state.remove_manifest(&id);
            continue;
        }
        let replaced = state.open_tree(&name).ok().and_then(|fd| {
            manifests
                .iter()
                .filter(|m| m.id != id)
                .find(|m| survey(fd.as_fd(), m, &known).is_ok_and(|s| s.is_own()))
        });
        let renamed = replaced.is_some_and(|m| state.rename(&name, &format!("retired-{}", m.id)).is_ok());
        if !renamed {
            let _ = state.rename(&name, &format!("kept-{id}"));
        }
    }
    Ok(())
}

/// Switches `build` (described by `next`, already written) in for what
/// `live` holds. The tree replaced is surveyed against its manifest right
/// after the exchange; when it holds anything sync did not write (a file
/// written, or the directory replaced, while the generation was built) the
/// exchange is undone and the sync fails, leaving that tree where it was.
pub(crate) fn switch_in(state: &State, build: &mut Build<'_>, next: &Manifest, live: &Live) -> Result<()> {
    let replaced = match live {
        Live::Absent => None,
        Live::Empty { manifest, .. } => {
            state.write_manifest(manifest)?;
            Some(manifest)
        }
        Live::Ours { manifest, .. } => Some(manifest),
    };
    if let Err(e) = state.switch(build.name(), replaced.is_some()) {
        forget(state, next, live);
        return Err(e);
    }
    // From here the build's name holds the tree replaced: never removed
    // as a build.
    build.keep();
    let Some(old) = replaced else { return Ok(()) };
    let known = Known::of([next, old]);
    let check: Option<Survey> = state
        .open_tree(build.name())
        .ok()
        .and_then(|fd| survey(fd.as_fd(), old, &known).ok());
    if check.as_ref().is_some_and(Survey::is_own) {
        if state.rename(build.name(), &format!("retired-{}", old.id)).is_err() {
            let _ = state.rename(build.name(), &format!("kept-{}", old.id));
        }
        return Ok(());
    }
    let what = check.map_or_else(
        || "the directory was replaced by something else".to_owned(),
        |s| s.foreign_list(),
    );
    let message = format!(
        "the sync target changed while the generation was built ({what}); nothing was switched: sync again \
         once it is as sync left it"
    );
    match state.switch(build.name(), true) {
        Ok(()) => {
            state.remove_unseen(build.name());
            forget(state, next, live);
            Err(Error::Usage(message))
        }
        Err(e) => {
            // The new generation stays live; what was there is kept whole.
            let _ = state.rename(build.name(), &format!("kept-{}", old.id));
            Err(Error::Usage(format!(
                "{message}; it could not be put back ({e}) and is kept in the sync state"
            )))
        }
    }
}

/// Removes the manifests a failed switch wrote.
fn forget(state: &State, next: &Manifest, live: &Live) {
    state.remove_manifest(&next.id);
    if let Live::Empty { manifest, .. } = live {
        state.remove_manifest(&manifest.id);
    }
}

/// After a switch: removes the generations retired before the one just
/// replaced (`retired`), keeping whatever sync did not write, drops the
/// manifests no tree needs, and brings the change times recorded for
/// `next` (live, at `build`) and `retired` up to date where removing a
/// link moved them. The switch has landed, so nothing here fails the
/// sync: what cannot be done is logged, and the next sync tries again.
pub(crate) fn clean_up(state: &State, build: &Build<'_>, next: &mut Manifest, retired: Option<&str>) {
    if let Err(e) = try_clean_up(state, build, next, retired) {
        tracing::warn!(error = %e, "cannot remove old generations after a switch");
    }
}

fn try_clean_up(state: &State, build: &Build<'_>, next: &mut Manifest, retired: Option<&str>) -> Result<()> {
    let manifests = state.manifests()?;
    let known = Known::of(&manifests);
    let mut unlinked: HashSet<u64> = HashSet::new();
    for id in state.trees("retired-")? {
        if Some(id.as_str()) == retired {
            continue;
        }
        let manifest = manifests.iter().find(|m| m.id == id);
        let (_, gone) = state.remove_tree(&format!("retired-{id}"), manifest, &known, &id);
        unlinked.extend(gone);
    }
    if !unlinked.is_empty() {
        if refresh(build.root(), next, &unlinked) {
            state.write_manifest(next)?;
        }
        if let Some(id) = retired
            && let Some(mut old) = manifests.into_iter().find(|m| m.id == id)
            && let Ok(tree) = state.open_tree(&format!("retired-{id}"))
            && refresh(tree.as_fd(), &mut old, &unlinked)
        {
            state.write_manifest(&old)?;
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

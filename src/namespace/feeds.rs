//! The change feeds of a namespace: for each mount set to `changes:
//! journal`, its store's journal and the sources it serves, each named by
//! its path from the store's root.

use skillstore_backends::VPath;

use super::open::Opened;
use crate::changes::{ChangesConfig, Journal};
use crate::error::{Error, Result};
use crate::location::Location;

/// A store's journal and the sources of one namespace stored there.
#[derive(Debug, Clone)]
pub struct ChangeFeed {
    /// The journal at the root of the store.
    pub journal: Journal,
    /// Each source the mount serves: its name and its directory from the
    /// store's root (what the journal's entries name).
    pub sources: Vec<(String, VPath)>,
}

/// A mount's journal, before its sources are known.
pub(super) struct MountJournal {
    pub(super) at: VPath,
    pub(super) journal: Journal,
    /// Where the mount's root is in the store.
    pub(super) prefix: VPath,
}

/// The journal of a mount of `location`, when its `changes:` setting asks
/// for one. The journal is at the root of the store (an S3 bucket's, not
/// the mount's prefix), so that one journal serves every mount of a bucket;
/// a mount held in memory keeps its own.
pub(super) fn mount_journal(
    at: &VPath,
    location: &Location,
    opened: &Opened,
    changes: Option<&ChangesConfig>,
) -> Result<Option<MountJournal>> {
    match changes {
        None | Some(ChangesConfig::Named(crate::changes::ChangesKind::Poll)) => return Ok(None),
        Some(ChangesConfig::Sqs(_)) => {
            return Err(Error::Usage(format!(
                "the mount at {at} sets `changes: {{sqs: ...}}`, which this build does not support yet; use `journal` or `poll`"
            )));
        }
        Some(ChangesConfig::Named(crate::changes::ChangesKind::Journal)) => {}
    }
    let (journal, prefix) = match (location, opened) {
        // Named by the files it holds: two memory mounts are two stores.
        (_, Opened::Memory(files)) => (
            Journal::new(
                opened.subdir(&VPath::root(), None, true)?,
                format!("{location}#{:p}", std::sync::Arc::as_ptr(files)),
            ),
            VPath::root(),
        ),
        (Location::Dir(_) | Location::S3 { .. }, _) => crate::changes::store_journal(location)?
            .ok_or_else(|| Error::Usage(format!("cannot keep a change journal for `{location}` in this build")))?,
        _ => {
            return Err(Error::Usage(format!(
                "the mount at {at} sets `changes: journal`, but skillstore does not write to `{location}`; \
                 a journal is kept in a directory, a memory file or an S3 bucket"
            )));
        }
    };
    Ok(Some(MountJournal {
        at: at.clone(),
        journal,
        prefix,
    }))
}

/// Adds the source `name` at `path` to the feed of the journal its mount
/// keeps, if any.
pub(super) fn add_source(
    feeds: &mut Vec<ChangeFeed>,
    journals: &[MountJournal],
    mount_at: &VPath,
    name: &str,
    path: &VPath,
) -> Result<()> {
    let Some(mount) = journals.iter().find(|j| j.at == *mount_at) else {
        return Ok(());
    };
    let inner = path.strip_prefix(&mount.at).expect("the mount is an ancestor");
    let stored = match inner.is_root() {
        true => mount.prefix.clone(),
        false => mount.prefix.join(inner.relative_str())?,
    };
    let feed = match feeds.iter().position(|f| f.journal.store() == mount.journal.store()) {
        Some(at) => &mut feeds[at],
        None => {
            feeds.push(ChangeFeed {
                journal: mount.journal.clone(),
                sources: Vec::new(),
            });
            feeds.last_mut().expect("just pushed")
        }
    };
    feed.sources.push((name.to_owned(), stored));
    Ok(())
}

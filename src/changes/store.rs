//! Where a location's journal is: the root of its store (a directory's
//! own root, an S3 bucket's root whatever the location's prefix), and
//! where the location is in that store.

use std::sync::Arc;

use skillstore_backends::VPath;

use super::journal::{Journal, JournalError};
use crate::error::{Error, Result};
use crate::location::Location;

/// The journal of the store holding `location`, and the location's path
/// from the store's root; `None` for a location skillstore does not write
/// to (Git, discovery) or one held in memory.
pub fn store_journal(location: &Location) -> Result<Option<(Journal, VPath)>> {
    match location {
        Location::Dir(path) => {
            let backend = skillstore_backends::FsBackend::new(path)
                .map_err(|e| Error::Usage(format!("cannot open the directory `{}`: {e}", path.display())))?;
            Ok(Some((
                Journal::new(Arc::new(backend), location.to_string()),
                VPath::root(),
            )))
        }
        #[cfg(feature = "s3")]
        Location::S3 { bucket, prefix } => {
            let store = format!("s3://{bucket}");
            let backend = skillstore_backends::ObjectStoreBackend::from_s3_url(
                &store,
                &skillstore_backends::S3Options::default(),
            )
            .map_err(|e| Error::Usage(format!("cannot use the change journal of `{location}`: {e}")))?;
            let at = match prefix.is_empty() {
                true => VPath::root(),
                false => VPath::root().join(prefix)?,
            };
            Ok(Some((Journal::new(Arc::new(backend), store), at)))
        }
        _ => Ok(None),
    }
}

/// Records writes made without the editor (`publish`) to the directories
/// `written` (paths from `location`'s root) in the journal of its store,
/// when the store keeps one (its head exists: a store nobody follows gets
/// none). Returns how many entries were added.
pub async fn record_outside(location: &Location, written: &[VPath]) -> std::result::Result<usize, JournalError> {
    let Ok(Some((journal, at))) = store_journal(location) else {
        return Ok(0);
    };
    if !journal.exists().await? {
        return Ok(0);
    }
    let mut added = 0;
    for path in written {
        let stored = match path.is_root() {
            true => at.clone(),
            false => at
                .join(path.relative_str())
                .map_err(|e| JournalError::Refused(e.to_string()))?,
        };
        journal.record(&stored).await?;
        added += 1;
    }
    Ok(added)
}

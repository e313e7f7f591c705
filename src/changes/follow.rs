//! Following a journal: one read of its head per look, turned into what a
//! reader must list again.

use std::collections::BTreeSet;

use super::journal::{Journal, JournalError};

/// What one look at the journal tells.
#[derive(Debug)]
#[non_exhaustive]
pub enum Poll {
    /// The first look: where the journal stands now. Taken before a reader
    /// loads, it means nothing to list; every later write is reported.
    Baseline,
    /// Nothing was written since the last look.
    Unchanged,
    /// These directories (paths from the store's root) were written since
    /// the last look; at most [`super::journal::MAX_ENTRIES`] of them.
    Changed(BTreeSet<String>),
    /// Every source must be listed again: the follower fell behind the
    /// entries the head keeps, or the journal was removed or started again.
    Everything(&'static str),
    /// The journal could not be read or was refused: the reader polls
    /// until a later look succeeds.
    Failed(JournalError),
}

/// Where a follower stands: the journal's epoch and generation at its last
/// good look.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    epoch: String,
    generation: u64,
}

/// Follows one store's journal. Each [`Follower::poll`] reads one object,
/// whatever the number of sources or tenants over the store.
#[derive(Debug)]
pub struct Follower {
    journal: Journal,
    seen: Option<Seen>,
    /// Whether a look has been taken (a store with no journal yet has
    /// nothing to report until one appears).
    looked: bool,
}

impl Follower {
    /// A follower of `journal` that has not looked yet.
    pub fn new(journal: Journal) -> Self {
        Follower {
            journal,
            seen: None,
            looked: false,
        }
    }

    /// True when the last look found a head. A store without one records
    /// nothing a reader could follow yet (a store written only by
    /// `publish`, or one whose head was removed), so its readers poll.
    pub fn found_head(&self) -> bool {
        self.seen.is_some()
    }

    /// The journal followed.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Reads the head once and says what changed since the last look. A
    /// failed look keeps the follower where it stood, so the next good one
    /// reports everything written meanwhile (or [`Poll::Everything`]).
    pub async fn poll(&mut self) -> Poll {
        let read = match self.journal.read().await {
            Ok(read) => read,
            Err(e) => return Poll::Failed(e),
        };
        let first = !self.looked;
        self.looked = true;
        let Some(read) = read else {
            return match self.seen.take() {
                Some(_) => Poll::Everything("the change journal was removed"),
                None if first => Poll::Baseline,
                None => Poll::Unchanged,
            };
        };
        let head = read.head;
        let now = Seen {
            epoch: head.epoch.clone(),
            generation: head.generation,
        };
        let before = self.seen.replace(now);
        let Some(before) = before else {
            // A journal made since the first look holds only new writes.
            return match first {
                true => Poll::Baseline,
                false => Poll::Changed(head.entries.into_iter().map(|e| e.path).collect()),
            };
        };
        if before.epoch != head.epoch {
            return Poll::Everything("the change journal was started again");
        }
        if head.generation == before.generation {
            return Poll::Unchanged;
        }
        if head.generation < before.generation {
            return Poll::Everything("the change journal went back");
        }
        let oldest = head.entries.first().map_or(head.generation + 1, |e| e.generation);
        if oldest > before.generation + 1 {
            return Poll::Everything("more was written than the change journal keeps since the last look");
        }
        Poll::Changed(
            head.entries
                .into_iter()
                .filter(|e| e.generation > before.generation)
                .map(|e| e.path)
                .collect(),
        )
    }
}

//! Change feeds: how a long-lived reader learns that a source changed
//! without listing it every interval.
//!
//! - [`journal`]: the change journal, one small object at the root of a
//!   store (`.skillstore/changes/head.json`) that every write through
//!   [`crate::SkillEditor`] (and `publish`) moves forward by a conditional
//!   put, naming the source it wrote.
//! - [`follow`]: a [`Follower`] reads that one object per interval and
//!   says which sources changed since its last look, or that everything
//!   must be listed again (it fell behind, the journal was started again),
//!   or that the journal could not be used (then the reader polls).
//! - [`push`]: a Git push event (GitHub, Gitea, GitLab) read into the
//!   repository and reference it moved, and which Git mounts follow them.
//!
//! A journal is a hint, never content: what it names is listed and read
//! again through the ordinary guards, so a planted or forged journal can
//! cost refreshes, bounded per look, and never bring a byte in. A change it
//! misses is found by the fallback poll.

pub mod follow;
pub mod journal;
pub mod push;
mod store;

use serde::Deserialize;

pub use follow::{Follower, Poll};
pub use journal::{Journal, JournalError, JournalWriter};
pub use push::GitPush;
pub use store::{record_outside, store_journal};

/// How a mount's changes reach a long-lived reader: the `changes:` setting
/// of a mount in `skillstore.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ChangesConfig {
    /// `poll` or `journal`.
    Named(ChangesKind),
    /// `{sqs: QUEUE_URL}`: S3 event notifications through an SQS queue.
    Sqs(SqsConfig),
}

/// The named kinds of [`ChangesConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangesKind {
    /// List the sources every interval (the default).
    Poll,
    /// Follow the store's change journal, polling at a longer interval as
    /// the fallback; writes through skillstore record themselves in it.
    Journal,
}

/// `{sqs: QUEUE_URL}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqsConfig {
    /// The queue the bucket's event notifications are sent to.
    pub sqs: String,
}

impl ChangesConfig {
    /// True when writes record themselves in the store's journal and
    /// readers follow it.
    pub fn is_journal(&self) -> bool {
        matches!(self, ChangesConfig::Named(ChangesKind::Journal))
    }
}

/// True when a journal entry naming `changed` concerns the source stored at
/// `watched` (both paths from the store's root): the same directory, or one
/// inside the other.
pub fn concerns(changed: &str, watched: &str) -> bool {
    let inside =
        |inner: &str, outer: &str| outer == "/" || inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('/'));
    changed == watched || inside(changed, watched) || inside(watched, changed)
}

#[cfg(test)]
mod tests {
    use super::concerns;

    #[test]
    fn an_entry_concerns_its_source_and_nothing_beside_it() {
        assert!(concerns("/t/acme/team", "/t/acme/team"));
        assert!(concerns("/t/acme/team/x", "/t/acme/team"));
        assert!(concerns("/t/acme", "/t/acme/team"));
        assert!(concerns("/", "/t/acme/team"));
        assert!(!concerns("/t/acme/teams", "/t/acme/team"));
        assert!(!concerns("/t/acm", "/t/acme/team"));
        assert!(!concerns("/t/globex/team", "/t/acme/team"));
    }
}

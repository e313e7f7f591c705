//! A source's selection (`select:` in its configuration): which release of
//! each skill it serves instead of the working copy.

use std::collections::BTreeMap;

use super::version::Selector;
use crate::error::{Error, Result};

/// The key that gives the selector of every skill the selection does not
/// name.
pub const EVERY_SKILL: &str = "*";

/// Skill name (or `*`) -> selector, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    named: BTreeMap<String, Selector>,
    every: Option<Selector>,
}

impl Selection {
    /// Parses `select:` as written: each key a skill name or `*`, each value
    /// a channel, an exact version or a Cargo range ([`Selector::parse`]).
    /// A refusal is [`Error::Config`], naming the key.
    pub fn parse<'a>(entries: impl IntoIterator<Item = (&'a String, &'a String)>) -> Result<Selection> {
        let mut selection = Selection::default();
        for (key, value) in entries {
            let selector = Selector::parse(value)
                .map_err(|e| Error::Config(format!("`select` of `{}`: {e}", key.escape_debug())))?;
            if key == EVERY_SKILL {
                selection.every = Some(selector);
            } else if skillstore_backends::is_valid_segment(key) && !key.starts_with('.') {
                selection.named.insert(key.clone(), selector);
            } else {
                return Err(Error::Config(format!(
                    "`select` names `{}`, which is neither a skill directory name nor `*`",
                    key.escape_debug()
                )));
            }
        }
        Ok(selection)
    }

    /// The selector for the skill `name`: its own, else the one for `*`.
    pub fn for_skill(&self, name: &str) -> Option<&Selector> {
        self.named.get(name).or(self.every.as_ref())
    }

    /// True when nothing is selected (every skill is its working copy).
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && self.every.is_none()
    }

    /// The skills named by their own key.
    pub fn named(&self) -> impl Iterator<Item = &str> {
        self.named.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_skills_win_over_every_skill() {
        let map: BTreeMap<String, String> = [("*".into(), "stable".into()), ("csv-report".into(), "^1".into())].into();
        let s = Selection::parse(&map).unwrap();
        assert_eq!(s.for_skill("csv-report").unwrap().to_string(), "^1");
        assert_eq!(s.for_skill("pdf").unwrap().to_string(), "stable");
        let bad: BTreeMap<String, String> = [("../x".into(), "^1".into())].into();
        assert_eq!(Selection::parse(&bad).unwrap_err().kind(), "config");
        let bad: BTreeMap<String, String> = [("pdf".into(), "not a range".into())].into();
        assert_eq!(Selection::parse(&bad).unwrap_err().kind(), "config");
    }
}

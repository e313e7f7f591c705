//! The YAML frontmatter of a SKILL.md: where it is, and what it holds.
//!
//! A frontmatter is an optional UTF-8 byte order mark, a first line `---`,
//! YAML, and a closing line `---` ([`fence`]). Its YAML is read by one
//! parser with two paths: a fast path for the flat mappings nearly every
//! frontmatter is ([`fast`]), and the reference path, `serde_yaml` with
//! anchors and aliases refused ([`reference`]), for everything else. The
//! two agree on every input the fast path takes; the differential tests
//! beside them (and a fuzz target) hold them to it.

#[cfg(test)]
mod differential;
mod fast;
mod fence;
mod reference;

use serde_yaml::Value;

use crate::skill::ProblemKind;
pub(crate) use fence::{Fence, decode, locate};
pub(crate) use reference::scalar_texts;

/// The largest frontmatter accepted, in bytes (64 KiB).
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// A frontmatter key: text borrowed from the file (the fast path), or any
/// YAML value (the reference path).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Key<'a> {
    Text(&'a str),
    Yaml(Value),
}

impl Key<'_> {
    /// The key's text, when it is a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Key::Text(text) => Some(text),
            Key::Yaml(value) => value.as_str(),
        }
    }

    /// The key as a YAML value, whichever path read it.
    #[cfg(test)]
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Key::Text(text) => Value::String((*text).to_owned()),
            Key::Yaml(value) => value.clone(),
        }
    }
}

/// The top-level entries of a frontmatter, in file order, with distinct
/// keys.
pub(crate) type Entries<'a> = Vec<(Key<'a>, Value)>;

/// Reads the YAML of a frontmatter: the fast path when it takes the text,
/// the reference path otherwise. An error is the problem's kind and
/// message.
pub(crate) fn parse(yaml: &str) -> Result<Entries<'_>, (ProblemKind, String)> {
    match fast::parse(yaml) {
        Some(entries) => Ok(entries.into_iter().map(|(k, v)| (Key::Text(k), v)).collect()),
        None => parse_reference(yaml),
    }
}

/// Reads the YAML of a frontmatter on the reference path alone.
pub(crate) fn parse_reference(yaml: &str) -> Result<Entries<'_>, (ProblemKind, String)> {
    reference::parse(yaml).map(|mapping| mapping.into_iter().map(|(k, v)| (Key::Yaml(k), v)).collect())
}

/// How a value's YAML type is named in messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

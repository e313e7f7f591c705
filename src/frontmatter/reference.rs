//! The reference path: any YAML, read by `serde_yaml`, with anchors and
//! aliases refused first by a look at the tokens of the same tokenizer
//! (libyaml, as transpiled in `libyaml-rs`) that `serde_yaml` parses with,
//! so the check and the parse can never disagree about what is an anchor.

use std::mem::MaybeUninit;

use libyaml_rs as sys;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_yaml::{Mapping, Value};

use crate::skill::ProblemKind;

/// The frontmatter's mapping; an error is the problem's kind and message.
pub(crate) fn parse(yaml: &str) -> Result<Mapping, (ProblemKind, String)> {
    if uses_anchors(yaml) {
        return Err((
            ProblemKind::YamlAlias,
            "YAML anchors and aliases (`&name`, `*name`) are not accepted in a frontmatter".into(),
        ));
    }
    let value: Value = serde_yaml::from_str(yaml).map_err(|e| {
        (
            ProblemKind::InvalidYaml,
            format!("the frontmatter is not valid YAML: {e}"),
        )
    })?;
    match value {
        Value::Mapping(mapping) => Ok(mapping),
        Value::Null => Ok(Mapping::new()),
        other => Err((
            ProblemKind::NotAMapping,
            format!(
                "the frontmatter must be a mapping of fields, not {}",
                super::type_name(&other)
            ),
        )),
    }
}

/// True when the YAML uses an anchor (`&a`) or an alias (`*a`). Only the
/// tokenizer can tell `*a` the alias from `*a*` inside a quoted string, so
/// texts holding `&` or `*` are tokenized; others cannot hold either and
/// are passed at once.
pub(crate) fn uses_anchors(yaml: &str) -> bool {
    if !yaml.bytes().any(|b| b == b'&' || b == b'*') {
        return false;
    }
    has_anchor_or_alias(yaml.as_bytes())
}

/// True when the YAML holds an anchor or alias token. A text the tokenizer
/// rejects holds none that the parser would accept, so it answers false and
/// leaves the error to the parser.
fn has_anchor_or_alias(yaml: &[u8]) -> bool {
    let mut parser = MaybeUninit::<sys::yaml_parser_t>::uninit();
    // SAFETY: `parser` is initialized by `yaml_parser_initialize` before any
    // other use and deleted exactly once below; `yaml` outlives the parser;
    // every token is deleted after its type is read.
    unsafe {
        let parser = parser.as_mut_ptr();
        if sys::yaml_parser_initialize(parser).fail {
            return false;
        }
        sys::yaml_parser_set_encoding(parser, sys::YAML_UTF8_ENCODING);
        sys::yaml_parser_set_input_string(parser, yaml.as_ptr(), yaml.len() as u64);
        let mut found = false;
        loop {
            let mut token = MaybeUninit::<sys::yaml_token_t>::uninit();
            if sys::yaml_parser_scan(parser, token.as_mut_ptr()).fail {
                break;
            }
            let kind = (*token.as_ptr()).type_;
            sys::yaml_token_delete(token.as_mut_ptr());
            match kind {
                sys::YAML_ANCHOR_TOKEN | sys::YAML_ALIAS_TOKEN => {
                    found = true;
                    break;
                }
                sys::YAML_STREAM_END_TOKEN | sys::YAML_NO_TOKEN => break,
                _ => {}
            }
        }
        sys::yaml_parser_delete(parser);
        found
    }
}

/// The text written in the file for each of `fields`, top-level keys whose
/// values are scalars (a number written `2.10` is `"2.10"`, not `"2.1"`).
/// A field missing, or a YAML the parser refuses, gives no text.
pub(crate) fn scalar_texts(yaml: &str, fields: &[&str]) -> Vec<(String, String)> {
    let deserializer = serde_yaml::Deserializer::from_str(yaml);
    Texts { fields }.deserialize(deserializer).unwrap_or_default()
}

struct Texts<'f> {
    fields: &'f [&'f str],
}

impl<'de> DeserializeSeed<'de> for Texts<'_> {
    type Value = Vec<(String, String)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Texts<'_> {
    type Value = Vec<(String, String)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = Vec::new();
        while let Some(key) = map.next_key::<Value>()? {
            match key.as_str().filter(|k| self.fields.contains(k)) {
                Some(field) => found.push((field.to_owned(), map.next_value::<Written>()?.0)),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// A scalar as written, whatever type YAML would give it.
struct Written(String);

impl<'de> serde::Deserialize<'de> for Written {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Written;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scalar")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Written, E> {
                Ok(Written(text.to_owned()))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_tell_aliases_from_text() {
        assert!(has_anchor_or_alias(b"a: &x 1\nb: *x\n"));
        assert!(has_anchor_or_alias(b"- &a [1]\n- *a\n"));
        assert!(!has_anchor_or_alias(b"a: 'x & *y'\n"));
        assert!(!has_anchor_or_alias(b"a: |\n  *not an alias\n"));
        assert!(!has_anchor_or_alias(b"a: [unclosed\n"));
    }

    #[test]
    fn anchors_and_aliases_are_found_only_where_they_are() {
        assert!(uses_anchors("a: &x 1\nb: *x\n"));
        assert!(uses_anchors("base: &b {k: v}\n"));
        assert!(!uses_anchors("description: \"use *bold* & more\"\n"));
        assert!(!uses_anchors("description: Tom & Jerry\n"));
        assert!(!uses_anchors("description: plain text\n"));
    }

    #[test]
    fn scalars_keep_the_text_written() {
        let yaml = "name: 2024\nlicense: 2.10\nother: [1, 2]\ncompatibility: TRUE\ndescription: 1e3\n";
        let texts = scalar_texts(yaml, &["name", "license", "compatibility", "description"]);
        let texts: Vec<(&str, &str)> = texts.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            texts,
            [
                ("name", "2024"),
                ("license", "2.10"),
                ("compatibility", "TRUE"),
                ("description", "1e3")
            ]
        );
        assert!(scalar_texts("name: [unclosed\n", &["name"]).is_empty());
    }
}

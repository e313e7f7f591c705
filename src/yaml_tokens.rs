//! A token-level look at YAML, through the same tokenizer (libyaml, as
//! transpiled in `libyaml-rs`) that `serde_yaml` parses with, so the check
//! and the parse can never disagree about what is an anchor.

use std::mem::MaybeUninit;

use libyaml_rs as sys;

/// True when the YAML holds an anchor or alias token. A text the tokenizer
/// rejects holds none that the parser would accept, so it answers false and
/// leaves the error to the parser.
pub(crate) fn has_anchor_or_alias(yaml: &[u8]) -> bool {
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
}

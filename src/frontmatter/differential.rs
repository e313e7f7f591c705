//! The fast path against the reference path: on every frontmatter-like
//! YAML, [`parse`] (fast path first) and [`parse_reference`] give the same
//! entries in the same order, or the same kind of error.

use proptest::prelude::*;
use serde_yaml::Value;

use super::{Entries, parse, parse_reference};

fn values(entries: Entries<'_>) -> Vec<(Value, Value)> {
    entries.into_iter().map(|(k, v)| (k.to_value(), v)).collect()
}

/// Both paths' results, required to be identical.
fn identical(yaml: &str) {
    let full = parse(yaml).map(values);
    let reference = parse_reference(yaml).map(values);
    match (&full, &reference) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{yaml:?}"),
        (Err((a, _)), Err((b, _))) => assert_eq!(a, b, "{yaml:?}"),
        _ => panic!("the paths disagree on {yaml:?}: {full:?} against {reference:?}"),
    }
}

#[test]
fn noncharacters_are_refused_by_both_paths() {
    for text in ["\u{fffe}", "\u{ffff}", "a\u{fffe}b", "x\u{ffff}"] {
        for yaml in [
            format!("name: {text}\ndescription: d\n"),
            format!("name: a\ndescription: \"{text}\"\n"),
            format!("name: a\ndescription: '{text}'\n"),
            format!("name: a\ndescription: |\n  {text}\n"),
            format!("name: a\nmetadata:\n  {text}: v\n"),
        ] {
            identical(&yaml);
            assert!(parse(&yaml).is_err(), "{yaml:?}");
        }
    }
}

#[test]
fn control_characters_and_escapes_agree() {
    let cases = [
        "description: \"bell \\a and \\u0007 and \\x1b\"\n",
        "description: \"\\u0000\"\n",
        "description: \"\\uFFFE\"\n",
        "description: \"\\u0085 \\u2028\"\n",
        "description: |\n  tab\there\n",
        "description: a\u{7f}b\n",
        "description: a\u{85}b\n",
        "description: a\u{9f}b\n",
        "description: 'é → 日本 \u{a0} \u{1f600}'\n",
        "description: a\rb\n",
        "description: a\tb\n",
    ];
    for yaml in cases {
        identical(yaml);
    }
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z][a-zA-Z0-9 ,.;:#'\"!&*()\\[\\]{}é→-]{0,24}",
        Just("null".into()),
        Just("~".into()),
        Just("True".into()),
        Just("false".into()),
        Just("".into()),
        "[0-9.+-][0-9a-z.]{0,6}",
    ]
}

/// Text mixing ordinary characters with those YAML treats specially:
/// controls, C1, line separators, a byte order mark, noncharacters,
/// non-ASCII letters and symbols, and YAML indicators.
fn special_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        8 => "[a-z]{1,4}",
        1 => Just(" ".to_owned()),
        1 => prop::sample::select(vec![
            "\u{0}", "\u{7}", "\u{8}", "\t", "\r", "\u{b}", "\u{c}", "\u{1b}", "\u{1f}", "\u{7f}", "\u{80}",
            "\u{85}", "\u{9f}", "\u{a0}", "\u{2028}", "\u{2029}", "\u{feff}", "\u{fffd}", "\u{fffe}", "\u{ffff}",
            "\u{10ffff}", "é", "日", "→", "\u{1f600}", "\u{301}", ":", "#", "-", "'", "\"", "\\", "&", "*", "!",
            "%", "@", "`", "[", "{", "|", ">", "?", ",",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(pieces, 1..8).prop_map(|p| p.concat())
}

/// An escape sequence of a double-quoted YAML string.
fn escape() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "\\a", "\\n", "\\t", "\\r", "\\0", "\\e", "\\\\", "\\\"", "\\/", "\\ ", "\\N"
        ])
        .prop_map(str::to_owned),
        prop::sample::select(vec![
            0x0u32, 0x7, 0x1b, 0x7f, 0x85, 0x9f, 0xa0, 0xe9, 0x2028, 0xfeff, 0xfffe, 0xffff
        ])
        .prop_map(|c| format!("\\u{c:04X}")),
    ]
}

fn special_value() -> impl Strategy<Value = String> {
    prop_oneof![
        special_text().prop_map(|s| format!(" {s}\n")),
        (special_text(), prop::collection::vec(escape(), 0..3)).prop_map(|(s, escapes)| format!(
            " \"{}{}\"\n",
            s.replace('\\', "\\\\").replace('"', "\\\""),
            escapes.concat()
        )),
        special_text().prop_map(|s| format!(" '{}'\n", s.replace('\'', "''"))),
        (
            prop_oneof![Just("|"), Just("|-"), Just(">"), Just(">-")],
            special_text()
        )
            .prop_map(|(h, s)| format!(" {h}\n  {s}\n")),
        prop::collection::vec(special_text(), 1..3)
            .prop_map(|ls| format!("\n{}", ls.iter().map(|l| format!("  - {l}\n")).collect::<String>())),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        scalar().prop_map(|s| format!(" {s}\n")),
        scalar().prop_map(|s| format!(" \"{}\"\n", s.replace('\\', "\\\\").replace('"', "\\\""))),
        scalar().prop_map(|s| format!(" '{}'\n", s.replace('\'', "''"))),
        (
            prop_oneof![Just("|"), Just("|-"), Just(">"), Just(">-")],
            prop::collection::vec(scalar(), 1..4)
        )
            .prop_map(|(h, ls)| format!(" {h}\n{}", ls.iter().map(|l| format!("  {l}\n")).collect::<String>())),
        prop::collection::vec(scalar(), 1..4)
            .prop_map(|ls| format!("\n{}", ls.iter().map(|l| format!("  - {l}\n")).collect::<String>())),
        prop::collection::vec(("[a-z]{1,6}", scalar()), 1..4).prop_map(|kv| format!(
            "\n{}",
            kv.iter().map(|(k, v)| format!("  {k}: {v}\n")).collect::<String>()
        )),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z][a-z_-]{0,8}",
        1 => special_text(),
        1 => Just("name".to_owned()),
        1 => Just("true".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_path_agrees_with_the_reference_path(
        entries in prop::collection::vec(("[a-z][a-z_-]{0,8}", value()), 0..6),
        crlf in any::<bool>(),
    ) {
        let mut yaml: String = entries.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        if crlf {
            yaml = yaml.replace('\n', "\r\n");
        }
        identical(&yaml);
    }

    #[test]
    fn special_characters_get_the_same_result_on_both_paths(
        entries in prop::collection::vec((key(), prop_oneof![value(), special_value()]), 0..6),
        crlf in any::<bool>(),
    ) {
        let mut yaml: String = entries.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        if crlf {
            yaml = yaml.replace('\n', "\r\n");
        }
        identical(&yaml);
    }
}

//! `validate_path` beside the specification's reference validator
//! (`skills-ref` 0.1.1, command `agentskills validate DIR`): one skill per
//! rule of either validator, and the same verdict on each, except for the
//! differences listed in the README (Agreement with the reference validator), where both verdicts
//! are pinned so a difference that goes away is noticed.
//!
//! Ignored by default; `scripts/test.sh` installs `skills-ref` in a venv,
//! sets `SKILLSTORE_AGENTSKILLS` to its `agentskills` command and runs this
//! with `--include-ignored`. Run that way without the variable, it fails
//! rather than passing untested.

use std::path::{Path, PathBuf};
use std::process::Command;

use skillstore::validate::validate_path;

const AGENTSKILLS: &str = "SKILLSTORE_AGENTSKILLS";

/// Why a case's verdicts differ on purpose, as listed in
/// the README (Agreement with the reference validator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Difference {
    NestingDepth,
    FrontmatterSize,
    FileSize,
    LinkOut,
    MetadataMap,
    StringFieldShape,
    FlowList,
    Tag,
    TabAfterColon,
    ByteOrderMark,
}

struct Case {
    /// The case's label, also its directory's parent.
    label: &'static str,
    /// The skill directory's name.
    dir: &'static str,
    /// Files inside the skill directory.
    files: Vec<(&'static str, Vec<u8>)>,
    /// Our verdict.
    valid: bool,
    /// Set when the reference's verdict is the opposite, on purpose.
    differs: Option<Difference>,
}

fn case(label: &'static str, dir: &'static str, skill_md: impl Into<Vec<u8>>, valid: bool) -> Case {
    Case {
        label,
        dir,
        files: vec![("SKILL.md", skill_md.into())],
        valid,
        differs: None,
    }
}

fn skill(dir: &'static str, fields: &str) -> Vec<u8> {
    format!("---\n{fields}---\n# {dir}\n\nBody.\n").into_bytes()
}

fn cases() -> Vec<Case> {
    let long_name = "a".repeat(65);
    let long_name: &'static str = Box::leak(long_name.into_boxed_str());
    let mut cases = vec![
        // Valid skills.
        case(
            "minimal",
            "pdf",
            skill("pdf", "name: pdf\ndescription: Read PDFs.\n"),
            true,
        ),
        case(
            "every_field",
            "forms",
            skill(
                "forms",
                "name: forms\ndescription: Fill forms.\nlicense: MIT\ncompatibility: Python 3.11\n\
                 metadata:\n  author: sre\n  version: \"1.2\"\nallowed-tools: Read Bash\n",
            ),
            true,
        ),
        case(
            "unicode_name",
            "café-outil",
            skill("café-outil", "name: café-outil\ndescription: Un outil.\n"),
            true,
        ),
        case(
            "block_scalar_description",
            "folded",
            skill("folded", "name: folded\ndescription: >-\n  Two lines\n  folded.\n"),
            true,
        ),
        case(
            "numeric_name",
            "2024",
            skill("2024", "name: 2024\ndescription: A year.\n"),
            true,
        ),
        case(
            "numeric_description",
            "num",
            skill("num", "name: num\ndescription: 42\n"),
            true,
        ),
        case(
            "numeric_license",
            "lic",
            skill("lic", "name: lic\ndescription: d\nlicense: 2.0\n"),
            true,
        ),
        case(
            "boolean_compatibility",
            "compat",
            skill("compat", "name: compat\ndescription: d\ncompatibility: true\n"),
            true,
        ),
        case(
            "escaped_control_character",
            "bell",
            skill("bell", "name: bell\ndescription: \"rings \\a here\"\n"),
            true,
        ),
        Case {
            label: "lowercase_skill_md",
            dir: "lower",
            files: vec![("skill.md", skill("lower", "name: lower\ndescription: d\n"))],
            valid: true,
            differs: None,
        },
        // Invalid under both.
        Case {
            label: "missing_skill_md",
            dir: "empty",
            files: vec![("README.md", b"# not a skill\n".to_vec())],
            valid: false,
            differs: None,
        },
        case("no_frontmatter", "nofm", "# Just markdown\n", false),
        case(
            "unclosed_frontmatter",
            "open",
            "---\nname: open\ndescription: d\n",
            false,
        ),
        case(
            "invalid_yaml",
            "bad",
            skill("bad", "name: bad\ndescription: \"unterminated\n"),
            false,
        ),
        case("not_a_mapping", "list", skill("list", "- name\n- description\n"), false),
        case(
            "yaml_alias",
            "alias",
            skill("alias", "name: &n alias\ndescription: *n\n"),
            false,
        ),
        case(
            "not_utf8",
            "latin",
            b"---\nname: latin\ndescription: caf\xe9\n---\n".to_vec(),
            false,
        ),
        case(
            "unexpected_field",
            "extra",
            skill("extra", "name: extra\ndescription: d\nversion: two\n"),
            false,
        ),
        case("missing_name", "noname", skill("noname", "description: d\n"), false),
        case(
            "empty_name",
            "blank",
            skill("blank", "name: ''\ndescription: d\n"),
            false,
        ),
        case(
            "missing_description",
            "nodesc",
            skill("nodesc", "name: nodesc\n"),
            false,
        ),
        case(
            "empty_description",
            "emptydesc",
            skill("emptydesc", "name: emptydesc\ndescription: '  '\n"),
            false,
        ),
        case(
            "name_too_long",
            long_name,
            format!("---\nname: {long_name}\ndescription: d\n---\n"),
            false,
        ),
        case(
            "name_not_lowercase",
            "Upper",
            skill("Upper", "name: Upper\ndescription: d\n"),
            false,
        ),
        case(
            "name_hyphen_edge",
            "-edge",
            skill("-edge", "name: -edge\ndescription: d\n"),
            false,
        ),
        case(
            "name_consecutive_hyphens",
            "a--b",
            skill("a--b", "name: a--b\ndescription: d\n"),
            false,
        ),
        case(
            "name_invalid_chars",
            "under_score",
            skill("under_score", "name: under_score\ndescription: d\n"),
            false,
        ),
        case(
            "name_mismatch",
            "alpha",
            skill("alpha", "name: beta\ndescription: d\n"),
            false,
        ),
        case(
            "description_too_long",
            "longdesc",
            format!("---\nname: longdesc\ndescription: {}\n---\n", "x".repeat(1025)),
            false,
        ),
        case(
            "compatibility_too_long",
            "longcompat",
            format!(
                "---\nname: longcompat\ndescription: d\ncompatibility: {}\n---\n",
                "x".repeat(501)
            ),
            false,
        ),
        case(
            "compatibility_not_a_string",
            "compatlist",
            skill(
                "compatlist",
                "name: compatlist\ndescription: d\ncompatibility:\n  - a\n",
            ),
            false,
        ),
        case(
            "name_not_a_string",
            "namemap",
            skill("namemap", "name:\n  first: a\ndescription: d\n"),
            false,
        ),
    ];
    // Differences on purpose.
    let differ = |mut c: Case, why: Difference| {
        c.differs = Some(why);
        c
    };
    cases.extend([
        differ(
            case(
                "nesting_depth",
                "deep",
                skill(
                    "deep",
                    "name: deep\ndescription: d\nmetadata:\n  a:\n    b:\n      c:\n        d:\n          e:\n            \
                     f:\n              g:\n                h:\n                  i: x\n",
                ),
                false,
            ),
            Difference::NestingDepth,
        ),
        differ(
            case(
                "frontmatter_over_64_kib",
                "bigfm",
                format!(
                    "---\nname: bigfm\ndescription: d\nlicense: {}\n---\n",
                    "x".repeat(skillstore::MAX_FRONTMATTER_BYTES)
                ),
                false,
            ),
            Difference::FrontmatterSize,
        ),
        differ(
            case(
                "file_over_10_mib",
                "bigfile",
                {
                    let mut text = skill("bigfile", "name: bigfile\ndescription: d\n");
                    text.resize(10 * 1024 * 1024 + 1, b'x');
                    text
                },
                false,
            ),
            Difference::FileSize,
        ),
        differ(
            case(
                "metadata_not_a_map",
                "metalist",
                skill("metalist", "name: metalist\ndescription: d\nmetadata:\n  - a\n  - b\n"),
                false,
            ),
            Difference::MetadataMap,
        ),
        differ(
            case(
                "metadata_nested_map",
                "metanest",
                skill("metanest", "name: metanest\ndescription: d\nmetadata:\n  a:\n    b: c\n"),
                false,
            ),
            Difference::MetadataMap,
        ),
        differ(
            case(
                "license_a_list",
                "liclist",
                skill("liclist", "name: liclist\ndescription: d\nlicense:\n  - MIT\n"),
                false,
            ),
            Difference::StringFieldShape,
        ),
        differ(
            case(
                "flow_list",
                "flow",
                skill("flow", "name: flow\ndescription: d\nallowed-tools: [Read, Bash]\n"),
                true,
            ),
            Difference::FlowList,
        ),
        differ(
            case("tag", "tagged", skill("tagged", "name: !!str tagged\ndescription: d\n"), true),
            Difference::Tag,
        ),
        differ(
            case(
                "tab_after_colon",
                "tab",
                skill("tab", "name: tab\ndescription:\tTabbed.\n"),
                true,
            ),
            Difference::TabAfterColon,
        ),
        differ(
            case(
                "byte_order_mark",
                "bom",
                [b"\xef\xbb\xbf".as_slice(), &skill("bom", "name: bom\ndescription: d\n")].concat(),
                true,
            ),
            Difference::ByteOrderMark,
        ),
    ]);
    cases
}

/// Writes every case under `root`, returning each case with its skill
/// directory.
fn build(root: &Path, cases: Vec<Case>) -> Vec<(Case, PathBuf)> {
    cases
        .into_iter()
        .map(|case| {
            let dir = root.join(case.label).join(case.dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &case.files {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
            (case, dir)
        })
        .collect()
}

fn reference_says_valid(agentskills: &Path, dir: &Path) -> bool {
    let output = Command::new(agentskills)
        .arg("validate")
        .arg(dir)
        .output()
        .expect("agentskills runs");
    output.status.success()
}

fn agentskills() -> PathBuf {
    std::env::var_os(AGENTSKILLS)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("set {AGENTSKILLS} to the `agentskills` command of skills-ref 0.1.1"))
}

#[tokio::test]
#[ignore = "needs skills-ref: set SKILLSTORE_AGENTSKILLS and pass --include-ignored"]
async fn verdicts_match_the_reference_validator_except_where_documented() {
    let agentskills = agentskills();
    let work = tempfile::tempdir().unwrap();
    let mut built = build(work.path(), cases());
    // A SKILL.md that links out of the skill's directory.
    let outside = work.path().join("outside.md");
    std::fs::write(&outside, skill("linked", "name: linked\ndescription: d\n")).unwrap();
    let linked = work.path().join("link_out").join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&outside, linked.join("SKILL.md")).unwrap();
    built.push((
        Case {
            label: "link_out",
            dir: "linked",
            files: Vec::new(),
            valid: false,
            differs: Some(Difference::LinkOut),
        },
        linked,
    ));

    let mut wrong = Vec::new();
    for (case, dir) in &built {
        let ours = validate_path(dir).await;
        let reference = reference_says_valid(&agentskills, dir);
        let expected_reference = if case.differs.is_some() {
            !case.valid
        } else {
            case.valid
        };
        if ours.valid != case.valid || reference != expected_reference {
            wrong.push(format!(
                "{}: skillstore {} (expected {}), reference {} (expected {}); problems {:?}",
                case.label, ours.valid, case.valid, reference, expected_reference, ours.problems
            ));
        }
    }
    assert!(wrong.is_empty(), "verdicts differ:\n{}", wrong.join("\n"));
}

#[tokio::test]
#[ignore = "needs skills-ref: set SKILLSTORE_AGENTSKILLS and pass --include-ignored"]
async fn a_skill_md_path_is_judged_as_its_directory_by_both() {
    let agentskills = agentskills();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("pdf");
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(dir.join("SKILL.md"), skill("pdf", "name: pdf\ndescription: d\n")).unwrap();
    std::fs::write(dir.join("references/x.md"), "# notes\n").unwrap();
    assert!(validate_path(&dir.join("SKILL.md")).await.valid);
    assert!(reference_says_valid(&agentskills, &dir.join("SKILL.md")));
}

/// Under CI the reference validator must be present: its absence fails the
/// run instead of leaving the comparison unexercised.
#[test]
fn agentskills_is_set_under_ci() {
    if std::env::var_os("CI").is_some() {
        assert!(
            std::env::var_os(AGENTSKILLS).is_some(),
            "CI is set but {AGENTSKILLS} is not: the comparison with the reference validator would not run"
        );
    }
}

/// A file inside a skill other than its SKILL.md is not a skill: the
/// verdict says so instead of judging the file's directory.
#[tokio::test]
async fn a_path_that_is_neither_a_skill_nor_its_skill_md_is_an_error_that_says_so() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("pdf");
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(dir.join("SKILL.md"), skill("pdf", "name: pdf\ndescription: d\n")).unwrap();
    std::fs::write(dir.join("references/x.md"), "# notes\n").unwrap();
    let outcome = validate_path(&dir.join("references/x.md")).await;
    assert!(!outcome.valid);
    assert_eq!(outcome.problems.len(), 1);
    assert_eq!(outcome.problems[0].kind, "invalid_path");
    assert!(
        outcome.problems[0].message.contains("not a skill"),
        "{:?}",
        outcome.problems
    );
    let json = serde_json::to_value(&outcome).unwrap();
    assert_eq!(json["problems"][0]["kind"], "invalid_path");
    assert_eq!(json["valid"], false);

    let lower = work.path().join("lower");
    std::fs::create_dir_all(&lower).unwrap();
    std::fs::write(lower.join("skill.md"), skill("lower", "name: lower\ndescription: d\n")).unwrap();
    for path in [lower.clone(), lower.join("skill.md")] {
        let outcome = validate_path(&path).await;
        assert!(outcome.valid, "{:?}", outcome.problems);
        assert_eq!(outcome.problems[0].kind, "lowercase_skill_md");
    }
}

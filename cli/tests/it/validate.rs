//! `validate`: problems and the exit code, of a skill, a layer or a root of
//! layers.

use crate::support::{repo, run, skillstore};

#[test]
fn cli_validate_reports_problems_and_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("Bad_Name");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("SKILL.md"),
        "---\nname: Bad_Name\ndescription: d\nversion: 1\n---\n",
    )
    .unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let good = repo().join("examples/skills/base/csv-report");
    let out = run(skillstore()
        .args(["validate", "--json"])
        .arg(&good)
        .arg(&bad)
        .arg(&empty));
    assert_eq!(out.code, 1);
    let report = out.json();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results[0]["valid"], true);
    assert_eq!(results[1]["valid"], false);
    let kinds: Vec<&str> = results[1]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["unexpected_field", "name_not_lowercase", "name_invalid_chars"]);
    assert!(
        results[1]["problems"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["severity"] == "error")
    );
    assert_eq!(results[2]["problems"][0]["kind"], "missing_skill_md");
    let ok = run(skillstore().arg("validate").arg(good.join("SKILL.md")));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

/// `validate path/to/references/x.md` judged the file's directory as a
/// skill; a path that is neither a skill directory nor its SKILL.md is an
/// error that says so.
#[test]
fn validate_refuses_a_path_that_is_not_a_skill() {
    let out = run(skillstore().args(["validate", "examples/skills/base/csv-report/references/format.md"]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.text().starts_with("invalid"), "{}", out.text());
    let ok = run(skillstore().args([
        "validate",
        "examples/skills/base/csv-report",
        "examples/skills/base/csv-report/SKILL.md",
    ]));
    assert_eq!(ok.code, 0, "{} {}", ok.text(), ok.stderr);
}

/// `validate` of a layer validates every skill in it, and of a root of
/// layers every skill of every layer; a directory with none says so.
#[test]
fn cli_validate_of_a_layer_or_a_root_of_layers_validates_each_skill() {
    let layer = run(skillstore().args(["validate", "examples/skills/base"]));
    assert_eq!(layer.code, 0, "{}", layer.stderr);
    assert_eq!(
        layer.text(),
        "ok       examples/skills/base/changelog\nok       examples/skills/base/code-review\n\
         ok       examples/skills/base/commit-messages\nok       examples/skills/base/csv-report\n"
    );
    let root = run(skillstore().args(["validate", "examples/skills", "--json"]));
    assert_eq!(root.code, 0, "{}", root.stderr);
    let skills = root.json()["results"].as_array().unwrap().len();
    let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/skills"))
        .unwrap()
        .flat_map(|layer| std::fs::read_dir(layer.unwrap().path()).unwrap())
        .filter(|skill| skill.as_ref().unwrap().path().join("SKILL.md").is_file())
        .count();
    assert_eq!(skills, on_disk);
    let empty = tempfile::tempdir().unwrap();
    let none = run(skillstore().args(["validate", empty.path().to_str().unwrap()]));
    assert_eq!(none.code, 1);
    assert!(none.text().contains("[missing_skill_md]"), "{}", none.text());
}

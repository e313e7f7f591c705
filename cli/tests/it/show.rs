//! `show`: provenance, and the files a skill leaves out.

use crate::support::{run, skillstore};

#[test]
fn cli_show_gives_provenance() {
    let out = run(skillstore().args(["show", "code-review", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = out.json();
    assert_eq!(shown["source"], "project");
    assert_eq!(shown["shadowed"][0]["source"], "base");
    assert_eq!(shown["files"], serde_json::json!(["SKILL.md"]));
    let text = run(skillstore().args(["show", "csv-report"])).text();
    assert!(
        text.contains("files:         SKILL.md, references/format.md, scripts/summarize.py"),
        "{text}"
    );
    let missing = run(skillstore().args(["show", "nope"]));
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stderr.trim(), "error: no skill named `nope` in the catalog");
    // A typo gets the name it was likely meant as; a wrong source, the valid ones.
    for command in ["show", "read"] {
        let typo = run(skillstore().args([command, "chnagelog"]));
        assert_eq!(typo.code, 1, "{}", typo.stderr);
        assert!(typo.stderr.contains("(did you mean `changelog`?)"), "{}", typo.stderr);
    }
    let source = run(skillstore().args([
        "--mount",
        "/=examples/skills",
        "--source",
        "/base/",
        "--source",
        "/team/",
        "--writable",
        "tem",
        "list",
    ]));
    assert_eq!(source.code, 2, "{}", source.stderr);
    assert!(
        source
            .stderr
            .contains("`tem` (did you mean `team`?); the sources are `base`, `team`"),
        "{}",
        source.stderr
    );
}

#[test]
fn cli_show_names_each_left_out_file() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("team/evil");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: evil\ndescription: Points out.\n---\nBody.\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("outside.txt"), "not the skill's\n").unwrap();
    std::os::unix::fs::symlink("../../outside.txt", skill.join("leak.txt")).unwrap();
    let out = run(skillstore()
        .current_dir(dir.path())
        .args(["--mount", "/=.", "--source", "/team/", "show", "evil"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.text().contains("[symlink_escape] /team/evil/leak.txt: left out"),
        "{}",
        out.text()
    );
}

//! `prompt`: both styles, the budget, and `--location-root`.

use crate::support::{in_tree, run, skillstore};

#[test]
fn cli_prompt_in_both_styles_and_under_a_budget() {
    let out = run(skillstore().arg("prompt"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.contains("- **Team**: `/examples/skills/team/` (highest priority)"));
    assert!(text.contains("  - instructions: `/examples/skills/team/incident-response/SKILL.md`"));
    let xml = run(skillstore().args(["prompt", "--style", "xml"])).text();
    assert!(xml.contains("<name>api-design</name>"));
    let small = run(skillstore().args(["prompt", "--max-chars", "2000"]));
    assert_eq!(small.code, 0);
    assert!(small.text().chars().count() <= 2001);
    assert!(small.stderr.contains("left out"), "{}", small.stderr);
    // The budget is a hard cap: below the fixed text nothing is printed and
    // the command fails, saying how long that text is.
    let tiny = run(skillstore().args(["prompt", "--max-chars", "500"]));
    assert_eq!(tiny.code, 1, "{}", tiny.stderr);
    assert_eq!(tiny.stdout, b"");
    assert!(
        tiny.stderr.contains("nothing fits in 500 characters"),
        "{}",
        tiny.stderr
    );
    assert_eq!(run(skillstore().args(["prompt", "--style", "html"])).code, 2);
}

/// `prompt` with no skills prints nothing; `--location-root` puts every
/// location under the synced or mounted tree.
#[test]
fn prompt_is_empty_without_skills_and_follows_a_location_root() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let empty = run(&mut in_tree(dir.path(), &["prompt"]));
    assert_eq!(empty.code, 0, "{}", empty.stderr);
    assert!(empty.stdout.is_empty(), "{}", empty.text());

    let rooted = run(skillstore().args(["prompt", "--style", "xml", "--location-root", "/mnt/skills"]));
    assert_eq!(rooted.code, 0, "{}", rooted.stderr);
    assert!(
        rooted
            .text()
            .contains("<location>/mnt/skills/csv-report/SKILL.md</location>"),
        "{}",
        rooted.text()
    );
}

/// Without `--location-root` the paths listed are in the skill store, not
/// on the agent's disk: both styles say so and name the command that reads
/// them; with a location root they send the agent to its own tools.
#[test]
fn a_prompt_names_what_reads_the_paths_it_lists() {
    let reader = "The paths listed here are in the skill store, not on your disk: read them with \
                  `skillstore read NAME [PATH]` (by the skill's name and the file's path inside the skill's directory).";
    for style in ["markdown", "xml"] {
        let out = run(skillstore().args(["prompt", "--style", style]));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.text().contains(reader), "{style}: {}", out.text());
        assert!(!out.text().contains("file-reading tool"), "{style}: {}", out.text());
        let rooted = run(skillstore().args(["prompt", "--style", style, "--location-root", "/mnt/skills"]));
        assert_eq!(rooted.code, 0, "{}", rooted.stderr);
        assert!(!rooted.text().contains("skillstore read"), "{style}: {}", rooted.text());
    }
}

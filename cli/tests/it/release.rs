//! `skill release|tag|yank`, `show NAME --versions` and `read NAME@...`
//! through the built binary.

use crate::support::{in_tree, run};

fn skill_md(body: &str) -> String {
    format!("---\nname: csv-report\ndescription: Write CSV reports.\n---\n\n{body}\n")
}

fn write_working_copy(root: &std::path::Path, body: &str) {
    let dir = root.join("team/csv-report");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), skill_md(body)).unwrap();
}

#[test]
fn cli_release_tag_yank_and_read_at_a_version() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    for (version, body) in [("1.0.0", "one"), ("1.1.0", "two"), ("2.0.0", "three")] {
        write_working_copy(dir.path(), body);
        let made = run(&mut in_tree(
            dir.path(),
            &[
                "skill",
                "release",
                "csv-report",
                version,
                "--to",
                "team",
                "--notes",
                body,
                "--author",
                "ana",
                "--json",
            ],
        ));
        assert_eq!(made.code, 0, "{}", made.stderr);
        let made = made.json();
        assert_eq!(made["version"], version);
        assert!(made["digest"].as_str().unwrap().starts_with("sha256:"));
    }
    let read = |selector: &str| run(&mut in_tree(dir.path(), &["read", &format!("csv-report@{selector}")]));
    assert!(read("1.0.0").text().contains("one"));
    assert!(read("^1").text().contains("two"));
    assert!(read("latest").text().contains("three"));
    let missing = read("stable");
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("no release of `csv-report` matches `stable`"),
        "{}",
        missing.stderr
    );

    let tagged = run(&mut in_tree(
        dir.path(),
        &["skill", "tag", "csv-report", "stable", "1.0.0", "--to", "team"],
    ));
    assert_eq!(tagged.code, 0, "{}", tagged.stderr);
    assert!(tagged.text().contains("stable -> 1.0.0"), "{}", tagged.text());
    assert!(read("stable").text().contains("one"));

    let yanked = run(&mut in_tree(
        dir.path(),
        &["skill", "yank", "csv-report", "1.1.0", "--to", "team"],
    ));
    assert_eq!(yanked.code, 0, "{}", yanked.stderr);
    assert!(read("^1").text().contains("one"));
    assert!(
        read("1.1.0").text().contains("two"),
        "an exact pin still reads a yanked release"
    );

    let versions = run(&mut in_tree(
        dir.path(),
        &["show", "csv-report", "--versions", "--json"],
    ));
    assert_eq!(versions.code, 0, "{}", versions.stderr);
    let versions = versions.json();
    assert_eq!(versions["source"], "team");
    let listed: Vec<(String, bool)> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap().to_owned(),
                v["yanked"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [("1.0.0".into(), false), ("1.1.0".into(), true), ("2.0.0".into(), false)]
    );
    assert_eq!(versions["versions"][0]["author"], "ana");
    assert_eq!(versions["versions"][2]["channels"][0], "latest");
    let table = run(&mut in_tree(dir.path(), &["show", "csv-report", "--versions"])).text();
    assert!(table.contains("1.1.0") && table.contains("(yanked)"), "{table}");

    // The working copy is still what `read NAME` serves, and the releases
    // directory is no skill.
    assert!(
        run(&mut in_tree(dir.path(), &["read", "csv-report"]))
            .text()
            .contains("three")
    );
    let list = run(&mut in_tree(dir.path(), &["list", "--json"])).json();
    assert_eq!(list["skills"].as_array().unwrap().len(), 1);

    // Refusals: a lower version, a version built to break a path, a second
    // release of one version, a read-only source.
    for (args, code, said) in [
        (
            vec!["skill", "release", "csv-report", "1.5.0", "--to", "team"],
            1,
            "not greater",
        ),
        (
            vec!["skill", "release", "csv-report", "3.0.0+../x", "--to", "team"],
            2,
            "not a release version",
        ),
        (
            vec!["skill", "release", "csv-report", "../3.0.0", "--to", "team"],
            2,
            "not a release version",
        ),
        (
            vec!["skill", "release", "csv-report", "2.0.0", "--to", "team"],
            1,
            "already released",
        ),
        (
            vec!["skill", "tag", "csv-report", "Bad", "1.0.0", "--to", "team"],
            2,
            "not a channel name",
        ),
        (
            vec!["skill", "yank", "csv-report", "1.0.0", "--to", "base"],
            1,
            "read-only",
        ),
        (vec!["read", "csv-report@1.0.0+x"], 2, "build metadata"),
        (vec!["read", "csv-report@../x"], 2, "neither a channel"),
        (
            vec!["read", "csv-report@1.0.0", "../../base/x"],
            1,
            "the release holds no such file",
        ),
    ] {
        let refused = run(&mut in_tree(dir.path(), &args));
        assert_eq!(refused.code, code, "{args:?}: {}", refused.stderr);
        assert!(refused.stderr.contains(said), "{args:?}: {}", refused.stderr);
    }
}

#[test]
fn cli_a_source_serves_the_release_its_selection_picks() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--mount",
        &format!("/={}", dir.path().display()),
        "--source",
        "/base",
        "--writable",
        "base",
    ]
    .map(str::to_owned);
    let in_base = |extra: &[&str]| {
        let mut cmd = crate::support::skillstore();
        cmd.args(&base).args(extra);
        run(&mut cmd)
    };
    let skill_dir = dir.path().join("base/csv-report");
    std::fs::create_dir_all(&skill_dir).unwrap();
    for (version, body) in [("1.0.0", "one"), ("1.1.0", "two"), ("2.0.0", "three")] {
        std::fs::write(skill_dir.join("SKILL.md"), skill_md(body)).unwrap();
        let made = in_base(&["skill", "release", "csv-report", version]);
        assert_eq!(made.code, 0, "{}", made.stderr);
    }
    std::fs::write(skill_dir.join("SKILL.md"), skill_md("working")).unwrap();
    let consumer = |select: &str, args: &[&str]| {
        let file = dir.path().join(format!("consumer-{}.yaml", select.len()));
        std::fs::write(
            &file,
            format!("sources:\n  - path: /base\n    select: {{csv-report: \"{select}\"}}\n"),
        )
        .unwrap();
        let mut cmd = crate::support::skillstore();
        cmd.arg("--config").arg(&file).args(args);
        run(&mut cmd)
    };

    let list = consumer("^1", &["list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(list.json()["skills"][0]["release"], "1.1.0");
    assert!(consumer("^1", &["read", "csv-report"]).text().contains("two"));
    let latest = consumer("latest", &["show", "csv-report", "--json"]);
    assert_eq!(latest.json()["release"], "2.0.0");
    assert!(consumer("latest", &["read", "csv-report"]).text().contains("three"));
    assert!(
        consumer("latest", &["show", "csv-report"])
            .text()
            .contains("release:       2.0.0")
    );

    assert_eq!(in_base(&["skill", "yank", "csv-report", "1.1.0"]).code, 0);
    assert!(consumer("^1", &["read", "csv-report"]).text().contains("one"));
    assert_eq!(
        consumer("^1", &["show", "csv-report", "--json"]).json()["release"],
        "1.0.0"
    );
    // The working copy carries no `release`.
    let own = in_base(&["list", "--json"]).json();
    assert!(own["skills"][0].get("release").is_none(), "{own}");

    let nothing = consumer("^3", &["list", "--json"]).json();
    assert_eq!(nothing["skills"].as_array().unwrap().len(), 0, "{nothing}");
    assert_eq!(nothing["diagnostics"][0]["kind"], "release_not_found", "{nothing}");
}

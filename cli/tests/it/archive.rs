//! `pack` and `install`: the round trip and a planted link.

use crate::support::{in_tree, repo, run, skillstore};

/// `pack` then `install` round-trips to identical bytes; a second install
/// needs `--replace`; a file that is not an archive is refused by kind.
#[test]
fn pack_then_install_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.skill");
    let second = dir.path().join("second.skill");
    for out in [&first, &second] {
        let packed = run(skillstore().args(["pack", "examples/skills/base/csv-report", "-o", out.to_str().unwrap()]));
        assert_eq!(packed.code, 0, "{}", packed.stderr);
    }
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap(),
        "pack is deterministic"
    );

    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let installed = run(&mut in_tree(
        dir.path(),
        &["install", first.to_str().unwrap(), "--to", "team"],
    ));
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    for file in ["SKILL.md", "references/format.md", "scripts/summarize.py"] {
        assert_eq!(
            std::fs::read(dir.path().join("team/csv-report").join(file)).unwrap(),
            std::fs::read(repo().join("examples/skills/base/csv-report").join(file)).unwrap(),
            "{file}"
        );
    }
    let again = run(&mut in_tree(
        dir.path(),
        &["install", first.to_str().unwrap(), "--to", "team"],
    ));
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already"), "{}", again.stderr);
    let replaced = run(&mut in_tree(
        dir.path(),
        &["install", first.to_str().unwrap(), "--to", "team", "--replace"],
    ));
    assert_eq!(replaced.code, 0, "{}", replaced.stderr);

    let junk = dir.path().join("junk.skill");
    std::fs::write(&junk, "not a zip").unwrap();
    let refused = run(&mut in_tree(
        dir.path(),
        &["install", junk.to_str().unwrap(), "--to", "team"],
    ));
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("[not_an_archive]"), "{}", refused.stderr);
    let base = run(&mut in_tree(
        dir.path(),
        &["install", first.to_str().unwrap(), "--to", "base"],
    ));
    assert_eq!(base.code, 1);
    assert!(base.stderr.contains("read-only"), "{}", base.stderr);
}

/// Finding: `pack -o` wrote a fixed temporary name with a plain write, so
/// a link planted at `.NAME.partial` overwrote the file it pointed to. The
/// link and its target are left alone, and the archive lands at `-o`.
#[test]
fn pack_o_follows_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for planted in [".csv-report.partial", ".csv-report.skill.partial"] {
        std::os::unix::fs::symlink(&victim, out.join(planted)).unwrap();
    }
    let archive = out.join("csv-report.skill");
    let packed = run(skillstore().args([
        "pack",
        "examples/skills/base/csv-report",
        "-o",
        archive.to_str().unwrap(),
    ]));
    assert_eq!(packed.code, 0, "{}", packed.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let bytes = std::fs::read(&archive).unwrap();
    assert!(bytes.starts_with(b"PK"), "an archive at -o");
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [".csv-report.partial", ".csv-report.skill.partial", "csv-report.skill"]
    );
}

/// `install` takes the skills of any location: a directory of skills (all
/// of them, or those `--skill` names), one skill's directory, a Git
/// repository read by the real `git`, an S3 prefix; every name is checked
/// before anything is written, and each installed skill is named.
#[test]
fn install_takes_skills_from_any_location() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let base = repo().join("examples/skills/base");
    let base = base.to_str().unwrap();
    let installed = |name: &str| dir.path().join("team").join(name).join("SKILL.md").is_file();

    // A misspelled name: refused with a suggestion, nothing written.
    let out = run(&mut in_tree(
        dir.path(),
        &[
            "install",
            base,
            "--skill",
            "changelog",
            "--skill",
            "csv-reprot",
            "--to",
            "team",
        ],
    ));
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("has no skill named `csv-reprot` (did you mean `csv-report`?)"),
        "{}",
        out.stderr
    );
    assert!(!installed("changelog"), "nothing is installed when a name is wrong");

    // A selection, each named in the report.
    let out = run(&mut in_tree(
        dir.path(),
        &[
            "install",
            base,
            "--skill",
            "changelog",
            "--skill",
            "csv-report",
            "--to",
            "team",
        ],
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.contains("install changelog (history entry 1)"), "{text}");
    assert!(text.contains("install csv-report (history entry 1)"), "{text}");
    assert!(installed("changelog") && installed("csv-report") && !installed("code-review"));
    assert_eq!(
        std::fs::read(dir.path().join("team/csv-report/scripts/summarize.py")).unwrap(),
        std::fs::read(repo().join("examples/skills/base/csv-report/scripts/summarize.py")).unwrap()
    );

    // One skill's directory stands for that skill; JSON names it.
    let one = repo().join("examples/skills/base/code-review");
    let out = run(&mut in_tree(
        dir.path(),
        &["install", one.to_str().unwrap(), "--to", "team", "--json"],
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let change = out.json();
    assert_eq!(change["skill"], "code-review");
    assert_eq!(change["action"], "install");

    // A Git repository, committed by the real git.
    let work = tempfile::tempdir().unwrap();
    let skill = work.path().join("notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), crate::support::NOTES).unwrap();
    skillstore::backends::testkit::git_repo::git(work.path(), &["init", "-q"]);
    skillstore::backends::testkit::git_repo::git(work.path(), &["add", "-A"]);
    skillstore::backends::testkit::git_repo::git(work.path(), &["commit", "-q", "-m", "notes"]);
    let url = format!("git+file://{}", work.path().display());
    let out = run(&mut in_tree(dir.path(), &["install", &url, "--to", "team"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("team/notes/SKILL.md")).unwrap(),
        crate::support::NOTES
    );

    // An S3 prefix.
    let server = skillstore::backends::testkit::s3_server::S3TestServer::shared();
    let (_, catalog, _) = crate::support::publish_examples(server);
    let mut cmd = in_tree(
        dir.path(),
        &[
            "install",
            &format!("{catalog}/base"),
            "--skill",
            "commit-messages",
            "--to",
            "team",
        ],
    );
    crate::support::s3_env(&mut cmd, server);
    let out = run(&mut cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(installed("commit-messages"));

    // A skill the source has already: refused before anything is written.
    let out = run(&mut in_tree(
        dir.path(),
        &[
            "install",
            base,
            "--skill",
            "commit-messages",
            "--skill",
            "csv-report",
            "--to",
            "team",
        ],
    ));
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("`team` already has `commit-messages`; nothing was installed"),
        "{}",
        out.stderr
    );
    assert!(out.text().is_empty(), "{}", out.text());
    // One skill's directory with its own name given is that skill; another
    // name is a usage error.
    let out = run(&mut in_tree(
        dir.path(),
        &[
            "install",
            one.to_str().unwrap(),
            "--skill",
            "csv-report",
            "--to",
            "team",
        ],
    ));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("is the directory of one skill, `code-review`"),
        "{}",
        out.stderr
    );

    // A location that cannot be read says so, and an archive takes no --skill.
    let missing = format!("git+file://{}", dir.path().join("no-such-repo").display());
    let out = run(&mut in_tree(dir.path(), &["install", &missing, "--to", "team"]));
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("cannot read `git+file://"), "{}", out.stderr);
    let archive = dir.path().join("one.skill");
    assert_eq!(
        run(skillstore().args(["pack", one.to_str().unwrap(), "-o", archive.to_str().unwrap()])).code,
        0
    );
    let out = run(&mut in_tree(
        dir.path(),
        &[
            "install",
            archive.to_str().unwrap(),
            "--skill",
            "code-review",
            "--to",
            "team",
        ],
    ));
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// Several skills from a location are installed all or none: one that a
/// read would not serve whole (a hidden file) refuses the command before
/// the first is written.
#[test]
fn install_from_a_location_writes_nothing_when_one_skill_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let from = dir.path().join("from");
    for name in ["aaa", "bbb"] {
        crate::support::write(
            &from,
            &format!("{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nx\n"),
        );
    }
    crate::support::write(&from, "bbb/.env", "SECRET=1\n");
    let out = run(&mut in_tree(
        dir.path(),
        &["install", from.to_str().unwrap(), "--to", "team"],
    ));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("`bbb` holds files a read does not serve"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.ends_with("nothing was written\n"), "{}", out.stderr);
    assert_eq!(std::fs::read_dir(dir.path().join("team")).unwrap().count(), 0);
}

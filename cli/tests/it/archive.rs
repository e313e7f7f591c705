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

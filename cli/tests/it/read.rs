//! `read`: raw bytes through the winner, and no path or link that leaves the
//! skill.

use crate::support::{in_tree, link_across_layers, repo, run, skillstore};

#[test]
fn cli_read_returns_raw_bytes_through_the_winner() {
    let out = run(skillstore().args(["read", "changelog"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        std::fs::read(repo().join("examples/skills/team/changelog/SKILL.md")).unwrap()
    );
    let out = run(skillstore().args(["read", "csv-report", "scripts/summarize.py"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        std::fs::read(repo().join("examples/skills/base/csv-report/scripts/summarize.py")).unwrap()
    );
}

#[test]
fn cli_read_refuses_paths_that_leave_the_skill() {
    for bad in [
        "../../base/changelog/SKILL.md",
        "../code-review/SKILL.md",
        "/etc/passwd",
        "references/../../x",
        "..\\..\\x",
        "./SKILL.md",
        "a//b",
    ] {
        let out = run(skillstore().args(["read", "csv-report", bad]));
        assert_eq!(out.code, 1, "{bad}");
        assert!(out.stdout.is_empty(), "{bad}");
        assert!(out.stderr.starts_with("error: refused path"), "{bad}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    }
    let missing = run(skillstore().args(["read", "csv-report", "references/none.md"]));
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("not found: /examples/skills/base/csv-report/references/none.md")
    );
}

/// Every string of the hostile-path corpus, as `read NAME RELPATH` and as
/// `--source`: a clear one-line error or an empty catalog, and no byte from
/// outside the skill (or outside the source) in any output. Strings holding
/// NUL cannot be passed as arguments and are counted apart.
#[test]
fn cli_hostile_paths_read_nothing_outside() {
    use skillstore::backends::testkit::hostile;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("outer-secret.txt"), "TOPSECRET-OUT").unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("base/x/references")).unwrap();
    std::fs::create_dir_all(tree.join("private")).unwrap();
    std::fs::write(tree.join("private/secret.txt"), "TOPSECRET-IN").unwrap();
    std::fs::write(
        tree.join("base/x/SKILL.md"),
        "---\nname: x\ndescription: The only skill.\n---\n",
    )
    .unwrap();
    std::fs::write(tree.join("base/x/references/ok.md"), "fine").unwrap();
    let mount = format!("/={}", tree.display());

    let corpus = hostile::corpus();
    assert!(corpus.len() >= 500);
    let usable: Vec<&String> = corpus.iter().filter(|s| !s.contains('\0')).collect();
    let check = |strings: &[&String]| {
        for raw in strings {
            let out = run(skillstore().args(["--mount", &mount, "--source", "/base", "read", "x", raw.as_str()]));
            assert_eq!(out.code, 1, "read {raw:?}: {}", out.stderr);
            assert!(out.stdout.is_empty(), "read {raw:?} printed {}", out.text());
            assert!(
                out.stderr.starts_with("error: ") && out.stderr.lines().count() == 1,
                "{raw:?}: {}",
                out.stderr
            );
            assert!(!out.stderr.contains("TOPSECRET") && !out.stderr.contains(&*tree.to_string_lossy()));

            let out = run(skillstore().args(["--mount", &mount, "--source", raw.as_str(), "list", "--json"]));
            assert!(
                !out.text().contains("TOPSECRET") && !out.stderr.contains("TOPSECRET"),
                "{raw:?}"
            );
            match out.code {
                2 => assert!(
                    out.stderr.starts_with("error: ") && out.stderr.lines().count() == 1,
                    "{raw:?}"
                ),
                // 3: the source could not be listed (not a directory, say).
                0 | 3 => assert_eq!(out.json()["skills"], serde_json::json!([]), "--source {raw:?}"),
                code => panic!("--source {raw:?} exited {code}: {}", out.stderr),
            }
        }
    };
    let (first, second) = usable.split_at(usable.len() / 2);
    std::thread::scope(|scope| {
        scope.spawn(|| check(first));
        scope.spawn(|| check(second));
    });
    eprintln!(
        "hostile paths: {} in the corpus, {} tried on the command line ({} hold NUL)",
        corpus.len(),
        usable.len(),
        corpus.len() - usable.len()
    );
    // The real file stays readable, so the refusals above are not blanket.
    let ok = run(skillstore().args(["--mount", &mount, "--source", "/base", "read", "x", "references/ok.md"]));
    assert_eq!((ok.code, ok.text().as_str()), (0, "fine"));
}

/// Finding: `read evil references/SKILL.md` printed the base layer's
/// secret through `team/evil/references -> ../../base/secret`.
#[test]
fn link_inside_root_cannot_carry_a_read_across_layers() {
    let dir = link_across_layers();
    let read = run(&mut in_tree(dir.path(), &["read", "evil", "references/SKILL.md"]));
    assert_eq!(read.code, 1, "{}", read.stderr);
    assert!(!read.text().contains("TOPSECRET") && !read.stderr.contains("TOPSECRET"));
    assert!(read.stderr.contains("symbolic link"), "{}", read.stderr);
}

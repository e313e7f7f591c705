//! `audit`: the log every change appends to, listed and verified through
//! the built binary; a record edited or removed by hand is named, exit 3.

use crate::support::{NOTES, in_tree, run};

fn team_with_three_changes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let file = dir.path().join("notes.md");
    std::fs::write(&file, NOTES).unwrap();
    let from = file.to_str().unwrap();
    for args in [
        vec!["skill", "create", "notes", "--from", from, "--author", "ada"],
        vec![
            "skill",
            "patch",
            "notes",
            "--find",
            "Body.",
            "--replace",
            "Steps.",
            "--author",
            "bob",
        ],
        vec!["skill", "remove-file", "notes", "absent.md", "--author", "eve"],
        vec![
            "skill",
            "patch",
            "notes",
            "--find",
            "Steps.",
            "--replace",
            "More steps.",
            "--author",
            "ada",
        ],
    ] {
        let done = run(&mut in_tree(dir.path(), &args));
        // The third is refused (no such file) and records nothing.
        assert_eq!(done.code == 0, args[1] != "remove-file", "{args:?}: {}", done.stderr);
    }
    dir
}

fn record_path(dir: &tempfile::TempDir, seq: u64) -> std::path::PathBuf {
    dir.path().join(format!("team/.audit/{seq:016}.json"))
}

#[test]
fn cli_audit_lists_and_verifies_every_change() {
    let dir = team_with_three_changes();
    let listed = run(&mut in_tree(dir.path(), &["audit", "--json"]));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let listed = listed.json();
    let records = listed["records"].as_array().unwrap();
    let seen: Vec<(u64, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["seq"].as_u64().unwrap(),
                r["actor"].as_str().unwrap(),
                r["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [(1, "ada", "create"), (2, "bob", "patch"), (3, "ada", "patch")]);
    assert!(listed.get("verification").is_none());
    assert_eq!(records[1]["files"][0]["path"], "SKILL.md");
    assert!(records[1]["prev"].as_str().unwrap().starts_with("sha256:"));

    let text = run(&mut in_tree(dir.path(), &["audit"])).text();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().nth(1).unwrap().contains("bob  patch notes"), "{text}");
    let none = run(&mut in_tree(dir.path(), &["audit", "--since", "2999-01-01", "--json"])).json();
    assert_eq!(none["records"].as_array().unwrap().len(), 0);
    let bad_time = run(&mut in_tree(dir.path(), &["audit", "--since", "yesterday"]));
    assert_eq!(bad_time.code, 2, "{}", bad_time.stderr);

    let verified = run(&mut in_tree(dir.path(), &["audit", "--verify", "--json"]));
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    let verification = &verified.json()["verification"];
    assert_eq!(verification["records"], 3);
    assert_eq!(verification["tail"]["seq"], 3);
    let text = run(&mut in_tree(dir.path(), &["audit", "--verify"])).text();
    let checkpoint = text
        .lines()
        .last()
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .to_owned();
    assert!(checkpoint.starts_with("3:sha256:"), "{text}");
    let held = run(&mut in_tree(
        dir.path(),
        &["audit", "--verify", "--checkpoint", &checkpoint],
    ));
    assert_eq!(held.code, 0, "{}", held.stderr);
}

#[test]
fn cli_audit_names_a_record_edited_or_removed_by_hand() {
    let dir = team_with_three_changes();
    let checkpoint = {
        let json = run(&mut in_tree(dir.path(), &["audit", "--verify", "--json"])).json();
        let tail = &json["verification"]["tail"];
        format!("{}:{}", tail["seq"], tail["hash"].as_str().unwrap())
    };

    // Record 2 says bob patched; someone makes it say ada.
    let second = record_path(&dir, 2);
    let original = std::fs::read_to_string(&second).unwrap();
    std::fs::write(&second, original.replace("\"actor\":\"bob\"", "\"actor\":\"ada\"")).unwrap();
    let edited = run(&mut in_tree(dir.path(), &["audit", "--verify"]));
    assert_eq!(edited.code, 3, "{}", edited.stderr);
    assert!(
        edited.stderr.contains("record 2 (.audit/0000000000000002.json)"),
        "{}",
        edited.stderr
    );
    assert!(edited.stderr.contains("hash_mismatch"), "{}", edited.stderr);
    let json = run(&mut in_tree(dir.path(), &["audit", "--verify", "--json"]));
    assert_eq!(json.code, 3);
    let breach = &json.json()["verification"]["breach"];
    assert_eq!(
        (breach["seq"].as_u64(), breach["kind"].as_str()),
        (Some(2), Some("hash_mismatch"))
    );
    std::fs::write(&second, &original).unwrap();

    // Record 2 removed.
    std::fs::remove_file(&second).unwrap();
    let removed = run(&mut in_tree(dir.path(), &["audit", "--verify"]));
    assert_eq!(removed.code, 3);
    assert!(
        removed.stderr.contains("record 2 ") && removed.stderr.contains("(missing)"),
        "{}",
        removed.stderr
    );
    std::fs::write(&second, &original).unwrap();

    // A FIFO planted in record 2's place is named too, never waited on.
    std::fs::remove_file(&second).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &second,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let planted = run(&mut in_tree(dir.path(), &["audit", "--verify"]));
    assert_eq!(planted.code, 3, "{}", planted.stderr);
    assert!(
        planted.stderr.contains("record 2 ") && planted.stderr.contains("(bad_format)"),
        "{}",
        planted.stderr
    );
    std::fs::remove_file(&second).unwrap();
    std::fs::write(&second, &original).unwrap();

    // The newest record cut off: only the checkpoint sees it.
    std::fs::remove_file(record_path(&dir, 3)).unwrap();
    assert_eq!(run(&mut in_tree(dir.path(), &["audit", "--verify"])).code, 0);
    let cut = run(&mut in_tree(
        dir.path(),
        &["audit", "--verify", "--checkpoint", &checkpoint],
    ));
    assert_eq!(cut.code, 3);
    assert!(cut.stderr.contains("record 3 "), "{}", cut.stderr);
    let bad = run(&mut in_tree(
        dir.path(),
        &["audit", "--verify", "--checkpoint", "three"],
    ));
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

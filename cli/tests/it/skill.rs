//! The `skill` commands: changes, history and rollback, refusals, and
//! versions taken back from `show`.

use skillstore::backends::testkit::s3_server::S3TestServer;

use crate::support::{NOTES, in_tree, link_across_layers, publish_examples, run, s3_env, skillstore};

#[test]
fn cli_skill_commands_change_history_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base/notes")).unwrap();
    std::fs::write(dir.path().join("base/notes/SKILL.md"), NOTES.replace("Take", "Base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let file = dir.path().join("notes.md");
    std::fs::write(&file, NOTES).unwrap();
    let from = file.to_str().unwrap();

    let created = run(&mut in_tree(
        dir.path(),
        &["skill", "create", "notes", "--from", from, "--author", "ada", "--json"],
    ));
    assert_eq!(created.code, 0, "{}", created.stderr);
    let created = created.json();
    assert_eq!(
        (created["id"].as_u64(), created["action"].as_str()),
        (Some(1), Some("create"))
    );
    let v1 = created["files"][0]["new_version"].as_str().unwrap().to_owned();

    let list = run(&mut in_tree(dir.path(), &["list", "--json"])).json();
    assert_eq!(list["skills"][0]["source"], "team");
    assert_eq!(list["skills"][0]["description"], "Take notes.");

    let patched = run(&mut in_tree(
        dir.path(),
        &["skill", "patch", "notes", "--find", "Body.", "--replace", "Steps."],
    ));
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    assert!(
        patched.text().starts_with("patch (history entry 2)"),
        "{}",
        patched.text()
    );
    let stale = run(&mut in_tree(
        dir.path(),
        &["skill", "edit", "notes", "--from", from, "--if-version", &v1],
    ));
    assert_eq!(stale.code, 1);
    assert!(stale.stderr.contains("version conflict"), "{}", stale.stderr);
    let mismatch = run(&mut in_tree(
        dir.path(),
        &["skill", "patch", "notes", "--find", "absent", "--replace", "x"],
    ));
    assert_eq!(mismatch.code, 1);
    assert!(
        mismatch.stderr.contains("expected 1 match(es) of the text, found 0"),
        "{}",
        mismatch.stderr
    );

    let mut script = in_tree(dir.path(), &["skill", "write-file", "notes", "scripts/run.sh"]);
    script.write_stdin("#!/bin/sh\necho hi\n");
    let script = run(&mut script);
    assert_eq!(script.code, 0, "{}", script.stderr);
    assert!(
        script.stderr.starts_with("warning: `scripts/run.sh` is a script"),
        "{}",
        script.stderr
    );
    let mut binary = in_tree(dir.path(), &["skill", "write-file", "notes", "assets/tool"]);
    binary.write_stdin(&b"\x7fELF\x02\x01\x01\0"[..]);
    let binary = run(&mut binary);
    assert_eq!(binary.code, 1);
    assert!(binary.stderr.contains("executable binary (ELF)"), "{}", binary.stderr);
    let outside = run(&mut in_tree(
        dir.path(),
        &["skill", "remove-file", "notes", "../../base/notes/SKILL.md"],
    ));
    assert_eq!(outside.code, 1);
    assert!(outside.stderr.contains("refused path"), "{}", outside.stderr);

    let history = run(&mut in_tree(dir.path(), &["skill", "history", "notes", "--json"])).json();
    let actions: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create", "patch", "write_file"]);
    assert_eq!(history[0]["author"], "ada");
    let table = run(&mut in_tree(dir.path(), &["skill", "history", "notes"])).text();
    assert_eq!(table.lines().count(), 4, "{table}");
    // The history of any source can be read, writable or not.
    let mount = format!("/={}", dir.path().display());
    let read_only = run(skillstore().args([
        "--mount", &mount, "--source", "/base", "--source", "/team", "skill", "history", "notes", "--to", "team",
        "--json",
    ]));
    assert_eq!(read_only.code, 0, "{}", read_only.stderr);
    assert_eq!(read_only.json().as_array().unwrap().len(), 3);
    let retried = run(&mut in_tree(
        dir.path(),
        &[
            "skill",
            "patch",
            "notes",
            "--find",
            "Steps.",
            "--replace",
            "Steps!",
            "--retry",
            "3",
        ],
    ));
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert!(
        retried.text().starts_with("patch (history entry 4)"),
        "{}",
        retried.text()
    );

    let rolled = run(&mut in_tree(dir.path(), &["skill", "rollback", "notes", "1"]));
    assert_eq!(rolled.code, 0, "{}", rolled.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("team/notes/SKILL.md")).unwrap(),
        NOTES
    );
    assert!(!dir.path().join("team/notes/scripts/run.sh").exists());

    let deleted = run(&mut in_tree(dir.path(), &["skill", "delete", "notes"]));
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
    let list = run(&mut in_tree(dir.path(), &["list", "--json"])).json();
    assert_eq!(list["skills"][0]["source"], "base");
    assert!(list["diagnostics"].as_array().unwrap().is_empty(), "{list}");
}

#[test]
fn cli_skill_refusals_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let file = dir.path().join("notes.md");
    std::fs::write(&file, NOTES).unwrap();
    let from = file.to_str().unwrap();

    let base = run(&mut in_tree(
        dir.path(),
        &["skill", "create", "notes", "--from", from, "--to", "base"],
    ));
    assert_eq!(base.code, 1);
    assert!(
        base.stderr.contains("the source `base` is read-only"),
        "{}",
        base.stderr
    );
    let mount = format!("/={}", dir.path().display());
    let none = run(skillstore().args([
        "--mount", &mount, "--source", "/team", "skill", "create", "notes", "--from", from,
    ]));
    assert_eq!(none.code, 1);
    assert!(none.stderr.contains("no source is writable"), "{}", none.stderr);
    let layered_base = run(skillstore().args([
        "--mount",
        &mount,
        "--source",
        "/base",
        "--source",
        "/team",
        "--writable",
        "base",
        "list",
    ]));
    assert_eq!(layered_base.code, 2);
    assert!(layered_base.stderr.contains("base layer"), "{}", layered_base.stderr);
    let wrong_name = run(&mut in_tree(dir.path(), &["skill", "create", "other", "--from", from]));
    assert_eq!(wrong_name.code, 1);
    assert!(wrong_name.stderr.contains("name_mismatch"), "{}", wrong_name.stderr);
    assert!(!dir.path().join("team/other").exists());
    let memory = dir.path().join("m.json");
    std::fs::write(&memory, "{}").unwrap();
    let location = format!("/=memory:{}", memory.display());
    let lost = run(skillstore().args([
        "--mount",
        &location,
        "--source",
        "/a",
        "--source",
        "/b",
        "--writable",
        "b",
        "skill",
        "history",
        "x",
    ]));
    assert_eq!(lost.code, 2);
    assert!(lost.stderr.contains("would be lost"), "{}", lost.stderr);
    for out in [&base, &none, &layered_base, &wrong_name, &lost] {
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
}

/// Finding: with `team/evil/references -> ../../base/secret`, a write to
/// the writable team layer landed in the base layer.
#[test]
fn link_inside_root_cannot_carry_a_write_across_layers() {
    let dir = link_across_layers();
    let payload = dir.path().join("payload.md");
    std::fs::write(&payload, "planted").unwrap();
    let write = run(&mut in_tree(
        dir.path(),
        &[
            "skill",
            "write-file",
            "evil",
            "references/x.md",
            "--from",
            payload.to_str().unwrap(),
        ],
    ));
    assert_eq!(write.code, 1, "{}", write.stderr);
    assert!(write.stderr.contains("symbolic link"), "{}", write.stderr);
    assert!(!dir.path().join("base/secret/x.md").exists());
}

/// `show` prints the SKILL.md version an S3 source gives (an ETag, with its
/// quotes), and `skill edit --if-version` takes it back with or without
/// them; a version that is not the current one is still a conflict.
#[test]
fn cli_an_s3_version_from_show_is_taken_back_with_or_without_quotes() {
    let server = S3TestServer::shared();
    let (_, location, _) = publish_examples(server);
    let mount = format!("/={location}");
    let on_s3 = |args: &[&str]| {
        let mut cmd = skillstore();
        s3_env(&mut cmd, server);
        cmd.args([
            "--mount",
            &mount,
            "--source",
            "/base/",
            "--source",
            "/team/",
            "--writable",
            "team",
        ])
        .args(args);
        run(&mut cmd)
    };
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("SKILL.md");
    let show = |name: &str| {
        let out = on_s3(&["show", name, "--json"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()["version"].as_str().unwrap().to_owned()
    };
    let quoted = show("changelog");
    assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{quoted}");
    let text = on_s3(&["show", "changelog"]).text();
    assert!(text.contains(&format!("version:       {quoted}\n")), "{text}");

    std::fs::write(&edited, "---\nname: changelog\ndescription: Edited once.\n---\nBody.\n").unwrap();
    let bare = quoted.trim_matches('"').to_owned();
    let out = on_s3(&[
        "skill",
        "edit",
        "changelog",
        "--from",
        edited.to_str().unwrap(),
        "--if-version",
        &bare,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    let second = show("changelog");
    std::fs::write(
        &edited,
        "---\nname: changelog\ndescription: Edited twice.\n---\nBody.\n",
    )
    .unwrap();
    let out = on_s3(&[
        "skill",
        "edit",
        "changelog",
        "--from",
        edited.to_str().unwrap(),
        "--if-version",
        &second,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    let stale = on_s3(&[
        "skill",
        "edit",
        "changelog",
        "--from",
        edited.to_str().unwrap(),
        "--if-version",
        &bare,
    ]);
    assert_eq!(stale.code, 1, "{}", stale.stderr);
    assert!(stale.stderr.contains("version conflict"), "{}", stale.stderr);
}

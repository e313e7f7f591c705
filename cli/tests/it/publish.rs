//! `publish`: to S3, to memory and to a directory, with the indexes it
//! writes, and the guards, links and checks it applies.

use serde_json::Value;
use skillstore::backends::testkit::s3_server::S3TestServer;

use crate::support::{EXAMPLE_LAYERS, example_sources, names, publish_examples, repo, run, s3_env, skillstore};

#[test]
fn cli_publish_to_s3_then_list_and_read_match_the_local_tree() {
    let server = S3TestServer::shared();
    let (_, location, out) = publish_examples(server);
    assert!(out.text().starts_with("published 15 file(s)"), "{}", out.text());

    let sources = example_sources();
    let mut remote = skillstore();
    s3_env(&mut remote, server);
    let mount = format!("/={location}");
    let remote_list = run(remote.args(["--mount", &mount]).args(&sources).args(["list", "--json"]));
    assert_eq!(remote_list.code, 0, "{}", remote_list.stderr);
    let local_list = run(skillstore()
        .args(["--mount", "/=examples/skills"])
        .args(&sources)
        .args(["list", "--json"]));
    assert_eq!(local_list.code, 0, "{}", local_list.stderr);
    assert_eq!(remote_list.stdout, local_list.stdout, "the catalogs differ");

    for (name, rel) in [
        ("csv-report", None),
        ("csv-report", Some("scripts/summarize.py")),
        ("changelog", None),
    ] {
        let mut remote = skillstore();
        s3_env(&mut remote, server);
        remote.args(["--mount", &mount]).args(&sources).args(["read", name]);
        let mut local = skillstore();
        local
            .args(["--mount", "/=examples/skills"])
            .args(&sources)
            .args(["read", name]);
        if let Some(rel) = rel {
            remote.arg(rel);
            local.arg(rel);
        }
        let (remote, local) = (run(&mut remote), run(&mut local));
        assert_eq!(remote.code, 0, "{}", remote.stderr);
        assert_eq!(remote.stdout, local.stdout, "{name} {rel:?}");
    }

    let mut again = skillstore();
    s3_env(&mut again, server);
    let out = run(again.args(["publish", "examples/skills", &location]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.text().starts_with("published 0 file(s), 0 bytes"), "{}", out.text());
    assert!(out.text().contains("15 unchanged"), "{}", out.text());
}

#[test]
fn publish_writes_each_layers_index_at_the_listed_versions() {
    use skillstore::backends::{ReadOptions, SkillBackend, VPath};
    let server = S3TestServer::shared();
    let (bucket, _, _) = publish_examples(server);

    let backend = server.backend(&bucket, "catalog");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for layer in EXAMPLE_LAYERS {
        let dir = VPath::new(format!("/{layer}")).unwrap();
        let listing = runtime.block_on(backend.list_deep(&dir, Default::default())).unwrap();
        let index = runtime
            .block_on(backend.read(&dir.join(".skillstore/index.json").unwrap(), ReadOptions::default()))
            .unwrap_or_else(|e| panic!("{layer}: no index: {e}"));
        let index: Value = serde_json::from_slice(&index.data).unwrap();
        assert_eq!(index["format"], "skillstore-index", "{layer}");
        assert_eq!(index["version"], 2, "{layer}");
        let entries = index["entries"].as_object().unwrap();

        let mut skill_files: Vec<String> = std::fs::read_dir(repo().join("examples/skills").join(layer))
            .unwrap()
            .map(|e| format!("{}/SKILL.md", e.unwrap().file_name().to_str().unwrap()))
            .collect();
        skill_files.sort();
        assert_eq!(entries.keys().cloned().collect::<Vec<_>>(), skill_files, "{layer}");
        for (relative, entry) in entries {
            let listed = listing.files.iter().find(|f| &f.relative == relative).unwrap();
            let text = std::fs::read_to_string(repo().join("examples/skills").join(layer).join(relative)).unwrap();
            assert_eq!(
                entry["version"],
                serde_json::to_value(listed.version.as_ref().unwrap()).unwrap()
            );
            assert_eq!(entry["size"], listed.size.unwrap());
            assert_eq!(entry["size"], text.len());
            assert_eq!(entry["sha256"], skillstore::integrity::sha256_hex(text.as_bytes()));
            let yaml = entry["yaml"].as_str().unwrap();
            assert!(
                text.starts_with(&format!("---\n{yaml}")),
                "{layer}/{relative}: {yaml:?}"
            );
        }
    }
}

#[test]
fn cli_publish_applies_the_read_guards() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("base/ok")).unwrap();
    std::fs::write(tree.join("base/ok/SKILL.md"), "---\nname: ok\ndescription: d\n---\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink("../../../secret.txt", tree.join("base/ok/leak.txt")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        tree.join("base/ok/pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let big = std::fs::File::create(tree.join("base/ok/big.bin")).unwrap();
    big.set_len(10 * 1024 * 1024 + 1).unwrap();
    let target = dir.path().join("out");
    std::fs::create_dir(&target).unwrap();
    let out = run(skillstore().arg("publish").arg(&tree).arg(&target));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.starts_with("published 1 file(s)"), "{text}");
    assert!(text.contains("skipped /base/ok/big.bin: 10485761 bytes"), "{text}");
    assert!(
        text.contains("skipped /base/ok/leak.txt: symbolic link leads outside the root"),
        "{text}"
    );
    assert!(text.contains("skipped /base/ok/pipe: not a regular file"), "{text}");
    assert!(target.join("base/ok/SKILL.md").is_file());
    assert!(!target.join("base/ok/leak.txt").exists());
}

#[test]
fn cli_publish_to_memory_json_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("skills.json");
    let location = format!("memory:{}", json.display());
    let out = run(skillstore().args(["publish", "examples/skills", &location]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mount = format!("/={location}");
    let out = run(skillstore().args([
        "--mount", &mount, "--source", "/base", "--source", "/team", "list", "--json",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(names(&out.json()).contains(&"incident-response".to_owned()));
}

/// Finding: `publish` over a tree with `a/up -> ..` walked for hours. It
/// publishes each file once, names the links it did not follow, and ends.
#[test]
fn publish_does_not_follow_directory_links() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("base/x/a")).unwrap();
    std::fs::write(
        tree.join("base/x/SKILL.md"),
        "---\nname: x\ndescription: Loops around.\n---\n",
    )
    .unwrap();
    std::fs::write(tree.join("base/x/a/file.md"), "once").unwrap();
    std::os::unix::fs::symlink("..", tree.join("base/x/a/up")).unwrap();
    std::os::unix::fs::symlink(".", tree.join("base/x/b")).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let published = run(skillstore().args(["publish", tree.to_str().unwrap(), out.to_str().unwrap()]));
    assert_eq!(published.code, 0, "{}", published.stderr);
    assert!(
        published.text().starts_with("published 2 file(s)"),
        "{}",
        published.text()
    );
    assert!(
        published.text().contains("/base/x/a/up: a link to a directory"),
        "{}",
        published.text()
    );
    assert_eq!(std::fs::read_to_string(out.join("base/x/a/file.md")).unwrap(), "once");
    assert!(!out.join("base/x/a/up").exists());
}

/// Finding: `publish` skipped hidden files but followed links with
/// innocent names to them (`notes.txt -> .env`, `cfg -> .git/config`) and
/// uploaded their bytes. Each file is read as a catalog serves it:
/// confined to its skill, never through a link to a hidden name.
#[test]
fn publish_never_uploads_a_hidden_file_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("tree/base/x");
    std::fs::create_dir_all(skill.join(".git")).unwrap();
    std::fs::write(skill.join("SKILL.md"), "---\nname: x\ndescription: Links.\n---\n").unwrap();
    std::fs::write(skill.join("ok.md"), "fine").unwrap();
    std::fs::write(skill.join(".env"), "DOTENV-SECRET").unwrap();
    std::fs::write(skill.join(".git/config"), "GITCONFIG-SECRET").unwrap();
    std::os::unix::fs::symlink(".env", skill.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(".git/config", skill.join("cfg")).unwrap();
    std::os::unix::fs::symlink("notes.txt", skill.join("chain.txt")).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let tree = dir.path().join("tree");
    let published = run(skillstore().args(["publish", tree.to_str().unwrap(), out.to_str().unwrap()]));
    assert_eq!(
        std::fs::read_to_string(out.join("base/x/ok.md")).unwrap(),
        "fine",
        "{}",
        published.text()
    );
    for name in ["notes.txt", "cfg", "chain.txt", ".env", ".git/config"] {
        assert!(
            !out.join("base/x").join(name).exists(),
            "{name} was published: {}",
            published.text()
        );
    }
}

/// Finding: `publish` uploaded without validation or the content check.
/// It refuses a tree with errors and lists them, unless `--no-check`.
#[test]
fn publish_validates_and_checks_content_first() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("base/good/assets")).unwrap();
    std::fs::create_dir_all(tree.join("base/misnamed")).unwrap();
    std::fs::write(
        tree.join("base/good/SKILL.md"),
        "---\nname: good\ndescription: Fine.\n---\n",
    )
    .unwrap();
    std::fs::write(tree.join("base/good/assets/tool"), b"\x7fELF\x02\x01\x01\0").unwrap();
    std::fs::write(
        tree.join("base/misnamed/SKILL.md"),
        "---\nname: other\ndescription: Wrong name.\n---\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let refused = run(skillstore().args(["publish", tree.to_str().unwrap(), out.to_str().unwrap()]));
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("/base/good/assets/tool: [content_blocked]"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("/base/misnamed/SKILL.md: [name_mismatch]"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing was published");

    let forced = run(skillstore().args(["publish", "--no-check", tree.to_str().unwrap(), out.to_str().unwrap()]));
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(out.join("base/good/assets/tool").is_file());
}

/// `publish` to a local directory that does not exist yet makes it (as
/// `sync` makes its target), and refuses one whose parent is missing.
#[test]
fn cli_publish_makes_a_missing_local_destination() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("published");
    let out = run(skillstore().args(["publish", "examples/skills", target.to_str().unwrap()]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(target.join("base/csv-report/SKILL.md").is_file());
    let deep = dir.path().join("no/such/place");
    let out = run(skillstore().args(["publish", "examples/skills", deep.to_str().unwrap()]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("the directory above it does not exist"),
        "{}",
        out.stderr
    );
}

#[test]
fn cli_publish_leaves_histories_behind_and_refuses_one_skill() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let skill = tree.join("team/notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: Take notes.\n---\nBody.\n",
    )
    .unwrap();
    std::fs::create_dir_all(tree.join("team/.history")).unwrap();
    std::fs::write(tree.join("team/.history/notes.jsonl"), "{\"secret\": \"sk-live-1\"}\n").unwrap();
    let target = dir.path().join("published");
    let out = run(skillstore().args(["publish", tree.to_str().unwrap(), target.to_str().unwrap()]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(target.join("team/notes/SKILL.md").is_file());
    assert!(!target.join("team/.history").exists(), "a history is never published");
    assert!(
        out.text().contains("skipped /team/.history/notes.jsonl"),
        "the skipped path is named: {}",
        out.text()
    );

    let out = run(skillstore().args(["publish", skill.to_str().unwrap(), target.to_str().unwrap()]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("one skill's directory"), "{}", out.stderr);
}

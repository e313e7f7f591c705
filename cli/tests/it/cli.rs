//! The `skillstore` command, end to end.

use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use skillstore::backends::testkit::s3_server::S3TestServer;

/// The workspace root, which holds the example layers.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the command's crate sits in the workspace")
        .to_path_buf()
}

/// A cache directory for every command of this test process, so no test
/// reads or writes the cache in the user's home.
fn test_cache_home() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a cache directory"))
        .path()
}

/// The command, run from the repository root (whose skillstore.yaml holds
/// the example layers), with a hang guard and a cache of its own.
fn skillstore() -> Command {
    let mut cmd = Command::cargo_bin("skillstore").unwrap();
    cmd.current_dir(repo())
        .timeout(Duration::from_secs(120))
        .env("XDG_CACHE_HOME", test_cache_home());
    for var in [
        "AWS_ENDPOINT_URL",
        "AWS_ALLOW_HTTP",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

impl Run {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

fn run(cmd: &mut Command) -> Run {
    let output = cmd.output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn names(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

const EXAMPLE_ORDER: [&str; 8] = [
    "changelog",
    "code-review",
    "commit-messages",
    "csv-report",
    "meeting-notes",
    "release-checklist",
    "api-design",
    "incident-response",
];

#[test]
fn cli_list_json_follows_the_contract() {
    let out = run(skillstore().args(["list", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = out.json();
    assert_eq!(names(&list), EXAMPLE_ORDER);
    let changelog = &list["skills"][0];
    assert_eq!(changelog["source"], "team");
    assert_eq!(changelog["path"], "/examples/skills/team/changelog/SKILL.md");
    assert_eq!(changelog["license"], "Apache-2.0");
    assert_eq!(changelog["compatibility"], Value::Null);
    assert_eq!(changelog["metadata"], serde_json::json!({}));
    assert_eq!(changelog["allowed_tools"], serde_json::json!([]));
    assert_eq!(
        changelog["shadowed"],
        serde_json::json!([{"source": "base", "path": "/examples/skills/base/changelog/SKILL.md"}])
    );
    let csv = &list["skills"][3];
    assert_eq!(csv["allowed_tools"], serde_json::json!(["Read", "Bash"]));
    assert_eq!(csv["metadata"], serde_json::json!({"author": "data-team"}));
    assert_eq!(list["diagnostics"], serde_json::json!([]));
}

#[test]
fn cli_list_table_shows_every_skill() {
    let out = run(skillstore().arg("list"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.starts_with("NAME"));
    for name in EXAMPLE_ORDER {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }
}

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

#[test]
fn cli_bad_usage_exits_two_with_one_line() {
    let cases: [&[&str]; 6] = [
        &[],
        &["list", "--bogus"],
        &["--mount", "no-equals", "list"],
        &["--source", "relative/path", "list"],
        &["--source", "/a/../b", "list"],
        &["--config", "does-not-exist.yaml", "list"],
    ];
    for args in cases {
        let out = run(skillstore().args(args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{args:?}");
    }
    let missing = run(skillstore().args(["--config", "does-not-exist.yaml", "list"]));
    assert!(
        missing.stderr.starts_with("error: cannot read the configuration"),
        "{}",
        missing.stderr
    );
}

#[test]
fn cli_config_with_an_unknown_key_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("skillstore.yaml");
    std::fs::write(&config, "sources:\n  - path: /base\n    lable: Base\n").unwrap();
    let out = run(skillstore().arg("--config").arg(&config).arg("list"));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("lable"), "{}", out.stderr);
}

#[test]
fn cli_config_sets_filters_and_per_source_symlink_policy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (layer, name) in [("base", "keep"), ("base", "legacy-tool"), ("team", "linked-target")] {
        let skill = root.join(layer).join(name);
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n"),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("../team/linked-target", root.join("base/linked")).unwrap();
    std::fs::write(
        root.join("skillstore.yaml"),
        "sources:\n  - path: /base\n    symlinks: deny\nskills:\n  disabled: [\"legacy-*\"]\n",
    )
    .unwrap();
    let out = run(skillstore()
        .arg("--config")
        .arg(root.join("skillstore.yaml"))
        .args(["list", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = out.json();
    assert_eq!(names(&list), ["keep", "legacy-tool"]);
    assert_eq!(list["skills"][1]["enabled"], false);
    assert_eq!(list["diagnostics"][0]["kind"], "symlink_refused");
    assert_eq!(list["diagnostics"][0]["path"], "/base/linked/SKILL.md");
}

#[test]
fn cli_memory_location_and_explicit_sources() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("state.json");
    std::fs::write(
        &json,
        r#"{"/base/a/SKILL.md": "---\nname: a\ndescription: from memory\n---\nbody", "/team/a/SKILL.md": "---\nname: a\ndescription: team memory\n---\n"}"#,
    )
    .unwrap();
    let location = format!("/=memory:{}", json.display());
    let out = run(skillstore().args([
        "--mount",
        &location,
        "--source",
        "/base/",
        "--source",
        "Team=/team/",
        "list",
        "--json",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = out.json();
    assert_eq!(list["skills"][0]["source"], "Team");
    assert_eq!(list["skills"][0]["description"], "team memory");
}

fn s3_env(cmd: &mut Command, server: &S3TestServer) {
    for (key, value) in server.env() {
        cmd.env(key, value);
    }
}

/// Publishes the example layers to a fresh bucket of the shared S3 server:
/// the bucket, `s3://BUCKET/catalog`, and what `publish` printed (it
/// succeeded).
fn publish_examples(server: &S3TestServer) -> (String, String, Run) {
    let bucket = server.create_bucket();
    let location = format!("s3://{bucket}/catalog");
    let mut publish = skillstore();
    s3_env(&mut publish, server);
    let out = run(publish.args(["publish", "examples/skills", &location]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    (bucket, location, out)
}

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

const EXAMPLE_LAYERS: [&str; 4] = ["base", "user", "project", "team"];

/// The `--source` flags naming the example layers.
fn example_sources() -> Vec<String> {
    EXAMPLE_LAYERS
        .iter()
        .flat_map(|layer| ["--source".to_owned(), format!("/{layer}/")])
        .collect()
}

/// Each skill's description in a `list --json` output, by name.
fn descriptions(out: &Run) -> std::collections::BTreeMap<String, String> {
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["description"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
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
fn list_reads_the_local_cache_only_at_listed_versions_and_no_cache_turns_it_off() {
    use skillstore::backends::{PutMode, SkillBackend, VPath};
    let server = S3TestServer::shared();
    let (bucket, location, _) = publish_examples(server);

    let cache_home = tempfile::tempdir().unwrap();
    let mount = format!("/={location}");
    let list = |cache_home: &std::path::Path, extra: &[&str]| {
        let mut cmd = skillstore();
        s3_env(&mut cmd, server);
        cmd.env("XDG_CACHE_HOME", cache_home)
            .args(extra)
            .args(["--mount", &mount])
            .args(example_sources())
            .args(["list", "--json"]);
        run(&mut cmd)
    };
    let local = {
        let mut cmd = skillstore();
        cmd.args(["--mount", "/=examples/skills"])
            .args(example_sources())
            .args(["list", "--json"]);
        descriptions(&run(&mut cmd))
    };
    // The cache keeps what was read from the files themselves, never an
    // entry taken from a source's index: without the indexes `publish`
    // wrote, the first load reads every SKILL.md.
    let backend = server.backend(&bucket, "catalog");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for layer in EXAMPLE_LAYERS {
        let index = VPath::new(format!("/{layer}/.skillstore/index.json")).unwrap();
        runtime.block_on(backend.delete(&index)).unwrap();
    }

    // A first load fills a private cache.
    assert_eq!(descriptions(&list(cache_home.path(), &[])), local);
    let cache_dir = cache_home.path().join("skillstore");
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777
    };
    assert_eq!(mode(&cache_dir), 0o700);
    let files: Vec<PathBuf> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert!(!files.is_empty(), "the load left no cache file");
    assert!(files.iter().all(|f| mode(f) == 0o600));

    // `--no-cache` neither reads nor creates one.
    let untouched = tempfile::tempdir().unwrap();
    assert_eq!(descriptions(&list(untouched.path(), &["--no-cache"])), local);
    assert!(
        !untouched.path().join("skillstore").exists(),
        "--no-cache made a cache directory"
    );

    // Entries forged in the cache at the current versions are what a load
    // takes (so the cache is read), and `--no-cache` passes them over.
    for file in &files {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        for entry in doc["entries"].as_object_mut().unwrap().values_mut() {
            let yaml = entry["yaml"]
                .as_str()
                .unwrap()
                .replace("description: ", "description: FORGED ");
            entry["yaml"] = Value::String(yaml);
        }
        std::fs::write(file, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
    let cached = descriptions(&list(cache_home.path(), &[]));
    assert!(cached.values().all(|d| d.starts_with("FORGED ")), "{cached:?}");
    assert_eq!(descriptions(&list(cache_home.path(), &["--no-cache"])), local);

    // A SKILL.md replaced behind skillstore's back, same size: its cache and
    // index entries no longer match the listed version, so it is read.
    let path = VPath::new("/base/csv-report/SKILL.md").unwrap();
    let original = std::fs::read_to_string(repo().join("examples/skills/base/csv-report/SKILL.md")).unwrap();
    let changed = original.replacen("Summarise a CSV file", "Summarize a CSV file", 1);
    assert_eq!(changed.len(), original.len());
    runtime
        .block_on(backend.put(&path, changed.clone().into(), PutMode::Overwrite))
        .unwrap();
    let after = descriptions(&list(cache_home.path(), &[]));
    assert!(after["csv-report"].starts_with("Summarize a CSV file"), "{after:?}");
    let fresh = descriptions(&list(cache_home.path(), &["--no-cache"]));
    assert_eq!(after["csv-report"], fresh["csv-report"]);
    assert!(
        after
            .iter()
            .filter(|(name, _)| *name != "csv-report")
            .all(|(_, d)| d.starts_with("FORGED "))
    );
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

#[test]
fn cli_unreachable_s3_endpoint_is_a_diagnostic_not_a_hang() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut cmd = skillstore();
    cmd.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .env("AWS_REGION", "us-east-1")
        .args([
            "--mount",
            "/remote=s3://skills",
            "--source",
            "/remote/base",
            "--source",
            "/local/",
        ])
        .args(["--mount", "/local=examples/skills/team", "list", "--json"]);
    let out = run(&mut cmd);
    assert_eq!(out.code, 3, "{}", out.stderr);
    let list = out.json();
    assert_eq!(list["diagnostics"][0]["kind"], "source_unavailable");
    assert_eq!(list["diagnostics"][0]["path"], "/remote/base");
    assert!(!names(&list).is_empty(), "the local source still loads");
}

#[test]
fn cli_rust_log_turns_on_tracing() {
    let out = run(skillstore().env("RUST_LOG", "debug").args(["list", "--json"]));
    assert_eq!(out.code, 0);
    assert!(out.stderr.contains("DEBUG"), "{}", out.stderr);
    // Standard error is a pipe here, so the log carries no colour codes.
    assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
}

/// A command over a temporary tree with a read-only base and a writable team.
fn in_tree(dir: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = skillstore();
    let mount = format!("/={}", dir.display());
    cmd.args([
        "--mount",
        &mount,
        "--source",
        "/base",
        "--source",
        "/team",
        "--writable",
        "team",
    ])
    .args(extra);
    cmd
}

const NOTES: &str = "---\nname: notes\ndescription: Take notes.\n---\n\n# Notes\n\nBody.\n";

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

/// Finding: a description holding ESC or BEL sequences reached the terminal
/// raw in `list`, `show`, diagnostics, errors and `history`.
#[test]
fn terminal_escapes_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let esc = "Title\u{1b}]0;pwned\u{7} and \u{1b}[2J cleared, \u{9b}31m red";
    std::fs::create_dir_all(dir.path().join("base/esc")).unwrap();
    std::fs::write(
        dir.path().join("base/esc/SKILL.md"),
        format!(
            "---\nname: esc\ndescription: \"{}\"\nlicense: \"MIT\\e[8m\"\n---\nBody \u{1b}[5m\n",
            esc.replace('\u{1b}', "\\e")
                .replace('\u{7}', "\\a")
                .replace('\u{9b}', "\\x9b")
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("team/bad")).unwrap();
    std::fs::write(
        dir.path().join("team/bad/SKILL.md"),
        "---\nname: \"bad\\e[31m\"\ndescription: Misnamed.\n---\n",
    )
    .unwrap();
    let raw = |bytes: &[u8]| {
        bytes.iter().any(|b| *b == 0x1b || *b == 0x07) || String::from_utf8_lossy(bytes).contains('\u{9b}')
    };

    let list = run(&mut in_tree(dir.path(), &["list"]));
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        !raw(&list.stdout) && !raw(list.stderr.as_bytes()),
        "{:?} {:?}",
        list.text(),
        list.stderr
    );
    assert!(list.text().contains("\\u{1b}]0;pwned\\u{7}"), "{}", list.text());
    assert!(list.stderr.contains("\\u{1b}[31m"), "{}", list.stderr);

    let show = run(&mut in_tree(dir.path(), &["show", "esc"]));
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(!raw(&show.stdout), "{:?}", show.text());
    assert!(show.text().contains("MIT\\u{1b}[8m"), "{}", show.text());

    // JSON escapes what JSON escapes: every C0 control (C1 stays text).
    let json = run(&mut in_tree(dir.path(), &["list", "--json"]));
    assert!(!json.stdout.iter().any(|b| *b < 0x20 && *b != b'\n'), "{}", json.text());
    assert!(json.text().contains("\\u001b]0;pwned\\u0007"), "{}", json.text());
    assert_eq!(json.json()["skills"][0]["description"], esc);

    let read = run(&mut in_tree(dir.path(), &["read", "esc"]));
    assert!(read.text().contains("Body \u{1b}[5m"), "read stays byte-exact");

    let error = run(&mut in_tree(dir.path(), &["read", "no\u{1b}]0;x\u{7}such"]));
    assert_eq!(error.code, 1);
    assert!(!raw(error.stderr.as_bytes()), "{:?}", error.stderr);

    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, NOTES).unwrap();
    let created = run(&mut in_tree(
        dir.path(),
        &[
            "skill",
            "create",
            "notes",
            "--from",
            notes.to_str().unwrap(),
            "--author",
            "mallory\u{1b}[2J",
        ],
    ));
    assert_eq!(created.code, 0, "{}", created.stderr);
    let history = run(&mut in_tree(dir.path(), &["skill", "history", "notes"]));
    assert!(!raw(&history.stdout), "{:?}", history.text());
    assert!(history.text().contains("mallory\\u{1b}[2J"), "{}", history.text());
}

/// Finding: `list`, `show`, `prompt` and `read` exited 0 when sources were
/// unreachable. They still print what loaded, then exit 3.
#[test]
fn unreachable_source_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base/local")).unwrap();
    std::fs::write(
        dir.path().join("base/local/SKILL.md"),
        "---\nname: local\ndescription: Still here.\n---\nBody.\n",
    )
    .unwrap();
    // Nothing listens on this port: connections are refused at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mount = format!("/={}", dir.path().display());
    let dead = |extra: &[&str]| {
        let mut cmd = skillstore();
        cmd.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_REGION", "us-east-1")
            .args([
                "--mount",
                &mount,
                "--mount",
                "/team=s3://dead-bucket/team",
                "--source",
                "/base/",
                "--source",
                "/team/",
            ])
            .args(extra);
        run(&mut cmd)
    };
    let list = dead(&["list"]);
    assert_eq!(list.code, 3, "{}", list.stderr);
    assert!(list.text().contains("local"), "{}", list.text());
    assert!(
        list.stderr.contains("incomplete") && list.stderr.contains("`team`"),
        "{}",
        list.stderr
    );
    let json = dead(&["list", "--json"]);
    assert_eq!(json.code, 3);
    assert_eq!(json.json()["skills"][0]["name"], "local");
    for extra in [&["show", "local"][..], &["read", "local"], &["prompt"]] {
        let out = dead(extra);
        assert_eq!(out.code, 3, "{extra:?}: {}", out.stderr);
        assert!(
            out.text().contains("local") || out.text().contains("Body."),
            "{extra:?}: {}",
            out.text()
        );
    }
    // Every source unreachable: nothing to print, still 3.
    let mut cmd = skillstore();
    cmd.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .args(["--mount", "/=s3://dead-bucket", "--source", "/team/", "list"]);
    let all = run(&mut cmd);
    assert_eq!(all.code, 3, "{}", all.stderr);
}

/// `base/secret` and `team/evil`, with `team/evil/references ->
/// ../../base/secret`: a link inside the root that crosses skills and layers.
fn link_across_layers() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base/secret")).unwrap();
    std::fs::write(
        dir.path().join("base/secret/SKILL.md"),
        "---\nname: secret\ndescription: Base only.\n---\nTOPSECRET\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("team/evil")).unwrap();
    std::fs::write(
        dir.path().join("team/evil/SKILL.md"),
        "---\nname: evil\ndescription: Tries.\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../../base/secret", dir.path().join("team/evil/references")).unwrap();
    dir
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

/// Every regular file under `root` by relative path.
fn files_under(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else {
                assert!(kind.is_file(), "not a regular file: {:?}", entry.path());
                let relative = entry.path().strip_prefix(root).unwrap().to_str().unwrap().to_owned();
                out.insert(relative, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// `sync DIR` writes every winner's files as `read` serves them, a second
/// sync changes nothing, and every location a prompt names under
/// `--location-root DIR` is a file of the synced tree.
#[test]
fn sync_matches_read_and_prompt_locations_exist() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("skills");
    let first = run(skillstore().args(["sync", dir.to_str().unwrap(), "--json"]));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let report = first.json();
    assert_eq!(report["switched"], true);

    let listed = run(skillstore().args(["list", "--json"])).json();
    let expected: Vec<String> = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["enabled"] != false)
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    let synced = files_under(&dir);
    let mut synced_skills: Vec<&str> = synced.keys().filter_map(|k| k.strip_suffix("/SKILL.md")).collect();
    synced_skills.sort_unstable();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort_unstable();
    assert_eq!(synced_skills, expected_sorted);
    for (relative, bytes) in &synced {
        let (name, inside) = relative.split_once('/').unwrap();
        let mut read = skillstore();
        read.arg("read").arg(name);
        if inside != "SKILL.md" {
            read.arg(inside);
        }
        let served = run(&mut read);
        assert_eq!(served.code, 0, "{relative}: {}", served.stderr);
        assert_eq!(&served.stdout, bytes, "{relative} differs from `read`");
    }

    let again = run(skillstore().args(["sync", dir.to_str().unwrap(), "--json"]));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.json()["switched"], false);
    assert_eq!(again.json()["files_copied"], 0);

    let prompt = run(skillstore().args(["prompt", "--style", "xml", "--location-root", dir.to_str().unwrap()]));
    assert_eq!(prompt.code, 0, "{}", prompt.stderr);
    let text = prompt.text();
    let locations: Vec<&str> = text
        .split("<location>")
        .skip(1)
        .map(|rest| rest.split("</location>").next().unwrap())
        .collect();
    assert_eq!(locations.len(), expected.len(), "{text}");
    for location in locations {
        assert!(
            std::path::Path::new(location).is_file(),
            "{location} is not in the synced tree"
        );
    }
}

/// A source that cannot be listed contributes no skills; a sync then would
/// delete that source's skills from the tree. It exits 3 and the tree keeps
/// its generation.
#[test]
fn sync_keeps_the_tree_when_a_source_is_unreachable() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    server.put_raw(
        &bucket,
        "team/remote/SKILL.md",
        b"---\nname: remote\ndescription: From S3.\n---\nBody.\n",
    );
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(local.path().join("base/local")).unwrap();
    std::fs::write(
        local.path().join("base/local/SKILL.md"),
        "---\nname: local\ndescription: On disk.\n---\nBody.\n",
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("skills");
    let root = format!("/={}", local.path().display());
    let team = format!("/team=s3://{bucket}/team");
    let sync = |cmd: &mut Command| {
        cmd.args([
            "--mount",
            &root,
            "--mount",
            &team,
            "--source",
            "/base/",
            "--source",
            "/team/",
            "sync",
            dir.to_str().unwrap(),
        ]);
        run(cmd)
    };
    let mut reachable = skillstore();
    s3_env(&mut reachable, server);
    let first = sync(&mut reachable);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(dir.join("remote/SKILL.md").is_file());

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut unreachable = skillstore();
    s3_env(&mut unreachable, server);
    unreachable.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"));
    let second = sync(&mut unreachable);
    assert_eq!(second.code, 3, "{}", second.stderr);
    assert!(second.stderr.contains("`team`"), "{}", second.stderr);
    assert!(
        !second.stderr.contains("127.0.0.1") && !second.stderr.contains(&bucket),
        "{}",
        second.stderr
    );
    assert!(
        dir.join("remote/SKILL.md").is_file(),
        "the unreachable source's skill was removed"
    );
    assert!(dir.join("local/SKILL.md").is_file());
}

/// A long-running command, killed with SIGTERM when dropped.
struct Running(std::process::Child);

impl Running {
    fn start(args: &[&str], cwd: &std::path::Path) -> Running {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("skillstore"))
            .current_dir(cwd)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Running(child)
    }

    /// Sends SIGTERM and returns the exit code and standard error.
    fn stop(mut self) -> (Option<i32>, String) {
        let pid = rustix::process::Pid::from_child(&self.0);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                break status;
            }
            assert!(std::time::Instant::now() < deadline, "no exit within 60 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(self.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        (status.code(), stderr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to 60 s for `check`, polling.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn skill(root: &std::path::Path, layer: &str, name: &str, description: &str) {
    std::fs::create_dir_all(root.join(layer).join(name)).unwrap();
    std::fs::write(
        root.join(layer).join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n"),
    )
    .unwrap();
}

/// `sync --watch` follows a change in its sources and ends with exit 0 on
/// SIGTERM.
#[test]
fn sync_watch_follows_changes_and_exits_0_on_sigterm() {
    let tree = tempfile::tempdir().unwrap();
    skill(tree.path(), "base", "alpha", "First.");
    std::fs::create_dir_all(tree.path().join("team")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("skills");
    let root = format!("/={}", tree.path().display());
    let watching = Running::start(
        &[
            "--mount",
            &root,
            "--source",
            "/base/",
            "--source",
            "/team/",
            "sync",
            dir.to_str().unwrap(),
            "--watch",
            "100ms",
        ],
        out.path(),
    );
    eventually("the first sync", || dir.join("alpha/SKILL.md").is_file());
    skill(tree.path(), "team", "alpha", "Second.");
    skill(tree.path(), "team", "beta", "Added.");
    eventually("the change in the tree", || {
        std::fs::read_to_string(dir.join("alpha/SKILL.md")).is_ok_and(|s| s.contains("Second."))
            && dir.join("beta/SKILL.md").is_file()
    });
    std::fs::remove_dir_all(tree.path().join("team/beta")).unwrap();
    eventually("the removal", || !dir.join("beta").exists());
    let (code, stderr) = watching.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

/// `mount DIR` serves the synced tree's files through FUSE and unmounts on
/// SIGTERM with exit 0. Mounts for real: a machine that cannot fails here
/// and the command's message says why.
#[test]
fn mount_serves_the_synced_tree_and_unmounts_on_sigterm() {
    let out = tempfile::tempdir().unwrap();
    let synced = out.path().join("synced");
    let made = run(skillstore().args(["sync", synced.to_str().unwrap()]));
    assert_eq!(made.code, 0, "{}", made.stderr);
    let point = out.path().join("mnt");
    std::fs::create_dir(&point).unwrap();
    let mounted = Running::start(&["mount", point.to_str().unwrap()], &repo());
    eventually("the mount", || point.join("csv-report/SKILL.md").is_file());
    assert_eq!(files_under(&point), files_under(&synced));
    assert!(
        std::fs::write(point.join("csv-report/new.md"), b"x").is_err(),
        "the mount is writable"
    );
    let (code, stderr) = mounted.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_dir(&point).unwrap().count(),
        0,
        "still mounted after exit"
    );
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

/// `mcp` and `serve` without a tenants file fail as any command does when
/// there is nothing to open: a usage error that names no tenant.
#[test]
fn cli_mcp_without_sources_is_a_usage_error_naming_no_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = skillstore();
    mcp.current_dir(dir.path()).arg("mcp").write_stdin("");
    let out = run(&mut mcp);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: no sources:"), "{}", out.stderr);
    assert!(!out.stderr.contains("tenant"), "{}", out.stderr);
}

/// `config check` reads a configuration or a server file as the commands
/// would and says what it would open; a refused file names itself, there
/// and in every other command.
#[test]
fn cli_config_check_names_the_file_and_says_what_it_would_open() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "mounts: [{at: /, location: \"s3://b\"}]\nsources: [{path: /base}, {path: /team, symlinks: deny}]\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    for args in [&["config", "check", bad][..], &["--config", bad, "list"]] {
        let out = run(skillstore().args(args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!(
                "error: {bad}: a symlink policy applies to local directories only"
            )),
            "{args:?}: {}",
            out.stderr
        );
    }

    let good = run(skillstore().args(["config", "check"]));
    assert_eq!(good.code, 0, "{}", good.stderr);
    assert_eq!(
        good.text(),
        "skillstore.yaml: a skillstore configuration\nmount / = .\nsource base (/examples/skills/base)\n\
         source user (/examples/skills/user)\nsource project (/examples/skills/project)\n\
         source team (/examples/skills/team)\n"
    );

    // Credentials in a location never show, whatever the shape.
    for location in [
        "git+https://alice:SEKRIT-pw@127.0.0.1:1/r.git@main",
        "git+https://127.0.0.1:1/r.git?private_token=SEKRIT-tok",
        "git+ssh://deploy:SEKRIT-ssh@127.0.0.1:1/r.git",
    ] {
        let file = dir.path().join("secret.yaml");
        std::fs::write(
            &file,
            format!("mounts: [{{at: /, location: \"{location}\"}}]\nsources: [{{path: /base}}]\n"),
        )
        .unwrap();
        let out = run(skillstore()
            .env("SKILLSTORE_GIT_CACHE", dir.path().join("git-cache"))
            .args(["config", "check"])
            .arg(&file));
        let shown = format!("{}{}", out.text(), out.stderr);
        assert!(shown.contains("127.0.0.1:1/r.git"), "{shown}");
        assert!(
            !shown.contains("SEKRIT") && !shown.contains("alice") && !shown.contains("deploy"),
            "{shown}"
        );
    }

    let server = dir.path().join("server.yaml");
    std::fs::write(
        &server,
        "tenants:\n  - name: acme\n    tokens: [{env: CHECK_ACME_TOKEN, scope: write}]\n    \
         config: {mounts: [{at: /, location: \"s3://acme\"}], sources: [{path: /base}, {path: /team, writable: true}]}\n",
    )
    .unwrap();
    let server = server.to_str().unwrap();
    let out = run(skillstore()
        .env("CHECK_ACME_TOKEN", "t0ken")
        .args(["config", "check", server]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.text(),
        format!(
            "{server}: a server file with 1 tenant(s)\ntenant acme: 1 token(s)\n  mount / = s3://acme\n  \
             source base (/base)\n  source team (/team, writable)\n"
        )
    );
    let unset = run(skillstore()
        .env_remove("CHECK_ACME_TOKEN")
        .args(["config", "check", server]));
    assert_eq!(unset.code, 2, "{}", unset.stderr);
    assert!(unset.stderr.contains(server), "{}", unset.stderr);

    // JWTs: what the file takes is said; a block that does not validate is refused.
    let jwt = "auth:\n  jwt:\n    jwks_url: https://idp.example.com/jwks.json\n    issuer: https://idp.example.com/\n    \
               audience: skillstore\n";
    let text = std::fs::read_to_string(server).unwrap();
    std::fs::write(server, format!("{text}{jwt}")).unwrap();
    let out = run(skillstore()
        .env("CHECK_ACME_TOKEN", "t0ken")
        .args(["config", "check", server]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.text().contains(
            "auth: bearer JWTs (RS256, ES256, EdDSA) signed by a key of the JWKS at https://idp.example.com/jwks.json, \
             issuer https://idp.example.com/, audience skillstore; tenant from `tenant`, scope from `scope`\n"
        ),
        "{}",
        out.text()
    );
    std::fs::write(server, format!("{text}{jwt}    algorithms: [HS256]\n")).unwrap();
    let out = run(skillstore()
        .env("CHECK_ACME_TOKEN", "t0ken")
        .args(["config", "check", server]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("HS256"), "{}", out.stderr);
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

/// `token-hash` prints the line a server file takes, and the server file
/// accepts it for that token.
#[test]
fn cli_token_hash_prints_what_the_server_file_takes() {
    let mut cmd = skillstore();
    cmd.arg("token-hash").write_stdin("test\n");
    let out = run(&mut cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.text(),
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
    );
    let mut empty = skillstore();
    empty.arg("token-hash").write_stdin("");
    assert_eq!(run(&mut empty).code, 2);
}

#[test]
fn cli_version_names_the_commit_it_was_built_from() {
    let out = run(skillstore().arg("--version"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out.text();
    let expected = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    assert_eq!(
        line,
        format!("skillstore {} (commit {expected})\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn cli_bash_completion_completes_commands_and_options() {
    let script = run(skillstore().args(["completions", "bash"]));
    assert_eq!(script.code, 0, "{}", script.stderr);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skillstore.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    // The real bash loads the script and asks it what `skillstore sy<TAB>`
    // and `skillstore sync --wa<TAB>` complete to.
    let complete = |words: &str, cword: usize| {
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
             _skillstore skillstore \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &probe])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(complete("skillstore sy", 1).trim(), "sync");
    assert!(complete("skillstore sync --wa", 2).lines().any(|l| l == "--watch"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = run(skillstore().args(["completions", shell]));
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert!(out.text().contains("sync"), "{shell}");
    }
    assert_eq!(run(skillstore().args(["completions", "tcsh"])).code, 2);
}

#[test]
fn cli_man_pages_cover_every_command() {
    let page = run(skillstore().arg("man"));
    assert_eq!(page.code, 0, "{}", page.stderr);
    let text = page.text();
    assert!(text.starts_with(".ie"), "roff: {}", &text[..80.min(text.len())]);
    assert!(text.contains(".TH skillstore 1"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let out = run(skillstore().arg("man").arg("--dir").arg(dir.path()));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for command in ["list", "show", "sync", "serve", "config", "token-hash", "man"] {
        assert!(pages.contains(&format!("skillstore-{command}.1")), "{pages:?}");
    }
    assert!(pages.contains(&"skillstore.1".to_owned()));
    let sync = std::fs::read_to_string(dir.path().join("skillstore-sync.1")).unwrap();
    assert!(
        sync.contains(".TH skillstore-sync 1") && sync.contains("watch"),
        "{sync}"
    );
    assert_eq!(run(skillstore().args(["man", "--dir", "/nonexistent/dir"])).code, 2);

    // A link or a FIFO planted under a page's name is replaced, never
    // written through or waited on.
    let planted = tempfile::tempdir().unwrap();
    let precious = planted.path().join("precious.txt");
    std::fs::write(&precious, "keep me\n").unwrap();
    let pages = planted.path().join("man");
    std::fs::create_dir(&pages).unwrap();
    std::os::unix::fs::symlink(&precious, pages.join("skillstore.1")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        pages.join("skillstore-list.1").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let out = run(skillstore().arg("man").arg("--dir").arg(&pages));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
    for page in ["skillstore.1", "skillstore-list.1"] {
        let meta = std::fs::symlink_metadata(pages.join(page)).unwrap();
        assert!(meta.is_file(), "{page} is a regular file now");
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o644
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn cli_commands_without_a_catalog_neither_list_nor_take_global_options() {
    for (command, help) in [
        (&["validate"][..], true),
        (&["pack"][..], true),
        (&["publish"][..], true),
        (&["token-hash"][..], true),
        (&["config", "check"][..], false),
    ] {
        let out = run(skillstore().args(command).arg("--help"));
        assert_eq!(out.code, 0, "{}", out.stderr);
        let text = out.text();
        let lists = |flag: &str| text.lines().any(|l| l.trim_start().starts_with(flag));
        for flag in ["--mount", "--source", "--writable", "--no-cache"] {
            assert!(!lists(flag), "{command:?} --help lists {flag}:\n{text}");
        }
        assert_eq!(lists("--config"), !help, "{command:?}:\n{text}");
    }
    // The commands that read a catalog still list them.
    let list = run(skillstore().args(["list", "--help"])).text();
    assert!(list.contains("--mount") && list.contains("--source"), "{list}");
    // Given anyway, they are a usage error rather than silently ignored.
    let out = run(skillstore().args(["--mount", "/=.", "validate", "examples/skills/base"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("`validate` reads no catalog and takes no --mount"),
        "{}",
        out.stderr
    );
    let out = run(skillstore().args(["pack", "examples/skills/base/csv-report", "--source", "/base"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn cli_config_schemas_match_the_committed_copies_and_the_types() {
    for (kind, file) in [("config", "skillstore.schema.json"), ("server", "server.schema.json")] {
        let out = run(skillstore().args(["config", "schema", kind]));
        assert_eq!(out.code, 0, "{}", out.stderr);
        let committed = std::fs::read_to_string(repo().join("docs/schema").join(file)).unwrap_or_default();
        assert!(
            out.text() == committed,
            "docs/schema/{file} is not what `skillstore config schema {kind}` prints; regenerate it with that command"
        );
        let schema = out.json();
        // deny_unknown_fields: an unknown key is refused by editors too.
        assert_eq!(schema["additionalProperties"], false, "{kind}");
    }
    // Every top-level key the repository's own configuration uses is in the schema.
    let schema = run(skillstore().args(["config", "schema", "config"])).json();
    let config: serde_json::Value = serde_yaml_keys(&std::fs::read_to_string(repo().join("skillstore.yaml")).unwrap());
    for key in config.as_object().unwrap().keys() {
        assert!(schema["properties"].get(key).is_some(), "{key} is not in the schema");
    }
    let server = run(skillstore().args(["config", "schema", "server"])).json();
    for key in [
        "listen",
        "limits",
        "template",
        "tenants",
        "allowed_origins",
        "metrics_tokens",
    ] {
        assert!(
            server["properties"].get(key).is_some(),
            "{key} is not in the server schema"
        );
    }
}

/// The top-level keys of a YAML mapping, as a JSON object of nulls (the
/// tests have no YAML parser of their own; top-level keys start a line).
fn serde_yaml_keys(text: &str) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for line in text.lines() {
        if let Some((key, _)) = line.split_once(':')
            && !key.is_empty()
            && !key.starts_with([' ', '#', '-'])
        {
            map.insert(key.to_owned(), Value::Null);
        }
    }
    Value::Object(map)
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

//! `list`: the JSON contract and the table, locations and sources, the local
//! cache, and what an unreachable source does to the exit code.

use std::path::PathBuf;

use serde_json::Value;
use skillstore::backends::testkit::s3_server::S3TestServer;

use crate::support::{EXAMPLE_LAYERS, Run, example_sources, names, publish_examples, repo, run, s3_env, skillstore};

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

/// `list` fits a terminal: descriptions cut with `...` to its width (a
/// real terminal through script(1), and `COLUMNS`), whole when piped;
/// `--format names|table|json`, with `--json` the same as `--format json`.
#[test]
fn cli_list_fits_the_terminal_and_takes_a_format() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let long = "Fill, read and merge PDF forms, keeping every field and signature as it was";
    crate::support::write(
        root,
        "skills/csv/SKILL.md",
        "---\nname: csv\ndescription: Read CSV.\n---\nSteps.\n",
    );
    crate::support::write(
        root,
        "skills/pdf/SKILL.md",
        &format!("---\nname: pdf\ndescription: {long}\n---\nSteps.\n"),
    );
    let list = |args: &[&str], columns: Option<&str>| {
        let mut cmd = crate::support::skillstore_in(root);
        cmd.env_remove("COLUMNS")
            .args(["--source", "/skills/", "list"])
            .args(args);
        if let Some(columns) = columns {
            cmd.env("COLUMNS", columns);
        }
        run(&mut cmd)
    };
    let header = "NAME  SOURCE  SHADOWS  ENABLED  DESCRIPTION\n";
    let whole = format!("{header}csv   skills        0  yes      Read CSV.\npdf   skills        0  yes      {long}\n");
    assert_eq!(list(&[], None).text(), whole);
    assert_eq!(list(&["--format", "table"], None).text(), whole);
    let cut = format!(
        "{header}csv   skills        0  yes      Read CSV.\npdf   skills        0  yes      Fill, read and merge PDF...\n"
    );
    assert_eq!(list(&[], Some("60")).text(), cut);
    for line in cut.lines() {
        assert!(line.chars().count() <= 60, "{line}");
    }
    assert_eq!(list(&["--format", "names"], None).text(), "csv\npdf\n");
    let json = list(&["--format", "json"], None);
    assert_eq!(json.json()["skills"][1]["description"], long);
    assert_eq!(json.stdout, list(&["--json"], None).stdout);
    let both = list(&["--json", "--format", "names"], None);
    assert_eq!(both.code, 2, "{}", both.stderr);

    // A real terminal 60 columns wide, no COLUMNS.
    let binary = assert_cmd::cargo::cargo_bin("skillstore");
    let line = format!("stty cols 60 rows 20; '{}' --source /skills/ list", binary.display());
    let out = std::process::Command::new("script")
        .args(["-qefc", &line, "/dev/null"])
        .current_dir(root)
        .env("XDG_CACHE_HOME", root.join(".test-cache"))
        .env_remove("COLUMNS")
        .env("TERM", "xterm")
        .output()
        .expect("script(1) (util-linux) runs the command on a terminal");
    assert_eq!(String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"), cut);
}

/// A diagnostic's path is the storage's own text: a bidi override in a
/// directory name reaches the terminal escaped, as the message around it
/// does.
#[test]
fn a_diagnostics_path_reaches_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::write(
        dir.path(),
        "base/ab\u{202e}cd/SKILL.md",
        "---\nname: odd\n---\nNo description.\n",
    );
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let out = run(&mut crate::support::in_tree(dir.path(), &["list"]));
    assert!(out.stderr.contains("/base/ab\\u{202e}cd/SKILL.md: "), "{}", out.stderr);
    assert!(!out.stderr.contains('\u{202e}'), "{}", out.stderr);
}

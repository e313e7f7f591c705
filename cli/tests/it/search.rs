//! `skillstore search`, end to end through the built command.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

use crate::support::write;

/// Two layers: `team` shadows `base`'s `pdf`.
fn layers() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "base/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDFs.\n---\nUses ghostscript.\n",
    );
    write(
        root,
        "team/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDFs, the team's way.\n---\n# Merging files\nUses poppler.\n",
    );
    write(
        root,
        "team/xlsx-editor/SKILL.md",
        "---\nname: xlsx-editor\ndescription: Edit spreadsheets.\n---\n# Formulas\nRecalculates cells; merging cells too.\n",
    );
    dir
}

fn skillstore(tree: &Path, cache: &Path) -> Command {
    let mut cmd = Command::cargo_bin("skillstore").unwrap();
    cmd.current_dir(tree)
        .timeout(Duration::from_secs(120))
        .env("XDG_CACHE_HOME", cache)
        .env_remove("RUST_LOG")
        .arg("--mount")
        .arg(format!("/={}", tree.display()))
        .args(["--source", "/base/", "--source", "/team/"]);
    cmd
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn search_json_ranks_winners_best_first() {
    let tree = layers();
    let cache = tempfile::tempdir().unwrap();
    let out = stdout(skillstore(tree.path(), cache.path()).args(["search", "merging", "--json"]));
    let answer: Value = serde_json::from_str(&out).unwrap();
    let results = answer["results"].as_array().unwrap();
    let names: Vec<&str> = results.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pdf", "xlsx-editor"], "the heading outranks the text");
    assert_eq!(
        results[0],
        serde_json::json!({
            "name": "pdf",
            "description": "Read PDFs, the team's way.",
            "source": "team",
            "path": "/team/pdf/SKILL.md",
            "score": results[0]["score"],
        })
    );
    assert!(results[0]["score"].as_f64().unwrap() > results[1]["score"].as_f64().unwrap());

    // The shadowed skill's words find nothing (exit 1, as grep); --limit caps.
    let out = skillstore(tree.path(), cache.path())
        .args(["search", "ghostscript", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"{"results":[]}"#);
    let out = stdout(skillstore(tree.path(), cache.path()).args(["search", "merging", "--limit", "1", "--json"]));
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["results"].as_array().unwrap().len(), 1);

    // A warm start reuses the cached index, and sees a change.
    write(
        tree.path(),
        "team/xlsx-editor/SKILL.md",
        "---\nname: xlsx-editor\ndescription: Edit spreadsheets.\n---\nPivot tables.\n",
    );
    let out = stdout(skillstore(tree.path(), cache.path()).args(["search", "pivot", "--json"]));
    assert!(out.contains("\"xlsx-editor\""), "{out}");
    let out = stdout(skillstore(tree.path(), cache.path()).args(["search", "merging", "--json"]));
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["results"].as_array().unwrap().len(), 1, "{out}");
}

#[test]
fn search_batch_answers_each_json_line_with_its_id() {
    let tree = layers();
    let cache = tempfile::tempdir().unwrap();
    let out = stdout(
        skillstore(tree.path(), cache.path())
            .args(["search", "--batch", "--limit", "5"])
            .write_stdin(
                "{\"id\": 7, \"query\": \"poppler\"}\n\n{\"id\": \"b\", \"query\": \"cells\", \"limit\": 0}\n",
            ),
    );
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["id"], 7);
    assert_eq!(lines[0]["results"][0]["name"], "pdf");
    assert_eq!(lines[1], serde_json::json!({"id": "b", "results": []}));
}

#[test]
fn search_text_output_and_usage_errors() {
    let tree = layers();
    let cache = tempfile::tempdir().unwrap();
    let out = stdout(skillstore(tree.path(), cache.path()).args(["search", "spreadsheets"]));
    assert!(out.starts_with("xlsx-editor  (team, "), "{out}");
    assert!(out.contains("    Edit spreadsheets.\n"), "{out}");

    let out = skillstore(tree.path(), cache.path()).arg("search").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = skillstore(tree.path(), cache.path())
        .args(["search", "--batch"])
        .write_stdin("not json\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["line"], 1);
    assert!(
        answer["error"].as_str().unwrap().starts_with("not a query object"),
        "{answer}"
    );
}

/// `search --batch` fed `input`: its exit code and one JSON value per
/// answer line.
fn batch(input: impl Into<Vec<u8>>) -> (Option<i32>, Vec<Value>) {
    let tree = layers();
    let cache = tempfile::tempdir().unwrap();
    let out = skillstore(tree.path(), cache.path())
        .args(["search", "--batch"])
        .write_stdin(input.into())
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code(), lines)
}

#[test]
fn search_batch_answers_the_lines_after_a_malformed_one() {
    let (code, lines) =
        batch("{\"id\": 1, \"query\": \"poppler\"}\n{\"id\": 2}\n[1]\n{\"id\": 3, \"query\": \"cells\"}\n");
    assert_eq!(code, Some(2));
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["results"][0]["name"], "pdf");
    assert_eq!(
        (lines[1]["line"].clone(), lines[2]["line"].clone()),
        (2.into(), 3.into())
    );
    assert!(lines[1]["error"].is_string() && lines[2]["error"].is_string());
    assert_eq!(lines[3]["id"], 3);
    assert_eq!(lines[3]["results"][0]["name"], "xlsx-editor");
}

#[test]
fn search_batch_answers_each_query_before_the_next_is_sent() {
    use std::io::{BufRead, Write};
    let tree = layers();
    let cache = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_skillstore"))
        .env("XDG_CACHE_HOME", cache.path())
        .env_remove("RUST_LOG")
        .current_dir(tree.path())
        .arg("--mount")
        .arg(format!("/={}", tree.path().display()))
        .args(["--source", "/base/", "--source", "/team/", "search", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for _ in 0..2 {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            tx.send(line).unwrap();
        }
    });
    for query in ["poppler", "cells"] {
        writeln!(stdin, "{{\"query\": \"{query}\"}}").unwrap();
        stdin.flush().unwrap();
        // Standard input stays open: the answer must come without it closing.
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("an answer while the batch is still open");
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert!(!answer["results"].as_array().unwrap().is_empty(), "{line}");
    }
    drop(stdin);
    reader.join().unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn search_batch_refuses_bad_lines_one_by_one_and_echoes_ids_as_they_came() {
    let mut input: Vec<u8> = Vec::new();
    input.extend_from_slice(b"{\"id\": null, \"query\": \"poppler\"}\n");
    input.extend_from_slice(b"{\"id\": \"u\", \"query\": \"\xff\xfe\"}\n");
    input.extend_from_slice(&vec![b'a'; 70 * 1024]);
    input.extend_from_slice(b"\n{\"id\": 123456789012345678901234567890, \"query\": \"pdf\"}\n");
    input.extend_from_slice(b"[\"x\", \"pdf\", 5]\n");
    input.extend_from_slice(b"{\"id\": 9, \"query\": 3}\n");
    input.extend_from_slice(b"{\"id\": 18446744073709551615, \"query\": \"cells\"}\n");
    let (code, lines) = batch(input);
    assert_eq!(code, Some(2));
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(lines[0]["id"], Value::Null);
    assert!(lines[0].as_object().unwrap().contains_key("id"));
    assert_eq!(lines[0]["results"][0]["name"], "pdf");
    for (at, line) in [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6)] {
        assert_eq!(lines[at]["line"], line, "{:?}", lines[at]);
        assert!(lines[at]["error"].is_string(), "{:?}", lines[at]);
    }
    assert!(lines[2]["error"].as_str().unwrap().contains("longer than"));
    assert_eq!(lines[5]["id"], 9, "a refused line keeps the id it had");
    assert_eq!(lines[6]["id"], serde_json::json!(18446744073709551615u64));
    assert_eq!(lines[6]["results"][0]["name"], "xlsx-editor");
}

#[test]
fn projects_with_the_same_relative_config_keep_their_own_index() {
    // Two projects, each with `./skillstore.yaml` serving its own directory
    // (`/` is the configuration's directory, written `.`), searched from
    // inside each with one cache directory.
    let projects = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    for (project, name) in [("one", "alpha-tool"), ("two", "beta-tool")] {
        let root = projects.path().join(project);
        write(&root, "skillstore.yaml", "sources:\n  - path: /skills\n");
        write(
            &root,
            &format!("skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: Works with zebras.\n---\n# Zebras\nStripes.\n"),
        );
    }
    let search = |project: &str| -> Vec<String> {
        let mut cmd = Command::cargo_bin("skillstore").unwrap();
        cmd.current_dir(projects.path().join(project))
            .timeout(Duration::from_secs(120))
            .env("XDG_CACHE_HOME", cache.path())
            .env_remove("RUST_LOG")
            .args(["search", "zebra", "--json"]);
        let answer: Value = serde_json::from_str(&stdout(&mut cmd)).unwrap();
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for _ in 0..2 {
        assert_eq!(search("one"), ["alpha-tool"]);
        assert_eq!(search("two"), ["beta-tool"]);
    }
    let indexes: Vec<String> = std::fs::read_dir(cache.path().join("skillstore"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("search-"))
        .collect();
    assert_eq!(indexes.len(), 2, "one index per project directory: {indexes:?}");
}

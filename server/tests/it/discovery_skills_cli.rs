//! The real `skills` command (npm package `skills`, on Node 22) installs
//! every winner from a running `skillstore serve` through Agent Skills
//! discovery: each installed file equals `skillstore read`, and the
//! digests its `skills-lock.json` records equal the index's.
//!
//! Needs the command: `scripts/test.sh` installs Node 22 and `skills`
//! under `target/tools/`, sets `SKILLSTORE_SKILLS` to the `skills`
//! command and `SKILLSTORE_NODE` to the directory of the `node` it runs
//! on, and passes `--include-ignored`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::*;
use serde_json::Value;

const SKILLS: &str = "SKILLSTORE_SKILLS";
const NODE: &str = "SKILLSTORE_NODE";

/// Every file under `dir`, by path relative to it.
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// `skillstore read NAME [RELPATH]` in `dir`.
fn skillstore_read(dir: &Path, args: &[&str]) -> Vec<u8> {
    let output = std::process::Command::new(skillstore_binary())
        .arg("read")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "read {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the skills command: set SKILLSTORE_SKILLS and SKILLSTORE_NODE and pass --include-ignored"]
async fn the_skills_command_installs_every_winner_from_serve() {
    let skills = PathBuf::from(std::env::var_os(SKILLS).expect("SKILLSTORE_SKILLS names the skills command"));
    let node_dir = PathBuf::from(std::env::var_os(NODE).expect("SKILLSTORE_NODE names the directory of node"));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    layered_tree(&store);
    write(&store, "team/gamma/SKILL.md", &skill_md("gamma", "Gamma alone."));
    write(
        &store,
        "team/gamma-two/SKILL.md",
        &skill_md("gamma-two", "Gamma, with assets."),
    );
    write(&store, "team/gamma-two/assets/logo.bin", "\u{0}\u{1}binary\u{ff}");
    write(&store, "team/gamma-two/references/deep/nested/note.md", "deep\n");
    write(
        &store,
        "skillstore.yaml",
        "sources:\n  - path: /base\n  - path: /team\n    writable: true\n",
    );

    let ServeProcess {
        mut child,
        base,
        mut lines,
        client,
        ..
    } = ServeProcess::start(serve_command(&[]).current_dir(&store)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    ready(&client, &base).await;
    let index: Value = client
        .get(format!("{base}/.well-known/agent-skills/index.json"))
        .sent()
        .await
        .json()
        .await
        .unwrap();

    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let path = std::env::join_paths(
        std::iter::once(node_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let added = tokio::process::Command::new(&skills)
        .args([
            "add",
            &base,
            "--skill",
            "*",
            "--agent",
            "claude-code",
            "--copy",
            "--yes",
        ])
        .current_dir(&project)
        .env("PATH", path)
        .env("HOME", &home)
        .env("DISABLE_TELEMETRY", "1")
        .env("DO_NOT_TRACK", "1")
        .env("CI", "1")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&added.stdout),
        String::from_utf8_lossy(&added.stderr)
    );
    assert!(added.status.success(), "skills add failed:\n{said}");

    let installed_root = project.join(".claude/skills");
    let entries = index["skills"].as_array().unwrap();
    let mut names: Vec<&str> = entries.iter().map(|e| e["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["alpha", "beta", "gamma", "gamma-two"]);
    let mut installed_names: Vec<String> = std::fs::read_dir(&installed_root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    installed_names.sort_unstable();
    assert_eq!(installed_names, names);
    let lock: Value = serde_json::from_slice(&std::fs::read(project.join("skills-lock.json")).unwrap()).unwrap();
    for entry in entries {
        let name = entry["name"].as_str().unwrap();
        let installed = files_under(&installed_root.join(name));
        assert!(installed.contains_key("SKILL.md"), "{name}: {:?}", installed.keys());
        for (relative, bytes) in &installed {
            let served = if relative == "SKILL.md" {
                skillstore_read(&store, &[name])
            } else {
                skillstore_read(&store, &[name, relative])
            };
            assert_eq!(bytes, &served, "{name}/{relative}");
        }
        let listed: Value = client
            .get(format!("{base}/v1/skills/{name}"))
            .sent()
            .await
            .json()
            .await
            .unwrap();
        let mut expected: Vec<String> = listed["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_owned())
            .collect();
        expected.sort();
        assert_eq!(installed.keys().cloned().collect::<Vec<_>>(), expected, "{name}");
        assert_eq!(lock["skills"][name]["wellKnownDigest"], entry["digest"], "{name}");
    }
    child.kill().await.unwrap();
}

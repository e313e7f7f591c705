//! `lock` and `--locked` through the command: a skill changed after the
//! lock is withheld by `list`, `read`, `verify` and `sync` (exit 3), the
//! others still served.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn skillstore(root: &Path) -> Command {
    let mut cmd = Command::cargo_bin("skillstore").unwrap();
    cmd.current_dir(root)
        .env("XDG_CACHE_HOME", root.join("cache"))
        .args(["--source", "/skills/"]);
    cmd
}

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_changed_skill_is_withheld_by_every_command_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for name in ["pdf", "forms"] {
        write(
            root,
            &format!("skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nSteps.\n"),
        );
        write(root, &format!("skills/{name}/scripts/run.sh"), "echo run\n");
    }
    skillstore(root).arg("lock").assert().success();
    let lock: Value = serde_json::from_slice(&std::fs::read(root.join("skillstore.lock")).unwrap()).unwrap();
    assert_eq!(lock["version"], 2);
    assert_eq!(lock["skills"][0]["name"], "forms");
    assert_eq!(lock["skills"][1]["name"], "pdf");
    assert!(lock["skills"][1]["digest"].as_str().unwrap().starts_with("sha256:"));
    skillstore(root).args(["--locked", "sync", "synced"]).assert().success();
    skillstore(root).args(["--locked", "verify"]).assert().success();

    write(root, "skills/pdf/scripts/run.sh", "echo rum\n");
    let list = skillstore(root).args(["--locked", "list", "--json"]).output().unwrap();
    assert_eq!(list.status.code(), Some(3));
    let json: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(json["skills"].as_array().unwrap().len(), 1);
    assert_eq!(json["skills"][0]["name"], "forms");
    assert_eq!(json["diagnostics"][0]["kind"], "lock_mismatch");
    let read = skillstore(root)
        .args(["--locked", "read", "pdf", "scripts/run.sh"])
        .output()
        .unwrap();
    assert_ne!(read.status.code(), Some(0));
    assert!(read.stdout.is_empty());
    let verify = skillstore(root)
        .args(["--locked", "verify", "--json"])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(3));
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["skills"][1]["name"], "pdf");
    assert!(
        report["skills"][1]["lock"]["mismatch"]["locked"].is_string(),
        "{report}"
    );
    let sync = skillstore(root).args(["--locked", "sync", "synced"]).output().unwrap();
    assert_eq!(sync.status.code(), Some(3), "{}", String::from_utf8_lossy(&sync.stderr));
    assert!(root.join("synced/forms/SKILL.md").exists());
    assert!(
        !root.join("synced/pdf").exists(),
        "a withheld skill leaves the synced tree"
    );
    // Without --locked, everything is served as before.
    skillstore(root).args(["list"]).assert().success();
}

/// `--locked` holds for the servers too: `mcp` (and `serve`, through the
/// same settings) withholds a changed skill, and with a tenants file, whose
/// tenants name their own locks, the flag is refused rather than ignored.
#[test]
fn the_servers_take_the_lock_or_refuse_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: The pdf skill.\n---\nSteps.\n",
    );
    write(root, "skills/pdf/scripts/run.sh", "echo run\n");
    skillstore(root).arg("lock").assert().success();
    write(root, "skills/pdf/scripts/run.sh", "echo EVIL\n");
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"skill://pdf/scripts/run.sh"}}"#,
    ];
    let out = skillstore(root)
        .args(["--locked", "mcp"])
        .write_stdin(requests.join("\n") + "\n")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answer = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the read: {stdout}"));
    assert!(answer["error"].is_object(), "{answer}");
    assert!(!stdout.contains("EVIL"), "{stdout}");

    write(
        root,
        "tenants.yaml",
        "tenants:\n  - name: acme\n    config: {sources: [{path: /skills/}]}\n",
    );
    let refused = skillstore(root)
        .args(["--locked", "serve", "--tenants", "tenants.yaml"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("lock:"));
}

/// A lock entry names the source its skill won in: a winner from another
/// source is `lock_mismatch` even with the same digest, and the message
/// names both sources.
#[test]
fn a_winner_from_another_source_than_the_locks_is_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for name in ["pdf", "xls"] {
        write(
            root,
            &format!("skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nSteps.\n"),
        );
    }
    skillstore(root).arg("lock").assert().success();
    let path = root.join("skillstore.lock");
    let mut lock: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(lock["skills"][1]["name"], "xls");
    let source = lock["skills"][1]["source"].as_str().unwrap().to_owned();
    lock["skills"][1]["source"] = Value::from("other");
    std::fs::write(&path, serde_json::to_vec_pretty(&lock).unwrap()).unwrap();

    let list = skillstore(root).args(["--locked", "list", "--json"]).output().unwrap();
    assert_eq!(list.status.code(), Some(3));
    let json: Value = serde_json::from_slice(&list.stdout).unwrap();
    let names: Vec<&str> = json["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pdf"]);
    let diagnostic = &json["diagnostics"][0];
    assert_eq!(diagnostic["kind"], "lock_mismatch");
    let message = diagnostic["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{source}`")) && message.contains("`other`"),
        "{message}"
    );
    let verify = skillstore(root)
        .args(["--locked", "verify", "--json"])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(3));
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(
        report["skills"][1]["lock"]["mismatch"]["locked_source"], "other",
        "{report}"
    );
}

/// `lock` writes enabled winners only; `--locked` does not ask the lock
/// for a disabled one (it is not served), so a configuration with a
/// disabled skill passes. Enabled later without being locked, it is left
/// out (`not_locked`, exit 3).
#[test]
fn a_disabled_skill_is_not_required_in_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for name in ["pdf", "legacy-xls"] {
        write(
            root,
            &format!("skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nSteps.\n"),
        );
    }
    let config = |disabled: &str| {
        std::fs::write(
            root.join("skillstore.yaml"),
            format!("sources:\n  - path: /skills/\nskills:\n  disabled: [{disabled}]\n"),
        )
        .unwrap();
    };
    let cmd = |args: &[&str]| {
        let mut cmd = Command::cargo_bin("skillstore").unwrap();
        cmd.current_dir(root)
            .env("XDG_CACHE_HOME", root.join("cache"))
            .args(args);
        cmd.output().unwrap()
    };
    config("\"legacy-*\"");
    assert!(cmd(&["lock"]).status.success());
    let lock: Value = serde_json::from_slice(&std::fs::read(root.join("skillstore.lock")).unwrap()).unwrap();
    assert_eq!(lock["skills"].as_array().unwrap().len(), 1, "{lock}");
    for args in [
        &["--locked", "list", "--json"][..],
        &["--locked", "verify", "--json"],
        &["--locked", "prompt"],
        &["--locked", "sync", "synced"],
    ] {
        let out = cmd(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let list: Value = serde_json::from_slice(&cmd(&["--locked", "list", "--json"]).stdout).unwrap();
    assert_eq!(list["diagnostics"], serde_json::json!([]), "{list}");
    assert!(!root.join("synced/legacy-xls").exists());

    // Enabled, and not in the lock: left out as any unlocked skill.
    config("");
    let out = cmd(&["--locked", "list", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["diagnostics"][0]["kind"], "not_locked", "{list}");
    assert_eq!(list["skills"].as_array().unwrap().len(), 1);
}

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

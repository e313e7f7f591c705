//! The command over a Git source: the example layers committed by the real
//! `git` and read through `git+file://` give what a checkout gives, with
//! the commit as provenance.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use skillstore::backends::testkit::git_repo::git;

/// The example layers, copied into `work` and committed; returns the
/// commit.
fn committed_examples(work: &Path) -> String {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/skills");
    copy(&examples, work);
    git(work, &["init", "-q"]);
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", "examples"]);
    git(work, &["rev-parse", "HEAD"]).trim().to_owned()
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The command with the example layers mounted from `location`, a cache
/// of its own under `dir`.
fn skillstore(dir: &Path, location: &str) -> Command {
    let mut cmd = Command::cargo_bin("skillstore").unwrap();
    cmd.current_dir(dir)
        .timeout(Duration::from_secs(120))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("RUST_LOG")
        .env_remove("SKILLSTORE_GIT_CACHE")
        .arg("--mount")
        .arg(format!("/={location}"));
    for layer in ["base", "user", "project", "team"] {
        cmd.arg("--source").arg(format!("/{layer}/"));
    }
    cmd
}

#[test]
fn list_json_of_a_git_source_is_the_checkouts_but_for_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let head = committed_examples(&work);
    let url = format!("git+file://{}", work.display());
    let from_git = skillstore(dir.path(), &url).args(["list", "--json"]).output().unwrap();
    assert!(
        from_git.status.success(),
        "{}",
        String::from_utf8_lossy(&from_git.stderr)
    );
    let from_checkout = skillstore(dir.path(), &work.to_string_lossy())
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert!(from_checkout.status.success());
    let with_commit = String::from_utf8(from_git.stdout).unwrap();
    let provenance = format!(",\"commit\":\"{head}\"");
    assert_eq!(with_commit.matches(&provenance).count(), 8, "{with_commit}");
    assert_eq!(
        with_commit.replace(&provenance, ""),
        String::from_utf8(from_checkout.stdout).unwrap()
    );
    let parsed: Value = serde_json::from_str(&with_commit).unwrap();
    assert!(parsed["skills"].as_array().unwrap().iter().all(|s| s["commit"] == head));
}

#[test]
fn show_and_read_through_a_git_source() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let head = committed_examples(&work);
    let url = format!("git+file://{}@{head}", work.display());
    let show = skillstore(dir.path(), &url)
        .args(["show", "changelog"])
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
    let text = String::from_utf8(show.stdout).unwrap();
    assert!(text.contains(&format!("commit:        {head}")), "{text}");
    let json = skillstore(dir.path(), &url)
        .args(["show", "changelog", "--json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["commit"], head);
    let read = skillstore(dir.path(), &url)
        .args(["read", "changelog"])
        .output()
        .unwrap();
    assert!(read.status.success());
    assert_eq!(
        read.stdout,
        std::fs::read(work.join("team/changelog/SKILL.md")).unwrap()
    );
}

#[test]
fn a_git_source_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    committed_examples(&work);
    let url = format!("git+file://{}", work.display());
    let out = skillstore(dir.path(), &url)
        .args(["--writable", "team", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("never writable"), "{stderr}");
    let publish = Command::cargo_bin("skillstore")
        .unwrap()
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .args(["publish", &work.join("team").to_string_lossy(), &url])
        .output()
        .unwrap();
    assert_eq!(publish.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&publish.stderr).contains("read-only"));
}

#[test]
fn locked_refuses_once_the_branch_has_moved() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let first = committed_examples(&work);
    let url = format!("git+file://{}@main", work.display());
    let lock = skillstore(dir.path(), &url).arg("lock").output().unwrap();
    assert!(lock.status.success(), "{}", String::from_utf8_lossy(&lock.stderr));
    let written: Value = serde_json::from_slice(&std::fs::read(dir.path().join("skillstore.lock")).unwrap()).unwrap();
    assert_eq!(written["git"][0]["commit"], first);
    assert_eq!(written["git"][0]["location"], url);
    let ok = skillstore(dir.path(), &url)
        .args(["--locked", "list"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));

    std::fs::write(
        work.join("team/changelog/SKILL.md"),
        "---\nname: changelog\ndescription: Moved.\n---\n",
    )
    .unwrap();
    git(&work, &["commit", "-q", "-a", "-m", "moved"]);
    let moved = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    let refused = skillstore(dir.path(), &url)
        .args(["--locked", "list"])
        .output()
        .unwrap();
    assert_ne!(refused.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains(&moved) && stderr.contains(&first), "{stderr}");
    assert!(refused.stdout.is_empty());
    // Pinned at the locked commit, it runs.
    let pinned = format!("git+file://{}@{first}", work.display());
    let other = skillstore(dir.path(), &pinned)
        .args(["--locked", "list"])
        .output()
        .unwrap();
    assert!(!other.status.success(), "a location the lock does not hold is refused");
    // Accepting the move: lock again.
    assert!(
        skillstore(dir.path(), &url)
            .arg("lock")
            .output()
            .unwrap()
            .status
            .success()
    );
    assert!(
        skillstore(dir.path(), &url)
            .args(["--locked", "list"])
            .output()
            .unwrap()
            .status
            .success()
    );
}

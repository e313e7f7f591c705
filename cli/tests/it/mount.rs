//! `mount`: the synced tree through FUSE until SIGTERM.

use crate::support::{Running, eventually, files_under, repo, run, skillstore};

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

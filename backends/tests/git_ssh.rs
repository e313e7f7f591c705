//! An `ssh://` fetch given up at its timeout ends the `ssh` process it
//! started, rather than leaving it to wait on a silent server. Alone in
//! its test binary: it sets `GIT_SSH_COMMAND` for the whole process.
#![cfg(all(feature = "git", target_os = "linux"))]

use std::path::Path;
use std::time::{Duration, Instant};

use skillstore_backends::{ErrorKind, GitCache, GitRemote, SymlinkPolicy};

/// True while a process `pid` runs (a zombie does not count).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

fn write_ssh_standin(dir: &Path) -> std::path::PathBuf {
    // Stands in for `ssh` that reached a server which never answers: it
    // writes its pid, then waits, as the real one would.
    let script = dir.join("silent-ssh");
    let pidfile = dir.join("ssh.pid");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho $$ > '{}'\nexec sleep 600\n", pidfile.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn a_timed_out_ssh_fetch_ends_the_ssh_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_ssh_standin(dir.path());
    // SAFETY: this test binary runs this one test, so no other thread reads
    // the environment while it is changed.
    unsafe { std::env::set_var("GIT_SSH_COMMAND", &script) };
    let cache = GitCache::new(dir.path().join("cache"))
        .unwrap()
        .with_fetch_timeout(Duration::from_secs(2));
    let remote = GitRemote::new("ssh://git@127.0.0.1/skills.git").unwrap();
    let refused = cache
        .open(&remote, Some("main"), SymlinkPolicy::WithinRoot)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unavailable, "{refused}");
    let pid: u32 = std::fs::read_to_string(dir.path().join("ssh.pid"))
        .expect("the stand-in ssh was started")
        .trim()
        .parse()
        .unwrap();
    // The stand-in would wait 600 s; it must be gone well before.
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!running(pid), "the ssh process {pid} outlived its timed-out fetch");
}

//! An `ssh://` fetch given up at its timeout ends the `ssh` process it
//! started, rather than leaving it to wait on a silent server. Alone in a
//! process of its own: it sets `GIT_SSH_COMMAND` for the whole process.
#![cfg(all(feature = "git", target_os = "linux"))]

use std::path::Path;
use std::time::{Duration, Instant};

use skillstore_backends::{ErrorKind, GitCache, GitRemote, SymlinkPolicy};

use crate::own_process::in_own_process;

/// True while a process `pid` runs (a zombie does not count).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

/// A stand-in for `ssh` that reached a server which never answers, with
/// a process of its own holding the pipes too (a ProxyCommand). Each time
/// it is run (`ssh -G` first, then the connection), it appends its pid and
/// its child's to `log`, then waits.
fn write_ssh_standin(dir: &Path, log: &Path) -> std::path::PathBuf {
    let script = dir.join("silent-ssh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ >> '{log}'\nsleep 600 &\necho $! >> '{log}'\nwait\n",
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn logged(log: &Path) -> Vec<u32> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn a_timed_out_ssh_fetch_ends_the_ssh_it_started_and_what_that_started() {
    if !in_own_process() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("pids");
    let script = write_ssh_standin(dir.path(), &log);
    // SAFETY: this process runs this one test (`in_own_process`), so no
    // other thread reads the environment while it is changed.
    unsafe { std::env::set_var("GIT_SSH_COMMAND", &script) };
    let cache = GitCache::new(dir.path().join("cache"))
        .unwrap()
        .with_fetch_timeout(Duration::from_secs(2));
    let remote = GitRemote::new("ssh://git@127.0.0.1/skills.git").unwrap();
    let refused = cache
        .open(&remote, Some("main"), SymlinkPolicy::WithinRoot)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unavailable, "{refused}");
    assert!(!logged(&log).is_empty(), "the stand-in ssh was started");
    // Every process the fetch started, and any it starts after its
    // timeout, must be gone well before the stand-ins' 600 s: watched for
    // 12 s after the open returned (the reaper gives up after 10 s).
    let returned = Instant::now();
    let mut left = logged(&log);
    while returned.elapsed() < Duration::from_secs(12) {
        std::thread::sleep(Duration::from_millis(100));
        left = logged(&log).into_iter().filter(|p| running(*p)).collect();
    }
    assert!(left.is_empty(), "processes {left:?} outlived their timed-out fetch");
}

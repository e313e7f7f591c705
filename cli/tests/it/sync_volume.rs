//! `sync --watch` of the built binary as a sidecar runs it: into a target
//! that is a mount point (a tmpfs, a volume's root) holding a file of its
//! user's, read by an agent in another mount namespace through a bind
//! mount of the target with the host side hidden (`docker run -v
//! DIR:/mnt/skills`). Every change of the source is seen through the bind
//! mount once `--watch` reports it, a reader looping there meanwhile never
//! finds a file missing or a directory empty, and the user's file stays.
//!
//! Needs root (mounts, `unshare -m`): the suite runs as root, and elsewhere
//! this test fails and says why.

#[path = "../../../tests/support/volume_reader.rs"]
mod volume_reader;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use volume_reader::{Mounted, Reader, counts};

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n")
}

/// Writes `text` at `path` in one step (a file beside the source's skills,
/// renamed into place), so a refresh never reads it half written.
fn replace(root: &Path, relative: &str, text: &str) {
    let aside = root.join(".next");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, root.join(relative)).unwrap();
}

/// A child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sync_watch_into_a_volume_root_is_seen_through_a_bind_mount_of_it() {
    let out = tempfile::tempdir().unwrap();
    let source = out.path().join("src");
    std::fs::create_dir_all(source.join("base/pdf")).unwrap();
    std::fs::create_dir_all(source.join("base/csv")).unwrap();
    replace(&source.join("base"), "pdf/SKILL.md", &skill_md("pdf", "Round 0."));
    replace(&source.join("base"), "csv/SKILL.md", &skill_md("csv", "CSV."));
    let target = out.path().join("volume");
    let _volume = Mounted::tmpfs(&target);
    std::fs::write(target.join("mine.txt"), b"the user's file\n").unwrap();

    let mut watch = Running(
        Command::new(assert_cmd::cargo::cargo_bin("skillstore"))
            .args(["--no-cache", "--mount"])
            .arg(format!("/={}", source.display()))
            .args(["--source", "/base/", "sync"])
            .arg(&target)
            .args(["--watch", "20ms", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (reports, rx) = mpsc::channel::<serde_json::Value>();
    let stdout = watch.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if reports.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let switched = || loop {
        let report = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("no report from sync --watch within 60 s");
        if report["switched"] == true {
            return report;
        }
    };
    let first = switched();
    assert_eq!(first["added"], serde_json::json!(["csv", "pdf"]));

    let mut reader = Reader::start(&target, &out.path().join("container"), "pdf");
    let shown = |text: &str| text.escape_debug().to_string();
    assert_eq!(reader.ask("read pdf"), shown(&skill_md("pdf", "Round 0.")));
    for round in 1..=15 {
        if round == 5 {
            std::fs::remove_file(source.join("base/csv/SKILL.md")).unwrap();
            let report = switched();
            assert_eq!(report["removed"], serde_json::json!(["csv"]));
            assert_eq!(reader.ask("read csv"), "missing", "a removed skill is still seen");
        }
        replace(
            &source.join("base"),
            "pdf/SKILL.md",
            &skill_md("pdf", &format!("Round {round}.")),
        );
        let report = switched();
        assert_eq!(
            report["files_updated"],
            serde_json::json!(["pdf/SKILL.md"]),
            "round {round}"
        );
        assert_eq!(
            reader.ask("read pdf"),
            shown(&skill_md("pdf", &format!("Round {round}."))),
            "round {round}: the bind mount does not show what --watch switched in"
        );
        let csv = reader.ask("read csv");
        if round < 5 {
            assert_eq!(csv, shown(&skill_md("csv", "CSV.")));
        } else {
            assert_eq!(csv, "missing", "round {round}: a removed skill is still seen");
        }
    }
    let answer = reader.ask("stop");
    eprintln!("the reader through the bind mount: {answer}");
    let (reads, failures) = counts(&answer);
    assert!(reads > 0);
    assert_eq!(
        failures, 0,
        "a reader through the bind mount found a file missing or a directory empty: {answer}"
    );

    let pid = rustix::process::Pid::from_child(&watch.0);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert_eq!(
        watch.0.wait().unwrap().code(),
        Some(0),
        "sync --watch did not end with 0 on SIGTERM"
    );
    assert_eq!(std::fs::read(target.join("mine.txt")).unwrap(), b"the user's file\n");
}

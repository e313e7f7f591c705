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

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

fn need_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root for {what}; the suite runs as root"
    );
}

/// A mount made by this process, lazily unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: &Path) -> Mounted {
        need_root("mount -t tmpfs");
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "skillstore-test"])
            .arg(at)
            .status()
            .unwrap();
        assert!(status.success(), "mount -t tmpfs failed: this test needs a real mount");
        Mounted(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A reader in a mount namespace of its own, as a container is: the test
/// binary run again under `unshare -m` (see [`namespace_reader`]).
struct Reader {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Reader {
    /// Binds `target` at `at` in a new mount namespace, hides `target`
    /// there under a tmpfs, and starts reading `at/SKILL/SKILL.md` in a
    /// loop.
    fn start(target: &Path, at: &Path, skill: &str) -> Reader {
        need_root("unshare -m and mounts");
        std::fs::create_dir_all(at).unwrap();
        let mut child = Command::new("unshare")
            .args(["-m", "--propagation", "private"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "namespace_reader", "--nocapture", "--test-threads=1"])
            .env("SKILLSTORE_READER_TARGET", target)
            .env("SKILLSTORE_READER_AT", at)
            .env("SKILLSTORE_READER_SKILL", skill)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut reader = Reader { child, input, output };
        assert_eq!(reader.answer(), "ready", "the reader could not set up its namespace");
        reader
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.output.read_line(&mut line).unwrap() > 0, "the reader ended");
            // The harness may print `test NAME ... ` on the same line first.
            if let Some((_, answer)) = line.trim_end().split_once("@@ ") {
                return answer.to_owned();
            }
        }
    }

    fn ask(&mut self, request: &str) -> String {
        writeln!(self.input, "{request}").unwrap();
        self.answer()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Not a test of its own: the reader [`Reader`] runs, in a mount namespace
/// of its own, when `SKILLSTORE_READER_TARGET` is set (and nothing
/// otherwise). It binds the target at `SKILLSTORE_READER_AT` and mounts a
/// tmpfs over the target, so only the bind mount leads to it, as in a
/// container given `-v DIR:/mnt/skills`. A thread reads
/// `AT/SKILL/SKILL.md` and lists `AT/SKILL` in a loop, counting every
/// time a file was missing or a directory empty (unless a request came
/// meanwhile: then two switches may have passed); requests on standard
/// input: `read NAME` answers the bytes of `AT/NAME/SKILL.md` (or
/// `missing`), `stop` answers `reads N failures M excused K`.
#[test]
fn namespace_reader() {
    let Some(target) = std::env::var_os("SKILLSTORE_READER_TARGET").map(PathBuf::from) else {
        return;
    };
    let at = PathBuf::from(std::env::var_os("SKILLSTORE_READER_AT").unwrap());
    let skill = std::env::var("SKILLSTORE_READER_SKILL").unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let status = Command::new("mount").args(args).status().unwrap();
        assert!(status.success(), "mount {args:?} failed");
    };
    run(&["--bind".as_ref(), target.as_os_str(), at.as_os_str()]);
    run(&["-t".as_ref(), "tmpfs".as_ref(), "hidden".as_ref(), target.as_os_str()]);
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "the host side is not hidden"
    );

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Requests answered: the test asks once after each sync, so a read
    // during which none was answered spanned at most one switch.
    let asked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let looping = {
        let (stop, file, dir) = (stop.clone(), at.join(&skill).join("SKILL.md"), at.join(&skill));
        let asked = asked.clone();
        std::thread::spawn(move || {
            let (mut reads, mut failures, mut excused, mut first) = (0u64, 0u64, 0u64, String::new());
            // Bounded: the test stops it; the cap ends it if the test never does.
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && reads < 50_000_000 {
                reads += 1;
                let before = asked.load(std::sync::atomic::Ordering::SeqCst);
                let problem = match std::fs::read(&file) {
                    Err(e) => Some(format!("SKILL.md: {e}")),
                    Ok(bytes) if bytes.is_empty() => Some("SKILL.md empty".to_owned()),
                    Ok(_) => match std::fs::read_dir(&dir).map(Iterator::count) {
                        Err(e) => Some(format!("listing: {e}")),
                        Ok(0) => Some("an empty directory".to_owned()),
                        Ok(_) => None,
                    },
                };
                // A read held up across two switches may find the
                // directory it resolved retired and emptied: that proves
                // nothing (directories are kept one switch, not forever).
                let spanned = asked.load(std::sync::atomic::Ordering::SeqCst) != before;
                match problem {
                    Some(_) if spanned => excused += 1,
                    Some(problem) => {
                        failures += 1;
                        if first.is_empty() {
                            first = problem;
                        }
                    }
                    None => {}
                }
            }
            (reads, failures, excused, first)
        })
    };
    println!("@@ ready");
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        if let Some(name) = line.strip_prefix("read ") {
            asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match std::fs::read_to_string(at.join(name).join("SKILL.md")) {
                Ok(text) => println!("@@ {}", text.escape_debug()),
                Err(_) => println!("@@ missing"),
            }
        } else if line == "stop" {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let (reads, failures, excused, first) = looping.join().unwrap();
            println!("@@ reads {reads} failures {failures} excused {excused} {first}");
            return;
        }
    }
}

/// The numbers of a reader's `stop` answer.
fn counts(answer: &str) -> (u64, u64) {
    let words: Vec<&str> = answer.split(' ').collect();
    assert_eq!((words[0], words[2]), ("reads", "failures"), "{answer}");
    (words[1].parse().unwrap(), words[3].parse().unwrap())
}

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

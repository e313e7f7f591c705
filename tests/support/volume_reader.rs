//! A reader in a mount namespace of its own, as an agent container is,
//! for the tests of `sync` into a volume root (the library's and the
//! command's): the test binary run again under `unshare -m`, reading
//! through a bind mount of the target with the host side hidden. Included
//! by path (`#[path]`) in each test binary that uses it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

pub fn need_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root for {what}; the suite runs as root"
    );
}

/// A mount made by this process, lazily unmounted when dropped.
pub struct Mounted(PathBuf);

impl Mounted {
    pub fn tmpfs(at: &Path) -> Mounted {
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
pub struct Reader {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Reader {
    /// Binds `target` at `at` in a new mount namespace, hides `target`
    /// there under a tmpfs, and starts reading `at/SKILL/SKILL.md` in a
    /// loop.
    pub fn start(target: &Path, at: &Path, skill: &str) -> Reader {
        need_root("unshare -m and mounts");
        std::fs::create_dir_all(at).unwrap();
        // This module's path in the test binary, without the crate's name:
        // where the harness finds `namespace_reader`.
        let module = module_path!().split_once("::").map_or("", |(_, module)| module);
        let mut child = Command::new("unshare")
            .args(["-m", "--propagation", "private"])
            .arg(std::env::current_exe().unwrap())
            .arg("--exact")
            .arg(format!("{module}::namespace_reader"))
            .args(["--nocapture", "--test-threads=1"])
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

    pub fn ask(&mut self, request: &str) -> String {
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
pub fn counts(answer: &str) -> (u64, u64) {
    let words: Vec<&str> = answer.split(' ').collect();
    assert_eq!((words[0], words[2]), ("reads", "failures"), "{answer}");
    (words[1].parse().unwrap(), words[3].parse().unwrap())
}

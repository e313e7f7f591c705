//! What the command's tests share: the command and its output, and the
//! trees they run it on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use skillstore::backends::testkit::s3_server::S3TestServer;

/// The workspace root, which holds the example layers.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the command's crate sits in the workspace")
        .to_path_buf()
}

/// A cache directory for every command of this test process, so no test
/// reads or writes the cache in the user's home.
pub fn test_cache_home() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a cache directory"))
        .path()
}

/// The command, run from the repository root (whose skillstore.yaml holds
/// the example layers), with a hang guard and a cache of its own.
pub fn skillstore() -> Command {
    command(&repo(), test_cache_home())
}

/// The command, run from `dir` with a cache of its own.
pub fn skillstore_in(dir: &Path) -> Command {
    command(dir, &dir.join(".test-cache"))
}

/// The command run from `dir` with `cache` as `XDG_CACHE_HOME`, a hang
/// guard, and none of the caller's S3 settings or log filter.
fn command(dir: &Path, cache: &Path) -> Command {
    let mut cmd = Command::cargo_bin("skillstore").unwrap();
    cmd.current_dir(dir)
        .timeout(Duration::from_secs(120))
        .env("XDG_CACHE_HOME", cache);
    for var in [
        "AWS_ENDPOINT_URL",
        "AWS_ALLOW_HTTP",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// What a command did: its exit code (-1 when a signal ended it), standard
/// output as bytes, standard error as text.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

pub fn run(cmd: &mut Command) -> Run {
    let output = cmd.output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Writes `text` at `relative` under `root`, making its directories.
pub fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The skills' names in a `list --json` output, in its order.
pub fn names(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

pub fn s3_env(cmd: &mut Command, server: &S3TestServer) {
    for (key, value) in server.env() {
        cmd.env(key, value);
    }
}

/// Publishes the example layers to a fresh bucket of the shared S3 server:
/// the bucket, `s3://BUCKET/catalog`, and what `publish` printed (it
/// succeeded).
pub fn publish_examples(server: &S3TestServer) -> (String, String, Run) {
    let bucket = server.create_bucket();
    let location = format!("s3://{bucket}/catalog");
    let mut publish = skillstore();
    s3_env(&mut publish, server);
    let out = run(publish.args(["publish", "examples/skills", &location]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    (bucket, location, out)
}

pub const EXAMPLE_LAYERS: [&str; 4] = ["base", "user", "project", "team"];

/// The `--source` flags naming the example layers.
pub fn example_sources() -> Vec<String> {
    EXAMPLE_LAYERS
        .iter()
        .flat_map(|layer| ["--source".to_owned(), format!("/{layer}/")])
        .collect()
}

/// A command over a temporary tree with a read-only base and a writable team.
pub fn in_tree(dir: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = skillstore();
    let mount = format!("/={}", dir.display());
    cmd.args([
        "--mount",
        &mount,
        "--source",
        "/base",
        "--source",
        "/team",
        "--writable",
        "team",
    ])
    .args(extra);
    cmd
}

pub const NOTES: &str = "---\nname: notes\ndescription: Take notes.\n---\n\n# Notes\n\nBody.\n";

/// `base/secret` and `team/evil`, with `team/evil/references ->
/// ../../base/secret`: a link inside the root that crosses skills and layers.
pub fn link_across_layers() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("base/secret")).unwrap();
    std::fs::write(
        dir.path().join("base/secret/SKILL.md"),
        "---\nname: secret\ndescription: Base only.\n---\nTOPSECRET\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("team/evil")).unwrap();
    std::fs::write(
        dir.path().join("team/evil/SKILL.md"),
        "---\nname: evil\ndescription: Tries.\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../../base/secret", dir.path().join("team/evil/references")).unwrap();
    dir
}

/// Every regular file under `root` by relative path.
pub fn files_under(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else {
                assert!(kind.is_file(), "not a regular file: {:?}", entry.path());
                let relative = entry.path().strip_prefix(root).unwrap().to_str().unwrap().to_owned();
                out.insert(relative, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// A long-running command, killed with SIGTERM when dropped.
pub struct Running(pub std::process::Child);

impl Running {
    pub fn start(args: &[&str], cwd: &std::path::Path) -> Running {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("skillstore"))
            .current_dir(cwd)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Running(child)
    }

    /// Sends SIGTERM and returns the exit code and standard error.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let pid = rustix::process::Pid::from_child(&self.0);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                break status;
            }
            assert!(std::time::Instant::now() < deadline, "no exit within 60 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(self.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        (status.code(), stderr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to 60 s for `check`, polling.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

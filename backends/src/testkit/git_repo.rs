//! A [`crate::GitBackend`] made writable for the conformance suite: every
//! write lands in a work tree, is committed by the real `git`, and the
//! backend is reopened at the new commit. Reads go to the read-only
//! backend alone, so the suite checks what a Git source serves.
//!
//! Writes go through an [`crate::FsBackend`] over the work tree (so a write
//! through a link is refused as there), under one lock, so conditional
//! writes are atomic. Versions are blob ids: a conditional write compares
//! with what the committed tree holds. Special files: a "FIFO" is a
//! submodule entry (a gitlink, which Git holds where a FIFO cannot be and
//! which is never entered), links are real links committed as mode
//! `120000`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use bytes::Bytes;

use super::{Fixture, Specials};
use crate::backend::{Blob, Capabilities, Entry, Listing, Metadata, PutMode, ReadOptions, SkillBackend, Version};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;
use crate::{FsBackend, GitBackend, SymlinkPolicy};

/// Runs the real `git` in `dir` with no user or system configuration, and
/// panics with its output when it fails. Returns its standard output.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `git` command in `dir`, isolated from the user's and the system's
/// configuration, with a fixed author and dates so commits are
/// reproducible.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "skillstore tests")
        .env("GIT_AUTHOR_EMAIL", "tests@skillstore.invalid")
        .env("GIT_COMMITTER_NAME", "skillstore tests")
        .env("GIT_COMMITTER_EMAIL", "tests@skillstore.invalid")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .args([
            "-c",
            "core.symlinks=true",
            "-c",
            "core.autocrlf=false",
            "-c",
            "init.defaultBranch=main",
        ]);
    cmd
}

/// A fresh, empty [`crate::GitBackend`] (one empty commit), writable
/// through commits as this module describes.
pub fn git_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let work = dir.path().join("work");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&work).expect("creating the work tree");
    std::fs::create_dir(&outside).expect("creating the outside directory");
    std::fs::write(outside.join("secret.txt"), b"outside the root").expect("writing the outside file");
    git(&work, &["init", "-q"]);
    git(&work, &["commit", "-q", "--allow-empty", "-m", "empty"]);
    let backend = CommittingGit::new(&work);
    let specials = GitSpecials {
        repo: Arc::clone(&backend.state),
    };
    Fixture::new(backend).with_specials(specials).keeping(dir)
}

/// The writable wrapper: a work tree, its commits, the backend at the last.
#[derive(Debug, Clone)]
pub struct CommittingGit {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    work: PathBuf,
    files: FsBackend,
    current: RwLock<GitBackend>,
    /// The gitlinks to keep in every commit (they have nothing in the work
    /// tree).
    write: Mutex<Vec<String>>,
    /// Held by each write from its check to its commit.
    serial: tokio::sync::Mutex<()>,
}

impl CommittingGit {
    /// Wraps the repository whose work tree is `work` (committed at least
    /// once).
    pub fn new(work: &Path) -> Self {
        let files = FsBackend::with_policy(work, SymlinkPolicy::WithinRoot).expect("opening the work tree");
        let current = GitBackend::open(&work.join(".git"), "HEAD", SymlinkPolicy::WithinRoot).expect("opening HEAD");
        CommittingGit {
            state: Arc::new(State {
                work: work.to_owned(),
                files,
                current: RwLock::new(current),
                write: Mutex::new(Vec::new()),
                serial: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The backend at the last commit.
    pub fn current(&self) -> GitBackend {
        self.state.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl State {
    /// Stages everything, keeps the gitlinks, commits and reopens.
    fn commit(&self, gitlinks: &[String]) {
        git(&self.work, &["add", "-A"]);
        for link in gitlinks {
            let info = format!("160000,{},{link}", "1".repeat(40));
            git(&self.work, &["update-index", "--add", "--cacheinfo", &info]);
        }
        git(&self.work, &["commit", "-q", "--allow-empty", "-m", "write"]);
        let next =
            GitBackend::open(&self.work.join(".git"), "HEAD", SymlinkPolicy::WithinRoot).expect("reopening HEAD");
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next;
    }

    fn current(&self) -> GitBackend {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The committed version at `path`, if a file is there.
    async fn committed(&self, path: &VPath) -> Result<Option<Version>> {
        match self.current().stat(path).await {
            Ok(meta) => Ok(meta.version),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl SkillBackend for CommittingGit {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            symlinks: true,
            ..Capabilities::READ_WRITE
        }
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.current().list(dir).await
    }

    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        self.current().list_detailed(dir).await
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.current().stat(path).await
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.current().read(path, options).await
    }

    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        self.current().read_many(paths, options).await
    }

    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        self.current().stat_many(paths).await
    }

    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        let state = Arc::clone(&self.state);
        let gitlinks = state.write.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _serial = state.serial.lock().await;
        let files_mode = match &mode {
            PutMode::IfVersion(expected) => {
                let found = state.committed(path).await?;
                if found.as_ref() != Some(expected) {
                    return Err(Error::version_conflict(path, expected, found.as_ref()));
                }
                PutMode::Overwrite
            }
            other => other.clone(),
        };
        state.files.put(path, data, files_mode).await?;
        let path = path.clone();
        let committed = Arc::clone(&state);
        tokio::task::spawn_blocking(move || committed.commit(&gitlinks))
            .await
            .expect("committing");
        state
            .committed(&path)
            .await?
            .ok_or_else(|| Error::at(ErrorKind::Other, &path).with_detail("the write was not committed"))
    }

    async fn delete(&self, path: &VPath) -> Result<()> {
        let state = Arc::clone(&self.state);
        let gitlinks = state.write.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _serial = state.serial.lock().await;
        state.files.delete(path).await?;
        let committed = Arc::clone(&state);
        tokio::task::spawn_blocking(move || committed.commit(&gitlinks))
            .await
            .expect("committing");
        Ok(())
    }
}

/// Links and submodule entries, committed.
struct GitSpecials {
    repo: Arc<State>,
}

impl Specials for GitSpecials {
    fn make_fifo(&self, path: &VPath) {
        let mut gitlinks = self.repo.write.lock().unwrap_or_else(|p| p.into_inner());
        gitlinks.push(path.relative_str().to_owned());
        self.repo.commit(&gitlinks);
    }

    fn make_symlink(&self, link: &VPath, target: &str) {
        let gitlinks = self.repo.write.lock().unwrap_or_else(|p| p.into_inner()).clone();
        std::os::unix::fs::symlink(target, self.repo.work.join(link.relative_str())).expect("symlink");
        self.repo.commit(&gitlinks);
    }

    fn outside_file(&self) -> String {
        let outside = self
            .repo
            .work
            .parent()
            .expect("work has a parent")
            .join("outside/secret.txt");
        outside.to_string_lossy().into_owned()
    }
}

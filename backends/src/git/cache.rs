//! A private cache of bare repositories, one per remote URL, and the fetch
//! that brings one commit into it.
//!
//! The cache directory is made `0700`. A repository lives at
//! `KEY.git`, where `KEY` is a hash of the URL with its credentials
//! removed; `KEY.lock` is held (`flock`) by whoever fetches into it or
//! prunes it, so concurrent processes wait for each other rather than
//! write one repository at once. Each reference asked for is fetched into
//! a ref of its own (`refs/skillstore/HASH`), shallow (depth 1), with no
//! tags. A full commit id already in the repository is served without
//! any network; anything else asks the remote for that one ref (one
//! round trip, and no objects when it did not move). When the remote
//! cannot be reached, the commit last fetched for the same reference is
//! served, and the outcome says so; a remote that answers without the
//! reference is an error, never an old commit.
//!
//! **Nothing waits forever.** A fetch (connection, negotiation, pack)
//! runs on a thread of its own and is given up after
//! [`GitCache::fetch_timeout`] (a `git://` or `ssh://` server that accepts
//! and never speaks is treated as unreachable, and on Linux the `ssh` it
//! started is ended); the abandoned thread keeps
//! the repository's lock until Git returns, and others wait for the lock
//! only as long, then serve what was fetched before. A commit already in
//! the cache is served without taking the lock at all. At most
//! [`GitCache::max_repositories`] are kept: the least recently used
//! beyond it are removed.

use std::num::NonZeroU32;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gix::bstr::ByteSlice;
use sha2::{Digest, Sha256};

use super::GitBackend;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::SymlinkPolicy;
use crate::remote::{GitRemote, is_full_commit_id, redact};

/// The most repositories a cache keeps by default.
pub const DEFAULT_MAX_REPOSITORIES: usize = 64;

/// How long a fetch may take, and how long the lock of a repository
/// another process is fetching into is waited for, by default.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// The default of [`GitCache::max_fetch_bytes`]: 512 MiB.
pub const DEFAULT_MAX_FETCH_BYTES: u64 = 512 * 1024 * 1024;

/// What a [`GitCache::open`] did to find its commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// A full commit id already in the cache: no network.
    Pinned,
    /// The remote was asked for the reference.
    Fetched,
    /// The remote could not be reached; the commit last fetched for the
    /// reference is served.
    Stale,
}

/// A directory of cached bare repositories.
#[derive(Debug, Clone)]
pub struct GitCache {
    dir: PathBuf,
    max_repositories: usize,
    fetch_timeout: Duration,
    max_fetch_bytes: u64,
}

impl GitCache {
    /// A cache in `dir`, created `0700` when missing (an existing one is
    /// narrowed to `0700`).
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|e| {
                Error::new(ErrorKind::PermissionDenied)
                    .with_detail("cannot make the Git cache directory")
                    .with_source(e)
            })?;
        Ok(GitCache {
            dir,
            max_repositories: DEFAULT_MAX_REPOSITORIES,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            max_fetch_bytes: DEFAULT_MAX_FETCH_BYTES,
        })
    }

    /// The usual place: `$XDG_CACHE_HOME/skillstore/git`, or
    /// `$HOME/.cache/skillstore/git`; `None` when neither is set.
    pub fn default_dir() -> Option<PathBuf> {
        let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".cache"),
        };
        Some(base.join("skillstore").join("git"))
    }

    /// The same cache keeping at most `max` repositories (at least one).
    pub fn with_max_repositories(mut self, max: usize) -> Self {
        self.max_repositories = max.max(1);
        self
    }

    /// The most repositories kept.
    pub fn max_repositories(&self) -> usize {
        self.max_repositories
    }

    /// The same cache giving up a fetch, or the wait for a repository's
    /// lock, after `timeout`.
    pub fn with_fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// How long a fetch, or the wait for a repository's lock, may take.
    pub fn fetch_timeout(&self) -> Duration {
        self.fetch_timeout
    }

    /// The same cache giving up a fetch whose pack passes `max` bytes as
    /// received (compressed): nothing of it is kept.
    pub fn with_max_fetch_bytes(mut self, max: u64) -> Self {
        self.max_fetch_bytes = max;
        self
    }

    /// The most bytes a fetch's pack may bring.
    pub fn max_fetch_bytes(&self) -> u64 {
        self.max_fetch_bytes
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The bare repository kept for `remote`.
    pub fn repository_dir(&self, remote: &GitRemote) -> PathBuf {
        self.dir.join(format!("{}.git", key(remote.url())))
    }

    /// `remote` at `reference` (a branch, a tag, a full commit id; the
    /// remote's `HEAD` when `None`), fetched as this module describes and
    /// opened with `policy`. Blocking: call it off an async runtime's
    /// worker threads.
    pub fn open(
        &self,
        remote: &GitRemote,
        reference: Option<&str>,
        policy: SymlinkPolicy,
    ) -> Result<(GitBackend, Resolution)> {
        // Keyed by the whole URL, its user and credentials included (only
        // their hash is written): a fetch another identity made is never
        // served to one the remote would refuse.
        let name = key(remote.url());
        let repo_dir = self.dir.join(format!("{name}.git"));
        // A commit's objects never change once here: no lock, no network.
        if let Some(commit) = reference.filter(|r| is_full_commit_id(r))
            && repo_dir.exists()
            && let Ok(backend) = GitBackend::open(&repo_dir, commit, policy)
        {
            return Ok((backend, Resolution::Pinned));
        }
        let local = local_ref(reference);
        // One deadline for the wait and the fetch together: a command that
        // gets the lock just before its wait ends has only what is left.
        let deadline = std::time::Instant::now() + self.fetch_timeout;
        let lock = match Lock::take_within(&self.dir.join(format!("{name}.lock")), self.fetch_timeout) {
            Ok(lock) => Arc::new(lock),
            Err(busy) => {
                // Another process holds the repository (a fetch that hangs):
                // what was fetched before is read without it.
                let before = repo_dir
                    .exists()
                    .then(|| GitBackend::open(&repo_dir, &local, policy).ok())
                    .flatten();
                return match before {
                    Some(backend) if !reference.is_some_and(is_full_commit_id) => {
                        tracing::warn!(remote = %remote, "the Git cache is held by another fetch; serving the commit fetched before");
                        Ok((backend, Resolution::Stale))
                    }
                    _ => Err(busy),
                };
            }
        };
        let result = self.open_locked(remote, &repo_dir, reference, policy, &lock, deadline);
        drop(lock);
        self.prune(&name);
        result
    }

    fn open_locked(
        &self,
        remote: &GitRemote,
        repo_dir: &Path,
        reference: Option<&str>,
        policy: SymlinkPolicy,
        lock: &Arc<Lock>,
        deadline: std::time::Instant,
    ) -> Result<(GitBackend, Resolution)> {
        let pinned = reference.filter(|r| is_full_commit_id(r));
        let local = &local_ref(reference);
        own_directory(repo_dir)?;
        remove_stale_locks(repo_dir);
        let repo = if repo_dir.exists() {
            gix::open(repo_dir).map_err(|e| cache_error("cannot open the cached repository", e))?
        } else {
            gix::init_bare(repo_dir).map_err(|e| cache_error("cannot make the cached repository", e))?
        };
        let source = reference.unwrap_or("HEAD");
        let fetched = self.fetch_within(repo_dir, remote, source, local, lock, deadline);
        let commit = match (&fetched, pinned) {
            (Ok(()), Some(commit)) => commit.to_owned(),
            (Ok(()), None) => local.to_owned(),
            // Only a remote that did not answer falls back to what was
            // fetched before; one that answered without the reference
            // (deleted, renamed) is an error, never an old commit.
            (Err(e), None) if e.kind().is_transient() && repo.try_find_reference(local).ok().flatten().is_some() => {
                local.to_owned()
            }
            (Err(_), _) => return Err(fetched.expect_err("matched an error")),
        };
        let backend = GitBackend::open(repo_dir, &commit, policy)?;
        let resolution = if fetched.is_ok() {
            Resolution::Fetched
        } else {
            tracing::warn!(remote = %remote, "the Git remote could not be reached; serving the commit fetched before");
            Resolution::Stale
        };
        Ok((backend, resolution))
    }

    /// [`fetch`] on a thread of its own, given up at `deadline` (the fetch
    /// timeout after the open began): the thread is asked to stop and keeps
    /// `lock` until it returns.
    fn fetch_within(
        &self,
        repo_dir: &Path,
        remote: &GitRemote,
        source: &str,
        local: &str,
        lock: &Arc<Lock>,
        deadline: std::time::Instant,
    ) -> Result<()> {
        let stop = Arc::new(AtomicBool::new(false));
        let (done, outcome) = std::sync::mpsc::sync_channel(1);
        let (started, fetcher) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let (repo_dir, remote, source, local) =
                (repo_dir.to_owned(), remote.clone(), source.to_owned(), local.to_owned());
            let (stop, lock) = (Arc::clone(&stop), Arc::clone(lock));
            std::thread::Builder::new()
                .name("skillstore-git-fetch".into())
                .spawn(move || {
                    let _ = started.send(children::Fetcher::current());
                    let result = gix::open(&repo_dir)
                        .map_err(|e| cache_error("cannot open the cached repository", e))
                        .and_then(|mut repo| {
                            speak_protocol_v1(&mut repo)?;
                            fetch(&repo, &remote, &source, &local, &stop)
                        });
                    let _ = done.send(result);
                    drop(lock);
                })
                .map_err(|e| cache_error("cannot start a fetch", e))?
        };
        let packs = repo_dir.join("objects").join("pack");
        let before = pack_files(&packs);
        let received = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match outcome.recv_timeout(left.min(PACK_WATCH)) {
                Ok(result) => break Some(result),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => {
                    let size: u64 = pack_files(&packs)
                        .iter()
                        .filter(|(n, _)| !before.contains_key(*n))
                        .map(|(_, s)| s)
                        .sum();
                    if size > self.max_fetch_bytes {
                        stop.store(true, Ordering::Relaxed);
                        // The interrupted fetch removes its temporary pack.
                        let _ = thread.join();
                        return Err(Error::new(ErrorKind::TooLarge).with_detail(format!(
                            "the fetch of `{}` from {remote} brought more than {} bytes; nothing of it is kept",
                            source.escape_debug(),
                            self.max_fetch_bytes
                        )));
                    }
                }
                Err(_) => break None,
            }
        };
        match received {
            Some(result) => {
                let _ = thread.join();
                result
            }
            None => {
                stop.store(true, Ordering::Relaxed);
                // A transport process (`ssh`) waiting on a silent server
                // would outlive the command: it is ended, and the fetch
                // thread, reading its output, returns.
                // The thread may start another (`ssh -G` first, then the
                // connection), so its children are ended until it returns,
                // for a bounded time.
                if let Ok(fetcher) = fetcher.try_recv() {
                    let _ = std::thread::Builder::new()
                        .name("skillstore-git-reaper".into())
                        .spawn(move || {
                            for _ in 0..REAP_ROUNDS {
                                fetcher.end_children();
                                match outcome.recv_timeout(PACK_WATCH) {
                                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                                    _ => break,
                                }
                            }
                        });
                }
                Err(Error::new(ErrorKind::Unavailable).with_detail(format!(
                    "the remote {remote} did not answer for `{}` within {} s",
                    source.escape_debug(),
                    self.fetch_timeout.as_secs()
                )))
            }
        }
    }

    /// Removes the least recently used repositories beyond the bound,
    /// never `keep` and never one another process holds.
    fn prune(&self, keep: &str) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut repos: Vec<(std::time::SystemTime, String)> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let key = name.strip_suffix(".lock")?.to_owned();
                let used = e.metadata().and_then(|m| m.modified()).ok()?;
                Some((used, key))
            })
            .collect();
        if repos.len() <= self.max_repositories {
            return;
        }
        repos.sort();
        let excess = repos.len() - self.max_repositories;
        for (_, key) in repos.into_iter().filter(|(_, k)| k != keep).take(excess) {
            let lock_path = self.dir.join(format!("{key}.lock"));
            if let Some(lock) = Lock::try_take(&lock_path) {
                let _ = std::fs::remove_dir_all(self.dir.join(format!("{key}.git")));
                let _ = std::fs::remove_file(&lock_path);
                drop(lock);
            }
        }
    }
}

/// Refuses a cached repository that is not a directory of this user's
/// own (a link planted in the cache would have fetches, and the removal of
/// stale locks, act on whatever it points to). Missing is fine: it is
/// made.
fn own_directory(repo_dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(repo_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(cache_error("cannot inspect the cached repository", e)),
        Ok(meta) if meta.is_dir() && meta.uid() == rustix::process::geteuid().as_raw() => Ok(()),
        Ok(_) => Err(Error::new(ErrorKind::PermissionDenied)
            .with_detail("the cached repository is a link or not a directory of this user's own; remove it")),
    }
}

/// Removes the lock files Git leaves in `repo_dir` (`shallow.lock`,
/// `refs/.../NAME.lock`) when a process is killed mid-fetch; left there,
/// they would make every later fetch fail. Called only with the
/// repository's own lock held, so no fetch is running to own them.
fn remove_stale_locks(repo_dir: &Path) {
    let mut dirs = vec![(repo_dir.to_owned(), 0usize)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            let name = entry.file_name();
            let in_refs = depth > 0 || name == "refs";
            if kind.is_dir() && in_refs && depth < 8 {
                dirs.push((path, depth + 1));
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "lock") {
                tracing::debug!(file = ?name, "removing a lock file a killed fetch left");
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// How often a running fetch's pack is measured, and how often the
/// processes of a given-up fetch are ended.
const PACK_WATCH: Duration = Duration::from_millis(100);

/// How many times the processes of a given-up fetch are ended while its
/// thread has not returned (10 s in all).
const REAP_ROUNDS: usize = 100;

/// The files of a pack directory and their sizes.
fn pack_files(dir: &Path) -> std::collections::HashMap<std::ffi::OsString, u64> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| Some((e.file_name(), e.metadata().ok()?.len())))
                .collect()
        })
        .unwrap_or_default()
}

/// The processes a fetch thread started (the `ssh` of an `ssh://`
/// remote), found through the thread's own list of children in `/proc`.
mod children {
    /// The most processes one fetch's transport is looked through for.
    #[cfg(target_os = "linux")]
    const MAX_DESCENDANTS: usize = 64;

    /// The thread running a fetch.
    pub(super) struct Fetcher {
        #[cfg(target_os = "linux")]
        tid: i32,
    }

    impl Fetcher {
        /// The calling thread.
        pub(super) fn current() -> Fetcher {
            Fetcher {
                #[cfg(target_os = "linux")]
                tid: rustix::thread::gettid().as_raw_nonzero().get(),
            }
        }

        /// Ends every process the thread started and every process those
        /// started in turn (`SIGKILL`), so nothing holds the transport's
        /// pipes open. Only Linux lists a thread's children; elsewhere they
        /// run until their server closes.
        pub(super) fn end_children(&self) {
            #[cfg(target_os = "linux")]
            {
                let mut found = Vec::new();
                let mut lists = vec![format!("/proc/self/task/{}/children", self.tid)];
                while let Some(list) = lists.pop() {
                    let Ok(text) = std::fs::read_to_string(list) else {
                        continue;
                    };
                    for pid in text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                        if found.len() >= MAX_DESCENDANTS || found.contains(&pid) {
                            continue;
                        }
                        found.push(pid);
                        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                            for task in tasks.filter_map(|t| t.ok()) {
                                lists.push(format!(
                                    "/proc/{pid}/task/{}/children",
                                    task.file_name().to_string_lossy()
                                ));
                            }
                        }
                    }
                }
                for pid in found.into_iter().filter_map(rustix::process::Pid::from_raw) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }
}

/// Has `repo` speak version 1 of Git's wire protocol, whose first answer
/// already lists the remote's references: asking whether a reference
/// moved is then one request over smart HTTP, where version 2 takes two
/// (its capabilities, then `ls-refs`), and one exchange less on the other
/// transports. Only the references' names and ids come back (no objects),
/// which is small for the repositories skills are published in.
fn speak_protocol_v1(repo: &mut gix::Repository) -> Result<()> {
    let mut config = repo.config_snapshot_mut();
    config
        .set_value(&gix::config::tree::Protocol::VERSION, "1")
        .map_err(|e| cache_error("cannot configure the protocol", e))?;
    config
        .commit()
        .map_err(|e| cache_error("cannot configure the protocol", e))?;
    Ok(())
}

/// The ref of the cached repository that `reference` (the remote's `HEAD`
/// when `None`) is fetched into.
fn local_ref(reference: Option<&str>) -> String {
    format!("refs/skillstore/{}", key(reference.unwrap_or("HEAD")))
}

/// Fetches `source` from `remote` into the local ref `local`, depth 1;
/// the pack's download stops when `stop` is set.
fn fetch(repo: &gix::Repository, remote: &GitRemote, source: &str, local: &str, stop: &AtomicBool) -> Result<()> {
    let unavailable = |what: &str, e: &(dyn std::error::Error + 'static)| {
        // Git's own words and each of their causes, for the operator's log.
        let mut cause = e.to_string();
        let mut next = e.source();
        while let Some(inner) = next {
            cause.push_str(": ");
            cause.push_str(&inner.to_string());
            next = inner.source();
        }
        let cause = cause.replace(remote.url(), &remote.to_string());
        Error::new(ErrorKind::Unavailable)
            .with_detail(format!("{what} `{}` of {remote}", source.escape_debug()))
            .with_source(std::io::Error::other(redact_all(&cause)))
    };
    let refspec = format!("+{source}:{local}");
    let handle = repo
        .remote_at(remote.url())
        .map_err(|e| unavailable("cannot use the remote for", &e))?
        .with_fetch_tags(gix::remote::fetch::Tags::None)
        .with_refspecs([refspec.as_bytes().as_bstr()], gix::remote::Direction::Fetch)
        .map_err(|e| unavailable("cannot ask for", &e))?;
    let connection = handle
        .connect(gix::remote::Direction::Fetch)
        .map_err(|e| unavailable("cannot reach the remote for", &e))?;
    let prepared = connection
        .prepare_fetch(gix::progress::Discard, Default::default())
        .map_err(|e| unavailable("cannot list", &e))?;
    if prepared.ref_map().mappings.is_empty() {
        return Err(Error::new(ErrorKind::NotFound).with_detail(format!(
            "the remote {remote} has no reference `{}`",
            source.escape_debug()
        )));
    }
    // The ref did not move and its objects are here: one round trip, done.
    let unchanged = prepared.ref_map().mappings.iter().all(|m| {
        let (Some(id), Some(local)) = (m.remote.as_id(), m.local.as_ref()) else {
            return false;
        };
        let here = repo
            .try_find_reference(local.as_bstr())
            .ok()
            .flatten()
            .and_then(|r| r.try_id().map(|i| i.detach()));
        here.as_deref() == Some(id) && repo.has_object(id)
    });
    if unchanged {
        return Ok(());
    }
    let depth = NonZeroU32::new(1).expect("one is not zero");
    prepared
        .with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(depth))
        .receive(gix::progress::Discard, stop)
        .map_err(|e| unavailable("cannot fetch", &e))?;
    Ok(())
}

/// Removes userinfo from every URL-looking word of `text`.
fn redact_all(text: &str) -> String {
    text.split(' ').map(redact).collect::<Vec<_>>().join(" ")
}

/// A short, stable name for `text`: 32 hex digits of its SHA-256.
fn key(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    crate::hex(&digest[..16])
}

fn cache_error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::new(ErrorKind::Other).with_detail(what.to_owned()).with_source(e)
}

/// An exclusive `flock` on a lock file, released on drop.
struct Lock(#[allow(dead_code, reason = "held for its flock, released on drop")] std::fs::File);

impl Lock {
    fn open(path: &Path) -> Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| cache_error("cannot open the Git cache's lock", e))
    }

    /// Waits for the lock, at most `patience`; past it, `unavailable`.
    fn take_within(path: &Path, patience: Duration) -> Result<Lock> {
        let file = Self::open(path)?;
        let deadline = std::time::Instant::now() + patience;
        let mut pause = Duration::from_millis(5);
        loop {
            match rustix::fs::flock(file.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {
                    return Err(Error::new(ErrorKind::Unavailable).with_detail(format!(
                        "another fetch of this remote has held the Git cache for over {} s",
                        patience.as_secs()
                    )));
                }
                Err(e) => return Err(cache_error("cannot lock the Git cache", std::io::Error::from(e))),
            }
        }
        // The lock file's time says when the repository was last used.
        let _ = file.set_modified(std::time::SystemTime::now());
        Ok(Lock(file))
    }

    /// The lock if nobody holds it.
    fn try_take(path: &Path) -> Option<Lock> {
        let file = Self::open(path).ok()?;
        rustix::fs::flock(file.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
        Some(Lock(file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show() {
        for (url, shown) in [
            ("https://user:secret@host/org/repo.git", "https://host/org/repo.git"),
            ("https://token@host/r.git", "https://host/r.git"),
            ("ssh://git@host:22/r.git", "ssh://host:22/r.git"),
            ("https://host/a@b.git", "https://host/a@b.git"),
            ("file:///srv/r.git", "file:///srv/r.git"),
            ("https://host/r.git?access_token=secret", "https://host/r.git"),
            ("https://u:se%2Fcret@host/r.git#secret", "https://host/r.git"),
        ] {
            let remote = GitRemote::new(url).unwrap();
            assert_eq!(remote.to_string(), shown);
            assert_eq!(format!("{remote:?}"), format!("GitRemote({shown:?})"));
            assert!(!remote.to_string().contains("secret"));
        }
        assert!(GitRemote::new("ftp://host/r.git").is_err());
        let err = GitRemote::new("gopher://u:secret@h/r").unwrap_err().to_string();
        assert!(!err.contains("secret"), "{err}");
        // A raw `/` in a password makes the text no URL at all: refused,
        // and shown without any part of it.
        for malformed in ["https://user:se/cret@host/r.git", "https://user:secret@ho st/r.git"] {
            let err = GitRemote::new(malformed).unwrap_err().to_string();
            assert!(!err.contains("secret") && !err.contains("cret"), "{err}");
        }
        assert_eq!(
            redact_all("cannot reach https://u:p/secret@h/x now"),
            "cannot reach https://(not a valid URL) now"
        );
    }

    #[test]
    fn full_commit_ids_are_recognized() {
        assert!(is_full_commit_id(&"a".repeat(40)));
        assert!(is_full_commit_id(&"0123456789abcdef".repeat(4)));
        assert!(!is_full_commit_id("main"));
        assert!(!is_full_commit_id(&"a".repeat(39)));
        assert!(!is_full_commit_id(&"g".repeat(40)));
    }
}

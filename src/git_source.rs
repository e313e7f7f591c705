//! Opening a Git location: its remote fetched into the private cache, then
//! served at the commit its reference resolved to.

use std::path::{Path, PathBuf};

use skillstore_backends::{
    Blob, Capabilities, Entry, ErrorKind, GitBackend, GitCache, GitRemote, GitResolution, Metadata, ReadOptions,
    SkillBackend, SymlinkPolicy, VPath,
};

/// The environment variable that names the Git cache directory, ahead of
/// the configuration's `cache.dir` (its `git` subdirectory) and of
/// `$XDG_CACHE_HOME/skillstore/git` or `$HOME/.cache/skillstore/git`.
pub const GIT_CACHE_ENV: &str = "SKILLSTORE_GIT_CACHE";

/// `remote` at `reference` (the remote's `HEAD` when `None`), through the
/// cache in [`GIT_CACHE_ENV`], else `cache_dir/git` (the configured
/// `cache.dir`, while the cache is on), else the user's cache directory. The fetch runs on a thread of its own, so it is safe to call
/// from inside an async runtime (Git's HTTP client blocks). A remote that
/// cannot be reached is served at the commit fetched before, when there
/// is one: the resolution then says [`GitResolution::Stale`], which the
/// namespace turns into a `source_stale` diagnostic.
pub fn open(
    remote: &GitRemote,
    reference: Option<&str>,
    policy: SymlinkPolicy,
    cache_dir: Option<&Path>,
) -> skillstore_backends::Result<(GitBackend, GitResolution)> {
    let dir = std::env::var_os(GIT_CACHE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| cache_dir.map(|d| d.join("git")))
        .or_else(GitCache::default_dir)
        .ok_or_else(|| {
            skillstore_backends::Error::new(skillstore_backends::ErrorKind::Other).with_detail(format!(
                "no cache directory for Git: set {GIT_CACHE_ENV}, XDG_CACHE_HOME or HOME"
            ))
        })?;
    let cache = GitCache::new(dir)?;
    let (backend, resolution) = std::thread::scope(|scope| {
        scope
            .spawn(|| cache.open(remote, reference, policy))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })?;
    tracing::debug!(remote = %remote, commit = %backend.commit(), ?resolution, "opened a Git location");
    if resolution == GitResolution::Stale {
        tracing::warn!(remote = %remote, commit = %backend.commit(), "serving a Git commit fetched before");
    }
    Ok((backend, resolution))
}

/// `err` followed by each of its causes, for an operator's message: Git's
/// own errors say why a fetch failed (credentials are already removed).
pub fn with_causes(err: &skillstore_backends::Error) -> String {
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The stand-in for a Git mount whose remote could not be reached and of
/// which nothing was fetched before: every call is `unavailable`, so the
/// catalog reports its sources as unavailable and serves the others.
#[derive(Debug, Clone, Copy)]
pub struct Unreachable;

impl Unreachable {
    fn error(path: &VPath) -> skillstore_backends::Error {
        skillstore_backends::Error::at(ErrorKind::Unavailable, path).with_detail("the Git remote could not be fetched")
    }
}

#[async_trait::async_trait]
impl SkillBackend for Unreachable {
    fn capabilities(&self) -> Capabilities {
        Capabilities::READ_ONLY
    }

    async fn list(&self, dir: &VPath) -> skillstore_backends::Result<Vec<Entry>> {
        Err(Self::error(dir))
    }

    async fn stat(&self, path: &VPath) -> skillstore_backends::Result<Metadata> {
        Err(Self::error(path))
    }

    async fn read(&self, path: &VPath, _options: ReadOptions) -> skillstore_backends::Result<Blob> {
        Err(Self::error(path))
    }
}

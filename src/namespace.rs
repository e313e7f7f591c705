//! [`Namespace`]: the mount table, sources and options a [`Config`]
//! describes, assembled in one place for every front end.
//!
//! The assembly rules, which every front end gets by calling
//! [`Config::open`]:
//! - every mount is opened read-only;
//! - a writable source, and a source with a symlink policy of its own, is
//!   served by a backend rooted at its own directory, mounted at the
//!   source's path. The way to that directory is judged by the mount's
//!   policy (nothing is canonicalized first), and a source's policy may only
//!   narrow its mount's;
//! - two sources whose directories are the same or nested (judged on the
//!   storage itself: device and inode for directories, bucket and key
//!   prefix for object stores) cannot be one writable and one read-only,
//!   so no source name can alias the base layer to write to it;
//! - a Git mount is fetched into the private cache and served at the commit
//!   its reference resolved to; it is never writable, and each of its
//!   sources carries that commit as provenance.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillstore_backends::{FsBackend, MemoryBackend, MountTable, SkillBackend, Subtree, SymlinkPolicy, VPath};

use crate::catalog::{Catalog, LoadOptions, SkillFilter};
use crate::config::{Config, MountConfig};
use crate::edit::SkillEditor;
use crate::error::{Error, Result};
use crate::integrity::signature::AllowedSigners;
use crate::integrity::{Integrity, Lock, SignaturePolicy};
use crate::location::{Location, read_local_text};
use crate::prompt::{PromptOptions, PromptStyle};
use crate::shared_catalog::{Origin, SharedCatalog};
use crate::source::{Patterns, Source, SourceList, parse_dir};
use crate::source_pool::{SharedSources, SourcePool};
use crate::sync::SyncOptions;

// What a lock says of a namespace: its Git mounts' commits.
impl Lock {
    /// The lock of `namespace` and its loaded `catalog` now: every Git
    /// mount's commit and every enabled winner's digest. A Git mount whose
    /// remote could not be reached, or a skill that cannot be digested, is
    /// an error naming it.
    pub async fn of(namespace: &Namespace, catalog: &Catalog) -> Result<Lock> {
        let mut lock = Lock::git_of(namespace)?;
        lock.skills = Lock::for_catalog(catalog).await?.skills;
        Ok(lock)
    }

    /// The Git part of a lock of `namespace`.
    fn git_of(namespace: &Namespace) -> Result<Lock> {
        let mut git = Vec::new();
        for (location, commit) in namespace.git_mounts() {
            let commit = commit.clone().ok_or_else(|| {
                Error::Usage(format!(
                    "`{location}` could not be fetched, so there is no commit to lock"
                ))
            })?;
            git.push(crate::integrity::lock::LockedGit {
                location: location.to_string(),
                commit,
            });
        }
        git.sort();
        git.dedup();
        Ok(Lock {
            version: crate::integrity::lock::LOCK_VERSION,
            git,
            skills: None,
        })
    }

    /// Refuses, naming each, the Git mounts of `namespace` that resolved to
    /// another commit than this lock says, and those the lock does not
    /// hold.
    pub fn check_git(&self, namespace: &Namespace) -> Result<()> {
        let now = Lock::git_of(namespace)?;
        let mut problems = Vec::new();
        for entry in &now.git {
            match self.git.iter().find(|l| l.location == entry.location) {
                Some(locked) if locked.commit == entry.commit => {}
                Some(locked) => problems.push(format!(
                    "`{}` is at {}, the lock says {}",
                    entry.location, entry.commit, locked.commit
                )),
                None => problems.push(format!("`{}` is not in the lock", entry.location)),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "the Git sources do not match the lock: {}; run `skillstore lock` to accept them",
                problems.join("; ")
            )))
        }
    }
}

impl SharedCatalog {
    /// This shared catalog, loaded from `namespace`, following the
    /// references of its Git mounts: when `namespace` follows a branch, a
    /// tag or a remote's `HEAD`, each [`SharedCatalog::refresh`] opens it
    /// again ([`Namespace::reopen`], one request per such mount) and loads
    /// the catalog from the namespace opened again (its lock and
    /// signatures read again and checked as in any load). A long-running
    /// server, `sync --watch` or mount thus serves a moved branch at its
    /// next refresh.
    pub fn following(self, namespace: Namespace) -> Self {
        if namespace.follows_git_references() {
            self.follow(Arc::new(namespace))
        } else {
            self
        }
    }
}

#[async_trait::async_trait]
impl Origin for Namespace {
    async fn reopened(&self) -> Option<Arc<dyn Origin>> {
        reopened(self.clone())
            .await
            .map(|next| Arc::new(next) as Arc<dyn Origin>)
    }

    async fn load(&self) -> Catalog {
        Namespace::load(self).await
    }
}

/// The namespace of `following` opened again, or `None` (logged) when it
/// cannot be.
async fn reopened(current: Namespace) -> Option<Namespace> {
    let before = current.git_mounts().to_vec();
    let next = match tokio::task::spawn_blocking(move || current.reopen()).await {
        Ok(Ok(Some(next))) => next,
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the namespace could not be opened again to follow its Git references; refreshing at the commits it has");
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, "opening the namespace again failed");
            return None;
        }
    };
    for ((location, was), (_, now)) in before.iter().zip(next.git_mounts()) {
        if was != now {
            tracing::info!(%location, before = ?was, after = ?now, "a Git reference moved");
        }
    }
    Some(next)
}

// Configuration is data; opening it is the namespace's job.
impl Config {
    /// Assembles the namespace: opens every mount (read-only), gives each
    /// writable source, and each source with a symlink policy of its own, a
    /// backend rooted at its own directory, refuses sources that alias one
    /// another with different writability, and builds the load and prompt
    /// options. Every front end calls this; it is the one place where
    /// locations become backends.
    pub fn open(&self) -> Result<Namespace> {
        assemble(self, self.writable_names()).map_err(|e| match (e, self.file()) {
            (Error::Config(m), Some(file)) if !m.starts_with(crate::config::GIVEN_MOUNT) => {
                Error::Config(format!("{}: {m}", file.display()))
            }
            (Error::Usage(m), Some(file)) if !m.starts_with(crate::config::GIVEN_MOUNT) => {
                Error::Usage(format!("{}: {m}", file.display()))
            }
            (e, _) => e,
        })
    }
}

/// Everything a catalog, an editor or a prompt needs: one namespace
/// (mounts joined in a [`MountTable`]), the ordered sources in it, and the
/// load and prompt options. Built by [`Config::open`].
#[derive(Debug, Clone)]
pub struct Namespace {
    backend: Arc<dyn SkillBackend>,
    sources: SourceList,
    source_locations: Vec<Location>,
    /// Per source, what makes it the same as another namespace's (its
    /// location, commit, settings and place), when it may be shared: see
    /// [`Namespace::with_source_pool`].
    share_keys: Vec<Option<String>>,
    git_mounts: Vec<(Location, Option<String>)>,
    load: LoadOptions,
    prompt: PromptSettings,
    sync: SyncOptions,
    lock: Option<Arc<Lock>>,
    /// The pool its read-only sources are shared through, when it has one.
    pool: Option<Arc<SourcePool>>,
    /// The checks every winner must pass (installed in `load` as its check).
    integrity: Option<Arc<Integrity>>,
    /// The configuration it was opened from, to open it again.
    config: Option<Arc<Config>>,
    /// The wrapper of [`Namespace::with_backend_layer`], applied again to
    /// a namespace opened again.
    layer: Option<BackendLayer>,
}

/// A wrapper around a namespace's backend ([`Namespace::with_backend_layer`]).
#[derive(Clone)]
struct BackendLayer(Arc<LayerFn>);

type LayerFn = dyn Fn(Arc<dyn SkillBackend>) -> Arc<dyn SkillBackend> + Send + Sync;

impl std::fmt::Debug for BackendLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BackendLayer")
    }
}

/// Prompt settings from the configuration, before a template is read.
#[derive(Debug, Clone, Default)]
pub struct PromptSettings {
    /// The list's shape.
    pub style: PromptStyle,
    /// The most characters a prompt may have.
    pub max_chars: Option<usize>,
    /// A template file, already resolved against the configuration's
    /// directory.
    pub template: Option<PathBuf>,
    /// Where the agent finds the skills (a synced or mounted tree), when
    /// locations should not be virtual paths.
    pub location_root: Option<String>,
    /// Skills listed first, kept when a budget leaves others out.
    pub always: Vec<String>,
}

impl Namespace {
    /// The whole namespace as one backend, with every guard of its mounts.
    pub fn backend(&self) -> Arc<dyn SkillBackend> {
        Arc::clone(&self.backend)
    }

    /// This namespace with its backend wrapped by `layer` (a wrapper that
    /// counts or traces calls, say): loads, reads and the editor's writes
    /// all go through the wrapper. The wrapper must hand every call it does
    /// not change to the backend it wraps, so every guard still applies.
    /// A namespace opened again ([`Namespace::reopen`]) is wrapped alike.
    pub fn with_backend_layer(
        mut self,
        layer: impl Fn(Arc<dyn SkillBackend>) -> Arc<dyn SkillBackend> + Send + Sync + 'static,
    ) -> Self {
        self.backend = layer(self.backend);
        self.layer = Some(BackendLayer(Arc::new(layer)));
        self
    }

    /// This namespace with its read-only sources shared through `pool`
    /// ([`crate::source_pool`]): a source another namespace in the pool
    /// mounts with the same location (and commit), symlink policies, place,
    /// name, patterns and load settings is loaded once for both. Writable
    /// sources and memory mounts are never shared. A namespace opened again
    /// ([`Namespace::reopen`]) keeps the pool.
    pub fn with_source_pool(mut self, pool: Arc<SourcePool>) -> Self {
        let settings = format!(
            "{}|{}|{}",
            self.load.read_limit,
            self.load.prefix_bytes,
            self.load.cache.is_some()
        );
        let keys = self
            .share_keys
            .iter()
            .map(|k| k.as_ref().map(|k| Arc::from(format!("{k}|{settings}"))))
            .collect();
        self.load.shared = Some(SharedSources::new(Arc::clone(&pool) as _, keys));
        self.pool = Some(pool);
        self
    }

    /// True when some Git mount follows a branch, a tag or the remote's
    /// `HEAD` rather than a full commit id: only [`Namespace::reopen`] sees
    /// it move.
    pub fn follows_git_references(&self) -> bool {
        self.git_mounts.iter().any(|(location, _)| match location {
            Location::Git { reference, .. } => {
                !reference.as_deref().is_some_and(skillstore_backends::is_full_commit_id)
            }
            _ => false,
        })
    }

    /// This namespace opened again from its configuration: each Git mount
    /// asks its remote for its reference (one request; a moved branch is
    /// fetched, a pinned commit is not asked for), and the lock and
    /// signature files are read again. The file digests already computed
    /// and the backend layer are kept. Blocks on the network: call it off
    /// the async runtime. `None` for a namespace not opened from a
    /// configuration.
    pub fn reopen(&self) -> Result<Option<Namespace>> {
        let Some(config) = &self.config else { return Ok(None) };
        let mut next = config.open()?;
        next.load.digests = Arc::clone(&self.load.digests);
        if let Some(layer) = &self.layer {
            next.backend = (layer.0)(next.backend);
            next.layer = Some(layer.clone());
        }
        if let Some(pool) = &self.pool {
            next = next.with_source_pool(Arc::clone(pool));
        }
        Ok(Some(next))
    }

    /// The sources, lowest priority first.
    pub fn sources(&self) -> &SourceList {
        &self.sources
    }

    /// How catalogs are loaded.
    pub fn load_options(&self) -> &LoadOptions {
        &self.load
    }

    /// The prompt settings.
    pub fn prompt_settings(&self) -> &PromptSettings {
        &self.prompt
    }

    /// How a sync of this namespace runs: the read limit and the bounds of
    /// the configuration's `sync` section, defaults elsewhere.
    pub fn sync_options(&self) -> &SyncOptions {
        &self.sync
    }

    /// Every Git mount's location and the commit it resolved to (`None`
    /// when its remote could not be reached and nothing was fetched
    /// before), in mount order.
    pub fn git_mounts(&self) -> &[(Location, Option<String>)] {
        &self.git_mounts
    }

    /// The lock every winner is checked against, when one is configured
    /// (`lock:` or `--locked`).
    pub fn lock(&self) -> Option<&Lock> {
        self.lock.as_deref()
    }

    /// The location serving the source `name` (for a front end that must
    /// refuse, say, writes to a `memory:` file it cannot save).
    pub fn source_location(&self, name: &str) -> Option<&Location> {
        let index = self.sources.iter().position(|s| s.name() == name)?;
        self.source_locations.get(index)
    }

    /// The pool its read-only sources are shared through
    /// ([`Namespace::with_source_pool`]), and which of its sources are
    /// shared there.
    pub fn shared_sources(&self) -> Option<(&Arc<SourcePool>, &SharedSources)> {
        Some((self.pool.as_ref()?, self.load.shared.as_ref()?))
    }

    /// The integrity checks (a lock, signature policies) every winner must
    /// pass, when the configuration asks for any.
    pub fn integrity(&self) -> Option<&Arc<Integrity>> {
        self.integrity.as_ref()
    }

    /// Loads the catalog without its integrity checks (a lock, required
    /// signatures): for `verify`, which reports on every winner.
    pub async fn load_unchecked(&self) -> Catalog {
        let options = LoadOptions {
            integrity: None,
            ..self.load.clone()
        };
        Catalog::load(self.backend(), self.sources.clone(), options).await
    }

    /// A search index for this namespace's catalogs: the one kept in the
    /// local cache (see [`crate::search::SearchIndex::open_cached`]) when
    /// the cache is on and every source's storage gives versions that stay
    /// true from one process to the next; in memory otherwise (a
    /// `memory:` file is numbered afresh at each load).
    #[cfg(feature = "search")]
    pub fn search_index(&self) -> crate::search::SearchIndex {
        match (&self.load.cache, self.search_identity()) {
            (Some(settings), Some(identity)) => crate::search::SearchIndex::open_cached(settings, &identity),
            _ => crate::search::SearchIndex::in_memory(),
        }
    }

    /// [`Namespace::search_index`] brought level with `catalog`. When the
    /// cached index cannot be written (another process holds it, the disk
    /// is full), the index is built in memory instead.
    #[cfg(feature = "search")]
    pub async fn search_index_for(&self, catalog: &Catalog) -> Result<crate::search::SearchIndex> {
        let index = self.search_index();
        match index.refresh(catalog).await {
            Ok(_) => Ok(index),
            Err(e) if index.is_cached() => {
                tracing::debug!(error = %e, "cannot update the cached search index; indexing in memory");
                let index = crate::search::SearchIndex::in_memory();
                index.refresh(catalog).await?;
                Ok(index)
            }
            Err(e) => Err(e),
        }
    }

    /// Names the storage behind every source, in order: the same for two
    /// namespaces only when they read the same skills at the same paths. A
    /// local directory is named by its resolved path (links followed), so
    /// a relative location such as `.` names a different directory in each
    /// working directory; one that cannot be resolved is not cached.
    #[cfg(feature = "search")]
    fn search_identity(&self) -> Option<String> {
        let mut identity = String::from("skillstore-search");
        for (source, location) in self.sources.iter().zip(&self.source_locations) {
            let named = match location {
                Location::Memory(_) => return None,
                Location::Dir(dir) => std::fs::canonicalize(dir).ok()?.display().to_string(),
                other => other.to_string(),
            };
            identity.push_str(&format!("\n{}\t{}\t{named}", source.name(), source.path()));
        }
        Some(identity)
    }

    /// Loads the catalog.
    pub async fn load(&self) -> Catalog {
        Catalog::load(self.backend(), self.sources.clone(), self.load.clone()).await
    }

    /// The sources at the directories `paths` (lowest priority first), as
    /// a front end naming sources by path alone (deepagents' `sources`)
    /// needs them: a directory the configuration names a source at is that
    /// source (its name, label, patterns and commit, read-only here), so a
    /// lock and a signature policy written for it apply; any other is
    /// named as the command line names `--source PATH`. A name already
    /// taken by an earlier path becomes the whole path without its leading
    /// `/` (`team/skills`). A path that is not a directory path is a usage
    /// error.
    pub fn sources_at<S: AsRef<str>>(&self, paths: &[S]) -> Result<SourceList> {
        let mut list = SourceList::new();
        for text in paths {
            let path = parse_dir(text.as_ref())?;
            let source = match self.sources.iter().find(|s| *s.path() == path) {
                Some(configured) => configured.clone().with_writable(false),
                None => Source::new(path.clone()),
            };
            let source = if list.get(source.name()).is_some() {
                let whole = path.as_str().trim_start_matches('/').to_owned();
                Source::labeled(if whole.is_empty() { "root".to_owned() } else { whole }, path)
            } else {
                source
            };
            list.push(source)?;
        }
        Ok(list)
    }

    /// Loads a catalog of `sources` (from [`Namespace::sources_at`], say)
    /// over this namespace's mounts, guards and load options: its lock and
    /// signature policies apply to them by source name. A source at the
    /// directory of a configured source under another name is a usage
    /// error when the namespace checks a lock or signatures, since under
    /// another name those checks would not apply to it.
    pub async fn load_sources(&self, sources: SourceList) -> Result<Catalog> {
        if self.load.integrity.is_some() {
            for source in &sources {
                if let Some(configured) = self
                    .sources
                    .iter()
                    .find(|c| c.path() == source.path() && c.name() != source.name())
                {
                    return Err(Error::Usage(format!(
                        "the source at {} is named `{}` in the configuration, whose lock or signatures apply by \
                         that name; load it under that name (or by its path alone)",
                        configured.display_path(),
                        configured.name()
                    )));
                }
            }
        }
        // Its sources are not the namespace's: none is taken from a pool.
        let options = LoadOptions {
            shared: None,
            ..self.load.clone()
        };
        Ok(Catalog::load(self.backend(), sources, options).await)
    }

    /// The source a write goes to: the one named, or else the
    /// highest-priority writable source.
    pub fn write_target(&self, name: Option<&str>) -> Result<&Source> {
        match name {
            Some(name) => self
                .sources
                .get(name)
                .ok_or_else(|| Error::SourceNotFound(name.to_owned())),
            None => self.sources.iter().rev().find(|s| s.is_writable()).ok_or_else(|| {
                Error::Usage(
                    "no source is writable: mark one `writable: true` in the configuration, or pass --writable NAME"
                        .into(),
                )
            }),
        }
    }

    /// An editor of the source `name` (or the highest-priority writable
    /// one), writing through this namespace under its read limit. Fails with
    /// [`Error::ReadOnlySource`] unless the source is writable.
    pub fn editor(&self, name: Option<&str>) -> Result<SkillEditor> {
        let source = self.write_target(name)?;
        Ok(SkillEditor::new(self.backend(), source)?.with_limit(self.load.read_limit))
    }

    /// The prompt options of the configuration, its template (if any) read
    /// under the read limit.
    pub fn prompt_options(&self) -> Result<PromptOptions> {
        let template = match &self.prompt.template {
            Some(path) => Some(read_local_text(path, self.load.read_limit, "template")?),
            None => None,
        };
        Ok(PromptOptions {
            style: self.prompt.style,
            max_chars: self.prompt.max_chars,
            template,
            location_root: self.prompt.location_root.clone(),
            always: self.prompt.always.clone(),
            ..PromptOptions::default()
        })
    }
}

/// A mount, opened.
struct Mount {
    at: VPath,
    location: Location,
    policy: SymlinkPolicy,
    opened: Opened,
}

/// A mount's backend, writable, kept by kind so that a source's own
/// backend can be opened beneath it. (A build without Git or discovery
/// support never makes those kinds.)
#[cfg_attr(not(all(feature = "git", feature = "discovery")), allow(dead_code))]
enum Opened {
    Fs(FsBackend),
    #[cfg(feature = "s3")]
    Object(skillstore_backends::ObjectStoreBackend),
    Memory(Arc<MemoryBackend>),
    /// A Git repository at its commit, or, when the remote could not be
    /// reached and nothing was fetched before, a stand-in answering
    /// `unavailable` (so the other sources are still served).
    Git {
        backend: Arc<dyn SkillBackend>,
        commit: Option<String>,
        /// Served at a commit fetched before: the remote did not answer.
        stale: bool,
    },
    Discovery(Arc<dyn SkillBackend>),
}

impl Opened {
    fn open(
        location: &Location,
        policy: SymlinkPolicy,
        read_limit: u64,
        cache: Option<&crate::cache::CacheSettings>,
        allow_http: bool,
        discovery_bytes: Option<u64>,
    ) -> Result<Opened> {
        #[cfg(not(all(feature = "git", feature = "discovery")))]
        let _ = (cache, allow_http, discovery_bytes);
        match location {
            Location::Dir(path) => open_dir(path, policy)
                .map(Opened::Fs)
                .map_err(|e| Error::Usage(format!("cannot open the directory `{}`: {e}", path.display()))),
            #[cfg(feature = "s3")]
            Location::S3 { .. } => skillstore_backends::ObjectStoreBackend::from_s3_url(
                &location.to_string(),
                &skillstore_backends::S3Options::default(),
            )
            .map(Opened::Object)
            .map_err(|e| Error::Usage(format!("cannot use `{location}`: {e}"))),
            #[cfg(not(feature = "s3"))]
            Location::S3 { .. } => Err(not_built(location, "s3")),
            Location::Memory(file) => {
                let text = read_local_text(file, read_limit, "memory file")?;
                let backend = MemoryBackend::from_json(&text)
                    .map_err(|e| Error::Usage(format!("cannot load the memory file `{}`: {e}", file.display())))?;
                Ok(Opened::Memory(Arc::new(backend)))
            }
            #[cfg(not(feature = "discovery"))]
            Location::Discovery(_) => Err(not_built(location, "discovery")),
            #[cfg(feature = "discovery")]
            Location::Discovery(url) => {
                let unpack = Arc::new(crate::archive::RootedUnpack::new(read_limit));
                let mut limits = skillstore_backends::DiscoveryLimits::default();
                if let Some(max) = discovery_bytes {
                    limits.max_total_bytes = max;
                }
                // Files are kept in the private cache directory (checked as
                // the frontmatter cache is), else in memory under the bound.
                skillstore_backends::DiscoveryBackend::new(url, unpack, limits, allow_http)
                    .map(|b| match cache.and_then(crate::cache::LocalCache::open) {
                        Some(local) => b.with_cache(local.dir().join("discovery"), local.max_bytes()),
                        None => b,
                    })
                    .map(|b| Opened::Discovery(Arc::new(b) as Arc<dyn SkillBackend>))
                    .map_err(|e| Error::Usage(format!("cannot use `{location}`: {e}")))
            }
            #[cfg(not(feature = "git"))]
            Location::Git { .. } => Err(not_built(location, "git")),
            #[cfg(feature = "git")]
            Location::Git { remote, reference } => {
                match crate::git_source::open(
                    remote,
                    reference.as_deref(),
                    policy,
                    cache.and_then(|c| c.dir.as_deref()),
                ) {
                    Ok((b, resolution)) => Ok(Opened::Git {
                        commit: Some(b.commit()),
                        backend: Arc::new(b) as Arc<dyn SkillBackend>,
                        stale: resolution == skillstore_backends::GitResolution::Stale,
                    }),
                    Err(e) if e.kind().is_transient() => {
                        tracing::warn!(location = %location, error = %crate::git_source::with_causes(&e), "a Git remote could not be reached; its sources are unavailable");
                        Ok(Opened::Git {
                            backend: Arc::new(crate::git_source::Unreachable),
                            commit: None,
                            stale: false,
                        })
                    }
                    Err(e) => Err(Error::Usage(format!(
                        "cannot use `{location}`: {}",
                        crate::git_source::with_causes(&e)
                    ))),
                }
            }
        }
    }

    /// The commit served, for a Git mount.
    fn commit(&self) -> Option<String> {
        match self {
            Opened::Git { commit, .. } => commit.clone(),
            _ => None,
        }
    }

    /// The whole mount, read-only.
    fn read_only(&self) -> Arc<dyn SkillBackend> {
        match self {
            Opened::Fs(b) => Arc::new(b.clone().read_only()),
            #[cfg(feature = "s3")]
            Opened::Object(b) => Arc::new(b.clone().read_only()),
            Opened::Memory(b) => {
                Arc::new(Subtree::new(Arc::clone(b) as Arc<dyn SkillBackend>, VPath::root()).read_only())
            }
            Opened::Git { backend, .. } => Arc::clone(backend),
            Opened::Discovery(b) => Arc::clone(b),
        }
    }

    /// A backend rooted at `inner` under this mount.
    fn subdir(&self, inner: &VPath, policy: Option<SymlinkPolicy>, writable: bool) -> Result<Arc<dyn SkillBackend>> {
        Ok(match self {
            Opened::Fs(b) => {
                let sub = b.subdir(inner, policy.unwrap_or(b.policy()))?;
                Arc::new(if writable { sub } else { sub.read_only() })
            }
            #[cfg(feature = "s3")]
            Opened::Object(b) => {
                let sub = b.subdir(inner)?;
                Arc::new(if writable { sub } else { sub.read_only() })
            }
            Opened::Memory(b) => {
                let sub = Subtree::new(Arc::clone(b) as Arc<dyn SkillBackend>, inner.clone());
                Arc::new(if writable { sub } else { sub.read_only() })
            }
            Opened::Git { backend, .. } => Arc::new(Subtree::new(Arc::clone(backend), inner.clone()).read_only()),
            Opened::Discovery(_) if writable => {
                return Err(Error::Usage(
                    "a discovery endpoint is read-only: its source cannot be writable".into(),
                ));
            }
            Opened::Discovery(b) => Arc::new(Subtree::new(Arc::clone(b), inner.clone()).read_only()),
        })
    }
}

/// The error for a location this build cannot open: the Cargo `feature`
/// that adds it was left out.
#[cfg(not(all(feature = "s3", feature = "git", feature = "discovery")))]
fn not_built(location: &Location, feature: &str) -> Error {
    Error::Usage(format!(
        "`{location}` needs the `{feature}` feature, which this build of skillstore leaves out"
    ))
}

impl Location {
    /// Opens the location as one writable backend, with `policy` for a
    /// local directory and `read_limit` for a memory file. For tools that
    /// write a whole tree to a location (`publish`); catalogs, editors and
    /// servers go through [`Config::open`], which applies the namespace's
    /// rules. A Git location is refused before anything is fetched: it is
    /// never written to.
    pub fn open(&self, policy: SymlinkPolicy, read_limit: u64) -> Result<Arc<dyn SkillBackend>> {
        if self.is_git() {
            return Err(Error::Usage(format!(
                "`{self}` is a Git repository, which is read-only; write to a directory or an s3:// location"
            )));
        }
        Ok(match Opened::open(self, policy, read_limit, None, false, None)? {
            Opened::Fs(b) => Arc::new(b),
            #[cfg(feature = "s3")]
            Opened::Object(b) => Arc::new(b),
            Opened::Memory(b) => b,
            Opened::Git { backend, .. } => backend,
            Opened::Discovery(b) => b,
        })
    }
}

/// The assembly behind [`Config::open`].
pub(crate) fn assemble(config: &Config, writable_names: &[String]) -> Result<Namespace> {
    let defaults = LoadOptions::default();
    let read_limit = config.limits.max_file_bytes.unwrap_or(defaults.read_limit);
    let base = config.base();

    let mut mount_configs: Vec<MountConfig> = config.mounts.clone();
    if mount_configs.is_empty() {
        mount_configs.push(MountConfig {
            at: "/".into(),
            location: ".".into(),
            ..MountConfig::default()
        });
    }
    let cache = (config.cache.enabled != Some(false)).then(|| crate::cache::CacheSettings {
        dir: config.cache.dir.as_deref().map(|dir| match dir.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME").map_or_else(|| base.join(dir), |home| Path::new(&home).join(rest)),
            None => base.join(dir),
        }),
        max_bytes: config.cache.max_bytes.unwrap_or(crate::cache::DEFAULT_CACHE_BYTES),
    });
    let mut mounts: Vec<Mount> = Vec::with_capacity(mount_configs.len());
    for m in &mount_configs {
        let named = |e: Error| {
            if m.given {
                crate::config::given_mount_error(&m.at, &m.location, e)
            } else {
                e
            }
        };
        let at = parse_dir(&m.at).map_err(named)?;
        let location = match &m.contents {
            Some(_) => Location::Memory(PathBuf::from(m.location.trim_start_matches("memory:"))),
            None => Location::parse(&m.location)
                .map_err(named)?
                .resolved_against(m.base_dir.as_deref().unwrap_or(&base)),
        };
        let policy = m.symlinks.as_deref().map(parse_policy).transpose()?.unwrap_or_default();
        if m.symlinks.is_some() && !location.is_local_dir() && !location.is_git() {
            return Err(Error::Usage(format!(
                "the mount at {at} sets a symlink policy, which applies to local directories and Git repositories only"
            )));
        }
        let opened = match &m.contents {
            Some(files) => Opened::Memory(Arc::clone(files)),
            None => {
                if let Some(host) = location.plain_http_host()
                    && !m.allow_http
                {
                    return Err(Error::Usage(format!(
                        "the mount at {at} reads `{location}` over plain http:// from `{host}`, which is not a loopback host: \
                         skills (and any credentials) would travel unencrypted and could be changed on the way; \
                         use https://, or set `allow_http: true` on the mount"
                    )));
                }
                Opened::open(
                    &location,
                    policy,
                    read_limit,
                    cache.as_ref(),
                    m.allow_http,
                    config.limits.max_discovery_bytes,
                )
                .map_err(named)?
            }
        };
        mounts.retain(|existing| existing.at != at);
        mounts.push(Mount {
            at,
            location,
            policy,
            opened,
        });
    }
    // What the mounts just fetched is the newest there, so trimmed last.
    if mounts
        .iter()
        .any(|m| matches!(m.opened, Opened::Discovery(_) | Opened::Git { .. }))
        && let Some(local) = cache.as_ref().and_then(crate::cache::LocalCache::open)
    {
        local.trim();
    }

    let mut sources: Vec<(Source, Option<SymlinkPolicy>)> = Vec::with_capacity(config.sources.len());
    let mut signatures = Vec::new();
    for s in &config.sources {
        let path = parse_dir(&s.path)?;
        let source = match &s.label {
            Some(label) => Source::labeled(label, path),
            None => Source::new(path),
        }
        .with_include(Patterns::new(s.include.iter().cloned())?)
        .with_exclude(Patterns::new(s.exclude.iter().cloned())?)
        .with_writable(s.writable);
        if let Some(wanted) = &s.signatures {
            let file = Path::new(&wanted.allowed_signers);
            let file = if file.is_relative() {
                base.join(file)
            } else {
                file.to_path_buf()
            };
            let text = read_local_text(&file, MAX_LOCK_BYTES, "allowed_signers file")?;
            let allowed = AllowedSigners::parse(&text)?;
            signatures.push((
                source.name().to_owned(),
                Arc::new(SignaturePolicy {
                    allowed,
                    required: wanted.required,
                }),
            ));
        }
        sources.push((source, s.symlinks.as_deref().map(parse_policy).transpose()?));
    }
    for name in writable_names {
        let Some(at) = sources.iter().position(|(s, _)| s.name() == name) else {
            let known: Vec<&str> = sources.iter().map(|(s, _)| s.name()).collect();
            return Err(Error::Usage(format!(
                "--writable names no source: `{name}`{}; the sources are {}",
                crate::suggest::did_you_mean(name, known.iter().copied()),
                known.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            )));
        };
        let source = &mut sources[at].0;
        *source = source.clone().with_writable(true);
    }
    if sources.is_empty() {
        return Err(Error::Usage(
            "no sources: pass --source VPATH (repeatable) or a configuration with `sources:`".into(),
        ));
    }

    let mut own_roots: Vec<(VPath, Arc<dyn SkillBackend>)> = Vec::new();
    let mut list = SourceList::new();
    let mut source_locations = Vec::with_capacity(sources.len());
    let mut share_keys = Vec::with_capacity(sources.len());
    let mut identities = Vec::with_capacity(sources.len());
    let mut standing = Vec::new();
    for (index, (source, policy)) in sources.into_iter().enumerate() {
        let path = source.path();
        let mount = mounts
            .iter()
            .filter(|m| path.starts_with(&m.at))
            .max_by_key(|m| m.at.segments().count())
            .ok_or_else(|| Error::Usage(format!("no mount serves the source {path}")))?;
        let inner = path.strip_prefix(&mount.at).expect("the mount is an ancestor");
        if source.is_writable() && mount.location.is_git() {
            return Err(Error::Usage(format!(
                "the source `{}` is writable, but {path} is in the Git repository mounted at {} ({}), which is never writable",
                source.name(),
                mount.at,
                mount.location
            )));
        }
        if let Some(policy) = policy {
            if !mount.location.is_local_dir() {
                return Err(Error::Usage(format!(
                    "a symlink policy applies to local directories only; the source {path} is not in one"
                )));
            }
            if looser(policy, mount.policy) {
                return Err(Error::Usage(format!(
                    "the source {path} asks for the symlink policy `{policy}`, looser than its mount's `{}`; a source may only narrow it",
                    mount.policy
                )));
            }
        }
        if source.is_writable() || policy.is_some() {
            let backend = mount
                .opened
                .subdir(&inner, policy, source.is_writable())
                .map_err(|e| Error::Usage(format!("cannot open the source {path}: {e}")))?;
            own_roots.push((path.clone(), backend));
        }
        identities.push((index, source.is_writable(), identity(mount, &mounts, &inner)));
        source_locations.push(mount.location.clone());
        // A writable source is written through this namespace's editor and
        // seen at once by its catalog, and each memory mount is a store of
        // its own: neither is shared. Nor is a source with another mount
        // below it, whose files that mount's location decides.
        let nested = mounts.iter().any(|m| m.at != *path && m.at.starts_with(path));
        share_keys.push(
            (!source.is_writable() && !nested && !matches!(mount.location, Location::Memory(_))).then(|| {
                format!(
                    "{}|{}|{:?}|{}|{}|{:?}",
                    mount.location,
                    mount.policy,
                    policy,
                    inner,
                    mount.opened.commit().unwrap_or_default(),
                    source
                )
            }),
        );
        if let Opened::Git {
            stale: true,
            commit: Some(commit),
            ..
        } = &mount.opened
        {
            standing.push(crate::Diagnostic::new(
                crate::Severity::Warning,
                crate::DiagnosticKind::SourceStale,
                Some(source.name()),
                Some(path),
                format!(
                    "the Git remote of {} could not be reached; serving commit {commit}, fetched before",
                    mount.location
                ),
            ));
        }
        let source = match mount.opened.commit() {
            Some(commit) => source.with_commit(commit),
            None => source,
        };
        list.push(source)?;
    }
    refuse_aliases(&list, &identities)?;

    // A source with a backend of its own replaces a mount at the same point.
    let mut table = MountTable::new();
    for m in mounts.iter().filter(|m| !own_roots.iter().any(|(at, _)| *at == m.at)) {
        table
            .mount(m.at.clone(), m.opened.read_only())
            .map_err(|e| Error::Usage(format!("cannot mount {}: {e}", m.at)))?;
    }
    for (at, backend) in own_roots {
        table
            .mount(at.clone(), backend)
            .map_err(|e| Error::Usage(format!("cannot mount the source {at}: {e}")))?;
    }

    let filter = SkillFilter::new(
        config.skills.enabled.clone().map(Patterns::new).transpose()?,
        Patterns::new(config.skills.disabled.iter().cloned())?,
    );
    let lock = match &config.lock {
        Some(file) => {
            let file = Path::new(file);
            let file = if file.is_relative() {
                base.join(file)
            } else {
                file.to_path_buf()
            };
            let text = read_local_text(&file, MAX_LOCK_BYTES, "lock file")?;
            Some(Arc::new(Lock::parse(&text)?))
        }
        None => None,
    };
    let integrity = (lock.is_some() || !signatures.is_empty()).then(|| {
        Arc::new(Integrity {
            lock: lock.clone(),
            signatures,
        })
    });
    let load = LoadOptions {
        concurrency: config.limits.concurrency.unwrap_or(defaults.concurrency).max(1),
        read_limit,
        filter,
        cache,
        standing,
        integrity: integrity.clone().map(|i| i as Arc<dyn crate::catalog::WinnerCheck>),
        ..defaults
    };
    let style = match config.prompt.style.as_deref() {
        Some(text) => text.parse::<PromptStyle>()?,
        None => PromptStyle::default(),
    };
    let template = config.prompt.template.as_ref().map(|t| {
        let t = Path::new(t);
        if t.is_relative() { base.join(t) } else { t.to_path_buf() }
    });
    let namespace = Namespace {
        backend: Arc::new(table),
        sources: list,
        source_locations,
        share_keys,
        git_mounts: mounts
            .iter()
            .filter(|m| m.location.is_git())
            .map(|m| (m.location.clone(), m.opened.commit()))
            .collect(),
        load,
        pool: None,
        integrity,
        prompt: PromptSettings {
            style,
            max_chars: config.prompt.max_chars,
            template,
            location_root: config.prompt.location_root.clone(),
            always: config.prompt.always.clone(),
        },
        sync: sync_options(config, read_limit),
        lock,
        config: Some(Arc::new(config.clone())),
        layer: None,
    };
    if let Some(lock) = &namespace.lock {
        lock.check_git(&namespace)?;
    }
    Ok(namespace)
}

/// Directories this process has open as mounts, by path and symlink
/// policy: namespaces that mount one directory alike (a server's tenants
/// over one base) share one handle and the listings it keeps, rather than
/// a descriptor each. A handle is reused only while the path still names
/// the directory it opened, and dropped once no namespace holds it.
static OPEN_DIRS: std::sync::Mutex<Option<OpenDirs>> = std::sync::Mutex::new(None);

/// [`OPEN_DIRS`]: the handles, and the count past which the unheld ones
/// are looked for.
#[derive(Default)]
struct OpenDirs {
    handles: std::collections::HashMap<(PathBuf, u8), FsBackend>,
    sweep_at: usize,
}

fn open_dir(path: &Path, policy: SymlinkPolicy) -> skillstore_backends::Result<FsBackend> {
    let rank = match policy {
        SymlinkPolicy::Deny => 0,
        SymlinkPolicy::WithinRoot => 1,
        SymlinkPolicy::Follow => 2,
    };
    let mut guard = OPEN_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let open = guard.get_or_insert_with(OpenDirs::default);
    if open.handles.len() >= open.sweep_at {
        open.handles.retain(|_, b| b.holders() > 1);
        open.sweep_at = (open.handles.len() * 2).max(64);
    }
    let key = (path.to_path_buf(), rank);
    if let Some(backend) = open.handles.get(&key).filter(|b| b.is_rooted_at(path)) {
        return Ok(backend.clone());
    }
    let backend = FsBackend::with_policy(path, policy)?;
    open.handles.insert(key, backend.clone());
    Ok(backend)
}

/// The largest lock file read.
const MAX_LOCK_BYTES: u64 = 16 * 1024 * 1024;

fn sync_options(config: &Config, read_limit: u64) -> SyncOptions {
    let defaults = SyncOptions::default();
    SyncOptions {
        read_limit,
        max_files_per_skill: config.sync.max_files.unwrap_or(defaults.max_files_per_skill),
        max_skill_bytes: config.sync.max_skill_bytes.unwrap_or(defaults.max_skill_bytes),
        max_total_bytes: config.sync.max_total_bytes.unwrap_or(defaults.max_total_bytes),
        ..defaults
    }
}

fn parse_policy(text: &str) -> Result<SymlinkPolicy> {
    text.parse::<SymlinkPolicy>().map_err(|_| {
        Error::Usage(format!(
            "unknown symlink policy `{}`; expected deny, within_root or follow",
            text.escape_debug()
        ))
    })
}

fn looser(a: SymlinkPolicy, b: SymlinkPolicy) -> bool {
    let rank = |p: SymlinkPolicy| match p {
        SymlinkPolicy::Deny => 0,
        SymlinkPolicy::WithinRoot => 1,
        SymlinkPolicy::Follow => 2,
    };
    rank(a) > rank(b)
}

/// Where a source's directory really is, to find sources that alias or
/// hold one another.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    /// A local directory: its (device, inode) and its ancestors', nearest
    /// first.
    Dir(Vec<(u64, u64)>),
    /// Storage addressed by name: a storage key, then path segments.
    Keyed(Vec<String>),
    /// The directory does not exist (yet): it holds nothing to alias.
    Absent,
}

fn identity(mount: &Mount, mounts: &[Mount], inner: &VPath) -> Identity {
    match &mount.location {
        Location::Dir(dir) => dir_identity(&dir.join(inner.relative_str())),
        Location::S3 { bucket, prefix } => {
            let mut key = vec![format!("s3:{bucket}")];
            key.extend(prefix.split('/').filter(|s| !s.is_empty()).map(str::to_owned));
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
        Location::Git { remote, .. } => {
            let mut key = vec![format!("git:{remote}@{}", mount.opened.commit().unwrap_or_default())];
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
        Location::Discovery(url) => {
            let mut key = vec![format!("discovery:{url}")];
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
        Location::Memory(_) => {
            // Each memory mount is a store of its own.
            let index = mounts.iter().position(|m| std::ptr::eq(m, mount)).unwrap_or(usize::MAX);
            let mut key = vec![format!("memory:{index}")];
            key.extend(inner.segments().map(str::to_owned));
            Identity::Keyed(key)
        }
    }
}

/// The identities of a local directory and its ancestors. The path was
/// already opened under its mount's policy; resolving it here serves only
/// to compare sources, never to open one.
fn dir_identity(path: &Path) -> Identity {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(canonical) = std::fs::canonicalize(path) else {
            return Identity::Absent;
        };
        let chain = canonical
            .ancestors()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        Identity::Dir(chain)
    }
    #[cfg(not(unix))]
    {
        match std::fs::canonicalize(path) {
            Ok(canonical) => Identity::Keyed(
                canonical
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect(),
            ),
            Err(_) => Identity::Absent,
        }
    }
}

/// True when `a` and `b` are the same directory or one holds the other.
fn overlaps(a: &Identity, b: &Identity) -> bool {
    match (a, b) {
        (Identity::Dir(a), Identity::Dir(b)) => match (a.first(), b.first()) {
            (Some(a0), Some(b0)) => a.contains(b0) || b.contains(a0),
            _ => false,
        },
        (Identity::Keyed(a), Identity::Keyed(b)) => a.starts_with(b) || b.starts_with(a),
        _ => false,
    }
}

fn refuse_aliases(sources: &SourceList, identities: &[(usize, bool, Identity)]) -> Result<()> {
    let names: Vec<&Source> = sources.iter().collect();
    for (i, (a, a_writable, a_id)) in identities.iter().enumerate() {
        for (b, b_writable, b_id) in &identities[i + 1..] {
            if a_writable != b_writable && overlaps(a_id, b_id) {
                let (writable, read_only) = if *a_writable { (*a, *b) } else { (*b, *a) };
                return Err(Error::Usage(format!(
                    "the writable source `{}` ({}) and the read-only source `{}` ({}) are the same directory or one holds the other; a write to one would change the other",
                    names[writable].name(),
                    names[writable].display_path(),
                    names[read_only].name(),
                    names[read_only].display_path()
                )));
            }
        }
    }
    Ok(())
}

impl Config {
    /// Opens the configuration at `path` when given; otherwise
    /// `./skillstore.yaml` when it exists and `use_default_file` is set;
    /// otherwise an empty configuration resolving against the working
    /// directory.
    pub fn load_or_default(path: Option<&Path>, use_default_file: bool) -> Result<Config> {
        match path {
            Some(path) => Config::load(path),
            None if use_default_file && Path::new(DEFAULT_CONFIG_FILE).is_file() => {
                Config::load(Path::new(DEFAULT_CONFIG_FILE))
            }
            None => Ok(Config::default()),
        }
    }
}

/// The configuration file read from the working directory when none is
/// named.
pub const DEFAULT_CONFIG_FILE: &str = "skillstore.yaml";

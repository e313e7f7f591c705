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

mod aliases;
mod assemble;
mod feeds;
mod follow;
mod open;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillstore_backends::SkillBackend;

use crate::catalog::{Catalog, LoadOptions};
use crate::config::Config;
use crate::edit::SkillEditor;
use crate::error::{Error, Result};
use crate::integrity::{Integrity, Lock};
use crate::location::{Location, read_local_text};
use crate::prompt::{PromptOptions, PromptStyle};
use crate::release::Releases;
use crate::source::{Source, SourceList, parse_dir};
use crate::source_pool::{SharedSources, SourcePool};
use crate::sync::SyncOptions;
pub use feeds::ChangeFeed;

pub(crate) use assemble::assemble;

/// Everything a catalog, an editor or a prompt needs: one namespace
/// (mounts joined in a [`MountTable`]), the ordered sources in it, and the
/// load and prompt options. Built by [`Config::open`].
#[derive(Debug, Clone)]
pub struct Namespace {
    backend: Arc<dyn SkillBackend>,
    sources: SourceList,
    source_locations: Vec<Location>,
    /// Each source with a selection, by name, and the backend serving it.
    selections: Vec<(String, Arc<crate::release::SelectedReleases>)>,
    /// The journals of mounts set to `changes: journal`, with their sources.
    change_feeds: Vec<ChangeFeed>,
    /// Per source, what makes it the same as another namespace's (its
    /// location, commit, settings and place), when it may be shared: see
    /// [`Namespace::with_source_pool`].
    share_keys: Vec<Option<String>>,
    git_mounts: Vec<(Location, Option<String>)>,
    /// Each local directory mount's path and the directory it opened.
    local_roots: Vec<(std::path::PathBuf, skillstore_backends::FsBackend)>,
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
        let editor = SkillEditor::new(self.backend(), source)?.with_limit(self.load.read_limit);
        Ok(match self.journal_of(source) {
            Some(journal) => editor.with_journal(journal),
            None => editor,
        })
    }

    /// The change journal a write to `source` is recorded in, if its store
    /// keeps one.
    fn journal_of(&self, source: &Source) -> Option<crate::changes::JournalWriter> {
        self.change_feeds.iter().find_map(|feed| {
            let (_, path) = feed.sources.iter().find(|(n, _)| n == source.name())?;
            Some(crate::changes::JournalWriter {
                journal: feed.journal.clone(),
                path: path.clone(),
            })
        })
    }

    /// The releases of the source `name` (or of the highest-priority
    /// writable one), read and written through this namespace under its read
    /// limit. Making, tagging and yanking through it fail unless that source
    /// is writable, and are recorded in its store's change journal when it
    /// keeps one (so followers choose their releases again).
    pub fn releases(&self, name: Option<&str>) -> Result<Releases> {
        let source = self.write_target(name)?;
        let releases = Releases::new(self.backend(), source).with_limit(self.load.read_limit);
        Ok(match self.journal_of(source) {
            Some(journal) => releases.with_journal(journal),
            None => releases,
        })
    }

    /// The releases of the skill `skill` in the highest-priority source that
    /// holds any (a source's releases stay when its working copy is gone),
    /// or `None` when no source has released it.
    pub async fn releases_of(&self, skill: &str) -> Result<Option<Releases>> {
        for source in self.sources().iter().rev() {
            let releases = Releases::new(self.backend(), source).with_limit(self.load.read_limit);
            if !releases.released_versions(skill).await?.is_empty() {
                return Ok(Some(releases));
            }
        }
        Ok(None)
    }

    /// The release version the source `source` serves for the skill
    /// `skill`, as chosen at its last listing; `None` for a working copy.
    pub fn served_release(&self, source: &str, skill: &str) -> Option<String> {
        let (_, served) = self.selections.iter().find(|(name, _)| name == source)?;
        served.served_version(skill)
    }

    /// True when the path of some local directory mount no longer names
    /// the directory it opened (renamed, removed, or a link moved to
    /// another since): a namespace opened again would serve another
    /// directory there.
    pub fn moved(&self) -> bool {
        self.local_roots
            .iter()
            .any(|(path, backend)| !backend.is_rooted_at(path))
    }

    /// The change journals this namespace's mounts keep (`changes:
    /// journal`), one per store, each with the sources stored there: what a
    /// long-lived reader follows instead of listing every interval.
    pub fn change_feeds(&self) -> &[ChangeFeed] {
        &self.change_feeds
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

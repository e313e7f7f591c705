//! One tenant: its namespace (opened by [`skillstore::Config::open`]), its
//! catalog in memory, what has been rendered from that catalog, and a
//! counter that moves when a refresh or a write changes the skills.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Serialize;
use skillstore::backends::{ErrorKind, VPath};
use skillstore::search::{SearchHit, SearchIndex, SearchOptions};
use skillstore::{Catalog, Diagnostic, Namespace, PromptOptions, SharedCatalog, Skill, SkillEditor};
use tokio::sync::watch;

use crate::counting::{BackendCalls, Counting};
use crate::digest::DigestCache;
use crate::discovery::{ArtifactCache, Published};
use crate::error::{ApiError, ServerError};
use crate::manifest::Manifest;
use crate::settings::{Discovery, TenantSettings};

/// A discovery index being built, or built, for every request of one view.
type SharedPublish = futures::future::Shared<futures::future::BoxFuture<'static, Arc<Published>>>;

/// A body rendered once and its entity tag.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The bytes sent.
    pub body: Bytes,
    /// The strong entity tag, quoted.
    pub etag: String,
}

impl Rendered {
    /// `body` with its tag: the SHA-256 of the bytes.
    pub fn new(body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let etag = format!("\"{}\"", crate::digest::sha256_hex(&body));
        Rendered { body, etag }
    }
}

/// The bytes of rendered answers kept across every tenant of a server: a
/// view keeps what it rendered only while the whole server keeps less than
/// the bound, and renders again at each request otherwise, so a platform
/// of many tenants holds at most this much of them.
#[derive(Debug)]
pub struct RenderBudget {
    used: std::sync::atomic::AtomicUsize,
    max: usize,
}

impl RenderBudget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(RenderBudget {
            used: std::sync::atomic::AtomicUsize::new(0),
            max,
        })
    }

    /// The bytes kept now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Room for `bytes`, held until the ticket is dropped; `None` when the
    /// budget has none.
    fn hold(self: &Arc<Self>, bytes: usize) -> Option<Held> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + bytes <= self.max).then_some(used + bytes)
            })
            .ok()?;
        Some(Held {
            budget: Arc::clone(self),
            bytes,
        })
    }
}

/// A prompt's style, character budget, reader and search (each front end
/// names its own).
type PromptKey = (String, Option<usize>, Option<String>, Option<String>);

/// Bytes of a [`RenderBudget`] held by something kept.
#[derive(Debug)]
struct Held {
    budget: Arc<RenderBudget>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// How far `GET /v1/skills/{name}` lists a skill's files.
/// How many histories the whole server reads at once.
pub const HISTORY_READS: usize = 2;

static HISTORY_PERMITS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(HISTORY_READS);

/// What is rendered from one catalog snapshot, built when first asked for
/// and dropped with the snapshot.
pub struct View {
    /// The snapshot.
    pub catalog: Arc<Catalog>,
    /// The snapshot's count of withdrawn skills when this was rendered.
    withdrawn: usize,
    /// The tenant's count of refreshes when this was rendered: a refresh
    /// that left the skills as they were may still have found other files
    /// changed, which shows and manifests list.
    refreshes: u64,
    budget: Arc<RenderBudget>,
    /// `GET /v1/skills`: the `list --json` object, when kept.
    list: Mutex<Option<(Rendered, Held)>>,
    shows: Mutex<HashMap<String, (Rendered, Held)>>,
    prompts: Mutex<HashMap<PromptKey, (Rendered, Held)>>,
    manifests: Mutex<HashMap<String, Arc<Manifest>>>,
    /// The discovery index's build, shared by every request that asks for
    /// it and run as a task of its own, so a request that gives up does not
    /// stop it (the next would start it over).
    discovery: Mutex<Option<SharedPublish>>,
    /// The digests and discovery artifacts of the load this view is of.
    digests: Arc<DigestCache>,
    artifacts: Arc<ArtifactCache>,
}

impl View {
    fn new(
        catalog: Arc<Catalog>,
        refreshes: u64,
        budget: Arc<RenderBudget>,
        digests: Arc<DigestCache>,
        artifacts: Arc<ArtifactCache>,
    ) -> Self {
        let withdrawn = catalog.withdrawn_count();
        View {
            digests,
            artifacts,
            catalog,
            withdrawn,
            refreshes,
            budget,
            list: Mutex::new(None),
            shows: Mutex::new(HashMap::new()),
            prompts: Mutex::new(HashMap::new()),
            manifests: Mutex::new(HashMap::new()),
            discovery: Mutex::new(None),
        }
    }

    /// The discovery index of this snapshot and its artifacts (see
    /// [`crate::discovery`]), built once per snapshot from the tenant's
    /// artifact cache.
    pub async fn discovery(&self) -> Arc<Published> {
        let build = lock(&self.discovery)
            .get_or_insert_with(|| {
                let catalog = Arc::clone(&self.catalog);
                let artifacts = Arc::clone(&self.artifacts);
                let task = tokio::spawn(async move { Arc::new(crate::discovery::publish(&catalog, &artifacts).await) });
                futures::FutureExt::shared(futures::FutureExt::boxed(async move {
                    task.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
                }))
            })
            .clone();
        build.await
    }

    /// `GET /v1/skills`: the `list --json` object, rendered once per
    /// snapshot while the server's [`RenderBudget`] has room.
    pub fn list(&self) -> Rendered {
        if let Some((hit, _)) = lock(&self.list).as_ref() {
            return hit.clone();
        }
        #[derive(Serialize)]
        struct ListOutput<'a> {
            skills: Vec<&'a Skill>,
            diagnostics: Vec<Diagnostic>,
        }
        let catalog = &self.catalog;
        let output = ListOutput {
            skills: catalog.served(true).collect(),
            diagnostics: public_diagnostics(catalog.diagnostics()),
        };
        let mut body = serde_json::to_vec(&output).expect("a catalog serializes");
        body.push(b'\n');
        let rendered = Rendered::new(body);
        let mut slot = lock(&self.list);
        if slot.is_none()
            && let Some(held) = self.budget.hold(rendered.body.len())
        {
            *slot = Some((rendered.clone(), held));
        }
        rendered
    }

    /// `GET /v1/skills/{name}`: the `show --json` object, built once per
    /// snapshot (while the server's [`RenderBudget`] has room).
    /// A checked skill is listed again first (no file read), so one that
    /// lost or changed a checked file since it was rendered is refused
    /// ([`Catalog::confirm_whole`]).
    pub async fn show(&self, name: &str) -> Result<Rendered, ApiError> {
        let hit = lock(&self.shows).get(name).map(|(r, _)| r.clone());
        if let Some(hit) = hit {
            self.catalog.confirm_whole(name).await?;
            return Ok(hit);
        }
        let mut report = self.catalog.report(name).await?;
        report.diagnostics = public_diagnostics(&report.diagnostics);
        let mut body = serde_json::to_vec_pretty(&report).expect("a skill serializes");
        body.push(b'\n');
        let rendered = Rendered::new(body);
        let mut shows = lock(&self.shows);
        if shows.len() < 10_000
            && !shows.contains_key(name)
            && let Some(held) = self.budget.hold(rendered.body.len() + name.len())
        {
            shows.insert(name.to_owned(), (rendered.clone(), held));
        }
        Ok(rendered)
    }

    /// The manifest of the skill `name` (see [`crate::manifest`]), built
    /// once per snapshot. A checked skill withdrawn since is refused
    /// ([`Catalog::is_withdrawn`]); with `confirm`, a checked skill is
    /// listed again first (no file read), so one that lost or changed a
    /// checked file since its manifest was built is refused too
    /// ([`Catalog::confirm_whole`]).
    pub async fn manifest(&self, name: &str, confirm: bool) -> Result<Arc<Manifest>, skillstore::Error> {
        let hit = lock(&self.manifests).get(name).cloned();
        if let Some(hit) = hit {
            if confirm {
                self.catalog.confirm_whole(name).await?;
            } else if let Some(refused) = self.catalog.withdrawn_refusal(name) {
                return Err(refused);
            }
            return Ok(hit);
        }
        let skill = self
            .catalog
            .get(name)
            .ok_or_else(|| skillstore::Error::SkillNotFound(name.to_owned()))?;
        let manifest = crate::manifest::build(&self.digests, &self.catalog, skill).await?;
        lock(&self.manifests).insert(name.to_owned(), Arc::clone(&manifest));
        Ok(manifest)
    }

    /// The rendered system-prompt section for these options, built once
    /// per snapshot and options. A `max_chars` below the section's fixed
    /// text is a bad request that says how long that text is, never an
    /// empty or over-long answer.
    pub fn prompt(&self, options: &PromptOptions) -> Result<Rendered, ApiError> {
        let key = (
            format!("{:?}", options.style),
            options.max_chars,
            options.read_hint.clone(),
            options.search_hint.clone(),
        );
        if let Some((hit, _)) = lock(&self.prompts).get(&key) {
            return Ok(hit.clone());
        }
        let prompt = skillstore::render(&self.catalog, options);
        if let Some(frame) = prompt.frame_chars {
            return Err(ApiError::bad_request(format!(
                "nothing fits in {} characters: the prompt's fixed text alone is {frame} characters",
                options.max_chars.unwrap_or(0)
            )));
        }
        let rendered = Rendered::new(prompt.text);
        let mut prompts = lock(&self.prompts);
        if prompts.len() < 64
            && !prompts.contains_key(&key)
            && let Some(held) = self.budget.hold(rendered.body.len())
        {
            prompts.insert(key, (rendered.clone(), held));
        }
        Ok(rendered)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Diagnostics as a tenant may see them: a diagnostic that comes from the
/// storage (an unreachable or stale source, a refused read) keeps its kind,
/// source and virtual path, and its message becomes a fixed sentence, with
/// the storage's reason only where the storage gave it as public (a
/// discovery entry's refusal, say), so no endpoint, bucket or request URL
/// reaches the tenant. The full message goes to the server's log when the
/// catalog is loaded.
pub fn public_diagnostics(diagnostics: &[Diagnostic]) -> Vec<Diagnostic> {
    diagnostics
        .iter()
        .map(|d| {
            let mut d = d.clone();
            if let Some(message) = storage_message(d.kind.as_str()) {
                d.message = match &d.public_detail {
                    Some(detail) => format!("{message} ({detail})"),
                    None => message.to_owned(),
                };
            }
            d
        })
        .collect()
}

fn storage_message(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "source_stale" => "cannot list the source now; keeping the skills it had at the last load",
        "source_unavailable" => "cannot list the source: storage unavailable",
        "source_not_found" => "the source's directory does not exist",
        _ => {
            let backend_kind = [
                ErrorKind::Unavailable,
                ErrorKind::Other,
                ErrorKind::PermissionDenied,
                ErrorKind::Unsupported,
                ErrorKind::NotFound,
                ErrorKind::NotADirectory,
                ErrorKind::IsADirectory,
                ErrorKind::NotRegularFile,
                ErrorKind::TooLarge,
                ErrorKind::SymlinkRefused,
                ErrorKind::SymlinkEscape,
                ErrorKind::SymlinkLoop,
                ErrorKind::DanglingSymlink,
            ]
            .into_iter()
            .find(|k| k.as_str() == kind)?;
            backend_kind.describe()
        }
    })
}

/// What a refresh found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// Every source was listed.
    Fresh,
    /// Some source could not be listed; its last good skills are kept.
    Stale,
}

/// What the HTTP prompt names to find a skill left out of it.
pub const HTTP_SEARCH_HINT: &str = "the `GET /v1/search?q=WORDS` route of this server";

/// What the MCP prompt names to find a skill left out of it.
pub const MCP_SEARCH_HINT: &str = "the `search_skills` tool";

/// What a tenant holds while it is loaded, dropped whole when it is
/// unloaded: its namespace, catalog, file digests and discovery artifacts.
/// What a tenant keeps unloaded is its name, configuration and counters.
struct Loaded {
    namespace: Namespace,
    catalog: SharedCatalog,
    digests: Arc<DigestCache>,
    artifacts: Arc<ArtifactCache>,
}

/// One tenant: its configuration always, its namespace and catalog while
/// loaded.
pub struct Tenant {
    name: String,
    /// What the namespace is opened from at each load.
    config: skillstore::Config,
    calls: Arc<BackendCalls>,
    pool: Arc<skillstore::source_pool::SourcePool>,
    prompt: PromptOptions,
    shared_keys: Vec<Arc<str>>,
    writable: bool,
    /// The change journals its mounts keep, followed before its first load.
    change_feeds: Vec<skillstore::namespace::ChangeFeed>,
    /// Its Git mounts' locations, which push events are matched against.
    git_locations: Vec<skillstore::Location>,
    /// The namespace and catalog while the tenant is loaded.
    loaded: Mutex<Option<Loaded>>,
    /// Files hashed by loads since unloaded.
    hashed_before: AtomicU64,
    /// What the server's views may keep.
    budget: Arc<RenderBudget>,
    /// When a request last used the tenant (see [`Tenant::touch`]).
    last_used: Mutex<std::time::Instant>,
    /// Stops the refresh loop of the current load.
    unloaded: Mutex<Option<tokio_util::sync::CancellationToken>>,
    /// Set once the server file no longer names the tenant: it is never
    /// loaded again, and a request that authenticated before is answered
    /// as its token now is (401).
    retired: std::sync::atomic::AtomicBool,
    /// Set once another tenant of the same name took this one's place (the
    /// server file changed its configuration, or a tenant made for a
    /// claim was dropped): it is never loaded again, and a request that
    /// still holds it is answered 503, to be asked again.
    replaced: std::sync::atomic::AtomicBool,
    /// When an explicit refresh last listed the shared sources.
    listed_shared: Mutex<Option<std::time::Instant>>,
    view: Mutex<Option<Arc<View>>>,
    signature: Mutex<u64>,
    generation: watch::Sender<u64>,
    refresh_turn: tokio::sync::Mutex<()>,
    refreshes_started: AtomicU64,
    /// Refreshes finished: a view rendered before the last is rendered again.
    refreshes_done: AtomicU64,
    last_refresh: Mutex<(u64, RefreshOutcome)>,
    discovery: Discovery,
    /// The search index, built at the first search, and the snapshot it
    /// was last brought level with.
    search: tokio::sync::Mutex<Option<(Arc<Catalog>, Arc<SearchIndex>)>>,
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenant")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Tenant {
    /// Checks that the tenant's namespace opens, its storage calls counted
    /// into `calls`, and keeps what requests need before a load (the
    /// prompt options, the shared sources' keys, whether a source is
    /// writable). The namespace itself is opened again at each load (its
    /// locations resolved again) and dropped at each unload; directory
    /// handles stay in the process's table of them, shared by every
    /// namespace that mounts the same path. Its read-only sources are shared through `pool` with every
    /// other tenant that mounts them alike ([`skillstore::source_pool`]).
    pub fn open(
        settings: &TenantSettings,
        calls: Arc<BackendCalls>,
        pool: &Arc<skillstore::source_pool::SourcePool>,
        budget: &Arc<RenderBudget>,
    ) -> Result<Self, ServerError> {
        let wrap = |source| ServerError::Tenant {
            tenant: settings.name.clone(),
            source,
        };
        let namespace = open_namespace(&settings.config, &calls, pool).map_err(wrap)?;
        // Each front end names its own reader and search (HTTP, MCP).
        let prompt = namespace.prompt_options().map_err(wrap)?;
        let shared_keys = namespace
            .load_options()
            .shared
            .as_ref()
            .map(|s| s.keys().iter().flatten().cloned().collect())
            .unwrap_or_default();
        let writable = namespace.sources().iter().any(|s| s.is_writable());
        let change_feeds = namespace.change_feeds().to_vec();
        let git_locations = namespace.git_mounts().iter().map(|(l, _)| l.clone()).collect();
        Ok(Tenant {
            name: settings.name.clone(),
            config: settings.config.clone(),
            calls,
            pool: Arc::clone(pool),
            prompt,
            shared_keys,
            writable,
            change_feeds,
            git_locations,
            loaded: Mutex::new(None),
            hashed_before: AtomicU64::new(0),
            budget: Arc::clone(budget),
            last_used: Mutex::new(std::time::Instant::now()),
            unloaded: Mutex::new(None),
            retired: std::sync::atomic::AtomicBool::new(false),
            replaced: std::sync::atomic::AtomicBool::new(false),
            listed_shared: Mutex::new(None),
            view: Mutex::new(None),
            signature: Mutex::new(0),
            generation: watch::Sender::new(0),
            refresh_turn: tokio::sync::Mutex::new(()),
            refreshes_started: AtomicU64::new(0),
            refreshes_done: AtomicU64::new(0),
            last_refresh: Mutex::new((0, RefreshOutcome::Fresh)),
            discovery: settings.discovery,
            search: tokio::sync::Mutex::new(None),
        })
    }

    /// Whether the tenant publishes its winners for discovery.
    pub fn discovery(&self) -> Discovery {
        self.discovery
    }

    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace, while loaded. A retired tenant answers as an
    /// unknown token does.
    pub fn namespace(&self) -> Result<Namespace, ApiError> {
        self.with_loaded(|loaded| loaded.namespace.clone())
    }

    /// The change journals the tenant's mounts keep (`changes: journal`),
    /// known whether or not it is loaded.
    pub fn change_feeds(&self) -> &[skillstore::namespace::ChangeFeed] {
        &self.change_feeds
    }

    /// The locations of the tenant's Git mounts, known whether or not it is
    /// loaded.
    pub fn git_locations(&self) -> &[skillstore::Location] {
        &self.git_locations
    }

    /// Files hashed for digests by this tenant since the start.
    pub fn digests_computed(&self) -> u64 {
        let now = lock(&self.loaded).as_ref().map_or(0, |l| l.digests.computed());
        self.hashed_before.load(Ordering::Relaxed) + now
    }

    fn with_loaded<T>(&self, f: impl FnOnce(&Loaded) -> T) -> Result<T, ApiError> {
        if self.retired.load(Ordering::SeqCst) {
            return Err(ApiError::unauthorized());
        }
        if self.replaced.load(Ordering::SeqCst) {
            return Err(ApiError::loading());
        }
        lock(&self.loaded).as_ref().map(f).ok_or_else(ApiError::loading)
    }

    /// The prompt options of the tenant's configuration.
    pub fn prompt_options(&self) -> &PromptOptions {
        &self.prompt
    }

    /// The keys of the sources this tenant shares with others
    /// ([`skillstore::source_pool`]).
    pub fn shared_keys(&self) -> &[Arc<str>] {
        &self.shared_keys
    }

    /// True while the tenant is loaded: from the end of its first load
    /// until [`Tenant::unload`].
    pub fn is_ready(&self) -> bool {
        lock(&self.loaded).is_some()
    }

    /// Marks the tenant used now.
    pub fn touch(&self) {
        *lock(&self.last_used) = std::time::Instant::now();
    }

    /// How long since a request last used the tenant.
    pub fn idle_for(&self) -> std::time::Duration {
        lock(&self.last_used).elapsed()
    }

    /// The token that stops the refresh loop of the current load, when no
    /// loop was started for it yet.
    pub(crate) fn begin_refresh_loop(&self) -> Option<tokio_util::sync::CancellationToken> {
        let mut slot = lock(&self.unloaded);
        if slot.is_some() || !self.is_ready() {
            return None;
        }
        let token = tokio_util::sync::CancellationToken::new();
        *slot = Some(token.clone());
        Some(token)
    }

    /// Drops the tenant's catalog and all that was rendered from it; the
    /// next request loads it again. Requests under way keep the snapshot
    /// they hold. Waits for a refresh under way, so none sets the catalog
    /// again after this.
    /// True when it was loaded.
    pub async fn unload(&self) -> bool {
        let _turn = self.refresh_turn.lock().await;
        if let Some(stop) = lock(&self.unloaded).take() {
            stop.cancel();
        }
        self.drop_loaded().await
    }

    /// Drops what the current load holds and all rendered from it (the
    /// caller holds the refresh turn). True when it was loaded.
    async fn drop_loaded(&self) -> bool {
        let was = lock(&self.loaded).take().inspect(|loaded| {
            self.hashed_before
                .fetch_add(loaded.digests.computed(), Ordering::Relaxed);
        });
        *lock(&self.view) = None;
        *self.search.lock().await = None;
        was.is_some()
    }

    /// Unloads the tenant for good: another of its name takes its place.
    pub async fn replace(&self) {
        self.replaced.store(true, Ordering::SeqCst);
        self.unload().await;
    }

    /// Unloads the tenant for good: the server file no longer names it.
    pub async fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        self.unload().await;
    }

    /// Loads the tenant unless it is loaded (or retired); concurrent
    /// callers share one load. True when this call loaded it.
    pub async fn load(&self) -> (RefreshOutcome, bool) {
        let _turn = self.refresh_turn.lock().await;
        if self.is_ready() || self.retired.load(Ordering::SeqCst) || self.replaced.load(Ordering::SeqCst) {
            return (lock(&self.last_refresh).1, false);
        }
        let number = self.refreshes_started.fetch_add(1, Ordering::SeqCst) + 1;
        let outcome = self.refresh_now().await;
        *lock(&self.last_refresh) = (number, outcome);
        (outcome, true)
    }

    /// Whether an explicit refresh may list the tenant's shared sources
    /// now: at most once a second per tenant, so one tenant's refreshes
    /// cannot list a base every tenant shares over and over.
    pub fn may_list_shared(&self) -> bool {
        let mut last = lock(&self.listed_shared);
        let now = std::time::Instant::now();
        match *last {
            Some(at) if now.duration_since(at) < std::time::Duration::from_secs(1) => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }

    /// True when the current catalog has some source it could list (or
    /// serves from an earlier load); false before the first load and when
    /// every source is unreachable or refused.
    pub fn reads_a_source(&self) -> bool {
        lock(&self.loaded).as_ref().is_some_and(|loaded| {
            let catalog = loaded.catalog.snapshot();
            let sources = catalog.sources().iter().count();
            sources == 0 || catalog.unlisted_sources().len() < sources
        })
    }

    /// A counter that moves each time the skills change (a refresh that
    /// found changes, or a write through this server).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The shared catalog, while loaded. A retired tenant answers as an
    /// unknown token does.
    pub fn shared(&self) -> Result<SharedCatalog, ApiError> {
        self.with_loaded(|loaded| loaded.catalog.clone())
    }

    /// The catalog as of now.
    pub fn snapshot(&self) -> Result<Arc<Catalog>, ApiError> {
        Ok(self.shared()?.snapshot())
    }

    /// What is rendered from the current snapshot.
    pub fn view(&self) -> Result<Arc<View>, ApiError> {
        let (catalog, digests, artifacts) =
            self.with_loaded(|l| (l.catalog.snapshot(), Arc::clone(&l.digests), Arc::clone(&l.artifacts)))?;
        let mut slot = lock(&self.view);
        // A skill withdrawn since the view was rendered is left out of a
        // view rendered again.
        let refreshes = self.refreshes_done.load(Ordering::SeqCst);
        if let Some(view) = slot.as_ref().filter(|v| {
            Arc::ptr_eq(&v.catalog, &catalog) && v.withdrawn == catalog.withdrawn_count() && v.refreshes == refreshes
        }) {
            return Ok(Arc::clone(view));
        }
        let view = Arc::new(View::new(
            catalog,
            refreshes,
            Arc::clone(&self.budget),
            digests,
            artifacts,
        ));
        *slot = Some(Arc::clone(&view));
        Ok(view)
    }

    /// The tenant's enabled skills that best match `query`, from its own
    /// index (in memory) over its own current snapshot: built at the first search,
    /// brought level (reading only changed SKILL.md files) when the
    /// snapshot has changed since.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, ApiError> {
        let catalog = self.snapshot()?;
        let index = {
            let mut slot = self.search.lock().await;
            match slot.as_ref() {
                Some((level, index)) if Arc::ptr_eq(level, &catalog) => Arc::clone(index),
                Some((_, index)) => {
                    let index = Arc::clone(index);
                    index.refresh(&catalog).await?;
                    *slot = Some((Arc::clone(&catalog), Arc::clone(&index)));
                    index
                }
                None => {
                    // In memory: a tenant's index is its own, never a file
                    // another tenant or process could share.
                    let index = Arc::new(SearchIndex::in_memory());
                    index.refresh(&catalog).await?;
                    *slot = Some((Arc::clone(&catalog), Arc::clone(&index)));
                    index
                }
            }
        };
        let options = SearchOptions {
            limit,
            include_disabled: false,
        };
        Ok(index.search(&catalog, query, options)?)
    }

    /// Loads the catalog the first time, refreshes it afterwards; moves the
    /// change counter when the skills changed. A source that cannot be
    /// listed keeps its last good skills. Shared as
    /// [`Tenant::refresh_shared`] is.
    pub async fn refresh(&self) -> RefreshOutcome {
        self.refresh_shared().await.0
    }

    /// A refresh that concurrent callers share: a caller waits for the
    /// refresh running when it arrived, then takes the outcome of a refresh
    /// that started after it arrived if one has finished meanwhile, and
    /// runs one otherwise. So any number of concurrent calls run at most
    /// two refreshes, and every caller sees one that began after its call.
    /// The second value is true when this call ran the refresh.
    pub async fn refresh_shared(&self) -> (RefreshOutcome, bool) {
        self.refresh_turned(false).await.expect("a refresh that may load")
    }

    /// As [`Tenant::refresh_shared`], for a loaded tenant only: one
    /// unloaded when its turn comes is left so (`None`).
    pub async fn refresh_loaded(&self) -> Option<RefreshOutcome> {
        self.refresh_turned(true).await.map(|(outcome, _)| outcome)
    }

    async fn refresh_turned(&self, only_loaded: bool) -> Option<(RefreshOutcome, bool)> {
        let arrived = self.refreshes_started.load(Ordering::SeqCst);
        let _turn = self.refresh_turn.lock().await;
        if only_loaded && !self.is_ready() {
            return None;
        }
        let (done, outcome) = *lock(&self.last_refresh);
        if done > arrived && self.is_ready() {
            return Some((outcome, false));
        }
        let number = self.refreshes_started.fetch_add(1, Ordering::SeqCst) + 1;
        let outcome = self.refresh_now().await;
        *lock(&self.last_refresh) = (number, outcome);
        Some((outcome, true))
    }

    async fn refresh_now(&self) -> RefreshOutcome {
        // A local directory renamed or relinked since the load (a base
        // switched in whole, as an atomic writer does): the tenant is
        // loaded again from what its paths name now, never half from each.
        let moved = lock(&self.loaded).as_ref().is_some_and(|l| l.namespace.moved());
        if moved {
            tracing::info!(tenant = %self.name, "a directory the tenant mounts was replaced; loading it again");
            self.drop_loaded().await;
        }
        let current = lock(&self.loaded).as_ref().map(|l| l.catalog.clone());
        let (catalog, same) = match current {
            Some(shared) => {
                let before = shared.snapshot();
                shared.refresh().await;
                let after = shared.snapshot();
                let same = Arc::ptr_eq(&before, &after);
                (after, same)
            }
            None => {
                let namespace = match open_namespace(&self.config, &self.calls, &self.pool) {
                    Ok(namespace) => namespace,
                    // Storage that opened when the server file was read and
                    // no longer does (a directory removed): the tenant stays
                    // unloaded, its requests answered `loading`, and the
                    // next request tries again.
                    Err(error) => {
                        tracing::error!(tenant = %self.name, %error, "the tenant's storage does not open");
                        return RefreshOutcome::Stale;
                    }
                };
                let loaded = namespace.load().await;
                let catalog = SharedCatalog::new(loaded).following(namespace.clone());
                let snapshot = catalog.snapshot();
                let digests = Arc::new(DigestCache::new(Arc::clone(&namespace.load_options().digests)));
                let artifacts = Arc::new(ArtifactCache::new(shared_by_source(&namespace)));
                *lock(&self.loaded) = Some(Loaded {
                    namespace,
                    catalog,
                    digests,
                    artifacts,
                });
                (snapshot, false)
            }
        };
        // The same snapshot: nothing to log again or compare.
        if !same {
            for d in catalog.diagnostics() {
                tracing::debug!(tenant = %self.name, kind = %d.kind, path = ?d.path, message = %d.message, "diagnostic");
            }
            self.note_change(&catalog);
        }
        self.refreshes_done.fetch_add(1, Ordering::SeqCst);
        if catalog.is_stale() {
            RefreshOutcome::Stale
        } else {
            RefreshOutcome::Fresh
        }
    }

    /// Moves the change counter if `catalog` differs from the last one seen.
    fn note_change(&self, catalog: &Catalog) {
        let signature = signature(catalog);
        let mut last = lock(&self.signature);
        if *last != signature {
            *last = signature;
            self.generation.send_modify(|g| *g += 1);
        }
    }

    /// Called after a write through this server landed.
    pub fn written(&self) {
        if let Ok(catalog) = self.snapshot() {
            self.note_change(&catalog);
        }
    }

    /// An editor of the tenant's highest-priority writable source, keeping
    /// the shared catalog up to date; `read_only` when no source is
    /// writable.
    pub fn editor(&self) -> Result<SkillEditor, ApiError> {
        let shared = self.shared()?;
        self.check_writable()?;
        let editor = self.namespace()?.editor(None)?;
        Ok(editor.with_catalog(shared).with_author(format!("server:{}", self.name)))
    }

    /// The history of `name` in `editor`'s source as a reader sees it
    /// ([`skillstore::HistoryEntry`]). At most [`HISTORY_READS`] histories
    /// are read at once in the whole server: each may be 64 MiB, and the
    /// answer is small whatever its size.
    pub async fn history_entries(
        &self,
        editor: &SkillEditor,
        name: &str,
    ) -> Result<Vec<skillstore::HistoryEntry>, ApiError> {
        let _permit = HISTORY_PERMITS.acquire().await.map_err(|_| {
            ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "shutting down",
            )
        })?;
        Ok(editor.history_entries(name).await?)
    }

    /// Fails with 404 `not_found` unless the history of `name` has entry `id`.
    pub async fn check_history_entry(&self, editor: &SkillEditor, name: &str, id: u64) -> Result<(), ApiError> {
        if self.history_entries(editor, name).await?.iter().any(|e| e.id == id) {
            return Ok(());
        }
        Err(ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "not_found",
            format!("`{name}` has no history entry {id}"),
        ))
    }

    /// Fails with 403 `read_only` when no source of the tenant is writable.
    pub fn check_writable(&self) -> Result<(), ApiError> {
        if self.writable {
            Ok(())
        } else {
            Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "read_only",
                "no source of this tenant is writable (a source is made writable with `writable: true` in the tenant's configuration)",
            ))
        }
    }

    /// The path of `relative` in the skill `name` of the editor's source,
    /// checked as a virtual path.
    pub fn file_in_source(editor: &SkillEditor, name: &str, relative: &str) -> Result<VPath, ApiError> {
        let refuse = |e: skillstore::backends::Error| {
            ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "invalid_path",
                crate::error::backend_message(&e),
            )
        };
        let dir = editor.source().path().join(name).map_err(refuse)?;
        if relative.starts_with('/') {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "invalid_path",
                "expected a path relative to the skill's directory",
            ));
        }
        dir.join(relative).map_err(refuse)
    }
}

/// The namespace `config` assembles, its storage calls counted into
/// `calls`, its read-only sources shared through `pool`.
fn open_namespace(
    config: &skillstore::Config,
    calls: &Arc<BackendCalls>,
    pool: &Arc<skillstore::source_pool::SourcePool>,
) -> Result<Namespace, skillstore::Error> {
    let calls = Arc::clone(calls);
    Ok(config
        .open()?
        .with_backend_layer(move |backend| Counting::wrap(backend, Arc::clone(&calls)))
        .with_source_pool(Arc::clone(pool)))
}

/// The key of each of `namespace`'s shared sources, by source name.
fn shared_by_source(namespace: &Namespace) -> HashMap<String, Arc<str>> {
    let Some(shared) = namespace.load_options().shared.as_ref() else {
        return HashMap::new();
    };
    namespace
        .sources()
        .iter()
        .zip(shared.keys())
        .filter_map(|(source, key)| Some((source.name().to_owned(), Arc::clone(key.as_ref()?))))
        .collect()
}

/// What identifies a catalog's content: each skill's name, source, path,
/// version and state.
fn signature(catalog: &Catalog) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for skill in catalog.skills() {
        skill.name().hash(&mut hasher);
        skill.source.hash(&mut hasher);
        skill.path.as_str().hash(&mut hasher);
        skill.version.as_str().hash(&mut hasher);
        skill.enabled.hash(&mut hasher);
    }
    catalog.diagnostics().len().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};

    use super::*;
    use crate::settings::Discovery;

    async fn tenant() -> Tenant {
        let files = MemoryBackend::new();
        files
            .put(
                &VPath::new("/base/pdf/SKILL.md").unwrap(),
                Bytes::from_static(b"---\nname: pdf\ndescription: PDFs.\n---\nbody\n"),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        let mut config = skillstore::Config::default();
        config.set_memory_mount("/", files).unwrap();
        config.set_sources(["/base"]).unwrap();
        config.disable_cache();
        let settings = TenantSettings {
            name: "acme".into(),
            config,
            tokens: Vec::new(),
            discovery: Discovery::Private,
        };
        let pool = skillstore::source_pool::SourcePool::new();
        Tenant::open(&settings, Arc::default(), &pool, &RenderBudget::new(1 << 20)).unwrap()
    }

    #[tokio::test]
    async fn a_retired_tenant_answers_401_and_is_never_loaded_again() {
        let tenant = tenant().await;
        let (_, loaded) = tenant.load().await;
        assert!(loaded && tenant.is_ready());
        assert!(tenant.snapshot().unwrap().get("pdf").is_some());
        tenant.retire().await;
        let err = tenant.snapshot().unwrap_err();
        assert_eq!(err.status, StatusCode::UNAUTHORIZED, "{err:?}");
        // A request that authenticated before the removal and asks for a
        // load gets none.
        let (_, loaded) = tenant.load().await;
        assert!(!loaded && !tenant.is_ready());
        assert_eq!(tenant.shared().unwrap_err().status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn a_replaced_tenant_answers_503_and_is_never_loaded_again() {
        let tenant = tenant().await;
        assert!(tenant.load().await.1);
        tenant.replace().await;
        assert!(!tenant.is_ready());
        // A request that still holds it asks again, and loads nothing.
        let (_, loaded) = tenant.load().await;
        assert!(!loaded && !tenant.is_ready());
        assert_eq!(tenant.snapshot().unwrap_err().status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(tenant.namespace().is_err());
    }
}

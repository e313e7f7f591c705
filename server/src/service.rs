//! The state every front end shares: the tenants, who may call as which,
//! the refresh loop, the limits and the counters.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ServerError};
use crate::feeds::Feeds;
use crate::http::origin::BrowserPolicy;
use crate::jwt::JwtVerifier;
use crate::metrics::Metrics;
use crate::settings::{Limits, Scope, Settings, TokenHash};
use crate::tenant::{RenderBudget, Tenant};
use skillstore::source_pool::SourcePool;

/// Who is calling: a tenant and what the caller may do there.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant the token names.
    pub tenant: Arc<Tenant>,
    /// What the token allows.
    pub scope: Scope,
    /// The token's hash; `None` for a caller without a token (an open
    /// server, or MCP over stdio).
    pub token: Option<TokenHash>,
}

impl Caller {
    /// Fails with 403 unless the caller may write.
    pub fn require_write(&self) -> Result<(), ApiError> {
        match self.scope {
            Scope::Write => Ok(()),
            Scope::Read => Err(ApiError::forbidden("this token may read only")),
        }
    }
}

/// The most tenants made for tokens' claims kept at once.
pub const MAX_CLAIMED: usize = 100_000;

/// The tenants of one reading of the server file, and their tokens.
#[derive(Debug)]
struct Registry {
    tenants: Vec<Arc<Tenant>>,
    /// What each tenant was opened from, to keep an unchanged tenant
    /// loaded when the file is read again.
    opened_from: HashMap<String, (String, usize)>,
    tokens: HashMap<TokenHash, (usize, Scope)>,
    open: bool,
    metrics_tokens: Vec<TokenHash>,
    /// The tenants loaded at start: the first tenant, and the first to
    /// mount each shared source, so the shared sources are loaded before
    /// the server says it is ready.
    warm: Vec<usize>,
    /// What a tenant named by a JWT's claim and not listed is made from.
    claims_template: Option<crate::settings::Template>,
}

impl Registry {
    /// Opens the tenants of `settings`, keeping those of `before` whose
    /// name and configuration are unchanged.
    fn open(
        settings: &Settings,
        before: Option<&Registry>,
        calls: &Arc<crate::counting::BackendCalls>,
        pool: &Arc<SourcePool>,
        budget: &Arc<RenderBudget>,
    ) -> Result<Registry, ServerError> {
        let mut tenants = Vec::with_capacity(settings.tenants.len());
        let mut opened_from = HashMap::with_capacity(settings.tenants.len());
        let mut tokens = HashMap::new();
        let mut unopened = Vec::new();
        for spec in &settings.tenants {
            // A digest of the configuration, not its text: one is kept per
            // tenant, and a platform lists thousands.
            let from = crate::digest::sha256_hex(format!("{:?}|{:?}", spec.config, spec.discovery).as_bytes());
            let kept = before.and_then(|b| {
                let (was, at) = b.opened_from.get(&spec.name)?;
                (*was == from).then(|| Arc::clone(&b.tenants[*at]))
            });
            let tenant = match kept {
                Some(tenant) => tenant,
                None => match Tenant::open(spec, Arc::clone(calls), pool, budget) {
                    Ok(tenant) => Arc::new(tenant),
                    // One tenant whose storage cannot be opened (a directory
                    // not made yet) is left out, not every tenant with it.
                    Err(e) if settings.file.is_some() => {
                        tracing::error!(tenant = %spec.name, error = %e, "a tenant could not be opened; it is not served until the server file is read again");
                        unopened.push(e);
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            let index = tenants.len();
            tenants.push(tenant);
            opened_from.insert(spec.name.clone(), (from, index));
            for (hash, scope) in &spec.tokens {
                tokens.insert(*hash, (index, *scope));
            }
        }
        if tenants.is_empty()
            && let Some(first) = unopened.into_iter().next()
        {
            return Err(first);
        }
        if tenants.is_empty() && settings.claims_template.is_none() {
            return Err(ServerError::Config("no tenants".into()));
        }
        let open = tenants.len() == 1 && settings.tenants[0].tokens.is_empty() && settings.jwt.is_none();
        // A source only one tenant mounts is that tenant's to load.
        let keys: Vec<&[Arc<str>]> = tenants.iter().map(|t| t.shared_keys()).collect();
        let mut mounted: HashMap<&Arc<str>, usize> = HashMap::new();
        for key in keys.iter().copied().flatten() {
            *mounted.entry(key).or_default() += 1;
        }
        let mut covered: std::collections::HashSet<&Arc<str>> = std::collections::HashSet::new();
        let mut warm = Vec::new();
        for (index, keys) in keys.iter().enumerate() {
            let shared: Vec<&Arc<str>> = keys.iter().filter(|k| mounted[k] > 1).collect();
            if index == 0 || shared.iter().any(|k| !covered.contains(k)) {
                covered.extend(shared);
                warm.push(index);
            }
        }
        Ok(Registry {
            tenants,
            opened_from,
            tokens,
            open,
            metrics_tokens: settings.metrics_tokens.clone(),
            warm,
            claims_template: settings.claims_template.clone(),
        })
    }
}

/// Counters of tenants loaded and unloaded.
#[derive(Debug, Default)]
struct Tenancy {
    loads: AtomicU64,
    load_micros: AtomicU64,
    unloads: AtomicU64,
    reloads: AtomicU64,
    reloads_refused: AtomicU64,
}

/// Everything a request is answered from. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Service {
    registry: RwLock<Arc<Registry>>,
    /// Bearer JWTs, when the server file takes them (read at start only).
    jwt: Option<JwtVerifier>,
    /// Tenants named by a JWT's claim, not listed, made from the template
    /// at their first request and dropped when unloaded.
    claimed: std::sync::Mutex<HashMap<String, Arc<Tenant>>>,
    refresh_interval: Duration,
    /// How often a tenant whose change journals are followed is listed.
    journal_poll_interval: Duration,
    /// The change journals of the loaded tenants' mounts, followed.
    feeds: Arc<Feeds>,
    /// The secrets Git push webhooks may be signed with (read at start).
    hook_secrets: Vec<crate::settings::HookSecret>,
    /// The sources the tenants share, loaded and refreshed once.
    pool: Arc<SourcePool>,
    /// What the tenants' views keep of what they rendered.
    budget: Arc<RenderBudget>,
    tenancy: Tenancy,
    /// Held while the server file is read again, so readings apply in turn.
    reloading: tokio::sync::Mutex<()>,
    /// What a request's `Host`, `Origin` and content type must satisfy.
    pub browser: BrowserPolicy,
    /// Request limits.
    pub limits: Limits,
    /// Turns of anonymous requests at loading a tenant
    /// ([`Limits::anonymous_loads`]).
    pub anonymous_loads: tokio::sync::Semaphore,
    /// The counters `/metrics` shows.
    pub metrics: Metrics,
    /// Cancelled when the server begins to shut down.
    pub shutdown: CancellationToken,
}

impl Service {
    /// Opens every tenant's namespace (nothing is loaded yet: see
    /// [`Service::start_refresh`]).
    pub fn open(settings: &Settings) -> Result<Arc<Self>, ServerError> {
        let metrics = Metrics::default();
        let pool = SourcePool::new();
        let budget = RenderBudget::new(settings.limits.max_rendered_bytes);
        let registry = Registry::open(settings, None, &metrics.backend_calls, &pool, &budget)?;
        let jwt = match &settings.jwt {
            Some(jwt) => Some(JwtVerifier::new(jwt).map_err(|e| ServerError::Config(format!("auth.jwt: {e}")))?),
            None => None,
        };
        Ok(Arc::new(Service {
            browser: BrowserPolicy::new(registry.open, &settings.allowed_origins),
            registry: RwLock::new(Arc::new(registry)),
            jwt,
            claimed: std::sync::Mutex::new(HashMap::new()),
            refresh_interval: settings.refresh_interval,
            journal_poll_interval: settings.journal_poll_interval,
            feeds: Feeds::new(settings.changes_interval),
            hook_secrets: settings.hook_secrets.clone(),
            pool,
            budget,
            tenancy: Tenancy::default(),
            reloading: tokio::sync::Mutex::new(()),
            limits: settings.limits,
            anonymous_loads: tokio::sync::Semaphore::new(settings.limits.anonymous_loads),
            metrics,
            shutdown: CancellationToken::new(),
        }))
    }

    fn registry(&self) -> Arc<Registry> {
        Arc::clone(&self.registry.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The tenants, in the server file's order.
    pub fn tenants(&self) -> Vec<Arc<Tenant>> {
        self.registry().tenants.clone()
    }

    /// The tenant named `name`, loaded or not.
    pub fn tenant_named(&self, name: &str) -> Option<Arc<Tenant>> {
        let registry = self.registry();
        let (_, at) = registry.opened_from.get(name)?;
        registry.tenants.get(*at).cloned()
    }

    /// True when the one tenant is served without a token.
    pub fn is_open(&self) -> bool {
        self.registry().open
    }

    /// Refuses an open server on an address other than loopback.
    pub fn check_listen(&self, addr: &SocketAddr) -> Result<(), ServerError> {
        if self.is_open() && !addr.ip().is_loopback() {
            return Err(ServerError::Listen(format!(
                "without tokens the server may listen on a loopback address only, not {addr}; give tenants tokens in a server file, or one token with `serve --token-env VAR`"
            )));
        }
        Ok(())
    }

    /// Loads the tenants that bring the shared sources in (see
    /// [`Service::is_ready`]); every other tenant is loaded at its first
    /// request ([`Service::loaded`]). Then refreshes the shared sources
    /// once per interval, whatever the number of tenants over them, and
    /// each loaded tenant at its own interval (listing only its own
    /// sources) and as soon as a shared source changed; unloads tenants
    /// past the limits. Returns at once.
    pub fn start_refresh(self: &Arc<Self>) {
        let service = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = service.shutdown.cancelled() => break,
                    () = tokio::time::sleep(service.refresh_interval) => {}
                }
                service.pool.refresh().await;
            }
        });
        self.load_at_start(self.registry());
        let idle = self.limits.tenant_idle_unload;
        if idle.is_some() || self.limits.max_loaded_tenants.is_some() {
            // Past the bound, a tenant a request used within the timeout is
            // spared at its load; this finds it once it is not.
            let every = idle
                .map_or(self.limits.request_timeout, |idle| {
                    (idle / 4).min(self.limits.request_timeout)
                })
                .clamp(Duration::from_millis(50), Duration::from_secs(30));
            let service = Arc::clone(self);
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = service.shutdown.cancelled() => break,
                        () = tokio::time::sleep(every) => {}
                    }
                    if let Some(idle) = idle {
                        service.unload_idle(idle).await;
                    }
                    service.unload_over_bound().await;
                }
            });
        }
    }

    /// Loads the tenants a registry loads at start; when none of them can
    /// read a source (the first tenant's storage is out of reach), loads
    /// the others one at a time until one can, so one broken tenant does
    /// not keep the server unready while others would serve.
    fn load_at_start(self: &Arc<Self>, registry: Arc<Registry>) {
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let warm: Vec<Arc<Tenant>> = registry
                .warm
                .iter()
                .map(|at| Arc::clone(&registry.tenants[*at]))
                .collect();
            futures::future::join_all(warm.iter().map(|t| service.loaded(t))).await;
            if warm.iter().any(|t| t.reads_a_source()) {
                return;
            }
            for (at, tenant) in registry.tenants.iter().enumerate() {
                if registry.warm.contains(&at) {
                    continue;
                }
                tokio::select! {
                    () = service.shutdown.cancelled() => return,
                    () = service.loaded(tenant) => {}
                }
                if tenant.reads_a_source() {
                    return;
                }
            }
        });
    }

    /// The tenant, loaded: a request waits here for its tenant's first
    /// load (no other request does), and marks the tenant used.
    pub async fn loaded(self: &Arc<Self>, tenant: &Arc<Tenant>) {
        tenant.touch();
        self.load_unless_ready(tenant).await;
    }

    /// The tenant, loaded, for an anonymous request: a load marks it used,
    /// but a request to a tenant already loaded does not, so anonymous
    /// traffic alone never keeps a tenant from being unloaded.
    pub async fn loaded_anonymously(self: &Arc<Self>, tenant: &Arc<Tenant>) {
        if !tenant.is_ready() {
            tenant.touch();
        }
        self.load_unless_ready(tenant).await;
    }

    async fn load_unless_ready(self: &Arc<Self>, tenant: &Arc<Tenant>) {
        if tenant.is_ready() {
            return;
        }
        self.feeds.subscribe(tenant, &self.shutdown).await;
        let started = std::time::Instant::now();
        let (outcome, ran) = tenant.load().await;
        if ran {
            self.metrics.refresh(outcome == crate::tenant::RefreshOutcome::Stale);
            self.tenancy.loads.fetch_add(1, Ordering::Relaxed);
            self.tenancy
                .load_micros
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        self.follow(tenant);
        self.unload_over_bound().await;
    }

    /// Starts the refresh loop of a tenant just loaded.
    fn follow(self: &Arc<Self>, tenant: &Arc<Tenant>) {
        let Some(stop) = tenant.begin_refresh_loop() else {
            return;
        };
        let service = Arc::clone(self);
        let tenant = Arc::clone(tenant);
        let mut shared_changes = self.pool.changes();
        tokio::spawn(async move {
            // Woken every `refresh_interval`, it lists when the tenant's
            // poll interval has passed, judged at each wake: a journal that
            // fails meanwhile brings polling back within one interval. The
            // first wake comes at the tenant's own phase of the interval,
            // so tenants loaded together do not list together ever after.
            let interval = service.refresh_interval;
            let phase = refresh_phase(tenant.name(), interval);
            let now = tokio::time::Instant::now();
            let mut last = now.checked_sub(interval).unwrap_or(now);
            let mut wake = now + phase;
            loop {
                let shared = tokio::select! {
                    () = service.shutdown.cancelled() => break,
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep_until(wake) => {
                        wake += interval;
                        false
                    }
                    changed = shared_changes.changed() => if changed.is_err() { break } else { true },
                };
                if !shared && last.elapsed() < service.poll_interval(&tenant) {
                    continue;
                }
                last = tokio::time::Instant::now();
                let outcome = tenant.refresh().await;
                service.metrics.refresh(outcome == crate::tenant::RefreshOutcome::Stale);
            }
        });
    }

    /// How long `tenant` waits between two listings of its sources: the
    /// longer interval while every change journal of its mounts is
    /// followed, `refresh_interval` otherwise (no journal, or one fallen
    /// back).
    fn poll_interval(&self, tenant: &Tenant) -> Duration {
        match self.feeds.follows(tenant) {
            true => self.journal_poll_interval.max(self.refresh_interval),
            false => self.refresh_interval,
        }
    }

    /// The change journals followed.
    pub fn feeds(&self) -> &Feeds {
        &self.feeds
    }

    /// The secrets Git push webhooks may be signed with; none when the
    /// server takes no webhooks.
    pub fn hook_secrets(&self) -> &[crate::settings::HookSecret] {
        &self.hook_secrets
    }

    /// Unloads the least recently used tenants past `max_loaded_tenants`,
    /// sparing the tenants loaded at start and any a request used within
    /// the request timeout.
    async fn unload_over_bound(&self) {
        let Some(max) = self.limits.max_loaded_tenants else {
            return;
        };
        let (registry, claimed) = self.all_tenants();
        let warm: Vec<&Arc<Tenant>> = registry.warm.iter().map(|at| &registry.tenants[*at]).collect();
        let loaded: Vec<&Arc<Tenant>> = registry
            .tenants
            .iter()
            .chain(&claimed)
            .filter(|t| t.is_ready())
            .collect();
        if loaded.len() <= max {
            return;
        }
        let mut spare: Vec<(Duration, &Arc<Tenant>)> = loaded
            .iter()
            .filter(|t| !warm.iter().any(|w| Arc::ptr_eq(w, t)))
            .map(|t| (t.idle_for(), *t))
            .filter(|(idle, _)| *idle > self.limits.request_timeout)
            .collect();
        spare.sort_by_key(|(idle, _)| std::cmp::Reverse(*idle));
        for (_, tenant) in spare.into_iter().take(loaded.len() - max) {
            self.unload(tenant).await;
        }
    }

    /// Unloads every tenant (but those loaded at start) without a request
    /// for `idle`, or for the request timeout when that is longer (a
    /// request may be under way that long).
    async fn unload_idle(&self, idle: Duration) {
        // A request may be under way for up to the request timeout.
        let idle = idle.max(self.limits.request_timeout);
        let (registry, claimed) = self.all_tenants();
        for (at, tenant) in registry.tenants.iter().enumerate() {
            if tenant.is_ready() && !registry.warm.contains(&at) && tenant.idle_for() > idle {
                self.unload(tenant).await;
            }
        }
        for tenant in &claimed {
            if tenant.is_ready() && tenant.idle_for() > idle {
                self.unload(tenant).await;
            }
        }
    }

    /// Unloads one tenant; one made for a token's claim is dropped too,
    /// for good (a request still holding it is answered 503 and asks
    /// again, for a tenant made anew).
    async fn unload(&self, tenant: &Arc<Tenant>) {
        let claimed = {
            let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
            let before = claimed.len();
            claimed.retain(|_, t| !Arc::ptr_eq(t, tenant));
            claimed.len() < before
        };
        let was = if claimed {
            let was = tenant.is_ready();
            tenant.replace().await;
            was
        } else {
            tenant.unload().await
        };
        if was {
            self.tenancy.unloads.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Applies a new reading of the server file: tenants added, removed or
    /// changed, tokens added, removed or rotated, without a restart. A
    /// tenant whose configuration is unchanged stays loaded and keeps its
    /// MCP sessions; a removed or changed one is unloaded. Limits, the
    /// listen address, the refresh interval and allowed origins are read
    /// at start only. A reading that does not open is refused whole: the
    /// tenants as they were stay in force.
    pub async fn reload(self: &Arc<Self>, settings: &Settings) -> Result<(), ServerError> {
        let _turn = self.reloading.lock().await;
        let before = self.registry();
        let next = Registry::open(
            settings,
            Some(&before),
            &self.metrics.backend_calls,
            &self.pool,
            &self.budget,
        );
        let next = match next {
            Ok(next) if next.open != before.open => Err(ServerError::Config(
                "a server file read again may not change whether the server needs tokens; restart it".into(),
            )),
            other => other,
        };
        let next = match next {
            Ok(next) => Arc::new(next),
            Err(e) => {
                self.tenancy.reloads_refused.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        *self.registry.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&next);
        self.tenancy.reloads.fetch_add(1, Ordering::Relaxed);
        let names = |r: &Registry| -> std::collections::BTreeSet<String> { r.opened_from.keys().cloned().collect() };
        let (was, now) = (names(&before), names(&next));
        let added: Vec<&String> = now.difference(&was).collect();
        let removed: Vec<&String> = was.difference(&now).collect();
        tracing::info!(tenants = now.len(), ?added, ?removed, "the tenant list was applied");
        for old in &before.tenants {
            if removed.iter().any(|name| name.as_str() == old.name()) {
                old.retire().await;
            } else if !next.tenants.iter().any(|t| Arc::ptr_eq(t, old)) {
                old.replace().await;
            }
        }
        // Made from a template that may have changed: made again at their
        // next request.
        let claimed: Vec<Arc<Tenant>> = std::mem::take(&mut *self.claimed.lock().unwrap_or_else(|e| e.into_inner()))
            .into_values()
            .collect();
        for tenant in claimed {
            tenant.replace().await;
        }
        self.load_at_start(next);
        Ok(())
    }

    /// Reads `path` again when it changes (checked every `every`) and on
    /// SIGHUP, and applies it ([`Service::reload`]); a reading that fails
    /// is logged and counted, and the tenants as they were stay in force.
    pub fn follow_file(self: &Arc<Self>, path: std::path::PathBuf, every: Duration) {
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let stamp = |p: &std::path::Path| {
                std::fs::metadata(p).ok().map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    (m.mtime(), m.mtime_nsec(), m.ino(), m.len())
                })
            };
            let mut seen = stamp(&path);
            #[cfg(unix)]
            let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            loop {
                let signalled = async {
                    match hangup.as_mut() {
                        Some(h) => {
                            h.recv().await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                let asked = tokio::select! {
                    () = service.shutdown.cancelled() => break,
                    () = tokio::time::sleep(every) => false,
                    () = signalled => true,
                };
                let now = stamp(&path);
                if !asked && now == seen {
                    continue;
                }
                if !asked {
                    // Changed: applied once it stays the same for one more
                    // look, so a file being written is not read half-way.
                    tokio::select! {
                        () = service.shutdown.cancelled() => break,
                        () = tokio::time::sleep(every) => {}
                    }
                    if stamp(&path) != now {
                        continue;
                    }
                }
                seen = now;
                let result = match Settings::load(&path) {
                    Ok(settings) => service.reload(&settings).await,
                    Err(e) => {
                        service.tenancy.reloads_refused.fetch_add(1, Ordering::Relaxed);
                        Err(e)
                    }
                };
                match result {
                    Ok(()) => tracing::info!(file = %path.display(), "the server file was read again"),
                    Err(e) => {
                        tracing::error!(error = %e, "the server file read again was refused; the tenants as they were stay in force")
                    }
                }
            }
        });
    }

    /// Loads every tenant's catalog and waits until all are loaded (for a
    /// front end that serves one client, such as MCP over stdio).
    pub async fn load_all(self: &Arc<Self>) {
        let tenants = self.tenants();
        futures::future::join_all(tenants.iter().map(|t| self.loaded(t))).await;
    }

    /// True once the tenants loaded at start (which bring every shared
    /// source in) are loaded and some loaded tenant can read a source: a
    /// server whose storage is wholly out of reach is not ready, while
    /// one tenant's broken source does not take the others' server out of
    /// a load balancer.
    pub fn is_ready(&self) -> bool {
        let registry = self.registry();
        // A server of tenants named by tokens alone lists none to load.
        registry.warm.iter().all(|at| registry.tenants[*at].is_ready())
            && (registry.tenants.is_empty() || registry.tenants.iter().any(|t| t.is_ready() && t.reads_a_source()))
    }

    /// The caller a request's `Authorization` header names: a token of the
    /// file, or a JWT when the file takes them. A missing, unknown or
    /// refused token is 401 and says nothing of what exists or why; an
    /// open server's one tenant needs no token.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        match bearer(headers)? {
            Some(token) => match self.caller_for_token(token) {
                Some(caller) => Ok(caller),
                None => self.caller_for_jwt(token).await.ok_or_else(ApiError::unauthorized),
            },
            None => {
                let registry = self.registry();
                if registry.open {
                    Ok(Caller {
                        tenant: Arc::clone(&registry.tenants[0]),
                        scope: Scope::Write,
                        token: None,
                    })
                } else {
                    Err(ApiError::unauthorized())
                }
            }
        }
    }

    /// Allows `/metrics` to a metrics token, or to anyone on an open
    /// server (whose one caller may do everything); 401 otherwise, and a
    /// tenant's token is not a metrics token.
    pub fn authenticate_metrics(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let registry = self.registry();
        match bearer(headers)? {
            Some(token) if registry.metrics_tokens.contains(&TokenHash::of(token)) => Ok(()),
            None if registry.open => Ok(()),
            // Says no more than any 401: not whether the token is a tenant's.
            _ => Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a metrics token is required (one of the server file's metrics_tokens)",
            )),
        }
    }

    /// The tenant a token of the server file (by its hash) is given to
    /// now; `None` for a token the file does not list.
    pub fn file_token_tenant(&self, token: &TokenHash) -> Option<String> {
        let registry = self.registry();
        let (index, _) = registry.tokens.get(token)?;
        Some(registry.tenants[*index].name().to_owned())
    }

    /// The caller `token` names, if any.
    pub fn caller_for_token(&self, token: &str) -> Option<Caller> {
        let hash = TokenHash::of(token);
        let registry = self.registry();
        let (index, scope) = registry.tokens.get(&hash)?;
        Some(Caller {
            tenant: Arc::clone(&registry.tenants[*index]),
            scope: *scope,
            token: Some(hash),
        })
    }

    /// The caller a bearer JWT names, if the file takes JWTs, the token is
    /// valid and its tenant is served; why not goes to the debug log.
    async fn caller_for_jwt(&self, token: &str) -> Option<Caller> {
        let jwt = self.jwt.as_ref()?;
        let identity = match jwt.verify(token).await {
            Ok(identity) => identity,
            Err(why) => {
                tracing::debug!(target: "skillstore::auth", "bearer JWT refused: {why}");
                return None;
            }
        };
        let tenant = self.tenant_named(&identity.tenant).or_else(|| {
            jwt.tenants_from_claims()
                .then(|| self.claimed_tenant(&identity.tenant))
                .flatten()
        });
        let Some(tenant) = tenant else {
            tracing::debug!(target: "skillstore::auth", tenant = %identity.tenant, "bearer JWT refused: its tenant is not served");
            return None;
        };
        Some(Caller {
            tenant,
            scope: identity.scope,
            token: Some(TokenHash::of(token)),
        })
    }

    /// The tenant `name` (a name that passed the tenant-name rule) that a
    /// valid JWT names and the file does not list, made from the template
    /// at its first request. At most [`MAX_CLAIMED`] such tenants are kept
    /// at once (those unloaded are dropped first); `None` past that, or
    /// without a template.
    fn claimed_tenant(&self, name: &str) -> Option<Arc<Tenant>> {
        let registry = self.registry();
        let template = registry.claims_template.as_ref()?;
        let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tenant) = claimed.get(name) {
            return Some(Arc::clone(tenant));
        }
        if claimed.len() >= MAX_CLAIMED {
            claimed.retain(|_, t| t.is_ready());
            if claimed.len() >= MAX_CLAIMED {
                tracing::warn!("{MAX_CLAIMED} tenants named by tokens are loaded; refusing one more");
                return None;
            }
        }
        let tenant = match Tenant::open(
            &template.tenant(name),
            Arc::clone(&self.metrics.backend_calls),
            &self.pool,
            &self.budget,
        ) {
            Ok(tenant) => Arc::new(tenant),
            Err(e) => {
                tracing::warn!(tenant = %name, error = %e, "a tenant named by a token could not be opened from the template");
                return None;
            }
        };
        claimed.insert(name.to_owned(), Arc::clone(&tenant));
        Some(tenant)
    }

    /// Every tenant the server holds: those the file lists, then those
    /// made for a token's claim.
    fn all_tenants(&self) -> (Arc<Registry>, Vec<Arc<Tenant>>) {
        let registry = self.registry();
        let claimed: Vec<Arc<Tenant>> = self
            .claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        (registry, claimed)
    }

    /// The open server's one tenant, or the only tenant, for a front end
    /// with no tokens (MCP over stdio): it may write.
    pub fn local_caller(&self) -> Caller {
        Caller {
            tenant: Arc::clone(&self.registry().tenants[0]),
            scope: Scope::Write,
            token: None,
        }
    }

    /// The tenant whose discovery paths are `/t/{name}/.well-known/...`
    /// (`name` given) or the root's (`None`): a tenant that opted in
    /// (`discovery: public`), or for the root, an open server's one
    /// tenant. `None` otherwise, whether or not the tenant exists.
    pub fn discovery_tenant(&self, name: Option<&str>) -> Option<Arc<Tenant>> {
        let registry = self.registry();
        match name {
            None if registry.open => Some(Arc::clone(&registry.tenants[0])),
            None => None,
            Some(name) => self
                .tenant_named(name)
                .filter(|t| t.discovery() == crate::settings::Discovery::Public),
        }
    }

    /// The sources the tenants share.
    pub fn source_pool(&self) -> &Arc<SourcePool> {
        &self.pool
    }

    /// The Prometheus text.
    pub fn render_metrics(&self) -> String {
        let registry = self.registry();
        let loaded: Vec<Arc<skillstore::Catalog>> = registry.tenants.iter().filter_map(|t| t.snapshot().ok()).collect();
        let skills = loaded.iter().map(|c| c.skills().len()).sum();
        let digests = registry.tenants.iter().map(|t| t.digests_computed()).sum();
        let mut text = self.metrics.render(registry.tenants.len(), skills, digests);
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        for (name, kind, help, value) in [
            (
                "skillstore_tenants_loaded",
                "gauge",
                "Tenants loaded now.",
                loaded.len() as f64,
            ),
            (
                "skillstore_tenant_loads_total",
                "counter",
                "Tenant loads (first requests and loads after an unload).",
                load(&self.tenancy.loads) as f64,
            ),
            (
                "skillstore_tenant_load_seconds_total",
                "counter",
                "Time spent loading tenants.",
                load(&self.tenancy.load_micros) as f64 / 1e6,
            ),
            (
                "skillstore_tenant_unloads_total",
                "counter",
                "Tenants unloaded, past max_loaded_tenants or idle.",
                load(&self.tenancy.unloads) as f64,
            ),
            (
                "skillstore_server_file_reloads_total",
                "counter",
                "Readings of the server file applied without a restart.",
                load(&self.tenancy.reloads) as f64,
            ),
            (
                "skillstore_server_file_reloads_refused_total",
                "counter",
                "Readings of the server file refused (the tenants as they were stayed in force).",
                load(&self.tenancy.reloads_refused) as f64,
            ),
            (
                "skillstore_rendered_bytes",
                "gauge",
                "Bytes of rendered answers kept, all tenants (bounded by limits.max_rendered_bytes).",
                self.budget.used() as f64,
            ),
            (
                "skillstore_shared_sources",
                "gauge",
                "Sources loaded once and shared by the tenants that mount them.",
                self.pool.len() as f64,
            ),
            (
                "skillstore_shared_source_loads_total",
                "counter",
                "Listings of shared sources (first loads and refreshes).",
                self.pool.loads() as f64,
            ),
        ] {
            let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        text.push_str(&self.feeds.render());
        text
    }
}

/// The bearer token of `headers`: `None` without an `Authorization`
/// header, 401 for one that is not a bearer token.
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Some)
        .ok_or_else(ApiError::unauthorized)
}

/// A tenant's phase within the refresh interval: spread by its name, the
/// same at each load, and never the interval itself.
fn refresh_phase(name: &str, interval: Duration) -> Duration {
    use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(name);
    let nanos = interval.as_nanos().max(1);
    Duration::from_nanos(u64::try_from(u128::from(hash) % nanos).unwrap_or(0))
}

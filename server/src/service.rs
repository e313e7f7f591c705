//! The state every front end shares: the tenants, who may call as which,
//! the refresh loop, the limits and the counters.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ServerError};
use crate::http::origin::BrowserPolicy;
use crate::jwt::JwtVerifier;
use crate::metrics::Metrics;
use crate::settings::{Limits, Scope, Settings, TokenHash};
use crate::tenant::Tenant;

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

/// Everything a request is answered from. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Service {
    tenants: Vec<Arc<Tenant>>,
    tokens: HashMap<TokenHash, (usize, Scope)>,
    open: bool,
    metrics_tokens: Vec<TokenHash>,
    jwt: Option<JwtVerifier>,
    refresh_interval: Duration,
    /// What a request's `Host`, `Origin` and content type must satisfy.
    pub browser: BrowserPolicy,
    /// Request limits.
    pub limits: Limits,
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
        let mut tenants = Vec::with_capacity(settings.tenants.len());
        let mut tokens = HashMap::new();
        for (index, spec) in settings.tenants.iter().enumerate() {
            tenants.push(Arc::new(Tenant::open(spec, Arc::clone(&metrics.backend_calls))?));
            for (hash, scope) in &spec.tokens {
                tokens.insert(*hash, (index, *scope));
            }
        }
        if tenants.is_empty() {
            return Err(ServerError::Config("no tenants".into()));
        }
        let jwt = match &settings.jwt {
            Some(jwt) => Some(JwtVerifier::new(jwt).map_err(|e| ServerError::Config(format!("auth.jwt: {e}")))?),
            None => None,
        };
        let open = tenants.len() == 1 && settings.tenants[0].tokens.is_empty() && jwt.is_none();
        Ok(Arc::new(Service {
            open,
            metrics_tokens: settings.metrics_tokens.clone(),
            jwt,
            browser: BrowserPolicy::new(open, &settings.allowed_origins),
            tenants,
            tokens,
            refresh_interval: settings.refresh_interval,
            limits: settings.limits,
            metrics,
            shutdown: CancellationToken::new(),
        }))
    }

    /// The tenants.
    pub fn tenants(&self) -> &[Arc<Tenant>] {
        &self.tenants
    }

    /// True when the one tenant is served without a token.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Refuses an open server on an address other than loopback.
    pub fn check_listen(&self, addr: &SocketAddr) -> Result<(), ServerError> {
        if self.open && !addr.ip().is_loopback() {
            return Err(ServerError::Listen(format!(
                "without tokens the server may listen on a loopback address only, not {addr}; give tenants tokens in a server file"
            )));
        }
        Ok(())
    }

    /// Loads every tenant's catalog now, then refreshes each at the
    /// configured interval until shutdown. Returns once the first loads
    /// are started; `/readyz` tells when they are done.
    pub fn start_refresh(self: &Arc<Self>) {
        for tenant in &self.tenants {
            let service = Arc::clone(self);
            let tenant = Arc::clone(tenant);
            tokio::spawn(async move {
                loop {
                    let outcome = tenant.refresh().await;
                    service.metrics.refresh(outcome == crate::tenant::RefreshOutcome::Stale);
                    tokio::select! {
                        () = service.shutdown.cancelled() => break,
                        () = tokio::time::sleep(service.refresh_interval) => {}
                    }
                }
            });
        }
    }

    /// Loads every tenant's catalog and waits until all are loaded (for a
    /// front end that serves one client, such as MCP over stdio).
    pub async fn load_all(&self) {
        futures::future::join_all(self.tenants.iter().map(|t| t.refresh())).await;
    }

    /// True once every tenant's first load is done and some tenant can
    /// read a source: a server whose storage is wholly out of reach is not
    /// ready, while one tenant's broken source does not take the others'
    /// server out of a load balancer.
    pub fn is_ready(&self) -> bool {
        self.tenants.iter().all(|t| t.is_ready()) && self.tenants.iter().any(|t| t.reads_a_source())
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
            None if self.open => Ok(Caller {
                tenant: Arc::clone(&self.tenants[0]),
                scope: Scope::Write,
                token: None,
            }),
            None => Err(ApiError::unauthorized()),
        }
    }

    /// Allows `/metrics` to a metrics token, or to anyone on an open
    /// server (whose one caller may do everything); 401 otherwise, and a
    /// tenant's token is not a metrics token.
    pub fn authenticate_metrics(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match bearer(headers)? {
            Some(token) if self.metrics_tokens.contains(&TokenHash::of(token)) => Ok(()),
            None if self.open => Ok(()),
            // Says no more than any 401: not whether the token is a tenant's.
            _ => Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a metrics token is required (one of the server file's metrics_tokens)",
            )),
        }
    }

    /// The caller `token` names, if any.
    pub fn caller_for_token(&self, token: &str) -> Option<Caller> {
        let hash = TokenHash::of(token);
        let (index, scope) = self.tokens.get(&hash)?;
        Some(Caller {
            tenant: Arc::clone(&self.tenants[*index]),
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
        let Some(tenant) = self.tenant_named(&identity.tenant) else {
            tracing::debug!(target: "skillstore::auth", tenant = %identity.tenant, "bearer JWT refused: its tenant is not served");
            return None;
        };
        Some(Caller {
            tenant,
            scope: identity.scope,
            token: Some(TokenHash::of(token)),
        })
    }

    /// The tenant called `name`, a name that passed the tenant-name rule.
    pub fn tenant_named(&self, name: &str) -> Option<Arc<Tenant>> {
        self.tenants.iter().find(|t| t.name() == name).cloned()
    }

    /// The open server's one tenant, or the only tenant, for a front end
    /// with no tokens (MCP over stdio): it may write.
    pub fn local_caller(&self) -> Caller {
        Caller {
            tenant: Arc::clone(&self.tenants[0]),
            scope: Scope::Write,
            token: None,
        }
    }

    /// The tenant whose discovery paths are `/t/{name}/.well-known/...`
    /// (`name` given) or the root's (`None`): a tenant that opted in
    /// (`discovery: public`), or for the root, an open server's one
    /// tenant. `None` otherwise, whether or not the tenant exists.
    pub fn discovery_tenant(&self, name: Option<&str>) -> Option<Arc<Tenant>> {
        match name {
            None if self.open => Some(Arc::clone(&self.tenants[0])),
            None => None,
            Some(name) => self
                .tenants
                .iter()
                .find(|t| t.name() == name && t.discovery() == crate::settings::Discovery::Public)
                .cloned(),
        }
    }

    /// The Prometheus text.
    pub fn render_metrics(&self) -> String {
        let skills = self
            .tenants
            .iter()
            .filter_map(|t| t.snapshot().ok())
            .map(|c| c.skills().len())
            .sum();
        let digests = self.tenants.iter().map(|t| t.digests.computed()).sum();
        self.metrics.render(self.tenants.len(), skills, digests)
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

//! The HTTP API (axum): routes, the guards every request passes (browser
//! checks, token, concurrency cap, timeout, body limit, counters), and
//! serving with bounded connections and a graceful shutdown.

mod conditional;
pub mod discovery;
pub(crate) mod front;
mod hooks;
mod listen;
pub mod openapi;
pub mod origin;
mod read;
mod write;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{MethodRouter, get, post};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::error::{ApiError, ServerError};

use crate::service::Service;
/// The content type a skill file is served with, from its extension.
pub use conditional::content_type as content_type_of;

/// The shared state of the routes.
#[derive(Clone)]
pub(crate) struct AppState {
    pub service: Arc<Service>,
    permits: Arc<Semaphore>,
}

/// Every route of the router but `/mcp` (which MCP itself describes), as
/// axum declares it. The router is built from this list alone (each path's
/// handlers come from [`handlers`]), and `/openapi.json` describes exactly
/// these paths, each with exactly the methods its route answers: a test
/// holds the document against the served router, method by method.
pub const ROUTES: &[&str] = &[
    "/v1/skills",
    "/v1/skills/{name}",
    "/v1/skills/{name}/files/{*path}",
    "/v1/skills/{name}/history",
    "/v1/skills/{name}/rollback",
    "/v1/archives",
    "/v1/prompt",
    "/v1/search",
    "/v1/refresh",
    "/v1/hooks/git",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/.well-known/agent-skills/index.json",
    "/.well-known/agent-skills/{artifact}",
    "/.well-known/agent-skills/{name}/SKILL.md",
    "/t/{tenant}/.well-known/agent-skills/index.json",
    "/t/{tenant}/.well-known/agent-skills/{artifact}",
    "/t/{tenant}/.well-known/agent-skills/{name}/SKILL.md",
];

/// The handlers of one path of [`ROUTES`].
fn handlers(route: &str) -> MethodRouter<AppState> {
    match route {
        "/v1/skills" => get(read::list),
        "/v1/skills/{name}" => get(read::show)
            .put(write::put_skill)
            .patch(write::patch_skill)
            .delete(write::delete_skill),
        "/v1/skills/{name}/files/{*path}" => get(read::file).put(write::put_file).delete(write::delete_file),
        "/v1/skills/{name}/history" => get(write::history),
        "/v1/skills/{name}/rollback" => post(write::rollback),
        "/v1/archives" => post(write::install),
        "/v1/prompt" => get(read::prompt),
        "/v1/search" => get(read::search),
        "/v1/refresh" => post(read::refresh),
        "/v1/hooks/git" => post(hooks::git),
        "/healthz" => get(read::healthz),
        "/readyz" => get(read::readyz),
        "/metrics" => get(read::metrics),
        "/openapi.json" => get(openapi::serve),
        other => discovery::handlers(other).unwrap_or_else(|| panic!("no handlers for the route {other}")),
    }
}

/// The whole router: every route of [`ROUTES`] (`/v1/...`, `/healthz`,
/// `/readyz`, `/metrics`, `/openapi.json`, the discovery routes of
/// [`discovery`]), and `mcp` (when given) at `/mcp`. Every API route
/// passes [`front::guard`].
pub fn router(service: Arc<Service>, mcp: Option<Router>) -> Router {
    let state = AppState {
        permits: Arc::new(Semaphore::new(service.limits.max_concurrent_requests)),
        service,
    };
    let body_limit = usize::try_from(state.service.limits.max_body_bytes).unwrap_or(usize::MAX);
    let api = ROUTES
        .iter()
        .fold(Router::new(), |api, route| api.route(route, handlers(route)))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), front::guard))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .with_state(state.clone());
    match mcp {
        Some(mcp) => api.merge(mcp.layer(middleware::from_fn_with_state(state, count_only))),
        None => api,
    }
}

async fn not_found() -> ApiError {
    no_route()
}

/// 503 with `Retry-After: 1` and `message`: the server is busy with work
/// of this kind, and the same request a second later may be served.
pub(crate) fn retry_soon(message: &str) -> Response {
    let mut response = axum::response::IntoResponse::into_response(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        message,
    ));
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    response
}

/// The answer to a route that does not exist.
pub(crate) fn no_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

/// MCP requests are counted; their streams are not bounded by the
/// request timeout.
async fn count_only(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(&request);
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    // The MCP handler authenticates for itself; this names the tenant for
    // the log line only (a token lookup, no body read).
    let tenant = state
        .service
        .authenticate(request.headers())
        .await
        .ok()
        .map(|caller| caller.tenant.name().to_owned());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    state.service.metrics.request(&route, status, started.elapsed());
    log_request(&method, &path, tenant.as_deref(), status, started);
    response
}

/// The most bytes of a request's path a log line keeps.
const LOGGED_PATH_BYTES: usize = 256;

/// One line per answered request, at info level under the target
/// `skillstore::request`: method, path (its first 256 bytes, control and
/// invisible characters escaped), tenant once a token named one, status
/// and milliseconds. Never a header, a query string or a body, so no token
/// or content reaches the log.
pub(crate) fn log_request(
    method: &axum::http::Method,
    path: &str,
    tenant: Option<&str>,
    status: u16,
    started: Instant,
) {
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut end = path.len().min(LOGGED_PATH_BYTES);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < path.len() { "..." } else { "" };
    tracing::info!(
        target: "skillstore::request",
        method = %method,
        path = %format_args!("{}{cut}", path[..end].escape_debug()),
        tenant = tenant.unwrap_or("-"),
        status,
        ms = format_args!("{ms:.1}"),
        "request"
    );
}

pub(crate) fn route_of(request: &Request) -> String {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned())
}

/// How long in-flight requests may run on after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting, lets requests in flight finish (for at most `grace`), and
/// returns. The service's refresh loop and MCP sessions stop with it.
/// Connections are bounded by the service's limits: at most
/// `max_connections` open (more wait in the kernel's queue), and a request's
/// headers must arrive within `header_read_timeout` of the connection being
/// ready for them (a silent or idle connection is closed after that long).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    service: Arc<Service>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> Result<(), ServerError> {
    let token = service.shutdown.clone();
    tokio::spawn({
        let token = token.clone();
        async move {
            shutdown.await;
            token.cancel();
        }
    });
    listen::accept_loop(listener, router, &service, grace).await;
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

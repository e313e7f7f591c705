//! The HTTP API (axum): routes, the guards every request passes (token,
//! concurrency cap, timeout, body limit, counters), and serving with a
//! graceful shutdown.

mod conditional;
pub mod openapi;
mod read;
mod write;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
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

/// The whole router: `/v1/...`, `/healthz`, `/readyz`, `/metrics`, and
/// `mcp` (when given) at `/mcp`.
pub fn router(service: Arc<Service>, mcp: Option<Router>) -> Router {
    let state = AppState {
        permits: Arc::new(Semaphore::new(service.limits.max_concurrent_requests)),
        service,
    };
    let body_limit = usize::try_from(state.service.limits.max_body_bytes).unwrap_or(usize::MAX);
    let api = Router::new()
        .route("/v1/skills", get(read::list))
        .route(
            "/v1/skills/{name}",
            get(read::show)
                .put(write::put_skill)
                .patch(write::patch_skill)
                .delete(write::delete_skill),
        )
        .route(
            "/v1/skills/{name}/files/{*path}",
            get(read::file).put(write::put_file).delete(write::delete_file),
        )
        .route("/v1/archives", post(write::install))
        .route("/v1/prompt", get(read::prompt))
        .route("/v1/refresh", post(read::refresh))
        .route("/healthz", get(read::healthz))
        .route("/readyz", get(read::readyz))
        .route("/metrics", get(read::metrics))
        .route("/openapi.json", get(openapi::serve))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .with_state(state.clone());
    match mcp {
        Some(mcp) => api.merge(mcp.layer(middleware::from_fn_with_state(state, count_only))),
        None => api,
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

/// Every API request: waits for a permit (the concurrency cap), runs under
/// the timeout, and is counted.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(&request);
    let _in_flight = state.service.metrics.begin();
    let response = match state.permits.clone().acquire_owned().await {
        Ok(_permit) => match tokio::time::timeout(state.service.limits.request_timeout, next.run(request)).await {
            Ok(response) => response,
            Err(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", "the request took too long").into_response()
            }
        },
        Err(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "shutting down").into_response(),
    };
    state
        .service
        .metrics
        .request(&route, response.status().as_u16(), started.elapsed());
    response
}

/// MCP requests are counted; their streams are not bounded by the
/// request timeout.
async fn count_only(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(&request);
    let response = next.run(request).await;
    state
        .service
        .metrics
        .request(&route, response.status().as_u16(), started.elapsed());
    response
}

fn route_of(request: &Request) -> String {
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
    let graceful = {
        let token = token.clone();
        async move { token.cancelled().await }
    };
    // Streamed MCP answers go out in several writes; without TCP_NODELAY a
    // write waiting on the peer's delayed ACK adds about 40 ms to an answer.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let server = axum::serve(listener, router).with_graceful_shutdown(graceful);
    let deadline = async {
        token.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = server => result.map_err(|e| ServerError::Listen(format!("the server failed: {e}"))),
        () = deadline => {
            tracing::warn!("requests still in flight after the shutdown grace period; stopping");
            Ok(())
        }
    }
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

//! The door every API request passes, in this order, before any body byte
//! is read: the browser checks (`Host`, `Origin`, content type), then the
//! token and its scope from the headers, then the concurrency cap and the
//! timeout. A caller who is not allowed is answered at once; health checks
//! never wait behind the cap.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AppState, route_of};
use crate::error::ApiError;

/// How a route is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    /// Anyone, outside the cap: `/healthz`, `/readyz`, `/openapi.json`,
    /// and unknown routes (404).
    Public,
    /// A metrics token.
    Metrics,
    /// Anyone, under the cap and timeout: the discovery routes, which
    /// decide themselves which tenant (if any) they answer for.
    Anonymous,
    /// A tenant's token (any scope).
    Read,
    /// A tenant's token with the write scope, on a tenant with a writable
    /// source.
    Write,
}

fn door(route: &str, method: &Method) -> Door {
    match route {
        "/healthz" | "/readyz" | "/openapi.json" | "unmatched" => Door::Public,
        "/metrics" => Door::Metrics,
        _ if super::discovery::is_discovery_route(route) && (*method == Method::GET || *method == Method::HEAD) => {
            Door::Anonymous
        }
        "/v1/refresh" => Door::Read,
        // A push event is its own credential: its signature (`hooks`).
        "/v1/hooks/git" => Door::Anonymous,
        _ if *method == Method::GET || *method == Method::HEAD => Door::Read,
        _ => Door::Write,
    }
}

/// The API's guard (see the module's description); every answer is counted.
pub(crate) async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(&request);
    let service = &state.service;
    let _in_flight = service.metrics.begin();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let has_body = declares_body(request.headers());
    let admitted = admit(&state, &route, &mut request).await;
    let tenant = request
        .extensions()
        .get::<crate::service::Caller>()
        .map(|c| c.tenant.name().to_owned());
    let response = match admitted {
        Err(refused) => unread_body_closes(refused.into_response(), has_body),
        Ok(Door::Public | Door::Metrics) => next.run(request).await,
        Ok(_) => match state.permits.clone().acquire_owned().await {
            Ok(_permit) => match tokio::time::timeout(service.limits.request_timeout, async {
                // A tenant not loaded yet is loaded for its first request.
                if let Some(caller) = request.extensions().get::<crate::service::Caller>() {
                    let tenant = std::sync::Arc::clone(&caller.tenant);
                    service.loaded(&tenant).await;
                }
                next.run(request).await
            })
            .await
            {
                Ok(response) => response,
                Err(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", "the request took too long")
                    .into_response(),
            },
            Err(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "shutting down").into_response(),
        },
    };
    let status = response.status().as_u16();
    service.metrics.request(&route, status, started.elapsed());
    super::log_request(&method, &path, tenant.as_deref(), status, started);
    response
}

/// True when a request's headers announce a body (a length over zero, or
/// a transfer coding).
pub(crate) fn declares_body(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key(axum::http::header::TRANSFER_ENCODING)
        || headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

/// `response` to a request refused before its body was read: when the
/// request announced a body, the connection cannot be kept without
/// reading it, so it is closed after this answer, and the answer says so
/// (`Connection: close`) instead of leaving the client to find a broken
/// pipe on its next request.
pub(crate) fn unread_body_closes(mut response: Response, has_body: bool) -> Response {
    if has_body {
        response.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// Decides from the headers alone whether the request may go on; hands
/// the caller to the handler.
async fn admit(state: &AppState, route: &str, request: &mut Request) -> Result<Door, ApiError> {
    let service = &state.service;
    service.browser.check(request.method(), request.headers(), false)?;
    let door = door(route, request.method());
    match door {
        Door::Public | Door::Anonymous => {}
        Door::Metrics => service.authenticate_metrics(request.headers())?,
        Door::Read | Door::Write => {
            let caller = service.authenticate(request.headers()).await?;
            if door == Door::Write {
                caller.require_write()?;
                caller.tenant.check_writable()?;
            }
            request.extensions_mut().insert(caller);
        }
    }
    Ok(door)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_route_needs_the_write_scope() {
        assert_eq!(door("/v1/skills/{name}", &Method::GET), Door::Read);
        assert_eq!(door("/v1/skills/{name}", &Method::HEAD), Door::Read);
        for method in [Method::PUT, Method::PATCH, Method::DELETE, Method::POST] {
            assert_eq!(door("/v1/skills/{name}", &method), Door::Write);
            assert_eq!(door("/v1/skills/{name}/files/{*path}", &method), Door::Write);
        }
        assert_eq!(door("/v1/archives", &Method::POST), Door::Write);
        assert_eq!(door("/v1/refresh", &Method::POST), Door::Read);
        assert_eq!(door("/metrics", &Method::GET), Door::Metrics);
        assert_eq!(door("/healthz", &Method::GET), Door::Public);
        for route in [
            "/.well-known/agent-skills/index.json",
            "/.well-known/agent-skills/{artifact}",
            "/t/{tenant}/.well-known/agent-skills/{name}/SKILL.md",
        ] {
            assert_eq!(door(route, &Method::GET), Door::Anonymous);
            assert_eq!(door(route, &Method::HEAD), Door::Anonymous);
            assert_eq!(door(route, &Method::POST), Door::Write);
        }
    }
}

//! The read routes: the catalog, one skill, a file of a skill, the prompt,
//! a refresh, and the service's own health and counters.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use skillstore::PromptStyle;

use super::AppState;
use super::conditional::{answer, answer_bytes, content_type};
use crate::error::ApiError;
use crate::service::Caller;

/// `GET /v1/skills`: the `list --json` object.
pub async fn list(Extension(caller): Extension<Caller>, headers: HeaderMap) -> Result<Response, ApiError> {
    let view = caller.tenant.view()?;
    Ok(answer(&headers, &view.list, "application/json"))
}

/// `GET /v1/skills/{name}`: the `show --json` object.
pub async fn show(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let view = caller.tenant.view()?;
    let rendered = view.show(&name).await?;
    Ok(answer(&headers, &rendered, "application/json"))
}

/// `GET /v1/skills/{name}/files/{*path}`: the bytes of a file of the
/// winning skill, confined to its directory.
pub async fn file(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path((name, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let catalog = caller.tenant.snapshot()?;
    let bytes = catalog.read_file(&name, &path).await?;
    let etag = format!("\"{}\"", crate::digest::sha256_hex(&bytes));
    Ok(answer_bytes(&headers, bytes, &etag, content_type(&path)))
}

/// The query of `GET /v1/prompt`.
#[derive(Debug, Deserialize)]
pub struct PromptQuery {
    style: Option<String>,
    max_chars: Option<usize>,
}

/// `GET /v1/prompt?style=&max_chars=`: the rendered system-prompt section.
pub async fn prompt(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    query: Result<Query<PromptQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let mut options = caller.tenant.prompt_options().clone();
    if let Some(style) = &query.style {
        options.style = style.parse::<PromptStyle>()?;
    }
    if query.max_chars.is_some() {
        options.max_chars = query.max_chars;
    }
    let view = caller.tenant.view()?;
    Ok(answer(&headers, &view.prompt(&options)?, "text/plain; charset=utf-8"))
}

/// `POST /v1/refresh`: refreshes the caller's catalog now.
/// Concurrent refreshes of a tenant share one.
pub async fn refresh(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let (outcome, ran) = caller.tenant.refresh_shared().await;
    let stale = outcome == crate::tenant::RefreshOutcome::Stale;
    if ran {
        state.service.metrics.refresh(stale);
    }
    let skills = caller.tenant.snapshot()?.skills().len();
    Ok(Json(serde_json::json!({"skills": skills, "stale": stale})).into_response())
}

/// `GET /healthz`: the process answers.
pub async fn healthz() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: every tenant's first load is done.
pub async fn readyz(State(state): State<AppState>) -> Response {
    if state.service.is_ready() {
        Json(serde_json::json!({"status": "ready"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"error": {"kind": "unavailable", "message": "a catalog is still loading, or none of its sources could be read"}})),
        )
            .into_response()
    }
}

/// `GET /metrics`: the Prometheus text, for a metrics token.
pub async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.service.render_metrics(),
    )
        .into_response()
}

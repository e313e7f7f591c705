//! The read routes: the catalog, one skill, a file of a skill, the prompt,
//! a refresh, and the service's own health and counters.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use skillstore::PromptStyle;

use super::AppState;
use super::conditional::{answer, answer_bytes, content_type};
use crate::error::ApiError;
use crate::service::Caller;

/// `GET /v1/skills`: the `list --json` object.
pub async fn list(Extension(caller): Extension<Caller>, headers: HeaderMap) -> Result<Response, ApiError> {
    let view = caller.tenant.view()?;
    Ok(answer(&headers, &view.list(), "application/json"))
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

/// What the HTTP prompt says reads the skills it lists at their paths in
/// the skill store.
pub const READ_HINT: &str = "the `GET /v1/skills/NAME/files/PATH` route of this server (by the skill's name and the file's path inside the skill's directory)";

/// `GET /v1/prompt?style=&max_chars=`: the rendered system-prompt section.
pub async fn prompt(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    query: Result<Query<PromptQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let mut options = caller.tenant.prompt_options().clone();
    options.read_hint = Some(READ_HINT.to_owned());
    options.search_hint = Some(crate::tenant::HTTP_SEARCH_HINT.to_owned());
    if let Some(style) = &query.style {
        options.style = style.parse::<PromptStyle>()?;
    }
    if query.max_chars.is_some() {
        options.max_chars = query.max_chars;
    }
    let view = caller.tenant.view()?;
    Ok(answer(&headers, &view.prompt(&options)?, "text/plain; charset=utf-8"))
}

/// The query of `GET /v1/search`.
#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    q: String,
    limit: Option<usize>,
}

/// The answer of `GET /v1/search` (and of `skillstore search --json`).
#[derive(Serialize)]
struct SearchAnswer {
    results: Vec<skillstore::search::SearchHit>,
}

/// `GET /v1/search?q=&limit=`: the caller's tenant's enabled skills that
/// best match `q`, best first (`limit` defaults to 10, at most 1000).
pub async fn search(
    Extension(caller): Extension<Caller>,
    query: Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = query.limit.unwrap_or(10);
    if limit > skillstore::search::MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "`limit` is at most {}",
            skillstore::search::MAX_LIMIT
        )));
    }
    let results = caller.tenant.search(&query.q, limit).await?;
    Ok(Json(SearchAnswer { results }).into_response())
}

/// `POST /v1/refresh`: refreshes the caller's catalog now, the sources it
/// shares with other tenants included (listed once for all of them, and
/// for one tenant at most once a second).
/// Concurrent refreshes of a tenant share one.
pub async fn refresh(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let namespace = caller.tenant.namespace()?;
    if let Some((pool, shared)) = namespace.shared_sources()
        && caller.tenant.may_list_shared()
    {
        pool.refresh_sources(shared).await;
    }
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
        Json(serde_json::json!({"status": "ready", "change_journals": state.service.feeds().status()})).into_response()
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

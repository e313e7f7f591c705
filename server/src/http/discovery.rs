//! The Agent Skills discovery routes: `/.well-known/agent-skills/index.json`
//! and its artifacts (`NAME/SKILL.md`, `NAME.zip`), at the root for an open
//! server and under `/t/TENANT/` for a tenant that opted in. Anonymous by
//! nature: no token is asked for, and the front door's browser checks,
//! cap and timeout still apply. A tenant that did not opt in answers
//! exactly as a route that does not exist.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{MethodRouter, get};

use super::AppState;
use super::conditional::answer_bytes;
use crate::error::ApiError;

/// The well-known prefix, as RFC 8615 registers it.
pub const WELL_KNOWN: &str = "/.well-known/agent-skills";

/// The handlers of a discovery route of [`super::ROUTES`], at the root and
/// under `/t/{tenant}`.
pub(crate) fn handlers(route: &str) -> Option<MethodRouter<AppState>> {
    let handlers = match route.strip_prefix("/t/{tenant}") {
        None => match route.strip_prefix(WELL_KNOWN)? {
            "/index.json" => get(root_index),
            "/{artifact}" => get(root_archive),
            "/{name}/SKILL.md" => get(root_skill_md),
            _ => return None,
        },
        Some(below) => match below.strip_prefix(WELL_KNOWN)? {
            "/index.json" => get(tenant_index),
            "/{artifact}" => get(tenant_archive),
            "/{name}/SKILL.md" => get(tenant_skill_md),
            _ => return None,
        },
    };
    Some(handlers)
}

/// True when `route` (a matched path) is a discovery route.
pub(crate) fn is_discovery_route(route: &str) -> bool {
    route.starts_with(WELL_KNOWN) || route.starts_with("/t/{tenant}/.well-known/")
}

/// What a request asks for.
enum Wanted<'a> {
    Index,
    SkillMd(&'a str),
    Archive(&'a str),
}

async fn root_index(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    serve(&state, None, Wanted::Index, &headers).await
}

async fn root_archive(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(artifact): Path<String>,
) -> Result<Response, ApiError> {
    serve(&state, None, archive_of(&artifact)?, &headers).await
}

async fn root_skill_md(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    serve(&state, None, Wanted::SkillMd(&name), &headers).await
}

async fn tenant_index(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    serve(&state, Some(&tenant), Wanted::Index, &headers).await
}

async fn tenant_archive(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((tenant, artifact)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    serve(&state, Some(&tenant), archive_of(&artifact)?, &headers).await
}

async fn tenant_skill_md(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((tenant, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    serve(&state, Some(&tenant), Wanted::SkillMd(&name), &headers).await
}

/// `NAME.zip` names an archive; anything else is no route.
fn archive_of(artifact: &str) -> Result<Wanted<'_>, ApiError> {
    artifact
        .strip_suffix(".zip")
        .filter(|name| !name.is_empty())
        .map(Wanted::Archive)
        .ok_or_else(no_route)
}

/// 503 with `Retry-After: 1`: too many public tenants are being loaded.
fn busy() -> Response {
    super::retry_soon("busy loading other tenants; try again shortly")
}

/// The answer every unknown route gets.
fn no_route() -> ApiError {
    super::no_route()
}

async fn serve(
    state: &AppState,
    tenant: Option<&str>,
    wanted: Wanted<'_>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let tenant = state.service.discovery_tenant(tenant).ok_or_else(no_route)?;
    // The load and the first index of a tenant not loaded take one of
    // `limits.anonymous_loads` turns, held until the index is built, so
    // anonymous callers cannot make the server load every public tenant.
    let _turn = if tenant.is_ready() {
        None
    } else {
        match state.service.anonymous_loads.try_acquire() {
            Ok(permit) => Some(permit),
            Err(_) => return Ok(busy()),
        }
    };
    state.service.loaded_anonymously(&tenant).await;
    let view = tenant.view()?;
    let published = view.discovery().await;
    let (name, kind) = match wanted {
        Wanted::Index => {
            let index = &published.index;
            return Ok(answer_bytes(
                headers,
                index.body.clone(),
                &index.etag,
                "application/json",
            ));
        }
        Wanted::SkillMd(name) => (name, crate::discovery::ArtifactType::SkillMd),
        Wanted::Archive(name) => (name, crate::discovery::ArtifactType::Archive),
    };
    let artifact = published
        .artifact(name)
        .filter(|a| a.kind == kind)
        .ok_or_else(|| ApiError::from(skillstore::Error::SkillNotFound(name.to_owned())))?;
    // Built from the checked bytes, but the skill has lost or changed one
    // of them since: it is handed on nowhere until a refresh.
    if let Some(refused) = view.catalog.withdrawn_refusal(name) {
        return Err(refused.into());
    }
    Ok(answer_bytes(
        headers,
        artifact.bytes.clone(),
        &artifact.etag(),
        artifact.content_type(),
    ))
}

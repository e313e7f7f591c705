//! The write routes: each goes through the tenant's `SkillEditor` (its
//! validation, content check, conditional writes and history), with the
//! caller's `If-Match` checked against the bytes it replaces.

use axum::Extension;
use axum::Json;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use skillstore::backends::{ErrorKind, ReadOptions, Version};
use skillstore::{Change, Patch, SKILL_FILE};

use super::conditional::check_write;
use crate::error::ApiError;
use crate::service::Caller;
use crate::tenant::Tenant;

fn body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                "too_large",
                "the request body is larger than the server accepts",
            )
        } else {
            ApiError::bad_request(rejection.body_text())
        }
    })
}

/// The current bytes and version of the file `relative` of the skill
/// `name` in the editor's source.
async fn current(
    caller: &Caller,
    editor: &skillstore::SkillEditor,
    name: &str,
    relative: &str,
) -> Result<Option<(Bytes, Version)>, ApiError> {
    let path = Tenant::file_in_source(editor, name, relative)?;
    let namespace = caller.tenant.namespace()?;
    let limit = namespace.load_options().read_limit;
    match namespace.backend().read(&path, ReadOptions::with_limit(limit)).await {
        Ok(blob) => Ok(Some((blob.data, blob.version))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(skillstore::Error::Backend(e).into()),
    }
}

/// The caller the guard admitted (with the write scope, on a tenant with
/// a writable source) and an editor for it.
fn writer(caller: Caller) -> Result<(Caller, skillstore::SkillEditor), ApiError> {
    let editor = caller.tenant.editor()?;
    Ok((caller, editor))
}

/// The answer to a change: the files it wrote with their new tags.
fn changed(caller: &Caller, status: StatusCode, name: &str, change: &Change) -> Response {
    caller.tenant.written();
    let files: Vec<serde_json::Value> = change
        .record
        .files
        .iter()
        .map(|f| {
            let etag = f
                .new
                .as_ref()
                .and_then(|c| c.to_bytes().ok())
                .map(|b| format!("\"{}\"", crate::digest::sha256_hex(&b)));
            serde_json::json!({"path": f.path, "etag": etag})
        })
        .collect();
    let single_tag = match files.as_slice() {
        [only] => only["etag"].as_str().map(str::to_owned),
        _ => None,
    };
    let body = serde_json::json!({
        "action": change.record.action,
        "skill": name,
        "history_id": change.record.id,
        "files": files,
        "warnings": change.warnings,
    });
    let mut response = (status, Json(body)).into_response();
    if let Some(tag) = single_tag.and_then(|t| HeaderValue::from_str(&t).ok()) {
        response.headers_mut().insert(axum::http::header::ETAG, tag);
    }
    response
}

/// `PUT /v1/skills/{name}`: creates the skill (201) or replaces its
/// SKILL.md (200).
pub async fn put_skill(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
    data: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let data = body(data)?;
    let (caller, editor) = writer(caller)?;
    put_skill_md(&caller, &editor, &headers, &name, data).await
}

async fn put_skill_md(
    caller: &Caller,
    editor: &skillstore::SkillEditor,
    headers: &HeaderMap,
    name: &str,
    data: Bytes,
) -> Result<Response, ApiError> {
    let current = current(caller, editor, name, SKILL_FILE).await?;
    check_write(headers, current.as_ref().map(|(b, _)| b))?;
    Ok(match current {
        None => changed(caller, StatusCode::CREATED, name, &editor.create(name, data).await?),
        Some((_, version)) => changed(
            caller,
            StatusCode::OK,
            name,
            &editor.edit(name, data, Some(&version)).await?,
        ),
    })
}

/// The body of `PATCH /v1/skills/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    #[serde(default)]
    file: Option<String>,
    find: String,
    replace: String,
    #[serde(default)]
    count: Option<usize>,
}

/// `PATCH /v1/skills/{name}`: a find-and-replace on one file (`SKILL.md`
/// by default); `If-Match` names the file's version.
pub async fn patch_skill(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
    data: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let data = body(data)?;
    let (caller, editor) = writer(caller)?;
    let request: PatchBody = serde_json::from_slice(&data).map_err(|e| {
        ApiError::bad_request(format!(
            "expected {{\"find\", \"replace\", \"file\"?, \"count\"?}}: {e}"
        ))
    })?;
    let file = request.file.unwrap_or_else(|| SKILL_FILE.to_owned());
    let current = current(&caller, &editor, &name, &file).await?;
    check_write(&headers, current.as_ref().map(|(b, _)| b))?;
    let mut patch = Patch::new(request.find, request.replace);
    patch.file = file;
    patch.count = request.count.unwrap_or(1);
    patch.expected = current.map(|(_, v)| v);
    Ok(changed(
        &caller,
        StatusCode::OK,
        &name,
        &editor.patch(&name, &patch).await?,
    ))
}

/// `DELETE /v1/skills/{name}`: deletes the skill from the tenant's
/// writable source; `If-Match` names the SKILL.md version.
pub async fn delete_skill(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let (caller, editor) = writer(caller)?;
    let current = current(&caller, &editor, &name, SKILL_FILE).await?;
    check_write(&headers, current.as_ref().map(|(b, _)| b))?;
    let version = current.map(|(_, v)| v);
    Ok(changed(
        &caller,
        StatusCode::OK,
        &name,
        &editor.delete(&name, version.as_ref()).await?,
    ))
}

/// `PUT /v1/skills/{name}/files/{*path}`: writes a supporting file
/// (`SKILL.md` itself goes through the same rules as `PUT` on the skill).
pub async fn put_file(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path((name, path)): Path<(String, String)>,
    data: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let data = body(data)?;
    let (caller, editor) = writer(caller)?;
    if path == SKILL_FILE {
        return put_skill_md(&caller, &editor, &headers, &name, data).await;
    }
    let current = current(&caller, &editor, &name, &path).await?;
    check_write(&headers, current.as_ref().map(|(b, _)| b))?;
    let status = if current.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let version = current.map(|(_, v)| v);
    let change = editor.write_file(&name, &path, data, version.as_ref()).await?;
    Ok(changed(&caller, status, &name, &change))
}

/// `DELETE /v1/skills/{name}/files/{*path}`: removes a supporting file.
pub async fn delete_file(
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path((name, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (caller, editor) = writer(caller)?;
    let current = current(&caller, &editor, &name, &path).await?;
    check_write(&headers, current.as_ref().map(|(b, _)| b))?;
    let version = current.map(|(_, v)| v);
    let change = editor.remove_file(&name, &path, version.as_ref()).await?;
    Ok(changed(&caller, StatusCode::OK, &name, &change))
}

/// The query of `POST /v1/archives`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallQuery {
    /// Replace a skill of the same name (its files become the archive's).
    #[serde(default)]
    replace: bool,
}

/// `POST /v1/archives[?replace=true]`: installs a `.skill` or `.zip`
/// archive (the request body) through the editor. The archive is read whole
/// under every archive guard before anything is written; a refusal is a
/// 400 naming its kind (`parent_segment`, `compression_ratio`, ...); a skill
/// that exists without `replace` is a 409. Answers 201 with the change.
pub async fn install(
    Extension(caller): Extension<Caller>,
    query: Result<axum::extract::Query<InstallQuery>, axum::extract::rejection::QueryRejection>,
    data: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let axum::extract::Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let data = body(data)?;
    let (caller, editor) = writer(caller)?;
    let mut limits = skillstore::ArchiveLimits::default();
    limits.max_file_bytes = caller.tenant.namespace()?.load_options().read_limit;
    let archive = skillstore::SkillArchive::read(&data, &limits).map_err(|e| match e {
        skillstore::ArchiveError::Skill(e) => ApiError::from(e),
        refused => ApiError::new(StatusCode::BAD_REQUEST, refused.kind(), refused.to_string()),
    })?;
    let options = if query.replace {
        skillstore::InstallOptions::replacing()
    } else {
        skillstore::InstallOptions::default()
    };
    let change = editor.install(&archive, options).await?;
    let name = archive.name().to_owned();
    Ok(changed(&caller, StatusCode::CREATED, &name, &change))
}

/// `GET /v1/skills/{name}/history` (any scope): the history of `name` in
/// the tenant's highest-priority writable source, oldest entry first, as
/// entries without contents or versions (what changed, when, by whom,
/// which files). A skill with no history answers an empty list; a tenant
/// with no writable source answers 403 `read_only`. Histories are read a
/// few at a time across the server (each may be 64 MiB) and parsed off the
/// async runtime.
pub async fn history(Extension(caller): Extension<Caller>, Path(name): Path<String>) -> Result<Response, ApiError> {
    let (caller, editor) = writer(caller)?;
    let entries = caller.tenant.history_entries(&editor, &name).await?;
    Ok(Json(serde_json::json!({"skill": name, "entries": entries})).into_response())
}

/// The body of `POST /v1/skills/{name}/rollback`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RollbackBody {
    id: u64,
}

/// `POST /v1/skills/{name}/rollback` (write scope), body `{"id": N}`:
/// restores every file the history mentions to what it was right after
/// entry N; the rollback is itself a history entry. Answers 200 with the
/// change, 404 `not_found` for an entry the skill's history does not have.
pub async fn rollback(
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    data: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let data = body(data)?;
    let (caller, editor) = writer(caller)?;
    let request: RollbackBody = serde_json::from_slice(&data)
        .map_err(|e| ApiError::bad_request(format!("expected {{\"id\": N}}, the history entry to restore: {e}")))?;
    caller.tenant.check_history_entry(&editor, &name, request.id).await?;
    let change = editor.rollback(&name, request.id).await?;
    Ok(changed(&caller, StatusCode::OK, &name, &change))
}

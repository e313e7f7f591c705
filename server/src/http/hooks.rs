//! `POST /v1/hooks/git`: a Git host's push event (GitHub, Gitea, GitLab)
//! refreshes the loaded tenants whose Git mounts follow the repository and
//! reference pushed.
//!
//! The event is its own credential: GitHub's `X-Hub-Signature-256` and
//! Gitea's `X-Gitea-Signature` (HMAC-SHA256 of the raw body) or GitLab's
//! `X-Gitlab-Token`, against the server file's `hooks.git_secrets`. A
//! token is checked before the body is read; the body is bounded before a
//! byte is read and checked before it is parsed. Unsigned or wrongly
//! signed: 401; for a repository no mount follows: 404; neither fetches.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use skillstore::changes::GitPush;
use subtle::ConstantTimeEq;

use super::AppState;
use crate::error::ApiError;
use crate::settings::HookSecret;

/// The largest push event read, in bytes.
pub const MAX_HOOK_BYTES: usize = 1024 * 1024;

/// How the sender proved it knows a secret.
enum Proof {
    /// An HMAC-SHA256 of the body (GitHub, Gitea).
    Signature(Vec<u8>),
    /// The secret itself (GitLab).
    Token(Vec<u8>),
}

/// The proof a request's headers carry; `None` when there is none, or it
/// is not well formed.
fn proof(headers: &HeaderMap) -> Option<Proof> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(value) = text("x-hub-signature-256") {
        return decode_hex(value.strip_prefix("sha256=")?).map(Proof::Signature);
    }
    if let Some(value) = text("x-gitea-signature") {
        return decode_hex(value).map(Proof::Signature);
    }
    // GitLab's token travels in clear with every delivery: it is taken
    // only for a GitLab event, never as a proof for another host's.
    if text("x-github-event").is_some() || text("x-gitea-event").is_some() || text("x-gitlab-event").is_none() {
        return None;
    }
    headers
        .get("x-gitlab-token")
        .map(|v| Proof::Token(v.as_bytes().to_vec()))
}

/// The most push events read at once; past it one is answered 503 with
/// `Retry-After` before its body is read, so slow senders hold few of the
/// server's request slots.
pub const HOOK_READS: usize = 4;

/// How long a push event's body may take to arrive.
pub const HOOK_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

static HOOK_PERMITS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(HOOK_READS);

/// 401 for a push event no configured secret proves.
fn unsigned() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "the push event is not signed with a secret this server takes",
    )
}

/// 32 bytes from 64 hex digits.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// True when `signature` is the HMAC-SHA256 of `body` under one of
/// `secrets` (each compared in constant time).
fn signed(secrets: &[HookSecret], body: &[u8], signature: &[u8]) -> bool {
    secrets.iter().any(|secret| {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&secret.0) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(signature).is_ok()
    })
}

/// True when `token` is one of `secrets`, compared in constant time.
fn token_matches(secrets: &[HookSecret], token: &[u8]) -> bool {
    secrets.iter().any(|secret| bool::from(secret.0.as_ref().ct_eq(token)))
}

/// Whether the event is a push (the only kind acted on), `None` when the
/// headers name no event.
fn is_push(headers: &HeaderMap) -> Option<bool> {
    ["x-github-event", "x-gitea-event", "x-gitlab-event"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .map(|event| matches!(event, "push" | "Push Hook" | "Tag Push Hook"))
}

/// `POST /v1/hooks/git`: see the module's description.
pub async fn git(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let service = &state.service;
    let secrets = service.hook_secrets();
    if secrets.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "this server takes no webhooks (the server file names no hooks.git_secrets)",
        ));
    }
    let proof = proof(&headers).ok_or_else(unsigned)?;
    if let Proof::Token(token) = &proof
        && !token_matches(secrets, token)
    {
        return Err(unsigned());
    }
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("a push event is at most {MAX_HOOK_BYTES} bytes"),
        )
    };
    if declared.is_some_and(|n| n > MAX_HOOK_BYTES as u64) {
        return Err(too_large());
    }
    let Ok(_turn) = HOOK_PERMITS.try_acquire() else {
        return Ok(super::retry_soon("busy reading other push events; try again shortly"));
    };
    let body = match tokio::time::timeout(HOOK_BODY_TIMEOUT, axum::body::to_bytes(body, MAX_HOOK_BYTES)).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return Err(too_large()),
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "a push event's body must arrive within {} s",
                    HOOK_BODY_TIMEOUT.as_secs()
                ),
            ));
        }
    };
    if let Proof::Signature(signature) = &proof
        && !signed(secrets, &body, signature)
    {
        return Err(unsigned());
    }
    match is_push(&headers) {
        Some(true) => {}
        Some(false) => {
            return Ok(Json(serde_json::json!({"refreshed": 0, "ignored": "not a push event"})).into_response());
        }
        None => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid",
                "the request names no event (X-GitHub-Event, X-Gitea-Event or X-Gitlab-Event)",
            ));
        }
    }
    let push = GitPush::parse(&body).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid",
            "the push event names no reference or repository",
        )
    })?;
    let following: Vec<_> = service
        .tenants()
        .into_iter()
        .filter(|t| t.git_locations().iter().any(|location| push.moves(location)))
        .collect();
    if following.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no mount follows that repository and reference",
        ));
    }
    // A tenant not loaded fetches at its first request anyway. The
    // refreshes run as a task of their own: a sender that gives up does
    // not lose what was fetched.
    let loaded: Vec<_> = following.into_iter().filter(|t| t.is_ready()).collect();
    let count = loaded.len();
    let refreshes = tokio::spawn(async move {
        futures::future::join_all(loaded.iter().map(|t| crate::feeds::refresh(t))).await;
    });
    let _ = refreshes.await;
    Ok(Json(serde_json::json!({"refreshed": count})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Vec<HookSecret> {
        vec![HookSecret(b"s3cret".to_vec().into())]
    }

    fn hmac_hex(key: &[u8], body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
        mac.update(body);
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_gitlab_token_proves_only_a_gitlab_event() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, value.parse().unwrap());
            }
            proof(&headers)
        };
        assert!(matches!(
            with(&[("x-gitlab-event", "Push Hook"), ("x-gitlab-token", "s3cret")]),
            Some(Proof::Token(_))
        ));
        for event in ["x-github-event", "x-gitea-event"] {
            assert!(
                with(&[(event, "push"), ("x-gitlab-token", "s3cret")]).is_none(),
                "{event}"
            );
            assert!(
                with(&[
                    (event, "push"),
                    ("x-gitlab-event", "Push Hook"),
                    ("x-gitlab-token", "s3cret")
                ])
                .is_none(),
                "{event}"
            );
        }
        assert!(with(&[("x-gitlab-token", "s3cret")]).is_none(), "no event named");
    }

    #[test]
    fn only_the_right_secret_over_the_same_body_passes() {
        let body = b"{\"ref\":\"refs/heads/main\"}";
        let good = decode_hex(&hmac_hex(b"s3cret", body)).unwrap();
        assert!(signed(&secrets(), body, &good));
        assert!(!signed(&secrets(), b"{\"ref\":\"refs/heads/evil\"}", &good));
        let other = decode_hex(&hmac_hex(b"guess", body)).unwrap();
        assert!(!signed(&secrets(), body, &other));
        assert!(!signed(&secrets(), body, &good[..31]));
        assert!(token_matches(&secrets(), b"s3cret"));
        assert!(!token_matches(&secrets(), b"s3cre"));
        assert!(!token_matches(&secrets(), b""));
        assert!(decode_hex("zz").is_none());
        assert!(decode_hex(&"g".repeat(64)).is_none());
    }
}

//! Errors: the server's own (configuration, startup), and the ones a
//! request gets, with a stable kind and a message that names virtual paths
//! only.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use skillstore::backends::ErrorKind;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The server file or a tenant's configuration is wrong.
    #[error("{0}")]
    Config(String),
    /// The listening address is not allowed or cannot be bound.
    #[error("{0}")]
    Listen(String),
    /// The library refused to assemble a tenant's namespace.
    #[error("tenant `{tenant}`: {source}")]
    Tenant {
        /// The tenant.
        tenant: String,
        /// Why.
        #[source]
        source: skillstore::Error,
    },
}

/// An answer to a request that failed: a status, a stable kind and a
/// message safe to show the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable snake_case kind.
    pub kind: String,
    /// For a person; virtual paths only.
    pub message: String,
}

impl ApiError {
    /// An error with every field given.
    pub fn new(status: StatusCode, kind: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// 401: no token or an unknown one. Says nothing of what exists.
    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required",
        )
    }

    /// 403: the token does not allow this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 503: the tenant's catalog is not loaded yet.
    pub fn loading() -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the catalog is still loading; try again shortly",
        )
    }

    /// 412: the If-Match version is not the current one.
    pub fn stale(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::PRECONDITION_FAILED, "version_conflict", message)
    }

    /// The JSON body `{"error": {"kind", "message"}}`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"kind": self.kind, "message": self.message}})
    }
}

impl From<skillstore::Error> for ApiError {
    fn from(err: skillstore::Error) -> Self {
        // A read of a skill changed since its lock or signature check: the
        // state changed (409), which a refresh settles; 412 is kept for a
        // precondition the caller stated (If-Match, If-None-Match).
        let (status, kind) = if skillstore::integrity::pin::is_changed(&err) {
            (StatusCode::CONFLICT, skillstore::integrity::pin::CHANGED_KIND)
        } else {
            (status_of(err.kind()), err.kind().as_str())
        };
        let message = public_message(&err);
        if status.is_server_error() {
            // The full error (an endpoint, a request URL) is for the log only.
            tracing::warn!(kind, error = ?err, "request failed");
        }
        ApiError::new(status, kind, message)
    }
}

/// The status code a library error kind answers with.
fn status_of(kind: skillstore::error::ErrorKind) -> StatusCode {
    use skillstore::backends::ErrorKind as Storage;
    use skillstore::error::ErrorKind as Kind;
    match kind {
        Kind::Usage | Kind::InvalidSkill | Kind::ContentBlocked => StatusCode::BAD_REQUEST,
        Kind::SkillNotFound | Kind::SourceNotFound => StatusCode::NOT_FOUND,
        Kind::PatchMismatch => StatusCode::CONFLICT,
        Kind::Storage(storage) => match storage {
            Storage::InvalidPath
            | Storage::NotADirectory
            | Storage::IsADirectory
            | Storage::NotRegularFile
            | Storage::SymlinkRefused
            | Storage::SymlinkEscape
            | Storage::SymlinkLoop
            | Storage::DanglingSymlink
            | Storage::WriteThroughSymlink => StatusCode::BAD_REQUEST,
            Storage::NotFound => StatusCode::NOT_FOUND,
            Storage::ReadOnly | Storage::PermissionDenied => StatusCode::FORBIDDEN,
            Storage::AlreadyExists => StatusCode::CONFLICT,
            Storage::VersionConflict => StatusCode::PRECONDITION_FAILED,
            Storage::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Storage::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Storage::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
            Storage::Unsupported => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        },
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The message of `err` a caller may see: a backend error's kind and
/// virtual path, and its detail only for kinds whose detail this project
/// writes itself (never a storage service's words).
pub fn public_message(err: &skillstore::Error) -> String {
    match err {
        skillstore::Error::Backend(e) => backend_message(e),
        other => other.to_string(),
    }
}

/// A backend error as a caller may see it.
pub fn backend_message(e: &skillstore::backends::Error) -> String {
    let mut text = e.kind().describe().to_owned();
    if let Some(path) = e.path() {
        text.push_str(": ");
        text.push_str(path.as_str());
    }
    let own_detail = matches!(
        e.kind(),
        ErrorKind::TooLarge | ErrorKind::VersionConflict | ErrorKind::InvalidPath | ErrorKind::AlreadyExists
    );
    if let (true, Some(detail)) = (own_detail, e.detail()) {
        text.push_str(" (");
        text.push_str(detail);
        text.push(')');
    }
    text
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

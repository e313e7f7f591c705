//! Entity tags: `If-None-Match` on reads (304), `If-Match` and
//! `If-None-Match: *` on writes (412).

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_MATCH, IF_NONE_MATCH};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::error::ApiError;
use crate::tenant::Rendered;

/// How two entity tags are compared (RFC 9110, section 8.8.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    /// `If-None-Match`: a weak tag matches by its opaque part.
    Weak,
    /// `If-Match`: a weak tag never matches.
    Strong,
}

/// True when the header lists `etag` (or `*`) under `comparison`.
fn lists(header: &HeaderValue, etag: &str, comparison: Comparison) -> bool {
    let Ok(text) = header.to_str() else {
        return false;
    };
    text.split(',').map(str::trim).any(|tag| {
        tag == "*"
            || match (tag.strip_prefix("W/"), comparison) {
                (Some(opaque), Comparison::Weak) => opaque == etag,
                (Some(_), Comparison::Strong) => false,
                (None, _) => tag == etag,
            }
    })
}

/// The answer to a read: 304 when `If-None-Match` lists the tag, else the
/// body with its tag and type.
pub fn answer(headers: &HeaderMap, rendered: &Rendered, content_type: &'static str) -> Response {
    answer_bytes(headers, rendered.body.clone(), &rendered.etag, content_type)
}

/// [`answer`] for bytes and a tag given apart.
pub fn answer_bytes(headers: &HeaderMap, body: Bytes, etag: &str, content_type: &'static str) -> Response {
    let tag = HeaderValue::from_str(etag).expect("a tag is hex in quotes");
    if headers
        .get(IF_NONE_MATCH)
        .is_some_and(|h| lists(h, etag, Comparison::Weak))
    {
        return (StatusCode::NOT_MODIFIED, [(ETAG, tag)]).into_response();
    }
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (ETAG, tag),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                axum::http::header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Checks a write's preconditions against the current bytes of the file
/// it replaces (`None`: there is none). `If-Match: *` needs a file,
/// `If-Match: "tag"` needs that content (compared strongly: a weak tag
/// never matches), `If-None-Match: *` needs none.
pub fn check_write(headers: &HeaderMap, current: Option<&Bytes>) -> Result<(), ApiError> {
    let current_tag = current.map(|b| format!("\"{}\"", crate::digest::sha256_hex(b)));
    if let Some(header) = headers.get(IF_MATCH) {
        let ok = match &current_tag {
            Some(tag) => lists(header, tag, Comparison::Strong),
            None => false,
        };
        if !ok {
            return Err(ApiError::stale(
                "the file is not at the version If-Match names; read it again and retry",
            ));
        }
    }
    if let Some(header) = headers.get(IF_NONE_MATCH) {
        let clash = match &current_tag {
            Some(tag) => lists(header, tag, Comparison::Weak),
            None => false,
        };
        if clash {
            return Err(ApiError::stale("the file exists (If-None-Match)"));
        }
    }
    Ok(())
}

/// The content type of a skill file, from its extension. Markup that a
/// browser would run is served as plain text.
pub fn content_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("md" | "markdown") => "text/markdown; charset=utf-8",
        Some("txt" | "html" | "htm" | "xml" | "svg" | "js" | "mjs" | "css") => "text/plain; charset=utf-8",
        Some("py") => "text/x-python; charset=utf-8",
        Some("sh" | "bash") => "text/x-shellscript; charset=utf-8",
        Some("json") => "application/json",
        Some("yaml" | "yml") => "application/yaml",
        Some("csv") => "text/csv; charset=utf-8",
        Some("toml") => "application/toml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("pdf") => "application/pdf",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_tags_match_only_a_weak_comparison() {
        let h = HeaderValue::from_static("\"a\", W/\"b\"");
        assert!(lists(&h, "\"b\"", Comparison::Weak));
        assert!(!lists(&h, "\"b\"", Comparison::Strong));
        assert!(lists(&h, "\"a\"", Comparison::Weak));
        assert!(lists(&h, "\"a\"", Comparison::Strong));
        assert!(!lists(&h, "\"c\"", Comparison::Weak));
        assert!(lists(&HeaderValue::from_static("*"), "\"c\"", Comparison::Strong));
    }

    #[test]
    fn markup_is_plain_text() {
        assert_eq!(content_type("assets/page.html"), "text/plain; charset=utf-8");
        assert_eq!(content_type("SKILL.md"), "text/markdown; charset=utf-8");
        assert_eq!(content_type("scripts/run"), "application/octet-stream");
    }
}

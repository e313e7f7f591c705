//! What a browser can make a request carry, and what the server accepts of
//! it: the `Host` a page on another site reaches a local server with (DNS
//! rebinding), the `Origin` of a page on another site, and the content
//! types a form can send without asking first.

use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, TRANSFER_ENCODING};
use axum::http::{HeaderMap, Method};

use crate::error::ApiError;

/// An origin as `scheme://host[:port]` names it: lowercase scheme and host,
/// the port explicit (the scheme's default when absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

/// Parses an origin (`https://app.example.com`, `http://[::1]:3000`); `None`
/// for anything else, `null` included.
pub fn parse_origin(text: &str) -> Option<Origin> {
    let (scheme, rest) = text.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (host, port) = split_authority(rest)?;
    Some(Origin {
        scheme,
        host,
        port: port.unwrap_or(default_port),
    })
}

/// `host[:port]` or `[v6]:port` as a lowercase host and the port, if any.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// True for a host name or address that can only mean this machine:
/// `localhost`, an address in 127.0.0.0/8, or `::1`.
pub fn is_loopback_host(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What a request must satisfy before anything else is looked at.
#[derive(Debug, Clone, Default)]
pub struct BrowserPolicy {
    /// Open mode: no tokens, so a page on another site must not reach the
    /// server at all.
    pub open: bool,
    /// Origins allowed besides loopback ones.
    pub allowed: Vec<Origin>,
}

impl BrowserPolicy {
    /// The policy for an open server or one with tokens, allowing these
    /// origins (each already checked by [`parse_origin`]).
    pub fn new(open: bool, allowed: &[String]) -> Self {
        BrowserPolicy {
            open,
            allowed: allowed.iter().filter_map(|o| parse_origin(o)).collect(),
        }
    }

    /// Checks a request's headers: in open mode, a loopback `Host`, no
    /// foreign `Origin`, and a body only with a content type a form cannot
    /// send; on `/mcp` (`mcp`), no foreign `Origin` in any mode. Refusals
    /// are 403 and name the header.
    pub fn check(&self, method: &Method, headers: &HeaderMap, mcp: bool) -> Result<(), ApiError> {
        if self.open {
            let host = headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(split_authority);
            if !host.is_some_and(|(h, _)| is_loopback_host(&h)) {
                return Err(ApiError::new(
                    axum::http::StatusCode::FORBIDDEN,
                    "forbidden_host",
                    "without tokens the server answers only requests addressed to a loopback host",
                ));
            }
        }
        if let Some(origin) = headers.get(ORIGIN).filter(|_| self.open || mcp) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(parse_origin)
                .is_some_and(|o| is_loopback_host(&o.host) || self.allowed.contains(&o));
            if !allowed {
                return Err(ApiError::new(
                    axum::http::StatusCode::FORBIDDEN,
                    "forbidden_origin",
                    "requests from this Origin are not allowed",
                ));
            }
        }
        if self.open && has_body(method, headers) && form_can_send(headers) {
            return Err(ApiError::new(
                axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "a request body needs a Content-Type a form cannot send (application/json, application/zip, application/octet-stream, text/markdown, ...)",
            ));
        }
        Ok(())
    }
}

/// True when the request carries a body (HTTP/1.1: a `Transfer-Encoding`,
/// or a `Content-Length` other than 0).
fn has_body(method: &Method, headers: &HeaderMap) -> bool {
    if *method == Method::GET || *method == Method::HEAD {
        return false;
    }
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"))
}

/// True when the content type is absent or one of the three a form (or a
/// script, without asking the server first) can send across sites.
fn form_can_send(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "" | "text/plain" | "application/x-www-form-urlencoded" | "multipart/form-data"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_with_their_default_ports() {
        assert_eq!(
            parse_origin("https://App.example.com"),
            parse_origin("https://app.example.com:443")
        );
        assert_ne!(parse_origin("http://example.com"), parse_origin("https://example.com"));
        assert_eq!(parse_origin("http://[::1]:3000").unwrap().host, "::1");
        for bad in [
            "null",
            "example.com",
            "ftp://x",
            "http://",
            "http://a/b",
            "http://u@a",
            "http://a:99999",
        ] {
            assert!(parse_origin(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn loopback_hosts_are_only_this_machine() {
        for host in ["localhost", "127.0.0.1", "127.5.4.3", "::1", "app.localhost"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["evil.example", "localhost.evil.example", "0.0.0.0", "10.0.0.1", "::"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}

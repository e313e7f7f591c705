//! A caller who may not do what it asks is answered from its headers:
//! whatever the method, route, declared body (up to the body limit,
//! chunked or not) and missing, unknown, malformed or read-only token, the
//! answer comes with no body byte sent. So an anonymous client costs the
//! server one header read, never its body's memory or a request slot.

use std::time::Duration;

use crate::common::*;
use proptest::prelude::*;
use skillstore_server::{Limits, Scope};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WRITER: &str = "writer-token";
const READER: &str = "reader-token";

#[derive(Debug, Clone)]
enum Auth {
    None,
    Unknown,
    Malformed,
    /// A read token on a route that writes.
    ReadOnly,
}

#[derive(Debug, Clone)]
enum Body {
    Length(u64),
    Chunked,
}

fn shape() -> impl Strategy<Value = (&'static str, &'static str, Auth, Body)> {
    let route = proptest::sample::select(
        &[
            ("PUT", "/v1/skills/alpha"),
            ("PATCH", "/v1/skills/alpha"),
            ("DELETE", "/v1/skills/alpha"),
            ("PUT", "/v1/skills/alpha/files/references/x.md"),
            ("DELETE", "/v1/skills/alpha/files/references/guide.md"),
            ("POST", "/v1/archives"),
            ("POST", "/v1/archives?replace=true"),
            ("POST", "/v1/refresh"),
            ("POST", "/mcp"),
            ("GET", "/v1/skills"),
            ("GET", "/metrics"),
            // Discovery is anonymous by nature: a tenant that opted in
            // answers anyone, one that did not and one that does not exist
            // answer the same 404, and neither waits for a body.
            ("GET", "/t/open/.well-known/agent-skills/index.json"),
            ("POST", "/t/open/.well-known/agent-skills/index.json"),
            ("GET", "/t/acme/.well-known/agent-skills/index.json"),
            ("GET", "/t/nobody/.well-known/agent-skills/index.json"),
            ("GET", "/.well-known/agent-skills/index.json"),
        ][..],
    );
    let auth = prop_oneof![
        Just(Auth::None),
        Just(Auth::Unknown),
        Just(Auth::Malformed),
        Just(Auth::ReadOnly),
    ];
    let body = prop_oneof![(1u64..=10 * 1024 * 1024).prop_map(Body::Length), Just(Body::Chunked)];
    (route, auth, body).prop_map(|((method, path), auth, body)| (method, path, auth, body))
}

/// The status a refused caller gets, or `None` when the request is one
/// the caller may make (a read token reading).
fn expected(method: &str, path: &str, auth: &Auth) -> Option<u16> {
    if path.contains("/.well-known/") {
        return match (method, path.starts_with("/t/open/"), auth) {
            ("GET", true, _) => Some(200),
            // Another tenant's token on a write: not this test's question.
            (_, true, Auth::ReadOnly) => None,
            (_, true, _) => Some(401),
            _ => Some(404),
        };
    }
    match auth {
        Auth::ReadOnly if path == "/v1/refresh" || path == "/mcp" || method == "GET" && path != "/metrics" => None,
        Auth::ReadOnly if path == "/metrics" => Some(401),
        Auth::ReadOnly => Some(403),
        _ => Some(401),
    }
}

#[test]
fn refused_callers_are_answered_before_any_body_byte() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let mut settings = settings(vec![
        (
            "acme",
            layered_config(dir.path()),
            vec![(WRITER, Scope::Write), (READER, Scope::Read)],
        ),
        ("open", layered_config(dir.path()), vec![("open-token", Scope::Write)]),
    ]);
    settings.tenants[1].discovery = skillstore_server::Discovery::Public;
    settings.limits = Limits {
        max_body_bytes: 10 * 1024 * 1024,
        max_concurrent_requests: 1,
        ..Limits::default()
    };
    let server = runtime.block_on(Served::start(settings));
    let addr = server.base.trim_start_matches("http://").to_owned();
    let mut config = ProptestConfig::with_cases(96);
    config.failure_persistence = None;
    proptest!(config, |((method, path, auth, body) in shape())| {
        let Some(status) = expected(method, path, &auth) else { return Ok(()) };
        let auth_line = match auth {
            Auth::None => String::new(),
            Auth::Unknown => "Authorization: Bearer not-a-token\r\n".to_owned(),
            Auth::Malformed => "Authorization: Basic d3JpdGVyOnRva2Vu\r\n".to_owned(),
            Auth::ReadOnly => format!("Authorization: Bearer {READER}\r\n"),
        };
        let body_line = match body {
            Body::Length(n) => format!("Content-Length: {n}\r\n"),
            Body::Chunked => "Transfer-Encoding: chunked\r\n".to_owned(),
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth_line}{body_line}\r\n"
        );
        let got = runtime.block_on(async {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 512];
            tokio::time::timeout(Duration::from_secs(20), async {
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
            })
            .await
            .expect("an answer from the headers alone");
            String::from_utf8_lossy(&buf).split(' ').nth(1).and_then(|s| s.parse::<u16>().ok())
        });
        prop_assert_eq!(got, Some(status), "{}", head);
    });
    // The one request slot was never taken: a reader is served at once.
    runtime.block_on(async {
        let client = reqwest::Client::new();
        assert_eq!(get(&client, server.url("/v1/skills"), READER).await.status(), 200);
    });
    drop(server);
}

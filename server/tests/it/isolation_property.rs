//! Tenant isolation as a property: any token (each tenant's, a stranger's,
//! none, a malformed header) on any route with any skill name and path
//! (the hostile corpus and arbitrary strings) gets an answer that holds
//! nothing of another tenant and no host path, never a 500. Two tenants
//! `acme` and `acme-evil` live side by side under one directory.

use std::path::Path;

use crate::common::*;
use proptest::prelude::*;
use skillstore::Config;
use skillstore_backends::testkit::hostile;
use skillstore_server::Scope;

#[derive(Debug, Clone)]
enum Token {
    Tenant(&'static str),
    Stranger(String),
    Missing,
    Malformed(String),
}

#[derive(Debug, Clone)]
enum Route {
    List,
    Show(String),
    File(String, String),
    Prompt(String),
    Write(String, String),
}

const TENANTS: [(&str, &str, &str); 2] = [
    ("acme", "acme-token", "ACME-ONLY"),
    ("acme-evil", "evil-token", "EVIL-ONLY"),
];

fn tenant_tree(root: &Path) {
    for (tenant, _, marker) in TENANTS {
        for skill in ["shared".to_owned(), format!("{tenant}-own")] {
            write(
                root,
                &format!("{tenant}/team/{skill}/SKILL.md"),
                &format!("---\nname: {skill}\ndescription: {marker} {skill}.\n---\n{marker}\n"),
            );
            write(
                root,
                &format!("{tenant}/team/{skill}/references/data.md"),
                &format!("{marker} data\n"),
            );
        }
    }
}

fn segment() -> impl Strategy<Value = String> {
    let corpus = hostile::corpus();
    prop_oneof![
        Just("shared".to_owned()),
        Just("acme-own".to_owned()),
        Just("acme-evil-own".to_owned()),
        Just("..".to_owned()),
        proptest::sample::select(corpus.clone()),
        "[a-z./%-]{0,24}",
        any::<String>(),
    ]
}

fn route() -> impl Strategy<Value = Route> {
    prop_oneof![
        Just(Route::List),
        segment().prop_map(Route::Show),
        (segment(), segment()).prop_map(|(n, p)| Route::File(n, p)),
        "[a-z0-9=&_]{0,20}".prop_map(Route::Prompt),
        (segment(), segment()).prop_map(|(n, p)| Route::Write(n, p)),
    ]
}

fn token() -> impl Strategy<Value = Token> {
    prop_oneof![
        Just(Token::Tenant("acme-token")),
        Just(Token::Tenant("evil-token")),
        "[ -~]{0,40}".prop_map(Token::Stranger),
        Just(Token::Missing),
        "[ -~]{0,40}".prop_map(Token::Malformed),
    ]
}

/// Percent-encodes every byte but unreserved ones and `/`.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[test]
fn no_token_route_or_path_reaches_another_tenant() {
    let dir = tempfile::tempdir().unwrap();
    tenant_tree(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tenants = TENANTS
        .iter()
        .map(|(tenant, token, _)| {
            let mut config = Config::parse("sources:\n  - path: /team\n    writable: true\n").unwrap();
            config
                .set_mount("/", dir.path().join(tenant).to_str().unwrap(), Path::new("."))
                .unwrap();
            (*tenant, config, vec![(*token, Scope::Write)])
        })
        .collect();
    let server = runtime.block_on(Served::start(settings(tenants)));
    let client = reqwest::Client::new();
    let host_dir = dir.path().to_str().unwrap().to_owned();

    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&(token(), route()), |(token, route)| {
            let (method, path) = match &route {
                Route::List => (reqwest::Method::GET, "/v1/skills".to_owned()),
                Route::Show(name) => (reqwest::Method::GET, format!("/v1/skills/{}", encode(name))),
                Route::File(name, path) => (
                    reqwest::Method::GET,
                    format!("/v1/skills/{}/files/{}", encode(name), encode(path)),
                ),
                Route::Prompt(query) => (reqwest::Method::GET, format!("/v1/prompt?{query}")),
                Route::Write(name, path) => (
                    reqwest::Method::PUT,
                    format!("/v1/skills/{}/files/{}", encode(name), encode(path)),
                ),
            };
            let mut request = client.request(method, server.url(&path)).body("x");
            request = match &token {
                Token::Tenant(t) => request.bearer_auth(t),
                Token::Stranger(t) => request.bearer_auth(t),
                Token::Missing => request,
                Token::Malformed(value) => match reqwest::header::HeaderValue::from_str(value) {
                    Ok(value) => request.header("authorization", value),
                    Err(_) => request,
                },
            };
            let (status, body) = runtime.block_on(async {
                let response = request.sent().await;
                (response.status(), response.text().await.unwrap())
            });
            prop_assert!(status.as_u16() < 500, "{status} on {route:?}: {body}");
            prop_assert!(!body.contains(&host_dir), "a host path on {route:?}: {body}");
            match token {
                Token::Tenant(t) => {
                    let other = TENANTS.iter().find(|(_, tok, _)| *tok != t).unwrap().2;
                    prop_assert!(!body.contains(other), "{t} saw {other} on {route:?}: {body}");
                }
                _ => {
                    // A URL that normalizes to no route (`/v1/skills/..`) is
                    // refused the same for everyone, before authentication.
                    let no_route = status.as_u16() == 404 && body.contains("no such route");
                    prop_assert!(
                        status.as_u16() == 401 || no_route,
                        "{:?} on {:?}: {} {}",
                        token,
                        route,
                        status,
                        body
                    );
                    prop_assert!(
                        !body.contains("ONLY") && !body.contains("shared") && !body.contains("acme"),
                        "an unauthenticated caller learned something on {route:?}: {body}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    runtime.block_on(server.stop());
}

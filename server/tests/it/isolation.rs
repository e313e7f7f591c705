//! Tenant isolation through the server: two tenants under prefixes of one
//! bucket of the test S3 server (`acme` and `acme-evil`, one name a prefix
//! of the other), every path of the hostile corpus through the file and
//! skill routes with each token. Nothing of the other tenant, and nothing
//! of the storage (bucket, endpoint, prefixes), ever comes back.
//!
//! The test runs alone in a process of its own (`with_s3_env`): it sets
//! the `AWS_*` variables before any other thread runs.

use crate::common::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, GetSkillRequestParams, ReadResourceRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use skillstore::Config;
use skillstore_backends::testkit::hostile;
use skillstore_backends::testkit::s3_server::S3TestServer;
use skillstore_backends::{ObjectStoreBackend, PutMode, SkillBackend, VPath};
use skillstore_server::Scope;

/// Percent-encodes every byte but unreserved ones and `/`.
fn encode(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn put(store: &ObjectStoreBackend, key: &str, text: String) {
    store
        .put(&VPath::new(format!("/{key}")).unwrap(), text.into(), PutMode::Overwrite)
        .await
        .unwrap();
}

#[test]
fn tenants_see_nothing_of_each_other_or_of_the_storage() {
    with_s3_env(run);
}

async fn run(s3: S3TestServer) {
    let bucket = s3.create_bucket();
    let store = ObjectStoreBackend::new(s3.store(&bucket), "").unwrap();
    for (tenant, marker, word) in [
        ("acme", "ACME-ONLY", "roadrunner"),
        ("acme-evil", "EVIL-ONLY", "coyote"),
    ] {
        for skill in ["shared", &format!("{tenant}-own")] {
            put(
                &store,
                &format!("tenants/{tenant}/team/{skill}/SKILL.md"),
                format!("---\nname: {skill}\ndescription: {marker} {skill}.\n---\n{marker} {word}\n"),
            )
            .await;
            put(
                &store,
                &format!("tenants/{tenant}/team/{skill}/references/data.md"),
                format!("{marker} data\n"),
            )
            .await;
        }
    }
    let template = Config::parse(&format!(
        "mounts:\n  - at: /\n    location: s3://{bucket}/tenants/{{tenant}}\nsources:\n  - path: /team\n    writable: true\n"
    ))
    .unwrap();
    let instantiate = |name: &str| {
        let mut config = template.clone();
        config.mounts[0].location = config.mounts[0].location.replace("{tenant}", name);
        config
    };
    let ghost =
        Config::parse("mounts:\n  - at: /\n    location: s3://no-such-bucket-here/x\nsources:\n  - path: /team\n")
            .unwrap();
    let server = Served::start(settings(vec![
        ("acme", instantiate("acme"), vec![("acme-token", Scope::Write)]),
        (
            "acme-evil",
            instantiate("acme-evil"),
            vec![("evil-token", Scope::Write)],
        ),
        ("ghost", ghost, vec![("ghost-token", Scope::Read)]),
    ]))
    .await;
    let client = reqwest::Client::new();
    let endpoint = s3.endpoint().trim_start_matches("http://").to_owned();
    let leaks = |text: &str, other_marker: &str| -> Option<String> {
        [
            other_marker,
            bucket.as_str(),
            endpoint.as_str(),
            "tenants/",
            "s3://",
            "no-such-bucket-here",
        ]
        .into_iter()
        .find(|needle| text.contains(needle))
        .map(str::to_owned)
    };

    // Each token sees its own tenant's skills.
    for (token, own, other) in [
        ("acme-token", "ACME-ONLY", "EVIL-ONLY"),
        ("evil-token", "EVIL-ONLY", "ACME-ONLY"),
    ] {
        let text = get(&client, server.url("/v1/skills"), token)
            .await
            .text()
            .await
            .unwrap();
        assert!(text.contains(own), "{text}");
        assert_eq!(leaks(&text, other), None, "{text}");
        let data = get(&client, server.url("/v1/skills/shared/files/references/data.md"), token)
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(data, format!("{own} data\n"));
    }
    let r = get(&client, server.url("/v1/skills/acme-own"), "evil-token").await;
    assert_eq!(r.status(), 404);

    // Search: each tenant's own index. A word only the other tenant holds
    // answers exactly as a word nobody holds; a word both hold finds only
    // the caller's own skills.
    for (token, own, other_word, own_names) in [
        ("acme-token", "ACME-ONLY", "coyote", ["acme-own", "shared"]),
        ("evil-token", "EVIL-ONLY", "roadrunner", ["acme-evil-own", "shared"]),
    ] {
        for word in [other_word, "nowhere"] {
            let text = get(&client, server.url(&format!("/v1/search?q={word}")), token)
                .await
                .text()
                .await
                .unwrap();
            assert_eq!(text, r#"{"results":[]}"#, "{word} with {token}");
        }
        let body: serde_json::Value = get(&client, server.url("/v1/search?q=only&limit=50"), token)
            .await
            .json()
            .await
            .unwrap();
        let mut names: Vec<&str> = body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, own_names, "{body}");
        assert!(body.to_string().contains(own), "{body}");
    }

    // A tenant whose storage cannot be listed learns that, and not where.
    let text = get(&client, server.url("/v1/skills"), "ghost-token")
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("\"diagnostics\":[{"), "{text}");
    assert_eq!(leaks(&text, "ACME-ONLY"), None, "{text}");

    // The hostile corpus through every read route, with each token.
    let corpus = hostile::corpus();
    let mut requests = 0;
    for (token, other) in [
        ("acme-token", "EVIL-ONLY"),
        ("evil-token", "ACME-ONLY"),
        ("ghost-token", "ACME-ONLY"),
    ] {
        for path in &corpus {
            let relative = path.trim_start_matches('/');
            for url in [
                format!("/v1/skills/shared/files/{}", encode(relative)),
                format!("/v1/skills/shared/files/references/{}", encode(relative)),
                format!("/v1/skills/{}", encode(relative).replace('/', "%2F")),
                format!("/v1/skills/{}/files/SKILL.md", encode(relative).replace('/', "%2F")),
            ] {
                let r = get(&client, server.url(&url), token).await;
                let status = r.status();
                let text = r.text().await.unwrap();
                requests += 1;
                assert!(status.as_u16() < 500, "{status} for {url}: {text}");
                assert_eq!(leaks(&text, other), None, "{url} with {token}: {text}");
                if status.is_client_error() && status != 404 && status != 405 {
                    let body: serde_json::Value =
                        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{url}: {text}"));
                    assert!(body["error"]["kind"].is_string(), "{text}");
                }
            }
        }
    }
    assert!(requests >= 6000, "{requests}");

    // The same corpus through the MCP tools and resources, with each token.
    for (token, other) in [("acme-token", "EVIL-ONLY"), ("evil-token", "ACME-ONLY")] {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")).auth_header(token),
        );
        let client = ().serve(transport).await.expect("an MCP session");
        for path in &corpus {
            let relative = path.trim_start_matches('/');
            let mut answers = Vec::new();
            for (tool, arguments) in [
                (
                    "read_skill_file",
                    serde_json::json!({"name": "shared", "path": relative}),
                ),
                ("read_skill_file", serde_json::json!({"name": "shared", "path": path})),
                ("load_skill", serde_json::json!({"name": relative})),
            ] {
                let serde_json::Value::Object(arguments) = arguments else {
                    unreachable!()
                };
                let result = client
                    .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
                    .await;
                answers.push(format!("{result:?}"));
            }
            for uri in [
                format!("skill://shared/{}", encode(relative)),
                format!("skill://{}/SKILL.md", encode(relative).replace('/', "%2F")),
            ] {
                answers.push(format!(
                    "{:?}",
                    client.read_resource(ReadResourceRequestParams::new(uri)).await
                ));
            }
            answers.push(format!(
                "{:?}",
                client
                    .get_skill(GetSkillRequestParams::new(format!(
                        "skill://{}/SKILL.md",
                        encode(relative)
                    )))
                    .await
            ));
            for answer in answers {
                assert_eq!(leaks(&answer, other), None, "{path:?} with {token}: {answer}");
            }
        }
        let skills = client.list_all_skills().await.unwrap();
        assert_eq!(leaks(&format!("{skills:?}"), other), None);
        for query in ["roadrunner coyote", "EVIL-ONLY ACME-ONLY data"] {
            let serde_json::Value::Object(arguments) = serde_json::json!({"query": query, "limit": 50}) else {
                unreachable!()
            };
            let found = client
                .call_tool(CallToolRequestParams::new("search_skills").with_arguments(arguments))
                .await
                .unwrap();
            let results = found.structured_content.as_ref().unwrap()["results"]
                .as_array()
                .unwrap()
                .clone();
            assert_eq!(results.len(), 2, "{found:?}");
            assert_eq!(leaks(&format!("{found:?}"), other), None, "{found:?}");
        }
        let _ = client.cancel().await;
    }

    // Writes land in the writer's own prefix only.
    let r = client
        .put(server.url("/v1/skills/shared/files/references/data.md"))
        .bearer_auth("evil-token")
        .body("EVIL-ONLY rewritten\n")
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    let data = get(
        &client,
        server.url("/v1/skills/shared/files/references/data.md"),
        "acme-token",
    )
    .await
    .text()
    .await
    .unwrap();
    assert_eq!(data, "ACME-ONLY data\n");
    server.stop().await;
}

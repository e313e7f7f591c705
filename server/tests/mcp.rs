//! MCP through rmcp's own client: over streamable HTTP against a served
//! port, and over stdio against `skillstore mcp` as a child process. Every
//! tool, the resources, the prompt and the Skills extension; every digest
//! equals the SHA-256 of the bytes `resources/read` returns.

mod common;

use std::collections::BTreeMap;

use base64::Engine as _;
use common::*;
use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, GetSkillRequestParams, JsonObject, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceRequestParams, ResourceContents, SkillResources,
};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use skillstore_server::Scope;

type Client = RunningService<RoleClient, ()>;

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> rmcp::model::CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .expect("a tool answer")
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content[0].as_text().expect("text content").text.clone()
}

async fn read_bytes(client: &Client, uri: &str) -> Vec<u8> {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|e| panic!("{uri}: {e}"));
    match &result.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone().into_bytes(),
        ResourceContents::BlobResourceContents { blob, .. } => {
            base64::engine::general_purpose::STANDARD.decode(blob).unwrap()
        }
        other => panic!("unexpected contents {other:?}"),
    }
}

/// Every tool, resource, prompt and extension method of a session whose
/// tenant serves the layered tree with `team` writable.
async fn exercise(client: &Client, writable: bool) {
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    let mut expected = vec!["list_skills", "load_skill", "read_skill_file"];
    if writable {
        expected.extend(["create_skill", "patch_skill", "write_skill_file", "delete_skill"]);
    }
    assert_eq!(tools, expected);

    let listed = call(client, "list_skills", json!({})).await;
    let names: Vec<&str> = listed.structured_content.as_ref().unwrap()["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    let filtered = call(client, "list_skills", json!({"query": "BASE WAY"})).await;
    assert_eq!(
        filtered.structured_content.as_ref().unwrap()["skills"][0]["name"],
        "beta"
    );
    assert_eq!(
        filtered.structured_content.as_ref().unwrap()["skills"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let loaded = call(client, "load_skill", json!({"name": "alpha"})).await;
    assert!(text_of(&loaded).contains("Alpha, the team's way."));
    assert_eq!(
        loaded.structured_content.as_ref().unwrap()["files"],
        json!(["references/guide.md"])
    );
    let file = call(
        client,
        "read_skill_file",
        json!({"name": "alpha", "path": "references/guide.md"}),
    )
    .await;
    assert_eq!(text_of(&file), "# Team guide\n");

    // Failures are tool errors that name the kind; the session goes on.
    for (tool, arguments, kind) in [
        ("load_skill", json!({"name": "nope"}), "skill_not_found"),
        (
            "read_skill_file",
            json!({"name": "alpha", "path": "../beta/SKILL.md"}),
            "invalid_path",
        ),
        (
            "read_skill_file",
            json!({"name": "alpha", "path": "/etc/passwd"}),
            "invalid_path",
        ),
        ("read_skill_file", json!({"name": "alpha"}), "bad_request"),
    ] {
        let result = call(client, tool, arguments).await;
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert!(text_of(&result).starts_with(kind), "{}", text_of(&result));
    }
    assert!(
        client
            .call_tool(CallToolRequestParams::new("no_such_tool"))
            .await
            .is_err()
    );

    // Resources: each SKILL.md, a template for the rest.
    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["skill://alpha/SKILL.md", "skill://beta/SKILL.md"]);
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "skill://{name}/{+path}");
    assert_eq!(
        read_bytes(client, "skill://beta/scripts/run.py").await,
        b"print('beta')\n"
    );
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new(
                "skill://alpha/references/..%2F..%2Fbeta"
            ))
            .await
            .is_err()
    );

    // The prompt.
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("skills").with_arguments(args(json!({"style": "xml", "max_chars": 4000}))),
        )
        .await
        .unwrap();
    let rmcp::model::ContentBlock::Text(text) = &prompt.messages[0].content else {
        panic!("a text message");
    };
    assert!(text.text.contains("<available_skills>"), "{}", text.text);

    // The Skills extension: every listed file is readable and its digest is
    // the SHA-256 of the bytes read; frontmatter is the file's.
    let skills = client.list_all_skills().await.unwrap();
    assert_eq!(skills.len(), 2);
    for skill in &skills {
        skill.validate().unwrap();
        let SkillResources::Files(files) = &skill.resources else {
            panic!("a complete manifest");
        };
        for file in files {
            let bytes = read_bytes(client, &file.uri).await;
            let hex: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
            let digest = format!("sha256:{hex}");
            assert_eq!(file.digest, digest, "{}", file.uri);
            assert_eq!(file.size, bytes.len() as u64);
        }
        let md = read_bytes(client, &skill.uri).await;
        assert!(String::from_utf8(md).unwrap().contains(&skill.frontmatter.description));
    }
    let alpha = &skills[0];
    assert_eq!(alpha.frontmatter.description, "Alpha, the team's way.");
    let got = client
        .get_skill(GetSkillRequestParams::new("skill://alpha/SKILL.md"))
        .await
        .unwrap();
    assert_eq!(&got.skill, alpha);
    let unknown = client
        .get_skill(GetSkillRequestParams::new("skill://nope/SKILL.md"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        unknown.contains("-32602") || unknown.contains("unknown skill"),
        "{unknown}"
    );
    let root = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new("skill://alpha"))
        .await
        .unwrap();
    let children: BTreeMap<&str, Option<&str>> = root
        .resources
        .iter()
        .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
        .collect();
    assert_eq!(
        children,
        BTreeMap::from([
            ("skill://alpha/SKILL.md", Some("text/markdown; charset=utf-8")),
            ("skill://alpha/references", Some("inode/directory")),
        ])
    );
    let sub = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new("skill://alpha/references"))
        .await
        .unwrap();
    assert_eq!(sub.resources[0].uri, "skill://alpha/references/guide.md");
    assert!(
        client
            .read_resource_directory(ReadResourceDirectoryRequestParams::new("skill://alpha/SKILL.md"))
            .await
            .is_err()
    );

    if writable {
        // Writes: create, write a file, patch, delete; the listing follows.
        let created = call(
            client,
            "create_skill",
            json!({"name": "gamma", "content": skill_md("gamma", "Gamma from MCP.")}),
        )
        .await;
        assert_eq!(created.is_error, Some(false), "{}", text_of(&created));
        let again = call(
            client,
            "create_skill",
            json!({"name": "gamma", "content": skill_md("gamma", "Again.")}),
        )
        .await;
        assert!(text_of(&again).starts_with("already_exists"), "{}", text_of(&again));
        let written = call(
            client,
            "write_skill_file",
            json!({"name": "gamma", "path": "references/notes.md", "content": "notes\n"}),
        )
        .await;
        assert_eq!(written.is_error, Some(false), "{}", text_of(&written));
        let patched = call(
            client,
            "patch_skill",
            json!({"name": "gamma", "find": "Gamma from MCP.", "replace": "Gamma, patched."}),
        )
        .await;
        assert_eq!(patched.is_error, Some(false), "{}", text_of(&patched));
        let gamma = client
            .get_skill(GetSkillRequestParams::new("skill://gamma/SKILL.md"))
            .await
            .unwrap();
        assert_eq!(gamma.skill.frontmatter.description, "Gamma, patched.");
        let SkillResources::Files(files) = &gamma.skill.resources else {
            panic!("a complete manifest");
        };
        assert_eq!(files.len(), 2);
        let deleted = call(client, "delete_skill", json!({"name": "gamma"})).await;
        assert_eq!(deleted.is_error, Some(false), "{}", text_of(&deleted));
        let gone = call(client, "load_skill", json!({"name": "gamma"})).await;
        assert!(text_of(&gone).starts_with("skill_not_found"));
    }
}

async fn http_client(base: &str, token: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token),
    );
    ().serve(transport).await.expect("an MCP session")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_serves_every_tool_resource_prompt_and_skill() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("writer", Scope::Write), ("reader", Scope::Read)],
    )]))
    .await;
    let writer = http_client(&server.base, "writer").await;
    exercise(&writer, true).await;
    let reader = http_client(&server.base, "reader").await;
    exercise(&reader, false).await;
    // Writes are not even offered to a reader.
    let refused = reader
        .call_tool(CallToolRequestParams::new("delete_skill").with_arguments(args(json!({"name": "alpha"}))))
        .await;
    assert!(refused.is_err());
    // Without a token there is no session.
    let transport =
        StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")));
    assert!(().serve(transport).await.is_err());
    let _ = writer.cancel().await;
    let _ = reader.cancel().await;
    server.stop().await;
}

/// A client that reports each `notifications/resources/list_changed`.
#[derive(Clone)]
struct Notified(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Notified {
    async fn on_resource_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_that_changes_the_catalog_notifies_the_session() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")).auth_header("reader"),
    );
    let client = Notified(tx).serve(transport).await.expect("an MCP session");
    // A refresh that changes nothing says nothing.
    let http = reqwest::Client::new();
    let refresh = || http.post(server.url("/v1/refresh")).bearer_auth("reader").send();
    assert_eq!(refresh().await.unwrap().status(), 200);
    write(dir.path(), "team/delta/SKILL.md", &skill_md("delta", "Delta."));
    assert_eq!(refresh().await.unwrap().status(), 200);
    // A bound on the wait turns a missing notification into a failure, not a hang.
    tokio::time::timeout(std::time::Duration::from_secs(120), rx.recv())
        .await
        .expect("a list_changed notification")
        .expect("the session is open");
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 3);
    assert!(rx.try_recv().is_err(), "one change, one notification");
    let _ = client.cancel().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serves_the_same_through_the_command() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(
        dir.path(),
        "skillstore.yaml",
        "sources:\n  - path: /base\n  - path: /team\n    writable: true\n",
    );
    let mut command = tokio::process::Command::new(skillstore_binary());
    command.arg("mcp").current_dir(dir.path());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("an MCP session");
    exercise(&client, true).await;
    let _ = client
        .list_skills(Some(PaginatedRequestParams::default()))
        .await
        .unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_are_computed_once_per_file_version() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let tenant = server.service.tenants()[0].clone();
    let client = http_client(&server.base, "reader").await;
    let files = |skills: &[rmcp::model::Skill]| -> usize {
        skills
            .iter()
            .map(|s| match &s.resources {
                SkillResources::Files(f) => f.len(),
                _ => 0,
            })
            .sum()
    };
    let first = client.list_all_skills().await.unwrap();
    let hashed = tenant.digests.computed();
    assert_eq!(hashed, files(&first) as u64);
    // Again, and after a refresh that rebuilds every manifest: no file is hashed again.
    let second = client.list_all_skills().await.unwrap();
    assert_eq!(first, second);
    let http = reqwest::Client::new();
    let refresh = || http.post(server.url("/v1/refresh")).bearer_auth("reader").send();
    assert_eq!(refresh().await.unwrap().status(), 200);
    let third = client.list_all_skills().await.unwrap();
    assert_eq!(first, third);
    assert_eq!(tenant.digests.computed(), hashed);
    // A new version of one file is hashed once, and its digest is the new bytes'.
    write(
        dir.path(),
        "team/alpha/references/guide.md",
        "# Team guide, second edition\n",
    );
    assert_eq!(refresh().await.unwrap().status(), 200);
    let fourth = client.list_all_skills().await.unwrap();
    assert_eq!(tenant.digests.computed(), hashed + 1);
    let SkillResources::Files(alpha) = &fourth[0].resources else {
        panic!("a complete manifest");
    };
    let guide = alpha.iter().find(|f| f.uri.ends_with("guide.md")).unwrap();
    let hex: String = Sha256::digest(b"# Team guide, second edition\n")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(guide.digest, format!("sha256:{hex}"));
    let _ = client.cancel().await;
    server.stop().await;
}

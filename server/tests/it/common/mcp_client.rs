//! rmcp's client against the server: helpers, and one pass over every
//! tool, resource, prompt and Skills-extension method.

use std::collections::BTreeMap;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, GetSkillRequestParams, JsonObject,
    ReadResourceDirectoryRequestParams, ReadResourceRequestParams, ResourceContents, SkillResources,
};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::skill_md;

pub type Client = RunningService<RoleClient, ()>;

pub fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

pub async fn call(client: &Client, tool: &'static str, arguments: Value) -> rmcp::model::CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .expect("a tool answer")
}

pub fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content[0].as_text().expect("text content").text.clone()
}

pub async fn read_bytes(client: &Client, uri: &str) -> Vec<u8> {
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
pub async fn exercise(client: &Client, writable: bool) {
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    let mut expected = vec!["list_skills", "search_skills", "load_skill", "read_skill_file"];
    if writable {
        expected.extend([
            "create_skill",
            "patch_skill",
            "write_skill_file",
            "delete_skill",
            "skill_history",
            "rollback_skill",
        ]);
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

    let found = call(client, "search_skills", json!({"query": "the team's way", "limit": 5})).await;
    let results = &found.structured_content.as_ref().unwrap()["results"];
    assert_eq!(results[0]["name"], "alpha", "{results}");
    assert_eq!(results[0]["source"], "team");
    assert_eq!(results[0]["uri"], "skill://alpha/SKILL.md");

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
        // History: create, write_file, patch; a rollback to the create
        // restores SKILL.md and removes the file written after it.
        let history = call(client, "skill_history", json!({"name": "gamma"})).await;
        let entries = history.structured_content.as_ref().unwrap()["entries"]
            .as_array()
            .unwrap()
            .clone();
        let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["create", "write_file", "patch"]);
        assert!(!text_of(&history).contains("Gamma from MCP."), "no earlier contents");
        assert!(!text_of(&history).contains("version"), "no versions");
        assert_eq!(
            entries[1]["files"],
            json!([{"path": "references/notes.md", "event": "created"}])
        );
        let missing = call(client, "rollback_skill", json!({"name": "gamma", "id": 9})).await;
        assert_eq!(text_of(&missing), "not_found: `gamma` has no history entry 9");
        let rolled = call(client, "rollback_skill", json!({"name": "gamma", "id": 1})).await;
        assert_eq!(rolled.is_error, Some(false), "{}", text_of(&rolled));
        let gamma = client
            .get_skill(GetSkillRequestParams::new("skill://gamma/SKILL.md"))
            .await
            .unwrap();
        assert_eq!(gamma.skill.frontmatter.description, "Gamma from MCP.");
        let deleted = call(client, "delete_skill", json!({"name": "gamma"})).await;
        assert_eq!(deleted.is_error, Some(false), "{}", text_of(&deleted));
        let gone = call(client, "load_skill", json!({"name": "gamma"})).await;
        assert!(text_of(&gone).starts_with("skill_not_found"));
    }
}

pub async fn http_client(base: &str, token: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token),
    );
    ().serve(transport).await.expect("an MCP session")
}

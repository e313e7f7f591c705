//! MCP through rmcp's own client: over streamable HTTP against a served
//! port, and over stdio against `skillstore mcp` as a child process. Every
//! tool, the resources, the prompt and the Skills extension; every digest
//! equals the SHA-256 of the bytes `resources/read` returns.

use crate::common::mcp_client::*;
use crate::common::*;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, SkillResources};
use rmcp::service::{RoleClient, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::json;
use sha2::{Digest, Sha256};
use skillstore_server::Scope;

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
    let hashed = tenant.digests_computed();
    assert_eq!(hashed, files(&first) as u64);
    // Again, and after a refresh that rebuilds every manifest: no file is hashed again.
    let second = client.list_all_skills().await.unwrap();
    assert_eq!(first, second);
    let http = reqwest::Client::new();
    let refresh = || http.post(server.url("/v1/refresh")).bearer_auth("reader").send();
    assert_eq!(refresh().await.unwrap().status(), 200);
    let third = client.list_all_skills().await.unwrap();
    assert_eq!(first, third);
    assert_eq!(tenant.digests_computed(), hashed);
    // A new version of one file is hashed once, and its digest is the new bytes'.
    write(
        dir.path(),
        "team/alpha/references/guide.md",
        "# Team guide, second edition\n",
    );
    assert_eq!(refresh().await.unwrap().status(), 200);
    let fourth = client.list_all_skills().await.unwrap();
    assert_eq!(tenant.digests_computed(), hashed + 1);
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

/// Raw lines to `skillstore mcp`: a line that is not JSON is answered
/// -32700 and the session goes on; JSON that is no message is -32600; a
/// known method with parameters it cannot take (skills/get with `name`
/// instead of `uri`) is -32602 naming what is missing, an unknown method
/// -32601; a good request after all that is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_answers_unreadable_lines_and_bad_params_as_json_rpc_says() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(
        dir.path(),
        "skillstore.yaml",
        "sources:\n  - path: /base\n  - path: /team\n",
    );
    let mut child = tokio::process::Command::new(skillstore_binary())
        .arg("mcp")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = async |line: &str| -> serde_json::Value {
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(20), stdout.next_line())
            .await
            .expect("an answer")
            .unwrap()
            .expect("a line");
        serde_json::from_str(&answer).unwrap()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let first = format!("{init}\n{initialized}");
    assert!(exchange(&first).await["result"].is_object());

    let parse = exchange("this is not json").await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], serde_json::Value::Null);
    let invalid = exchange(r#"{"id": 7, "no": "method"}"#).await;
    assert_eq!(
        (invalid["error"]["code"].clone(), invalid["id"].clone()),
        (json!(-32600), json!(7)),
        "{invalid}"
    );
    let params = exchange(r#"{"jsonrpc":"2.0","id":2,"method":"skills/get","params":{"name":"alpha"}}"#).await;
    assert_eq!(params["error"]["code"], -32602, "{params}");
    assert!(params["error"]["message"].as_str().unwrap().contains("uri"), "{params}");
    let unknown = exchange(r#"{"jsonrpc":"2.0","id":3,"method":"skills/nothing","params":{}}"#).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let good =
        exchange(r#"{"jsonrpc":"2.0","id":4,"method":"skills/get","params":{"uri":"skill://alpha/SKILL.md"}}"#).await;
    assert_eq!(good["id"], 4, "{good}");
    assert!(good["result"].is_object(), "{good}");
    drop(stdin);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait()).await;
}

/// The input schema of `tool` in `tools`, by name.
fn input_schema<'a>(tools: &'a [rmcp::model::Tool], tool: &str) -> &'a rmcp::model::JsonObject {
    &tools
        .iter()
        .find(|t| t.name == tool)
        .unwrap_or_else(|| panic!("no tool {tool}"))
        .input_schema
}

/// The required fields of a schema, sorted, and its properties' names, sorted.
fn fields(schema: &rmcp::model::JsonObject) -> (Vec<String>, Vec<String>) {
    let mut required: Vec<String> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    required.sort();
    let mut properties: Vec<String> = schema["properties"].as_object().unwrap().keys().cloned().collect();
    properties.sort();
    (required, properties)
}

/// What `tools/list` offers a reader and a writer: the read tools to both,
/// the write tools to the writer only, each schema an object with its
/// required fields, every property described, and the bounds the handlers
/// enforce (`limit` 1..=50, `count` and `id` at least 1). A value out of
/// bounds or of the wrong type is a tool error naming `bad_request`, and a
/// reader's call to a write tool is refused as a call to no tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_schemas_give_required_fields_and_bounds_by_scope() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("writer", Scope::Write), ("reader", Scope::Read)],
    )]))
    .await;
    let reader = http_client(&server.base, "reader").await;
    let writer = http_client(&server.base, "writer").await;
    let read_tools = reader.list_all_tools().await.unwrap();
    let write_tools = writer.list_all_tools().await.unwrap();
    let names = |tools: &[rmcp::model::Tool]| -> Vec<String> { tools.iter().map(|t| t.name.to_string()).collect() };
    assert_eq!(
        names(&read_tools),
        ["list_skills", "search_skills", "load_skill", "read_skill_file"]
    );
    assert_eq!(names(&write_tools)[..4], names(&read_tools)[..]);
    let s = |v: &[&str]| -> Vec<String> { v.iter().map(|x| (*x).to_owned()).collect() };
    let expected: [(&str, Vec<String>, Vec<String>); 10] = [
        ("list_skills", s(&[]), s(&["query"])),
        ("search_skills", s(&["query"]), s(&["limit", "query"])),
        ("load_skill", s(&["name"]), s(&["name"])),
        ("read_skill_file", s(&["name", "path"]), s(&["name", "path"])),
        ("create_skill", s(&["content", "name"]), s(&["content", "name"])),
        (
            "patch_skill",
            s(&["find", "name", "replace"]),
            s(&["count", "file", "find", "name", "replace"]),
        ),
        (
            "write_skill_file",
            s(&["content", "name", "path"]),
            s(&["content", "name", "path"]),
        ),
        ("delete_skill", s(&["name"]), s(&["name"])),
        ("skill_history", s(&["name"]), s(&["name"])),
        ("rollback_skill", s(&["id", "name"]), s(&["id", "name"])),
    ];
    assert_eq!(names(&write_tools), expected.iter().map(|e| e.0).collect::<Vec<_>>());
    for (tool, required, properties) in &expected {
        let schema = input_schema(&write_tools, tool);
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(&fields(schema), &(required.clone(), properties.clone()), "{tool}");
        for (property, spec) in schema["properties"].as_object().unwrap() {
            let description = spec["description"].as_str().unwrap_or_default();
            assert!(!description.is_empty(), "{tool}.{property} has a description");
        }
        assert!(
            !write_tools
                .iter()
                .find(|t| t.name == *tool)
                .unwrap()
                .description
                .as_deref()
                .unwrap_or_default()
                .is_empty()
        );
    }
    for tool in &read_tools {
        assert_eq!(
            tool.input_schema.as_ref(),
            input_schema(&write_tools, &tool.name),
            "one schema for both"
        );
    }
    let bound =
        |tool: &str, property: &str, key: &str| input_schema(&write_tools, tool)["properties"][property][key].clone();
    assert_eq!(bound("search_skills", "limit", "minimum"), json!(1));
    assert_eq!(bound("search_skills", "limit", "maximum"), json!(50));
    assert_eq!(bound("patch_skill", "count", "minimum"), json!(1));
    assert_eq!(bound("rollback_skill", "id", "minimum"), json!(1));

    for (arguments, kind) in [
        (json!({"query": "alpha", "limit": 0}), "bad_request"),
        (json!({"query": "alpha", "limit": 51}), "bad_request"),
        (json!({"query": "alpha", "limit": "ten"}), "bad_request"),
        (json!({"limit": 5}), "bad_request"),
    ] {
        let result = call(&reader, "search_skills", arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{arguments}");
        assert!(text_of(&result).starts_with(kind), "{arguments}: {}", text_of(&result));
    }
    let zero = call(
        &writer,
        "patch_skill",
        json!({"name": "alpha", "find": "a", "replace": "b", "count": -1}),
    )
    .await;
    assert!(text_of(&zero).starts_with("bad_request"), "{}", text_of(&zero));
    let no_id = call(&writer, "rollback_skill", json!({"name": "alpha"})).await;
    assert!(text_of(&no_id).starts_with("bad_request"), "{}", text_of(&no_id));
    let refused = reader
        .call_tool(
            CallToolRequestParams::new("create_skill").with_arguments(args(json!({"name": "x", "content": "y"}))),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("no tool named `create_skill`"), "{refused}");
    // A client's tool name is its own text, of any length: the answer shows
    // 64 characters of it, escaped.
    let long = format!("{}\u{202e}", "x".repeat(10_000));
    let refused = reader
        .call_tool(CallToolRequestParams::new(long).with_arguments(args(json!({}))))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("no tool named `{}...`", "x".repeat(64))),
        "{}",
        &refused[..refused.len().min(300)]
    );
    assert!(refused.len() < 1_000, "{} bytes", refused.len());
    let _ = reader.cancel().await;
    let _ = writer.cancel().await;
    server.stop().await;
}

/// A skill's `.skillstore/` (skillstore's own metadata: its signature) is
/// offered to the agent by no listing: not `load_skill`'s files, not a
/// directory listing, not a Skills-extension manifest; the skill's other
/// files still are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_listing_offers_a_skills_own_metadata() {
    use rmcp::model::ReadResourceDirectoryRequestParams;
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(dir.path(), "team/alpha/.skillstore/signature", "not a real signature\n");
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let client = http_client(&server.base, "reader").await;
    let loaded = call(&client, "load_skill", json!({"name": "alpha"})).await;
    assert_eq!(
        loaded.structured_content.as_ref().unwrap()["files"],
        json!(["references/guide.md"])
    );
    assert!(!text_of(&loaded).contains(".skillstore"), "{}", text_of(&loaded));
    let root = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new("skill://alpha"))
        .await
        .unwrap();
    let uris: Vec<&str> = root.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["skill://alpha/SKILL.md", "skill://alpha/references"]);
    assert!(
        client
            .read_resource_directory(ReadResourceDirectoryRequestParams::new("skill://alpha/.skillstore"))
            .await
            .is_err()
    );
    let skills = client.list_all_skills().await.unwrap();
    let SkillResources::Files(files) = &skills[0].resources else {
        panic!("a complete manifest");
    };
    let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
    assert_eq!(uris, ["skill://alpha/SKILL.md", "skill://alpha/references/guide.md"]);
    let _ = client.cancel().await;
    server.stop().await;
}

/// The MCP prompt of `skillstore mcp`, whose skills are at their paths in
/// the skill store (no location root), names the tools that read those
/// paths and never the agent's own file-reading tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_names_the_tools_that_read_the_paths_it_lists() {
    use rmcp::model::GetPromptRequestParams;
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(
        dir.path(),
        "skillstore.yaml",
        "sources:\n  - path: /base\n  - path: /team\n",
    );
    let mut command = tokio::process::Command::new(skillstore_binary());
    command.arg("mcp").current_dir(dir.path());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("an MCP session");
    let text_of_prompt = async |style: &str| -> String {
        let prompt = client
            .get_prompt(GetPromptRequestParams::new("skills").with_arguments(args(json!({"style": style}))))
            .await
            .unwrap();
        let rmcp::model::ContentBlock::Text(text) = &prompt.messages[0].content else {
            panic!("a text message");
        };
        text.text.clone()
    };
    let reader = " The paths listed here are in the skill store, not on your disk: read them with the `load_skill` tool (by the skill's name) and the `read_skill_file` tool (by the skill's name and the file's path inside the skill's directory).";
    let markdown = text_of_prompt("markdown").await;
    let opening = format!(
        "## Skills\n\nSkills are folders of instructions, scripts and references for particular kinds of work. Only each skill's name and description are listed here. When a task fits a skill, read its SKILL.md in full before you start, and follow it; open the other files it mentions only when you need them.{reader}\n\nSkill sources"
    );
    assert!(markdown.starts_with(&opening), "{markdown}");
    assert!(
        markdown.contains("  - instructions: `/team/alpha/SKILL.md`"),
        "{markdown}"
    );
    let xml = text_of_prompt("xml").await;
    let opening = format!(
        "The skills below extend what you can do. Each has a name, a description of when it helps, and the location of its SKILL.md. When a task fits a skill, read that file in full before you start and follow it; open the files it mentions only when you need them.{reader}\n"
    );
    assert!(xml.starts_with(&opening), "{xml}");
    for text in [&markdown, &xml] {
        assert!(!text.contains("file-reading tool"), "{text}");
    }
    client.cancel().await.unwrap();
}

/// `completion/complete`: skill names for the file template's `{name}`,
/// the skill's files (never its `.skillstore/`) for `{+path}` with the name
/// given, the prompt's `style`; by prefix, at most 100 values with the
/// total and `hasMore`, nothing for an unknown skill or argument.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_offers_names_paths_and_styles_bounded() {
    use rmcp::model::{ArgumentInfo, CompleteRequestParams, CompletionContext, Reference};
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(dir.path(), "team/alpha/.skillstore/signature", "not a real signature\n");
    for i in 0..120 {
        let name = format!("s{i:03}");
        write(dir.path(), &format!("team/{name}/SKILL.md"), &skill_md(&name, "Many."));
    }
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let client = http_client(&server.base, "reader").await;
    let complete = async |reference: Reference, argument: &str, value: &str, name: Option<&str>| {
        let mut request = CompleteRequestParams::new(reference, ArgumentInfo::new(argument, value));
        if let Some(name) = name {
            request.context = Some(CompletionContext::with_arguments(
                [("name".to_owned(), name.to_owned())].into_iter().collect(),
            ));
        }
        client.complete(request).await.unwrap().completion
    };
    let template = || Reference::for_resource("skill://{name}/{+path}");
    let alpha = complete(template(), "name", "a", None).await;
    assert_eq!(alpha.values, ["alpha"]);
    assert_eq!(alpha.has_more, Some(false));
    let many = complete(template(), "name", "s", None).await;
    assert_eq!(many.values.len(), 100);
    assert_eq!(many.values[0], "s000");
    assert_eq!((many.total, many.has_more), (Some(120), Some(true)));
    let paths = complete(template(), "path", "", Some("alpha")).await;
    assert_eq!(paths.values, ["SKILL.md", "references/guide.md"]);
    let refs = complete(template(), "path", "ref", Some("alpha")).await;
    assert_eq!(refs.values, ["references/guide.md"]);
    assert!(complete(template(), "path", "", Some("nope")).await.values.is_empty());
    assert!(complete(template(), "path", "", None).await.values.is_empty());
    let style = complete(Reference::for_prompt("skills"), "style", "x", None).await;
    assert_eq!(style.values, ["xml"]);
    assert!(
        complete(Reference::for_prompt("other"), "style", "", None)
            .await
            .values
            .is_empty()
    );
    let _ = client.cancel().await;
    server.stop().await;
}

/// Two tenants of one server: each caller's completions offer its own
/// tenant's skill names and files only, never the other's, through the
/// official client of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_offers_each_tenant_only_its_own_names_and_files() {
    use rmcp::model::{ArgumentInfo, CompleteRequestParams, CompletionContext, Reference};
    let acme_dir = tempfile::tempdir().unwrap();
    let globex_dir = tempfile::tempdir().unwrap();
    layered_tree(acme_dir.path());
    layered_tree(globex_dir.path());
    write(
        acme_dir.path(),
        "team/acme-secret/SKILL.md",
        &skill_md("acme-secret", "Acme's."),
    );
    write(acme_dir.path(), "team/alpha/references/acme-plan.md", "acme only\n");
    write(
        globex_dir.path(),
        "team/globex-secret/SKILL.md",
        &skill_md("globex-secret", "Globex's."),
    );
    let server = Served::start(settings(vec![
        (
            "acme",
            layered_config(acme_dir.path()),
            vec![("acme-reader", Scope::Read)],
        ),
        (
            "globex",
            layered_config(globex_dir.path()),
            vec![("globex-reader", Scope::Read)],
        ),
    ]))
    .await;
    let template = || Reference::for_resource("skill://{name}/{+path}");
    for (token, own, other, own_file) in [
        (
            "acme-reader",
            "acme-secret",
            "globex-secret",
            Some("references/acme-plan.md"),
        ),
        ("globex-reader", "globex-secret", "acme-secret", None),
    ] {
        let client = http_client(&server.base, token).await;
        let names = client
            .complete(CompleteRequestParams::new(template(), ArgumentInfo::new("name", "")))
            .await
            .unwrap()
            .completion;
        assert!(names.values.iter().any(|n| n == own), "{token}: {:?}", names.values);
        assert!(!names.values.iter().any(|n| n == other), "{token}: {:?}", names.values);
        let other_prefix = &other[..3];
        let guessed = client
            .complete(CompleteRequestParams::new(
                template(),
                ArgumentInfo::new("name", other_prefix),
            ))
            .await
            .unwrap()
            .completion;
        assert!(guessed.values.is_empty(), "{token}: {:?}", guessed.values);
        let mut request = CompleteRequestParams::new(template(), ArgumentInfo::new("path", ""));
        request.context = Some(CompletionContext::with_arguments(
            [("name".to_owned(), "alpha".to_owned())].into_iter().collect(),
        ));
        let paths = client.complete(request).await.unwrap().completion;
        assert_eq!(
            paths.values.iter().any(|p| p == "references/acme-plan.md"),
            own_file.is_some(),
            "{token}: {:?}",
            paths.values
        );
        let _ = client.cancel().await;
    }
    server.stop().await;
}

/// One server, one tenant: the MCP prompt names the MCP tools and the HTTP
/// prompt the HTTP route, whichever was asked first (each front end's
/// prompt is kept apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_and_http_prompts_each_name_their_own_reader() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let client = http_client(&server.base, "reader").await;
    let mcp = prompt_text(&client, json!({"style": "xml"})).await;
    assert!(mcp.contains("the `load_skill` tool"), "{mcp}");
    let http = reqwest::Client::new();
    let text = get(&http, server.url("/v1/prompt?style=xml"), "reader")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("read them with the `GET /v1/skills/NAME/files/PATH` route of this server"),
        "{text}"
    );
    assert!(!text.contains("load_skill"), "{text}");
    let _ = client.cancel().await;
    server.stop().await;
}

/// Past its budget, each front end's prompt names its own search: MCP the
/// `search_skills` tool (a stdio session has no HTTP), HTTP its route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_past_its_budget_names_its_own_front_ends_search() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    for i in 0..40 {
        let name = format!("skill-{i:02}");
        write(
            dir.path(),
            &format!("team/{name}/SKILL.md"),
            &skill_md(&name, "Does one task of many, described at some length here."),
        );
    }
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let client = http_client(&server.base, "reader").await;
    let mcp = prompt_text(&client, json!({"max_chars": 2000})).await;
    assert!(
        mcp.contains("find the one a task needs with the `search_skills` tool"),
        "{mcp}"
    );
    assert!(!mcp.contains("GET /v1/search"), "{mcp}");
    let http = reqwest::Client::new();
    let text = get(&http, server.url("/v1/prompt?max_chars=2000"), "reader")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("find the one a task needs with the `GET /v1/search?q=WORDS` route of this server"),
        "{text}"
    );
    assert!(!text.contains("search_skills"), "{text}");
    let _ = client.cancel().await;
    server.stop().await;
}

/// The text of the `skills` prompt `client` gets with `arguments`.
async fn prompt_text(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    arguments: serde_json::Value,
) -> String {
    let prompt = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("skills").with_arguments(args(arguments)))
        .await
        .unwrap();
    let rmcp::model::ContentBlock::Text(text) = &prompt.messages[0].content else {
        panic!("a text message");
    };
    text.text.clone()
}

//! The server's own edges, each test named after the finding it holds
//! closed: open mode and browsers, anonymous callers, slow and idle
//! connections, MCP bounds, manifests under the read guards, session
//! ownership, metrics, refresh and `If-Match`. Raw TCP where what matters
//! is what the server does before a body arrives; rmcp's client where the
//! MCP answer matters.

use std::time::Duration;

use crate::common;
use crate::common::mcp_client::{http_client, text_of};
use crate::common::*;
use rmcp::model::{CallToolRequestParams, GetSkillRequestParams, ListSkillsResult, SkillResources};
use serde_json::{Value, json};
use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
use skillstore_server::tenant::RefreshOutcome;
use skillstore_server::{Limits, Scope, Settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ACME: &str = "acme-token";
const ACME_READ: &str = "acme-read-token";
const EVIL: &str = "acme-evil-token";

/// Two tenants over two copies of the layered tree.
fn two_tenants(root: &std::path::Path, limits: Limits) -> Settings {
    layered_tree(&root.join("acme"));
    layered_tree(&root.join("evil"));
    let mut settings = settings(vec![
        (
            "acme",
            layered_config(&root.join("acme")),
            vec![(ACME, Scope::Write), (ACME_READ, Scope::Read)],
        ),
        (
            "acme-evil",
            layered_config(&root.join("evil")),
            vec![(EVIL, Scope::Write)],
        ),
    ]);
    settings.limits = limits;
    settings
}

fn open_server(root: &std::path::Path) -> Settings {
    layered_tree(root);
    Settings::single(layered_config(root))
}

fn addr(server: &Served) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

/// Sends `head` (and nothing more) on a new connection and reads the
/// answer's status line; `None` when the connection closes first. A server
/// that waits for the body never answers, and the read gives up after 20 s.
async fn status_of_head(addr: &str, head: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    status_line(&mut stream).await
}

async fn status_line(stream: &mut TcpStream) -> Option<u16> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                return Some(());
            }
        }
    })
    .await
    .expect("the server answered or closed within 20 s");
    read?;
    let text = String::from_utf8_lossy(&buf);
    text.split(' ').nth(1)?.parse().ok()
}

/// Reads until the peer closes; true when it did within 20 s.
async fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// A `.skill` archive of a skill named `name`.
async fn archive_of(name: &str) -> Vec<u8> {
    let files = MemoryBackend::new();
    let path = VPath::new(format!("/{name}/SKILL.md")).unwrap();
    files
        .put(&path, skill_md(name, "An archived skill.").into(), PutMode::Overwrite)
        .await
        .unwrap();
    skillstore::pack(
        &files,
        &VPath::new(format!("/{name}")).unwrap(),
        &skillstore::ArchiveLimits::default(),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_1_open_mode_refuses_foreign_hosts_origins_and_form_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(open_server(dir.path())).await;
    let a = addr(&server);
    // DNS rebinding: a page on another site reaches the port by a name of its own.
    for head in [
        "GET /v1/skills HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_owned(),
        "PUT /v1/skills/x HTTP/1.1\r\nHost: evil.example:8080\r\nContent-Type: text/markdown\r\nContent-Length: 5\r\n\r\n"
            .to_owned(),
        "POST /mcp HTTP/1.1\r\nHost: rebound.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
            .to_owned(),
    ] {
        assert_eq!(status_of_head(&a, &head).await, Some(403), "{head}");
    }
    // Cross-site request forgery: a foreign Origin, or a body a form can send.
    let archive = archive_of("x").await;
    let client = reqwest::Client::new();
    let forged = client
        .post(server.url("/v1/archives"))
        .header("origin", "https://evil.example")
        .header("content-type", "text/plain")
        .body(archive.clone())
        .sent()
        .await;
    assert_eq!(forged.status(), 403);
    for form in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let r = client
            .post(server.url("/v1/archives"))
            .header("content-type", form)
            .body(archive.clone())
            .sent()
            .await;
        assert_eq!(r.status(), 415, "{form}");
    }
    let no_type = client
        .post(server.url("/v1/archives"))
        .body(archive.clone())
        .sent()
        .await;
    assert_eq!(no_type.status(), 415);
    assert!(!dir.path().join("team/x").exists(), "nothing was installed");
    let mcp = client
        .post(server.url("/mcp"))
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{}")
        .sent()
        .await;
    assert_eq!(mcp.status(), 403);
    // The same requests from this machine work.
    let ok = client
        .post(server.url("/v1/archives"))
        .header("origin", format!("http://{a}"))
        .header("content-type", "application/zip")
        .body(archive)
        .sent()
        .await;
    assert_eq!(ok.status(), 201, "{}", ok.text().await.unwrap());
    assert_eq!(client.post(server.url("/v1/refresh")).sent().await.status(), 200);
    server.stop().await;

    // With tokens, /mcp still checks Origin; configured origins pass.
    let dir = tempfile::tempdir().unwrap();
    let mut settings = two_tenants(dir.path(), Limits::default());
    settings.allowed_origins = vec!["https://app.example.com".into()];
    let server = Served::start(settings).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    for (origin, status) in [("https://evil.example", 403), ("https://app.example.com", 200)] {
        let r = client
            .post(server.url("/mcp"))
            .bearer_auth(ACME)
            .header("origin", origin)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .sent()
            .await;
        assert_eq!(r.status(), status, "{origin}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_unauthenticated_requests_are_answered_from_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_concurrent_requests: 2,
        ..Limits::default()
    };
    let server = Served::start(two_tenants(dir.path(), limits)).await;
    let a = addr(&server);
    let big = 10 * 1024 * 1024;
    // Each head declares a body that never comes: the answer must not wait for it.
    for (head, status) in [
        (
            format!(
                "POST /v1/archives HTTP/1.1\r\nHost: x\r\nContent-Type: application/zip\r\nContent-Length: {big}\r\n\r\n"
            ),
            401,
        ),
        (
            format!(
                "PUT /v1/skills/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: {big}\r\n\r\n"
            ),
            401,
        ),
        (
            format!(
                "PUT /v1/skills/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ACME_READ}\r\nContent-Length: {big}\r\n\r\n"
            ),
            403,
        ),
        (
            format!("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {big}\r\n\r\n"),
            401,
        ),
        (
            "PATCH /v1/skills/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned(),
            401,
        ),
    ] {
        assert_eq!(status_of_head(&a, &head).await, Some(status), "{head}");
    }
    // Anonymous writers trickling bodies hold no request slot: another
    // tenant's read is answered while they wait.
    let mut tricklers = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(&a).await.unwrap();
        s.write_all(b"PUT /v1/skills/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
            .await
            .unwrap();
        tricklers.push(s);
    }
    let client = reqwest::Client::new();
    let r = get(&client, server.url("/v1/skills"), EVIL).await;
    assert_eq!(r.status(), 200);
    // Authenticated slow bodies may fill the cap; health checks never wait behind it.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(&a).await.unwrap();
        s.write_all(
            format!("PUT /v1/skills/alpha/files/references/n.md HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ACME}\r\nContent-Type: text/markdown\r\nContent-Length: 1000\r\n\r\nab").as_bytes(),
        )
        .await
        .unwrap();
        holders.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for route in ["/healthz", "/readyz"] {
        let head = format!("GET {route} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status_of_head(&a, &head).await, Some(200), "{route}");
    }
    drop(tricklers);
    drop(holders);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_slow_silent_and_idle_connections_are_closed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        header_read_timeout: Duration::from_millis(300),
        max_connections: 2,
        ..Limits::default()
    };
    let server = Served::start(two_tenants(dir.path(), limits)).await;
    let a = addr(&server);
    // Connected and silent.
    let mut silent = TcpStream::connect(&a).await.unwrap();
    assert!(closed_by_peer(&mut silent).await, "a silent connection stays open");
    // Headers at a byte every 50 ms never complete in time.
    let mut slow = TcpStream::connect(&a).await.unwrap();
    let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut closed = false;
    for byte in head {
        if slow.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        closed || status_line(&mut slow).await.is_none_or(|s| s != 200),
        "slow headers were served"
    );
    // Idle after a keep-alive answer.
    let mut idle = TcpStream::connect(&a).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(status_line(&mut idle).await, Some(200));
    assert!(
        closed_by_peer(&mut idle).await,
        "an idle kept-alive connection stays open"
    );
    // Two open connections fill the bound; a third is served only once one
    // of them has been closed.
    let mut first = TcpStream::connect(&a).await.unwrap();
    let mut second = TcpStream::connect(&a).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let third = status_of_head(&a, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(third, Some(200));
    assert!(closed_by_peer(&mut first).await && closed_by_peer(&mut second).await);
    server.stop().await;
}

/// An MCP `initialize` by raw HTTP; the session id the server gave, if any,
/// and the status.
async fn initialize(client: &reqwest::Client, base: &str, token: &str) -> (u16, Option<String>) {
    let r = client
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .sent()
        .await;
    let id = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (r.status().as_u16(), id)
}

async fn session_request(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    method: reqwest::Method,
    session: &str,
) -> u16 {
    let mut request = client
        .request(method.clone(), format!("{base}/mcp"))
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .header("accept", "application/json, text/event-stream");
    if method == reqwest::Method::POST {
        request = request.json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }
    let r = request.sent().await;
    r.status().as_u16()
}

/// Finding: on one kept-alive connection, the server answered a few 429
/// `too_many_sessions` and then closed the connection without a word, so
/// the client met a broken pipe on its next request. A refusal given
/// before the request's body is read says `Connection: close`, and the
/// connection is closed after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_before_the_body_is_read_says_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        mcp_sessions_per_token: 1,
        ..Limits::default()
    };
    let server = Served::start(two_tenants(dir.path(), limits)).await;
    let client = reqwest::Client::new();
    assert_eq!(initialize(&client, &server.base, ACME).await.0, 200);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    for token in [ACME, "no-such-token"] {
        let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "the connection was kept open after the refusal");
        let head = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        let status = if token == ACME { "429" } else { "401" };
        assert!(head.starts_with(&format!("http/1.1 {status}")), "{head}");
        assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_4_mcp_sessions_and_answers_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        mcp_sessions_per_token: 2,
        mcp_sessions: 3,
        mcp_session_idle: Duration::from_millis(400),
        request_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let settings = two_tenants(dir.path(), limits);
    std::fs::write(
        dir.path().join("acme/team/alpha/references/zeros.bin"),
        vec![0u8; 1 << 20],
    )
    .unwrap();
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();
    // Per token, then in all.
    let (s1, one) = initialize(&client, &server.base, ACME).await;
    let (s2, _) = initialize(&client, &server.base, ACME).await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(initialize(&client, &server.base, ACME).await.0, 429);
    assert_eq!(initialize(&client, &server.base, EVIL).await.0, 200);
    assert_eq!(initialize(&client, &server.base, EVIL).await.0, 429, "the server's cap");
    // Idle sessions are closed and their places given back.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let one = one.unwrap();
    assert_eq!(
        session_request(&client, &server.base, ACME, reqwest::Method::POST, &one).await,
        404
    );
    assert_eq!(
        server
            .service
            .metrics
            .mcp_sessions
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(initialize(&client, &server.base, ACME).await.0, 200);
    // A body that trickles is timed out like any request's.
    let mut s = TcpStream::connect(addr(&server)).await.unwrap();
    s.write_all(
        format!("POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {EVIL}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{").as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(status_line(&mut s).await, Some(503));
    // One copy of a file per answer, and bytes that are not text as base64:
    // the answer is about four thirds of the file, not six times it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mcp = http_client(&server.base, ACME).await;
    let result = mcp
        .call_tool(
            CallToolRequestParams::new("read_skill_file").with_arguments(
                json!({"name": "alpha", "path": "references/zeros.bin"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let size = serde_json::to_vec(&result).unwrap().len();
    assert!(size < (1 << 20) * 4 / 3 + 4096, "{size} bytes for a 1 MiB file");
    assert_eq!(result.structured_content.as_ref().unwrap()["encoding"], "base64");
    let text = mcp
        .call_tool(
            CallToolRequestParams::new("read_skill_file").with_arguments(
                json!({"name": "alpha", "path": "references/guide.md"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&text), "# Team guide\n");
    assert!(text.structured_content.as_ref().unwrap().get("content").is_none());
    mcp.cancel().await.unwrap();
    server.stop().await;
}

/// A skill whose directory holds links in every direction, a FIFO and an
/// oversized file, beside a second skill whose files must stay its own.
#[cfg(unix)]
fn hostile_skill(root: &std::path::Path) {
    use std::os::unix::fs::symlink;
    let skill = root.join("team/alpha");
    symlink(".", skill.join("a")).unwrap();
    symlink(".", skill.join("b")).unwrap();
    symlink("../../base/beta/scripts/run.py", skill.join("borrowed.py")).unwrap();
    // In a read-only layer the mount's own backend lists links anywhere
    // under the mount: this one resolves, and only confinement refuses it.
    symlink(
        "../../team/alpha/references/guide.md",
        root.join("base/beta/borrowed.md"),
    )
    .unwrap();
    symlink("references/guide.md", skill.join("alias.md")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(skill.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let big = std::fs::File::create(skill.join("big.bin")).unwrap();
    big.set_len(11 * 1024 * 1024).unwrap();
}

fn resource_uris(resources: &SkillResources) -> Vec<String> {
    match resources {
        SkillResources::Files(files) => files.iter().map(|f| f.uri.clone()).collect(),
        other => panic!("{other:?}"),
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_5_manifests_list_exactly_what_a_confined_read_serves() {
    let dir = tempfile::tempdir().unwrap();
    let settings = two_tenants(dir.path(), Limits::default());
    hostile_skill(&dir.path().join("acme"));
    let server = Served::start(settings).await;
    let expected = ["SKILL.md", "alias.md", "references/guide.md"];

    let client = reqwest::Client::new();
    let show: Value = get(&client, server.url("/v1/skills/alpha"), ACME)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(show["files"], json!(expected));
    let kinds: Vec<(String, String)> = show["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_owned(),
                d["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (path, kind) in [
        ("/team/alpha/a", "directory_link"),
        ("/team/alpha/b", "directory_link"),
        ("/team/alpha/borrowed.py", "unresolved_link"),
        ("/team/alpha/pipe", "special_file"),
        ("/team/alpha/big.bin", "too_large"),
    ] {
        assert!(
            kinds.contains(&(path.to_owned(), kind.to_owned())),
            "{path} {kind}: {kinds:?}"
        );
    }

    let mcp = http_client(&server.base, ACME).await;
    let skill = mcp
        .get_skill(GetSkillRequestParams::new("skill://alpha/SKILL.md"))
        .await
        .unwrap()
        .skill;
    let uris = resource_uris(&skill.resources);
    assert_eq!(
        uris,
        expected
            .iter()
            .map(|p| format!("skill://alpha/{p}"))
            .collect::<Vec<_>>()
    );
    let meta = &skill.meta.as_ref().expect("what was left out").0;
    let left_out = meta[skillstore_server::mcp::LEFT_OUT_META].as_array().unwrap();
    assert!(
        left_out.contains(&json!({"path": "borrowed.py", "kind": "unresolved_link"})),
        "{left_out:?}"
    );
    let beta = mcp
        .get_skill(GetSkillRequestParams::new("skill://beta/SKILL.md"))
        .await
        .unwrap()
        .skill;
    assert_eq!(
        resource_uris(&beta.resources),
        ["skill://beta/SKILL.md", "skill://beta/scripts/run.py"]
    );
    assert_eq!(
        beta.meta.as_ref().unwrap().0[skillstore_server::mcp::LEFT_OUT_META],
        json!([{"path": "borrowed.md", "kind": "symlink_escape"}])
    );
    // Every listed file is served, and its digest is that of the bytes served.
    if let SkillResources::Files(files) = &skill.resources {
        for file in files {
            let bytes = common::mcp_client::read_bytes(&mcp, &file.uri).await;
            file.verify(&bytes).unwrap();
        }
    }
    let loaded = mcp
        .call_tool(
            CallToolRequestParams::new("load_skill")
                .with_arguments(json!({"name": "alpha"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        loaded.structured_content.as_ref().unwrap()["files"],
        json!(["alias.md", "references/guide.md"])
    );
    // The link out of the skill is not read through any door.
    let borrowed = get(&client, server.url("/v1/skills/alpha/files/borrowed.py"), ACME).await;
    assert_eq!(borrowed.status(), 400);
    mcp.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_6_one_oversized_file_leaves_the_page_whole() {
    let dir = tempfile::tempdir().unwrap();
    let settings = two_tenants(dir.path(), Limits::default());
    let big = std::fs::File::create(dir.path().join("acme/base/beta/big.bin")).unwrap();
    big.set_len(11 * 1024 * 1024).unwrap();
    let server = Served::start(settings).await;
    let mcp = http_client(&server.base, ACME).await;
    let page: ListSkillsResult = mcp.list_skills(None).await.unwrap();
    let names: Vec<&str> = page.skills.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    let beta = &page.skills[1];
    assert_eq!(
        resource_uris(&beta.resources),
        ["skill://beta/SKILL.md", "skill://beta/scripts/run.py"]
    );
    let left_out = &beta.meta.as_ref().unwrap().0[skillstore_server::mcp::LEFT_OUT_META];
    assert_eq!(left_out, &json!([{"path": "big.bin", "kind": "too_large"}]));
    mcp.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_7_a_session_belongs_to_the_token_that_opened_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(two_tenants(dir.path(), Limits::default())).await;
    let client = reqwest::Client::new();
    let (status, session) = initialize(&client, &server.base, ACME).await;
    assert_eq!(status, 200);
    let session = session.unwrap();
    for token in [EVIL, ACME_READ] {
        for method in [reqwest::Method::GET, reqwest::Method::POST, reqwest::Method::DELETE] {
            let status = session_request(&client, &server.base, token, method.clone(), &session).await;
            assert_eq!(status, 404, "{token} {method}");
        }
    }
    // The owner's session is untouched.
    assert_eq!(
        session_request(&client, &server.base, ACME, reqwest::Method::POST, &session).await,
        202
    );
    let closed = session_request(&client, &server.base, ACME, reqwest::Method::DELETE, &session).await;
    assert!((200..300).contains(&closed), "{closed}");
    assert_eq!(
        session_request(&client, &server.base, ACME, reqwest::Method::POST, &session).await,
        404
    );
    server.stop().await;
}

#[test]
fn finding_7_session_ids_are_not_logged_at_info_level() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let file = dir.path().join("server.yaml");
    std::fs::write(
        &file,
        "tenants:\n  - name: acme\n    tokens: [{env: HARDENING_TOKEN, scope: write}]\n    config: {sources: [{path: /base}, {path: /team}]}\n",
    )
    .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (session, text) = runtime.block_on(async {
        let file = file.to_str().unwrap();
        let mut server = ServeProcess::start(
            serve_command(&["--tenants", file])
                .env("RUST_LOG", "info")
                .env("HARDENING_TOKEN", ACME),
        )
        .await;
        server.wait_ready().await;
        let (status, session) = initialize(&server.client, &server.base, ACME).await;
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _ = server.child.kill().await;
        // Everything it wrote: what it said up to its address, then the rest.
        let mut text = server.said.join("\n");
        while let Ok(Some(line)) = server.lines.next_line().await {
            text.push('\n');
            text.push_str(&line);
        }
        (session.unwrap(), text)
    });
    assert!(text.contains("serving 1 tenant"), "{text}");
    assert!(!text.contains(&session), "the session id is in the log:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_8_metrics_need_a_metrics_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(two_tenants(dir.path(), Limits::default())).await;
    let client = reqwest::Client::new();
    for token in [None, Some(ACME), Some(EVIL), Some("nope")] {
        let mut request = client.get(server.url("/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let r = request.sent().await;
        assert_eq!(r.status(), 401, "{token:?}");
        let body = r.text().await.unwrap();
        assert!(!body.contains("tenant") && !body.contains("acme"), "{body}");
    }
    let r = get(&client, server.url("/metrics"), METRICS_TOKEN).await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("skillstore_tenants 2"));
    // Nothing else an anonymous caller may reach counts tenants.
    for route in ["/healthz", "/readyz", "/openapi.json", "/v1/skills", "/nope"] {
        let body = client.get(server.url(route)).sent().await.text().await.unwrap();
        assert!(
            !body.contains("acme") && !body.contains("\"tenants\""),
            "{route}: {body}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_10_concurrent_refreshes_of_a_tenant_share_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(two_tenants(dir.path(), Limits::default())).await;
    let client = reqwest::Client::new();
    let before = refreshes(&client, &server).await;
    let answers =
        futures::future::join_all((0..40).map(|_| client.post(server.url("/v1/refresh")).bearer_auth(ACME).send()))
            .await;
    assert!(answers.into_iter().all(|r| r.unwrap().status() == 200));
    let ran = refreshes(&client, &server).await - before;
    assert!(ran < 40, "forty concurrent refreshes ran {ran}");
    // Forty calls started together: the first runs, every later one waits
    // for it and then shares one more that began after they arrived. A
    // refresh that ends before the next caller arrives lets that caller run
    // its own, so the count depends on timing (1 to 5 on a quiet host, 10
    // seen on a host at load 10); forty in a row, or half of them, would
    // not share.
    let tenant = &server.service.tenants()[0];
    let outcomes = futures::future::join_all((0..40).map(|_| tenant.refresh_shared())).await;
    let ran = outcomes.iter().filter(|(_, ran)| *ran).count();
    assert!((1..20).contains(&ran), "{outcomes:?}");
    assert!(
        outcomes.iter().all(|(o, _)| *o == RefreshOutcome::Fresh),
        "{outcomes:?}"
    );
    server.stop().await;
}

async fn refreshes(client: &reqwest::Client, server: &Served) -> u64 {
    let text = get(client, server.url("/metrics"), METRICS_TOKEN)
        .await
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("skillstore_refresh_total{outcome=\"fresh\"} "))
        .map(|n| n.parse::<u64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_10_if_match_compares_strongly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(two_tenants(dir.path(), Limits::default())).await;
    let client = reqwest::Client::new();
    let current = get(&client, server.url("/v1/skills/alpha/files/references/guide.md"), ACME).await;
    let tag = current.headers()["etag"].to_str().unwrap().to_owned();
    let put = |if_match: String| {
        client
            .put(server.url("/v1/skills/alpha/files/references/guide.md"))
            .bearer_auth(ACME)
            .header("if-match", if_match)
            .header("content-type", "text/markdown")
            .body("# New guide\n")
            .send()
    };
    assert_eq!(put(format!("W/{tag}")).await.unwrap().status(), 412);
    assert_eq!(put(tag).await.unwrap().status(), 200);
    server.stop().await;
}

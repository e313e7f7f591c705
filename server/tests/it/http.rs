//! The HTTP API through a real client against a served port.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::Value;
use skillstore_server::Scope;

const WRITER: &str = "writer-token";
const READER: &str = "reader-token";

async fn served(dir: &std::path::Path) -> Served {
    layered_tree(dir);
    Served::start(settings(vec![(
        "acme",
        layered_config(dir),
        vec![(WRITER, Scope::Write), (READER, Scope::Read)],
    )]))
    .await
}

async fn error_kind(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON error body");
    (status, body["error"]["kind"].as_str().expect("a kind").to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_routes_answer_with_etags_and_304s() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();

    let list = get(&client, server.url("/v1/skills"), READER).await;
    assert_eq!(list.status(), 200);
    let etag = list.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = list.json().await.unwrap();
    let names: Vec<&str> = body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(body["skills"][0]["source"], "team");
    assert_eq!(body["skills"][0]["shadowed"][0]["path"], "/base/alpha/SKILL.md");

    let again = client
        .get(server.url("/v1/skills"))
        .bearer_auth(READER)
        .header("if-none-match", &etag)
        .sent()
        .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    assert!(again.bytes().await.unwrap().is_empty());

    let show = get(&client, server.url("/v1/skills/alpha"), READER).await;
    assert_eq!(show.status(), 200);
    let show_tag = show.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = show.json().await.unwrap();
    assert_eq!(body["description"], "Alpha, the team's way.");
    assert_eq!(body["files"], serde_json::json!(["SKILL.md", "references/guide.md"]));
    let again = client
        .get(server.url("/v1/skills/alpha"))
        .bearer_auth(READER)
        .header("if-none-match", format!("\"other\", W/{show_tag}"))
        .sent()
        .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);

    let file = get(
        &client,
        server.url("/v1/skills/alpha/files/references/guide.md"),
        READER,
    )
    .await;
    assert_eq!(file.status(), 200);
    assert_eq!(file.headers()["content-type"], "text/markdown; charset=utf-8");
    let file_tag = file.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(file.text().await.unwrap(), "# Team guide\n");
    let again = client
        .get(server.url("/v1/skills/alpha/files/references/guide.md"))
        .bearer_auth(READER)
        .header("if-none-match", &file_tag)
        .sent()
        .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let script = get(&client, server.url("/v1/skills/beta/files/scripts/run.py"), READER).await;
    assert_eq!(script.headers()["content-type"], "text/x-python; charset=utf-8");

    let prompt = get(&client, server.url("/v1/prompt?style=xml&max_chars=5000"), READER).await;
    assert_eq!(prompt.status(), 200);
    let prompt_tag = prompt.headers()["etag"].to_str().unwrap().to_owned();
    let text = prompt.text().await.unwrap();
    assert!(
        text.contains("<available_skills>") && text.contains("<name>alpha</name>"),
        "{text}"
    );
    let again = client
        .get(server.url("/v1/prompt?style=xml&max_chars=5000"))
        .bearer_auth(READER)
        .header("if-none-match", &prompt_tag)
        .sent()
        .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let markdown = get(&client, server.url("/v1/prompt"), READER).await;
    assert!(!markdown.text().await.unwrap().contains("<available_skills>"));

    assert_eq!(client.get(server.url("/healthz")).sent().await.status(), 200);
    assert_eq!(client.get(server.url("/readyz")).sent().await.status(), 200);
    let metrics = client
        .get(server.url("/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .sent()
        .await
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("skillstore_http_requests_total{route=\"/v1/skills\",status=\"304\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("skillstore_catalog_skills 2"), "{metrics}");
    assert!(metrics.contains("skillstore_http_request_duration_seconds_bucket{route=\"/v1/skills/{name}\""));
    // The load listed and read the layers; nothing was written.
    assert!(backend_calls(&metrics, "list") > 0, "{metrics}");
    assert!(backend_calls(&metrics, "read") > 0, "{metrics}");
    assert_eq!(backend_calls(&metrics, "put"), 0, "{metrics}");
    server.stop().await;
}

/// The value of `skillstore_backend_calls_total{call="CALL"}`.
fn backend_calls(metrics: &str, call: &str) -> u64 {
    let prefix = format!("skillstore_backend_calls_total{{call=\"{call}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {call} counter in {metrics}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_name_what_went_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();

    // 401: no token, an unknown token, a malformed header; the body says nothing of what exists.
    let none = client.get(server.url("/v1/skills")).sent().await;
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        error_kind(none).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );
    for auth in ["Bearer nope", "Basic abc", "Bearer "] {
        let r = client
            .get(server.url("/v1/skills/alpha"))
            .header("authorization", auth)
            .sent()
            .await;
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth}");
        assert!(!text.contains("alpha") && !text.contains("acme"), "{text}");
    }
    // 404: no skill, no file, no route.
    let r = get(&client, server.url("/v1/skills/gamma"), READER).await;
    assert_eq!(error_kind(r).await, (StatusCode::NOT_FOUND, "skill_not_found".into()));
    let r = get(&client, server.url("/v1/skills/alpha/files/references/none.md"), READER).await;
    assert_eq!(error_kind(r).await, (StatusCode::NOT_FOUND, "not_found".into()));
    let r = get(&client, server.url("/v2/nothing"), READER).await;
    assert_eq!(error_kind(r).await.0, StatusCode::NOT_FOUND);
    // 400: a path leaving the skill, a bad prompt style, a bad query.
    let r = get(
        &client,
        server.url("/v1/skills/alpha/files/..%2F..%2Fbeta%2FSKILL.md"),
        READER,
    )
    .await;
    assert_eq!(error_kind(r).await, (StatusCode::BAD_REQUEST, "invalid_path".into()));
    let r = get(&client, server.url("/v1/prompt?style=html"), READER).await;
    assert_eq!(error_kind(r).await, (StatusCode::BAD_REQUEST, "usage".into()));
    let r = get(&client, server.url("/v1/prompt?max_chars=many"), READER).await;
    assert_eq!(error_kind(r).await.0, StatusCode::BAD_REQUEST);
    // A budget below the fixed text is refused and says how long that is.
    let r = get(&client, server.url("/v1/prompt?max_chars=20"), READER).await;
    let (status, kind) = error_kind(r).await;
    assert_eq!((status, kind.as_str()), (StatusCode::BAD_REQUEST, "bad_request"));
    // 403: a read token writing.
    let r = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(READER)
        .body(skill_md("gamma", "Gamma."))
        .sent()
        .await;
    assert_eq!(error_kind(r).await, (StatusCode::FORBIDDEN, "forbidden".into()));
    // 413: a body over the limit.
    let r = client
        .put(server.url("/v1/skills/gamma/files/references/big.md"))
        .bearer_auth(WRITER)
        .body(vec![b'x'; 65 * 1024])
        .sent()
        .await;
    assert_eq!(error_kind(r).await, (StatusCode::PAYLOAD_TOO_LARGE, "too_large".into()));
    // 400: an invalid SKILL.md is refused by the editor's validation.
    let r = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .body("no frontmatter")
        .sent()
        .await;
    assert_eq!(error_kind(r).await, (StatusCode::BAD_REQUEST, "invalid_skill".into()));
    // 409: a patch whose text is not there.
    let r = client
        .patch(server.url("/v1/skills/alpha"))
        .bearer_auth(WRITER)
        .json(&serde_json::json!({"find": "not in the file", "replace": "x"}))
        .sent()
        .await;
    assert_eq!(error_kind(r).await, (StatusCode::CONFLICT, "patch_mismatch".into()));
    let r = client
        .patch(server.url("/v1/skills/alpha"))
        .bearer_auth(WRITER)
        .body("{not json")
        .sent()
        .await;
    assert_eq!(error_kind(r).await, (StatusCode::BAD_REQUEST, "bad_request".into()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_through_the_editor_with_if_match() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();

    let list_tag = get(&client, server.url("/v1/skills"), READER).await.headers()["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    // Create: 201, then the catalog shows it at once, and the list's tag moved.
    let created = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .header("if-none-match", "*")
        .body(skill_md("gamma", "Gamma."))
        .sent()
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let tag = created.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = created.json().await.unwrap();
    assert_eq!(body["action"], "create");
    let r = client
        .get(server.url("/v1/skills"))
        .bearer_auth(READER)
        .header("if-none-match", &list_tag)
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("\"gamma\""));
    assert!(dir.path().join("team/gamma/SKILL.md").is_file());
    // Creating it again with If-None-Match: * is a stale precondition.
    let r = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .header("if-none-match", "*")
        .body(skill_md("gamma", "Gamma again."))
        .sent()
        .await;
    assert_eq!(
        error_kind(r).await,
        (StatusCode::PRECONDITION_FAILED, "version_conflict".into())
    );

    // The file route's tag is the one the write returned.
    let read = get(&client, server.url("/v1/skills/gamma/files/SKILL.md"), READER).await;
    assert_eq!(read.headers()["etag"].to_str().unwrap(), tag);

    // Edit with the right tag: 200 and a new tag; with the old one: 412.
    let edited = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .header("if-match", &tag)
        .body(skill_md("gamma", "Gamma, edited."))
        .sent()
        .await;
    assert_eq!(edited.status(), 200);
    let new_tag = edited.headers()["etag"].to_str().unwrap().to_owned();
    assert_ne!(new_tag, tag);
    let stale = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .header("if-match", &tag)
        .body(skill_md("gamma", "Lost update."))
        .sent()
        .await;
    assert_eq!(
        error_kind(stale).await,
        (StatusCode::PRECONDITION_FAILED, "version_conflict".into())
    );

    // Patch with If-Match.
    let patched = client
        .patch(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .header("if-match", &new_tag)
        .json(&serde_json::json!({"find": "Gamma, edited.", "replace": "Gamma, patched."}))
        .sent()
        .await;
    assert_eq!(patched.status(), 200);
    let show: Value = get(&client, server.url("/v1/skills/gamma"), READER)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(show["description"], "Gamma, patched.");

    // Supporting files: write (201), replace (200), read, delete.
    let r = client
        .put(server.url("/v1/skills/gamma/files/references/notes.md"))
        .bearer_auth(WRITER)
        .body("# Notes\n")
        .sent()
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let r = client
        .put(server.url("/v1/skills/gamma/files/references/notes.md"))
        .bearer_auth(WRITER)
        .body("# Notes v2\n")
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    let r = get(
        &client,
        server.url("/v1/skills/gamma/files/references/notes.md"),
        READER,
    )
    .await;
    assert_eq!(r.text().await.unwrap(), "# Notes v2\n");
    let r = client
        .delete(server.url("/v1/skills/gamma/files/references/notes.md"))
        .bearer_auth(WRITER)
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    // A hidden path: refused.
    let r = client
        .put(server.url("/v1/skills/gamma/files/.git/config"))
        .bearer_auth(WRITER)
        .body("x")
        .sent()
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Delete with a stale tag: 412; with none: gone.
    let r = client
        .delete(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .header("if-match", &tag)
        .sent()
        .await;
    assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);
    let r = client
        .delete(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    let r = get(&client, server.url("/v1/skills/gamma"), READER).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // The base layer cannot be written through the server: `beta` is not in the writable source.
    let r = client
        .delete(server.url("/v1/skills/beta"))
        .bearer_auth(WRITER)
        .sent()
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(dir.path().join("base/beta/SKILL.md").is_file());
    let metrics = client
        .get(server.url("/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .sent()
        .await
        .text()
        .await
        .unwrap();
    assert!(backend_calls(&metrics, "put") > 0, "{metrics}");
    assert!(backend_calls(&metrics, "delete") > 0, "{metrics}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_brings_in_changes_made_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();
    write(dir.path(), "team/delta/SKILL.md", &skill_md("delta", "Delta."));
    let r = get(&client, server.url("/v1/skills/delta"), READER).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = client.post(server.url("/v1/refresh")).bearer_auth(READER).sent().await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["skills"], 3);
    assert_eq!(body["stale"], false);
    let r = get(&client, server.url("/v1/skills/delta"), READER).await;
    assert_eq!(r.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_server_is_loopback_only() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let settings = skillstore_server::Settings::single(layered_config(dir.path()));
    let service = skillstore_server::Service::open(&settings).unwrap();
    assert!(service.check_listen(&"127.0.0.1:8080".parse().unwrap()).is_ok());
    assert!(service.check_listen(&"[::1]:8080".parse().unwrap()).is_ok());
    let err = service
        .check_listen(&"0.0.0.0:8080".parse().unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("loopback"), "{err}");
    // ...and answers without a token.
    let server = Served::start(settings).await;
    let r = reqwest::get(server.url("/v1/skills")).await.unwrap();
    assert_eq!(r.status(), 200);
    server.stop().await;
}

/// `POST /v1/archives` installs a packed skill through the editor: 201 and
/// the catalog shows it; 409 when it exists and `replace` is not asked;
/// 400 with the refusal's kind for bytes that are no archive; 403 for a
/// read token. Nothing is written on a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_install_through_the_editor() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();
    let source = tempfile::tempdir().unwrap();
    write(source.path(), "gamma/SKILL.md", &skill_md("gamma", "Gamma, packed."));
    write(source.path(), "gamma/references/notes.md", "# Notes\n");
    let (name, archive) = skillstore::pack_dir(&source.path().join("gamma"), &skillstore::ArchiveLimits::default())
        .await
        .unwrap();
    assert_eq!(name, "gamma");
    let post = |token: &'static str, query: &'static str, body: Vec<u8>| {
        client
            .post(server.url(&format!("/v1/archives{query}")))
            .bearer_auth(token)
            .body(body)
            .send()
    };

    let denied = post(READER, "", archive.to_vec()).await.unwrap();
    assert_eq!(error_kind(denied).await.0, StatusCode::FORBIDDEN);
    let garbage = post(WRITER, "", b"PK\x03\x04 not really a zip".to_vec()).await.unwrap();
    assert_eq!(
        error_kind(garbage).await,
        (StatusCode::BAD_REQUEST, "not_an_archive".to_owned())
    );
    assert!(
        !dir.path().join("team/gamma").exists(),
        "a refused install wrote something"
    );

    let installed = post(WRITER, "", archive.to_vec()).await.unwrap();
    assert_eq!(installed.status(), StatusCode::CREATED);
    let shown: Value = get(&client, server.url("/v1/skills/gamma"), READER)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["description"], "Gamma, packed.", "{shown}");
    let notes = get(
        &client,
        server.url("/v1/skills/gamma/files/references/notes.md"),
        READER,
    )
    .await;
    assert_eq!(notes.text().await.unwrap(), "# Notes\n");

    let again = post(WRITER, "", archive.to_vec()).await.unwrap();
    assert_eq!(
        error_kind(again).await,
        (StatusCode::CONFLICT, "already_exists".to_owned())
    );
    let replaced = post(WRITER, "?replace=true", archive.to_vec()).await.unwrap();
    assert_eq!(replaced.status(), StatusCode::CREATED);
    let unknown = post(WRITER, "?overwrite=yes", archive.to_vec()).await.unwrap();
    assert_eq!(error_kind(unknown).await.0, StatusCode::BAD_REQUEST);
    server.stop().await;
}

/// `/openapi.json` describes exactly the routes the router has: its paths
/// are the router's (`http::ROUTES`, the list the router is built from, so
/// a route cannot be added without the document or dropped from it), and on
/// every path each of GET, PUT, PATCH, DELETE and POST is answered by the
/// served router (never 405, never "no such route" where a route answers)
/// exactly when the document declares it, with a status the document
/// lists. Requests carry a write token and a stale `If-Match`, so no write
/// goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_matches_the_routes() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let mut settings = settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![(WRITER, Scope::Write), (READER, Scope::Read)],
    )]);
    // The tenant's discovery routes answer (the root ones are an open
    // server's, answered here as no route).
    settings.tenants[0].discovery = skillstore_server::Discovery::Public;
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();
    let document: Value = client
        .get(server.url("/openapi.json"))
        .sent()
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().unwrap();
    let mut documented: Vec<&str> = paths.keys().map(String::as_str).collect();
    documented.sort_unstable();
    let mut routed: Vec<String> = skillstore_server::http::ROUTES
        .iter()
        .map(|route| route.replace("{*", "{"))
        .collect();
    routed.sort_unstable();
    assert_eq!(documented, routed, "the document's paths are not the router's");
    for (path, item) in paths {
        let root_discovery = path.starts_with("/.well-known/");
        let url = path
            .replace("{name}", "alpha")
            .replace("{path}", "references/guide.md")
            .replace("{artifact}", "alpha.zip")
            .replace("{tenant}", "acme");
        let token = if path == "/metrics" { METRICS_TOKEN } else { WRITER };
        for method in ["get", "put", "patch", "delete", "post"] {
            let response = client
                .request(method.to_uppercase().parse().unwrap(), server.url(&url))
                .bearer_auth(token)
                .header("if-match", "\"stale\"")
                .sent()
                .await;
            let status = response.status();
            let body = response.text().await.unwrap();
            let Some(operation) = item.get(method) else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path} is answered by the router but not in the document: {body}"
                );
                continue;
            };
            assert_ne!(
                status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path} is in the document but the router has no such method"
            );
            if !root_discovery {
                assert!(
                    !body.contains("no such route"),
                    "{method} {path} is in the document but no route answered it: {status} {body}"
                );
            }
            assert!(
                operation["responses"].get(status.as_str()).is_some(),
                "{method} {path} answered {status}, which the document does not list: {body}"
            );
        }
    }
    // Nothing went through: both skills are as they were.
    let list: Value = get(&client, server.url("/v1/skills"), READER)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["skills"].as_array().unwrap().len(), 2, "{list}");
    server.stop().await;
}

/// The served `/openapi.json` is a valid OpenAPI 3.1 document as a
/// validator we did not write judges it (`openapi-spec-validator`, which
/// `scripts/test.sh` installs into `target/venvs/openapi` and names in
/// `SKILLSTORE_OPENAPI_VALIDATOR`). Ignored without it; with
/// `--include-ignored` (as CI runs) a missing validator fails the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs openapi-spec-validator: set SKILLSTORE_OPENAPI_VALIDATOR and pass --include-ignored"]
async fn the_served_openapi_document_passes_a_real_validator() {
    let validator = std::env::var_os("SKILLSTORE_OPENAPI_VALIDATOR")
        .expect("SKILLSTORE_OPENAPI_VALIDATOR names the openapi-spec-validator command");
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let document = reqwest::get(server.url("/openapi.json"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    server.stop().await;
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &document).unwrap();
    let output = std::process::Command::new(&validator)
        .args(["--schema", "3.1", "--validation-errors", "all"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", validator.to_string_lossy()));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the validator refused the document:\n{said}");
    assert!(said.contains("OK"), "the validator did not say OK:\n{said}");
}

/// Under CI the validator must be present: its absence fails the run
/// instead of leaving the document unvalidated.
#[test]
fn openapi_validator_is_set_under_ci() {
    if std::env::var_os("CI").is_some() {
        assert!(
            std::env::var_os("SKILLSTORE_OPENAPI_VALIDATOR").is_some(),
            "CI is set but SKILLSTORE_OPENAPI_VALIDATOR is not: the served document would not be validated"
        );
    }
}

/// `/readyz` is 503 while no tenant has a source it could read (the only
/// source is a file, not a directory), and 200 once one can be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_unavailable_while_a_tenant_can_read_none_of_its_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("team"), "not a directory\n").unwrap();
    let mut config = skillstore::Config::parse("sources:\n  - path: /team\n").unwrap();
    config
        .set_mount("/", dir.path().to_str().unwrap(), std::path::Path::new("."))
        .unwrap();
    let server = Served::start_unready(settings(vec![("acme", config, vec![("reader", Scope::Read)])])).await;
    let tenant = server.service.tenants()[0].clone();
    for _ in 0..2000 {
        if tenant.snapshot().is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(tenant.snapshot().is_ok(), "the first load never ended");
    let client = reqwest::Client::new();
    let ready = client.get(server.url("/readyz")).sent().await;
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);

    std::fs::remove_file(dir.path().join("team")).unwrap();
    std::fs::create_dir(dir.path().join("team")).unwrap();
    let refresh = client
        .post(server.url("/v1/refresh"))
        .bearer_auth("reader")
        .sent()
        .await;
    assert_eq!(refresh.status(), 200);
    assert_eq!(client.get(server.url("/readyz")).sent().await.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_readable_and_rollback_needs_the_write_scope() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();
    let put = |body: String| {
        client
            .put(server.url("/v1/skills/gamma"))
            .bearer_auth(WRITER)
            .body(body)
            .send()
    };
    assert_eq!(
        put(skill_md("gamma", "First.")).await.unwrap().status(),
        StatusCode::CREATED
    );
    let secret = skill_md("gamma", "Second, with sk-live-0123456789 in it.");
    assert_eq!(put(secret).await.unwrap().status(), StatusCode::OK);

    // A read token sees the entries, with versions and no earlier bytes.
    let history = get(&client, server.url("/v1/skills/gamma/history"), READER).await;
    assert_eq!(history.status(), 200);
    let text = history.text().await.unwrap();
    assert!(
        !text.contains("sk-live"),
        "no file contents in a history answer: {text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    let entries = body["entries"].as_array().unwrap();
    let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "edit"]);
    assert_eq!(
        entries[0]["files"],
        serde_json::json!([{"path": "SKILL.md", "event": "created"}])
    );
    assert_eq!(
        entries[1]["files"],
        serde_json::json!([{"path": "SKILL.md", "event": "modified"}])
    );

    // Rollback: not with a read token, not to an entry that does not exist.
    let rollback = |token: &'static str, body: &'static str| {
        client
            .post(server.url("/v1/skills/gamma/rollback"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(
        error_kind(rollback(READER, r#"{"id": 1}"#).await.unwrap()).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        error_kind(rollback(WRITER, r#"{"id": 9}"#).await.unwrap()).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    assert_eq!(
        error_kind(rollback(WRITER, r#"{"entry": 1}"#).await.unwrap()).await.0,
        StatusCode::BAD_REQUEST
    );
    let done = rollback(WRITER, r#"{"id": 1}"#).await.unwrap();
    assert_eq!(done.status(), 200);
    let change: Value = done.json().await.unwrap();
    assert_eq!(change["action"], "rollback");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("team/gamma/SKILL.md")).unwrap(),
        skill_md("gamma", "First.")
    );
    let shown: Value = get(&client, server.url("/v1/skills/gamma"), READER)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["description"], "First.", "the catalog follows a rollback at once");
    let body: Value = get(&client, server.url("/v1/skills/gamma/history"), READER)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["entries"][2]["rollback_to"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_answers_winners_best_first_and_sees_writes() {
    let dir = tempfile::tempdir().unwrap();
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();

    let r = get(&client, server.url("/v1/search?q=team%27s%20way&limit=5"), READER).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let body: Value = r.json().await.unwrap();
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["name"], "alpha");
    assert_eq!(results[0]["source"], "team");
    assert_eq!(results[0]["path"], "/team/alpha/SKILL.md");
    assert_eq!(results[0]["description"], "Alpha, the team's way.");
    assert!(results[0]["score"].as_f64().unwrap() > 0.0);
    let scores: Vec<f64> = results.iter().map(|r| r["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    let r = get(&client, server.url("/v1/search?q=steps&limit=1"), READER).await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["results"].as_array().unwrap().len(), 1);

    // A write is searchable at once.
    let r = client
        .put(server.url("/v1/skills/gamma"))
        .bearer_auth(WRITER)
        .body(skill_md("gamma", "Gamma handles zebras."))
        .sent()
        .await;
    assert!(r.status().is_success(), "{}", r.status());
    let body: Value = get(&client, server.url("/v1/search?q=zebra"), READER)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["results"][0]["name"], "gamma", "{body}");

    for bad in ["/v1/search", "/v1/search?q=x&limit=1001", "/v1/search?q=x&limit=-1"] {
        let (status, kind) = error_kind(get(&client, server.url(bad), READER).await).await;
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{bad}"
        );
    }
    let r = client.get(server.url("/v1/search?q=x")).sent().await;
    assert_eq!(r.status(), 401);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_past_its_budget_names_the_search() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..40 {
        let name = format!("skill-{i:02}");
        write(
            dir.path(),
            &format!("team/{name}/SKILL.md"),
            &skill_md(&name, "Does one task of many, described at some length here."),
        );
    }
    let server = served(dir.path()).await;
    let client = reqwest::Client::new();
    let text = get(&client, server.url("/v1/prompt?max_chars=2000"), READER)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.chars().count() <= 2000);
    assert!(
        text.contains("more skills left out to keep this list short; find the one a task needs with the `GET /v1/search?q=WORDS` route of this server"),
        "{text}"
    );
    server.stop().await;
}

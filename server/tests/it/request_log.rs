//! `skillstore serve --log-format json` as a process: one JSON line per
//! answered request with method, path, tenant, status and milliseconds, and
//! never a token or a query string.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_one_json_line_per_request_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let token = "tok-secret-7f3a";
    let hash = skillstore_server::TokenHash::of(token).to_hex();
    let root = dir.path().to_str().unwrap();
    write(
        dir.path(),
        "server.yaml",
        &format!(
            "tenants:\n  - name: acme\n    tokens: [{{sha256: {hash}}}]\n    config:\n      mounts: [{{at: /, location: \"{root}\"}}]\n      sources: [{{path: /base}}, {{path: /team}}]\n"
        ),
    );
    let mut server = ServeProcess::start(
        serve_command(&["--log-format", "json", "--tenants", "server.yaml"])
            .current_dir(dir.path())
            .env_remove("RUST_LOG"),
    )
    .await;
    server.wait_ready().await;
    let (base, client, lines) = (&server.base, &server.client, &mut server.lines);
    let ok = client
        .get(format!("{base}/v1/prompt?style=xml"))
        .bearer_auth(token)
        .sent()
        .await;
    assert_eq!(ok.status(), 200);
    let refused = client
        .get(format!("{base}/v1/skills/alpha"))
        .bearer_auth("not-a-token")
        .sent()
        .await;
    assert_eq!(refused.status(), 401);
    let long = format!("{base}/v1/skills/{}", "a".repeat(5000));
    let answer = client.get(long).bearer_auth(token).sent().await;
    assert!(answer.status().is_client_error());

    let mut requests = Vec::new();
    while requests.len() < 3 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("a log line")
            .unwrap()
            .expect("the server is still running");
        assert!(
            !line.contains(token) && !line.contains("not-a-token"),
            "a token in the log: {line}"
        );
        let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if value["target"] == "skillstore::request" && value["fields"]["path"] != "/readyz" {
            requests.push(value);
        }
    }
    let fields = &requests[0]["fields"];
    assert_eq!(requests[0]["level"], "INFO");
    assert_eq!(fields["method"], "GET");
    assert_eq!(fields["path"], "/v1/prompt", "the path without its query");
    assert_eq!(fields["tenant"], "acme");
    assert_eq!(fields["status"], 200);
    assert!(fields["ms"].as_str().unwrap().parse::<f64>().is_ok(), "{fields}");
    let fields = &requests[1]["fields"];
    assert_eq!(
        (fields["status"].as_u64(), fields["tenant"].as_str()),
        (Some(401), Some("-"))
    );
    let _ = server.child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_standard_error_never_stalls_requests() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(
        dir.path(),
        "skillstore.yaml",
        "sources:\n  - path: /base\n  - path: /team\n",
    );
    // Read up to the address, then never again: the pipe fills after a
    // few hundred request lines.
    let mut server = ServeProcess::start(serve_command(&[]).current_dir(dir.path()).env_remove("RUST_LOG")).await;
    let base = &server.base;
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    for n in 0..3000 {
        let answer = client
            .get(format!("{base}/v1/skills/alpha/files/references/guide.md"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("request {n} stalled or failed: {e}"));
        assert_eq!(answer.status(), 200, "request {n}");
    }
    let _ = server.child.kill().await;
}

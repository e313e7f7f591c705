//! `skillstore serve --log-format json` as a process: one JSON line per
//! answered request with method, path, tenant, status and milliseconds, and
//! never a token or a query string.

use std::process::Stdio;

use crate::common::*;
use tokio::io::{AsyncBufReadExt, BufReader};

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
    let mut child = tokio::process::Command::new(skillstore_binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--tenants",
            "server.yaml",
        ])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut base = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        if let Some(rest) = line.split("on http://").nth(1) {
            base = Some(format!("http://{}", rest.split_whitespace().next().unwrap()));
            break;
        }
    }
    let base = base.expect("the address it listens on");
    let client = reqwest::Client::new();
    for _ in 0..2000 {
        if client.get(format!("{base}/readyz")).send().await.unwrap().status() == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let ok = client
        .get(format!("{base}/v1/prompt?style=xml"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let refused = client
        .get(format!("{base}/v1/skills/alpha"))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let long = format!("{base}/v1/skills/{}", "a".repeat(5000));
    let answer = client.get(long).bearer_auth(token).send().await.unwrap();
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
    let _ = child.kill().await;
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
    let mut child = tokio::process::Command::new(skillstore_binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Read up to the address, then never again: the pipe fills after a
    // few hundred request lines.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut base = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        if let Some(rest) = line.split("on http://").nth(1) {
            base = Some(format!("http://{}", rest.split_whitespace().next().unwrap()));
            break;
        }
    }
    let base = base.expect("the address it listens on");
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
    drop(lines);
    let _ = child.kill().await;
}

//! `skillstore serve` as a process: on SIGTERM it stops accepting, lets a
//! request in flight finish, and exits 0.

use std::process::Stdio;

use crate::common::*;
use tokio::io::{AsyncBufReadExt, BufReader};

async fn in_flight(client: &reqwest::Client, base: &str) -> u64 {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("skillstore_http_requests_in_flight "))
        .expect("the gauge")
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_request_in_flight_finish_then_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    write(
        dir.path(),
        "skillstore.yaml",
        "sources:\n  - path: /base\n  - path: /team\n    writable: true\n",
    );
    let mut child = tokio::process::Command::new(skillstore_binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut base = None;
    let mut said_open = false;
    while let Some(line) = lines.next_line().await.unwrap() {
        said_open |= line.contains("without tokens") && line.contains("loopback");
        if let Some(rest) = line.split("on http://").nth(1) {
            base = Some(format!("http://{}", rest.split_whitespace().next().unwrap()));
            break;
        }
    }
    assert!(said_open, "the server says it serves without tokens on loopback only");
    let base = base.expect("the address it listens on");
    let client = reqwest::Client::new();
    for _ in 0..2000 {
        if client.get(format!("{base}/readyz")).send().await.unwrap().status() == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }

    // A write whose body arrives in two parts: in flight until the second.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    let body = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|chunk| (chunk, rx)) });
    let put = tokio::spawn(
        client
            .put(format!("{base}/v1/skills/slow"))
            .header("content-type", "text/markdown")
            .body(reqwest::Body::wrap_stream(body))
            .send(),
    );
    tx.send(Ok(bytes::Bytes::from_static(b"---\nname: slow\n")))
        .await
        .unwrap();
    // In flight: the write, and the /metrics request asking.
    while in_flight(&client, &base).await < 2 {
        tokio::task::yield_now().await;
    }
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    tx.send(Ok(bytes::Bytes::from_static(b"description: Slow.\n---\nBody\n")))
        .await
        .unwrap();
    drop(tx);
    let response = put.await.unwrap().expect("the request in flight is answered");
    assert_eq!(response.status(), 201);
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status:?}");
    assert!(dir.path().join("team/slow/SKILL.md").is_file());
}

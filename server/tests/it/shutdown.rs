//! `skillstore serve` as a process: on SIGTERM it stops accepting, lets a
//! request in flight finish, and exits 0.

use crate::common::*;

async fn in_flight(client: &reqwest::Client, base: &str) -> u64 {
    let text = client.get(format!("{base}/metrics")).sent().await.text().await.unwrap();
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
    let mut server = ServeProcess::start(serve_command(&[]).current_dir(dir.path())).await;
    let said_open = server
        .said
        .iter()
        .any(|line| line.contains("without tokens") && line.contains("loopback"));
    assert!(said_open, "the server says it serves without tokens on loopback only");
    server.wait_ready().await;
    let (base, client, child) = (&server.base, &server.client, &mut server.child);

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
    while in_flight(client, base).await < 2 {
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

//! Two servers (each its own service, namespace and follower, sharing
//! only the storage, as two processes would) over one directory whose mount keeps a change
//! journal: a write through A is seen by B within the journal's interval,
//! with B's own poll an hour away; a journal B cannot use makes it fall
//! back to polling and say so in `/readyz` and `/metrics`, until a writer
//! starts the journal again.

use std::time::{Duration, Instant};

use skillstore::Config;
use skillstore_server::Scope;

use crate::common::*;

const TOKEN: &str = "feed-token";

/// A replica: its own service, namespace and journal follower over the
/// shared directory, as another process would hold them.
async fn replica(root: &std::path::Path) -> Served {
    let config = Config::parse(&format!(
        "mounts:\n  - at: /\n    location: \"{}\"\n    changes: journal\nsources:\n  - path: /base\n  - path: /team\n    writable: true\n",
        root.display()
    ))
    .unwrap();
    let mut settings = settings(vec![("acme", config, vec![(TOKEN, Scope::Write)])]);
    settings.changes_interval = Duration::from_millis(100);
    Served::start(settings).await
}

/// Waits up to `within` for `GET path` on `server` to answer `status`.
async fn answers(server: &Served, path: &str, status: u16, within: Duration) -> Duration {
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        let r = get(&client, server.url(path), TOKEN).await;
        if r.status() == status {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{path} did not answer {status} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn readyz(server: &Served) -> serde_json::Value {
    reqwest::Client::new()
        .get(server.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn metric(server: &Served, name: &str) -> f64 {
    let text = get(&reqwest::Client::new(), server.url("/metrics"), METRICS_TOKEN)
        .await
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_replica_reaches_another_through_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    layered_tree(&root);
    let a = replica(&root).await;
    let b = replica(&root).await;
    assert_eq!(readyz(&b).await["change_journals"]["following"], 1);
    // No write has made a journal yet: B polls, and says so.
    assert_eq!(readyz(&b).await["change_journals"]["fallen_back"], 1);

    let client = reqwest::Client::new();
    let r = client
        .put(a.url("/v1/skills/fresh"))
        .bearer_auth(TOKEN)
        .body(skill_md("fresh", "Written through A."))
        .sent()
        .await;
    assert_eq!(r.status(), 201);
    assert!(root.join(".skillstore/changes/head.json").is_file());
    let took = answers(&b, "/v1/skills/fresh", 200, Duration::from_secs(5)).await;
    eprintln!("B saw A's write after {took:?}");
    assert!(metric(&b, "skillstore_change_journal_refreshes_total").await >= 1.0);
    assert_eq!(metric(&b, "skillstore_change_journals_fallen_back").await, 0.0);
    // The journal is no skill and no file of one.
    let list: serde_json::Value = get(&client, b.url("/v1/skills"), TOKEN).await.json().await.unwrap();
    assert!(!list.to_string().contains("head.json"), "{list}");

    // A journal B cannot use: B falls back to polling and says so.
    write(&root, ".skillstore/changes/head.json", "{\"planted\": true}");
    let started = Instant::now();
    while readyz(&b).await["change_journals"]["fallen_back"] != 1 {
        assert!(started.elapsed() < Duration::from_secs(5), "B never said it fell back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Twice: while no journal existed, and now.
    assert_eq!(metric(&b, "skillstore_change_journal_fallbacks_total").await, 2.0);
    // A's next write starts the journal again; B lists everything, sees
    // the delete, and follows the journal again.
    let r = client.delete(a.url("/v1/skills/fresh")).bearer_auth(TOKEN).sent().await;
    assert_eq!(r.status(), 200);
    answers(&b, "/v1/skills/fresh", 404, Duration::from_secs(5)).await;
    assert_eq!(readyz(&b).await["change_journals"]["fallen_back"], 0);
    a.stop().await;
    b.stop().await;
}

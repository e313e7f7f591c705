//! A tenant's skill digests in every answer (the HTTP skill object, MCP
//! `skills/list` `_meta`), equal to the library's; and a tenant pinned to
//! a lock does not serve a skill changed behind the server's back.

mod common;

use std::path::Path;

use common::mcp_client::http_client;
use common::*;
use skillstore::integrity::Lock;
use skillstore_server::Scope;

async fn digests(root: &Path) -> (Lock, String, String) {
    let namespace = layered_config(root).open().unwrap();
    let catalog = namespace.load().await;
    let lock = Lock::for_catalog(&catalog).await.unwrap();
    let alpha = catalog.skill_digest("alpha").await.unwrap().digest;
    let beta = catalog.skill_digest("beta").await.unwrap().digest;
    (lock, alpha, beta)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_mcp_show_the_digest_and_a_locked_tenant_withholds_a_changed_skill() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    layered_tree(&root);
    let (lock, alpha, beta) = digests(&root).await;
    assert_ne!(alpha, beta);
    let lock_file = dir.path().join("skills.lock");
    std::fs::write(&lock_file, lock.to_json()).unwrap();
    let mut config = layered_config(&root);
    config.set_lock(&lock_file);

    let server = Served::start(settings(vec![("acme", config.clone(), vec![("reader", Scope::Read)])])).await;
    let http = reqwest::Client::new();
    let show: serde_json::Value = get(&http, server.url("/v1/skills/alpha"), "reader")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(show["digest"], alpha.as_str());
    let client = http_client(&server.base, "reader").await;
    let listed = client.list_all_skills().await.unwrap();
    assert_eq!(listed.len(), 2);
    for skill in &listed {
        let meta = skill.meta.as_ref().expect("every skill carries its digest in _meta");
        let expected = if skill.uri.contains("alpha") { &alpha } else { &beta };
        assert_eq!(
            meta.0[skillstore_server::mcp::DIGEST_META],
            expected.as_str(),
            "{}",
            skill.uri
        );
    }
    let _ = client.cancel().await;
    server.stop().await;

    // One byte of the winning alpha's file changed on disk: a tenant
    // started on the lock serves beta only.
    std::fs::write(root.join("team/alpha/references/guide.md"), "# Team guidE\n").unwrap();
    let server = Served::start(settings(vec![("acme", config, vec![("reader", Scope::Read)])])).await;
    let missing = get(&http, server.url("/v1/skills/alpha"), "reader").await;
    assert_eq!(missing.status(), 404);
    let file = get(
        &http,
        server.url("/v1/skills/alpha/files/references/guide.md"),
        "reader",
    )
    .await;
    assert_eq!(file.status(), 404);
    let list: serde_json::Value = get(&http, server.url("/v1/skills"), "reader")
        .await
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beta"]);
    let client = http_client(&server.base, "reader").await;
    assert_eq!(client.list_all_skills().await.unwrap().len(), 1);
    let _ = client.cancel().await;
    server.stop().await;
}

//! A tenant whose skills come from a Git repository (fetched over
//! `file://` from a repository the real `git` made): the HTTP API and the
//! MCP `skills/list` entries say the commit they were read at.

use std::path::Path;

use crate::common::mcp_client::http_client;
use crate::common::*;
use skillstore::Config;
use skillstore::backends::testkit::git_repo::git;
use skillstore_server::Scope;

/// The layered tree committed in `root`; returns the commit.
fn committed_layers(root: &Path) -> String {
    layered_tree(root);
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "layers"]);
    git(root, &["rev-parse", "HEAD"]).trim().to_owned()
}

fn git_config(root: &Path, cache: &Path) -> Config {
    let yaml = format!(
        "mounts:\n  - at: /\n    location: \"git+file://{}@main\"\nsources:\n  - path: /base\n  - path: /team\ncache:\n  dir: \"{}\"\n",
        root.display(),
        cache.display()
    );
    Config::parse(&yaml).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_mcp_say_the_commit_of_a_git_source() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let head = committed_layers(&work);
    let config = git_config(&work, &dir.path().join("cache"));
    let server = Served::start(settings(vec![("acme", config, vec![("reader", Scope::Read)])])).await;
    let http = reqwest::Client::new();
    let list: serde_json::Value = get(&http, server.url("/v1/skills"), "reader")
        .await
        .json()
        .await
        .unwrap();
    let skills = list["skills"].as_array().unwrap();
    assert_eq!(skills.len(), 2);
    assert!(skills.iter().all(|s| s["commit"] == head), "{list}");
    let show: serde_json::Value = get(&http, server.url("/v1/skills/alpha"), "reader")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(show["commit"], head);
    let file = get(
        &http,
        server.url("/v1/skills/alpha/files/references/guide.md"),
        "reader",
    )
    .await;
    assert_eq!(file.text().await.unwrap(), "# Team guide\n");

    let client = http_client(&server.base, "reader").await;
    let listed = client.list_all_skills().await.unwrap();
    assert_eq!(listed.len(), 2);
    for skill in &listed {
        let meta = skill.meta.as_ref().expect("a Git skill carries _meta");
        assert_eq!(
            meta.0[skillstore_server::mcp::COMMIT_META],
            head.as_str(),
            "{}",
            skill.uri
        );
    }
    let _ = client.cancel().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_serves_a_moved_branch_at_its_new_commit() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let first = committed_layers(&work);
    let config = git_config(&work, &dir.path().join("cache"));
    let server = Served::start(settings(vec![("acme", config, vec![("reader", Scope::Read)])])).await;
    let http = reqwest::Client::new();
    let names = |list: &serde_json::Value| -> Vec<String> {
        let skills = list["skills"].as_array().unwrap();
        skills.iter().map(|s| s["name"].as_str().unwrap().to_owned()).collect()
    };
    let list: serde_json::Value = get(&http, server.url("/v1/skills"), "reader")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(names(&list), ["alpha", "beta"]);
    write(
        &work,
        "team/gamma/SKILL.md",
        &skill_md("gamma", "Gamma, new on the branch."),
    );
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "gamma"]);
    let second = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    assert_ne!(first, second);
    let refreshed = http.post(server.url("/v1/refresh")).bearer_auth("reader").sent().await;
    assert!(refreshed.status().is_success(), "{}", refreshed.status());
    let list: serde_json::Value = get(&http, server.url("/v1/skills"), "reader")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(names(&list), ["alpha", "beta", "gamma"]);
    let skills = list["skills"].as_array().unwrap();
    assert!(skills.iter().all(|s| s["commit"] == second), "{list}");
    let body = get(&http, server.url("/v1/skills/gamma/files/SKILL.md"), "reader").await;
    assert_eq!(
        body.text().await.unwrap(),
        skill_md("gamma", "Gamma, new on the branch.")
    );
    server.stop().await;
}

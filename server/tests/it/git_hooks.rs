//! `POST /v1/hooks/git` against a repository served by `git http-backend`:
//! a push event signed as GitHub, Gitea or GitLab sign them refreshes the
//! tenant whose mount follows that repository and branch, which fetches
//! the new commit; a forged, unsigned or wrongly signed event, or one for
//! another repository or branch, is refused and nothing is fetched
//! (counted at the Git server).

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use skillstore::Config;
use skillstore::backends::testkit::git_repo::git;
use skillstore::backends::testkit::git_servers::{GitHttpServer, publish_bare};
use skillstore_server::Scope;
use skillstore_server::settings::HookSecret;

use crate::common::*;

const SECRET: &str = "hook-secret";

fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

fn push_event(url: &str, reference: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "ref": reference,
        "repository": {"clone_url": url, "default_branch": "main"},
        "commits": [],
    }))
    .unwrap()
}

async fn names(server: &Served) -> Vec<String> {
    let list: serde_json::Value = get(&reqwest::Client::new(), server.url("/v1/skills"), "reader")
        .await
        .json()
        .await
        .unwrap();
    let mut names: Vec<String> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn commit(work: &Path, name: &str, bare: &Path) {
    write(
        work,
        &format!("team/{name}/SKILL.md"),
        &skill_md(name, "New on the branch."),
    );
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", name]);
    git(work, &["push", "-q", &bare.to_string_lossy(), "HEAD:main"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_push_refreshes_the_mount_and_a_forged_one_fetches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_tree(&work);
    git(&work, &["init", "-q"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "layers"]);
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let bare = publish_bare(&work, &served, "skills.git");
    let http = GitHttpServer::start(&served);
    let url = http.url("skills.git");
    let config = Config::parse(&format!(
        "mounts:\n  - at: /\n    location: \"git+{url}@main\"\nsources:\n  - path: /base\n  - path: /team\ncache:\n  dir: \"{}\"\n",
        dir.path().join("cache").display()
    ))
    .unwrap();
    let mut settings = settings(vec![("acme", config, vec![("reader", Scope::Read)])]);
    settings.hook_secrets = vec![HookSecret(SECRET.as_bytes().to_vec().into())];
    let server = Served::start(settings).await;
    assert_eq!(names(&server).await, ["alpha", "beta"]);

    commit(&work, "gamma", &bare);
    let client = reqwest::Client::new();
    let hook = server.url("/v1/hooks/git");
    let body = push_event(&url, "refs/heads/main");
    let fetched_before = http.requests();
    let refused = [
        // Unsigned.
        client.post(&hook).header("x-github-event", "push").body(body.clone()),
        // Signed with another secret.
        client
            .post(&hook)
            .header("x-github-event", "push")
            .header("x-hub-signature-256", format!("sha256={}", signature("guess", &body))),
        // A good signature over another body.
        client
            .post(&hook)
            .header("x-github-event", "push")
            .header("x-hub-signature-256", format!("sha256={}", signature(SECRET, b"{}")))
            .body(body.clone()),
        // Not hex.
        client
            .post(&hook)
            .header("x-gitea-event", "push")
            .header("x-gitea-signature", "zz")
            .body(body.clone()),
        // GitLab's token, wrong.
        client
            .post(&hook)
            .header("x-gitlab-event", "Push Hook")
            .header("x-gitlab-token", "guess")
            .body(body.clone()),
        // A bearer token is no signature.
        client
            .post(&hook)
            .header("x-github-event", "push")
            .bearer_auth("reader")
            .body(body.clone()),
    ];
    for request in refused {
        let r = request.header("content-type", "application/json").sent().await;
        assert_eq!(r.status(), 401, "{}", r.text().await.unwrap());
    }
    // Signed, but for another repository, or another branch.
    for other in [
        push_event(&http.url("other.git"), "refs/heads/main"),
        push_event(&url, "refs/heads/dev"),
    ] {
        let r = client
            .post(&hook)
            .header("x-github-event", "push")
            .header("x-hub-signature-256", format!("sha256={}", signature(SECRET, &other)))
            .body(other)
            .sent()
            .await;
        assert_eq!(r.status(), 404);
    }
    // Too large, refused before it is read (the server may close the
    // connection before the client has sent it all).
    let huge = vec![b' '; 2 * 1024 * 1024];
    let sent = client
        .post(&hook)
        .header("x-gitlab-event", "Push Hook")
        .header("x-gitlab-token", SECRET)
        .body(huge)
        .send()
        .await;
    if let Ok(r) = sent {
        assert_eq!(r.status(), 413);
    }
    assert_eq!(http.requests(), fetched_before, "a refused event fetched");
    assert_eq!(names(&server).await, ["alpha", "beta"]);

    // GitHub's signature: the branch is fetched and the new skill served.
    let r = client
        .post(&hook)
        .header("x-github-event", "push")
        .header("x-hub-signature-256", format!("sha256={}", signature(SECRET, &body)))
        .header("content-type", "application/json")
        .body(body.clone())
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["refreshed"], 1);
    assert!(http.requests() > fetched_before, "nothing was fetched");
    assert_eq!(names(&server).await, ["alpha", "beta", "gamma"]);

    // Gitea's signature and GitLab's token are taken alike.
    commit(&work, "delta", &bare);
    let r = client
        .post(&hook)
        .header("x-gitea-event", "push")
        .header("x-gitea-signature", signature(SECRET, &body))
        .body(body.clone())
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(names(&server).await, ["alpha", "beta", "delta", "gamma"]);
    commit(&work, "epsilon", &bare);
    let r = client
        .post(&hook)
        .header("x-gitlab-event", "Push Hook")
        .header("x-gitlab-token", SECRET)
        .body(body)
        .sent()
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(names(&server).await, ["alpha", "beta", "delta", "epsilon", "gamma"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_secrets_the_route_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(dir.path()),
        vec![("reader", Scope::Read)],
    )]))
    .await;
    let body = push_event("https://example.invalid/x.git", "refs/heads/main");
    let r = reqwest::Client::new()
        .post(server.url("/v1/hooks/git"))
        .header("x-github-event", "push")
        .header("x-hub-signature-256", format!("sha256={}", signature(SECRET, &body)))
        .body(body)
        .sent()
        .await;
    assert_eq!(r.status(), 404);
    server.stop().await;
}

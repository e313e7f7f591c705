//! A tenant's skill digests in every answer (the HTTP skill object, MCP
//! `skills/list` `_meta`), equal to the library's; and a tenant pinned to
//! a lock does not serve a skill changed behind the server's back.

use std::path::Path;

use crate::common;
use crate::common::mcp_client::http_client;
use crate::common::*;
use skillstore::integrity::Lock;
use skillstore_server::Scope;

/// The public discovery index of the tenant `acme`.
async fn discovery_index(http: &reqwest::Client, server: &Served) -> serde_json::Value {
    http.get(server.url("/t/acme/.well-known/agent-skills/index.json"))
        .sent()
        .await
        .json()
        .await
        .unwrap()
}

/// The names `GET /v1/skills` lists.
async fn listed_names(http: &reqwest::Client, server: &Served) -> Vec<String> {
    let list: serde_json::Value = get(http, server.url("/v1/skills"), "reader")
        .await
        .json()
        .await
        .unwrap();
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The layered tree (with `extra` files, by path and text) under `dir`,
/// locked as it is now: its root and a configuration checked against the
/// lock.
async fn locked_tree(dir: &Path, extra: &[(&str, &str)]) -> (std::path::PathBuf, skillstore::Config) {
    let root = dir.join("tree");
    layered_tree(&root);
    for (path, text) in extra {
        write(&root, path, text);
    }
    let (lock, _, _) = digests(&root).await;
    let lock_file = dir.join("skills.lock");
    std::fs::write(&lock_file, lock.to_json()).unwrap();
    let mut config = layered_config(&root);
    config.set_lock(&lock_file);
    (root, config)
}

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

/// A locked tenant's skill changed on disk after its check, with no
/// refresh: no HTTP or MCP read returns the new bytes, each says why; a
/// file added since is neither listed nor read.
/// Without a lock no winner carries a digest from its load: MCP computes
/// each skill's digest from the manifest it lists (one listing), and it is
/// the library's, a signature in the reserved directory left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlocked_tenant_gives_mcp_the_library_digest_from_one_listing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    layered_tree(&root);
    write(&root, "team/alpha/.skillstore/signature", "not part of the digest\n");
    let (_, alpha, beta) = digests(&root).await;
    let server = Served::start(settings(vec![(
        "acme",
        layered_config(&root),
        vec![("reader", Scope::Read)],
    )]))
    .await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_skill_changed_behind_the_server_is_refused_until_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let (root, config) = locked_tree(dir.path(), &[]).await;
    let server = Served::start(settings(vec![("acme", config, vec![("reader", Scope::Read)])])).await;
    let http = reqwest::Client::new();
    let client = http_client(&server.base, "reader").await;
    let guide = "/v1/skills/alpha/files/references/guide.md";
    let before = get(&http, server.url(guide), "reader").await;
    assert_eq!(before.status(), 200);
    assert_eq!(before.text().await.unwrap(), "# Team guide\n");

    std::fs::write(root.join("team/alpha/references/guide.md"), "# EVIL guide\n").unwrap();
    std::fs::write(
        root.join("team/alpha/SKILL.md"),
        skill_md("alpha", "Alpha, the team's way.") + "EVIL\n",
    )
    .unwrap();
    std::fs::write(root.join("team/alpha/added.sh"), "echo EVIL\n").unwrap();

    for path in [
        guide,
        "/v1/skills/alpha/files/SKILL.md",
        "/v1/skills/alpha/files/added.sh",
    ] {
        let answer = get(&http, server.url(path), "reader").await;
        // 409: the state changed since the check (412 is kept for a failed
        // If-Match or If-None-Match).
        assert_eq!(answer.status(), 409, "{path}");
        let body = answer.text().await.unwrap();
        assert!(!body.contains("EVIL"), "{path}: {body}");
        assert!(body.contains("changed since"), "{path}: {body}");
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["kind"], "changed_since_checked", "{path}: {body}");
    }
    // The first changed read withdrew alpha: it is refused whole, and
    // every listing leaves it out.
    let show = get(&http, server.url("/v1/skills/alpha"), "reader").await;
    assert_eq!(show.status(), 409);
    let body = show.text().await.unwrap();
    assert!(!body.contains("EVIL"), "{body}");
    let shown: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["error"]["kind"], "changed_since_checked", "{body}");
    assert_eq!(listed_names(&http, &server).await, ["beta"]);

    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "skill://alpha/references/guide.md",
        ))
        .await;
    let read = format!("{read:?}");
    assert!(!read.contains("EVIL") && read.contains("changed since"), "{read}");
    let loaded = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("load_skill")
                .with_arguments(common::mcp_client::args(serde_json::json!({"name": "alpha"}))),
        )
        .await;
    let loaded = format!("{loaded:?}");
    assert!(!loaded.contains("EVIL"), "{loaded}");
    let file = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("read_skill_file").with_arguments(common::mcp_client::args(
                serde_json::json!({"name": "alpha", "path": "added.sh"}),
            )),
        )
        .await;
    let file = format!("{file:?}");
    assert!(!file.contains("EVIL"), "{file}");

    // Beta, unchanged, is served as before.
    let beta = get(&http, server.url("/v1/skills/beta/files/scripts/run.py"), "reader").await;
    assert_eq!(beta.status(), 200);
    let _ = client.cancel().await;
    server.stop().await;
}

/// A locked tenant's skill loses a file it was checked with (deleted,
/// before its discovery archive is first built): the archive is not
/// served partial with the index still naming the skill, and the skill
/// object says it changed rather than listing what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_skill_missing_a_checked_file_is_served_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let (root, config) = locked_tree(dir.path(), &[("base/beta/scripts/guard.sh", "exit 1\n")]).await;
    let mut settings = settings(vec![("acme", config, vec![("reader", Scope::Read)])]);
    settings.tenants[0].discovery = skillstore_server::Discovery::Public;
    let server = Served::start(settings).await;
    let http = reqwest::Client::new();

    std::fs::remove_file(root.join("base/beta/scripts/guard.sh")).unwrap();
    let index = discovery_index(&http, &server).await;
    let names: Vec<&str> = index["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha"], "{index}");
    let archive = http
        .get(server.url("/t/acme/.well-known/agent-skills/beta.zip"))
        .sent()
        .await;
    assert_eq!(archive.status(), 404);

    let show = get(&http, server.url("/v1/skills/beta"), "reader").await;
    assert_eq!(show.status(), 409);
    let body: serde_json::Value = show.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "changed_since_checked", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("scripts/guard.sh"),
        "{body}"
    );
    server.stop().await;
}

/// A locked tenant's skill loses one checked file while its other files
/// stay as checked. Once any channel notices (here: the lost file read,
/// or the skill's manifest or a directory asked for), no channel serves
/// any byte of the skill or lists it, until a refresh withholds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_skill_that_lost_a_file_is_withdrawn_from_every_channel() {
    for notice in ["http_read", "mcp_get_skill", "mcp_directory", "http_show"] {
        let dir = tempfile::tempdir().unwrap();
        let (root, config) = locked_tree(dir.path(), &[("base/beta/scripts/guard.sh", "exit 1\n")]).await;
        let mut settings = settings(vec![("acme", config, vec![("reader", Scope::Read)])]);
        settings.tenants[0].discovery = skillstore_server::Discovery::Public;
        let server = Served::start(settings).await;
        let http = reqwest::Client::new();
        let client = http_client(&server.base, "reader").await;
        // Every listing is rendered (and cached) before the loss.
        assert_eq!(listed_names(&http, &server).await, ["alpha", "beta"]);
        assert_eq!(client.list_all_skills().await.unwrap().len(), 2);
        let show = get(&http, server.url("/v1/skills/beta"), "reader").await;
        assert_eq!(show.status(), 200);

        std::fs::remove_file(root.join("base/beta/scripts/guard.sh")).unwrap();
        match notice {
            "http_read" => {
                let lost = get(&http, server.url("/v1/skills/beta/files/scripts/guard.sh"), "reader").await;
                assert_eq!(lost.status(), 404, "{notice}");
            }
            "mcp_get_skill" => {
                let got = client
                    .get_skill(rmcp::model::GetSkillRequestParams::new("skill://beta/SKILL.md"))
                    .await;
                assert!(format!("{got:?}").contains("changed since"), "{notice}: {got:?}");
            }
            "mcp_directory" => {
                let listed = client
                    .read_resource_directory(rmcp::model::ReadResourceDirectoryRequestParams::new(
                        "skill://beta/scripts",
                    ))
                    .await;
                assert!(format!("{listed:?}").contains("changed since"), "{notice}: {listed:?}");
            }
            _ => {
                let show = get(&http, server.url("/v1/skills/beta"), "reader").await;
                assert_eq!(show.status(), 409, "{notice}");
            }
        }

        // The files still as checked are refused with the rest.
        for path in ["/v1/skills/beta/files/scripts/run.py", "/v1/skills/beta/files/SKILL.md"] {
            let answer = get(&http, server.url(path), "reader").await;
            assert_eq!(answer.status(), 409, "{notice}: {path}");
            let body: serde_json::Value = answer.json().await.unwrap();
            assert_eq!(body["error"]["kind"], "changed_since_checked", "{notice}: {path}");
        }
        let read = client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "skill://beta/scripts/run.py",
            ))
            .await;
        assert!(format!("{read:?}").contains("changed since"), "{notice}: {read:?}");
        let loaded = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("load_skill")
                    .with_arguments(common::mcp_client::args(serde_json::json!({"name": "beta"}))),
            )
            .await;
        assert!(
            !format!("{loaded:?}").contains("Beta, the base way"),
            "{notice}: {loaded:?}"
        );

        // Every listing leaves it out: HTTP, MCP, search, discovery.
        assert_eq!(listed_names(&http, &server).await, ["alpha"], "{notice}");
        let skills = client.list_all_skills().await.unwrap();
        let uris: Vec<&str> = skills.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(uris, ["skill://alpha/SKILL.md"], "{notice}");
        let got = client
            .get_skill(rmcp::model::GetSkillRequestParams::new("skill://beta/SKILL.md"))
            .await;
        assert!(got.is_err(), "{notice}: {got:?}");
        let directory = client
            .read_resource_directory(rmcp::model::ReadResourceDirectoryRequestParams::new("skill://beta"))
            .await;
        assert!(directory.is_err(), "{notice}: {directory:?}");
        let show = get(&http, server.url("/v1/skills/beta"), "reader").await;
        assert_eq!(show.status(), 409, "{notice}");
        let found: serde_json::Value = get(&http, server.url("/v1/search?q=beta"), "reader")
            .await
            .json()
            .await
            .unwrap();
        assert!(!found.to_string().contains("\"beta\""), "{notice}: {found}");
        let index = discovery_index(&http, &server).await;
        assert!(!index.to_string().contains("\"beta\""), "{notice}: {index}");
        let archive = http
            .get(server.url("/t/acme/.well-known/agent-skills/beta.zip"))
            .sent()
            .await;
        assert_ne!(archive.status(), 200, "{notice}");

        // Alpha, untouched, is served as before.
        let alpha = get(
            &http,
            server.url("/v1/skills/alpha/files/references/guide.md"),
            "reader",
        )
        .await;
        assert_eq!(alpha.status(), 200, "{notice}");
        let _ = client.cancel().await;
        server.stop().await;
    }
}

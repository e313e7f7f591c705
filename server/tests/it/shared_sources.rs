//! A base every tenant mounts is loaded, held and refreshed once: the
//! tenants share its state, shadow it each in their own way, and all see a
//! change of it after one listing.

use std::path::Path;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;
use skillstore::Config;
use skillstore_server::Scope;

const ACME: &str = "acme-token";
const GLOBEX: &str = "globex-token";

/// The platform's base at `root/base`, and each tenant's own layer at
/// `root/teams/NAME`.
fn tenant_config(root: &Path, team: &str) -> Config {
    let mut config = Config::parse("sources:\n  - path: /base\n  - path: /team\n    writable: true\n").unwrap();
    config
        .set_mount("/base", root.join("base").to_str().unwrap(), Path::new("."))
        .unwrap();
    config
        .set_mount("/team", root.join("teams").join(team).to_str().unwrap(), Path::new("."))
        .unwrap();
    config
}

fn platform(root: &Path) -> skillstore_server::Settings {
    for name in ["alpha", "beta", "gamma"] {
        write(
            root,
            &format!("base/{name}/SKILL.md"),
            &skill_md(name, &format!("{name} from the base.")),
        );
    }
    write(
        root,
        "teams/acme/alpha/SKILL.md",
        &skill_md("alpha", "Alpha, acme's way."),
    );
    write(root, "teams/acme/own/SKILL.md", &skill_md("own", "Acme's own."));
    write(root, "teams/globex/.keep", "");
    let mut settings = settings(vec![
        ("acme", tenant_config(root, "acme"), vec![(ACME, Scope::Write)]),
        ("globex", tenant_config(root, "globex"), vec![(GLOBEX, Scope::Write)]),
    ]);
    settings.refresh_interval = Duration::from_millis(300);
    settings
}

async fn skills(client: &reqwest::Client, server: &Served, token: &str) -> Vec<(String, String, String)> {
    let body: Value = get(client, server.url("/v1/skills"), token).await.json().await.unwrap();
    body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["source"].as_str().unwrap().to_owned(),
                s["description"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn described(list: &[(String, String, String)], name: &str) -> Option<String> {
    list.iter().find(|(n, _, _)| n == name).map(|(_, _, d)| d.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_hold_one_load_of_the_base_and_shadow_it_each_their_way() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(platform(dir.path())).await;
    let pool = server.service.source_pool();
    assert_eq!(pool.len(), 1, "one shared source: the base");
    assert_eq!(pool.loads(), 1, "the base was listed once for both tenants");
    let client = reqwest::Client::new();
    let acme = skills(&client, &server, ACME).await;
    let globex = skills(&client, &server, GLOBEX).await;
    assert_eq!(described(&acme, "alpha").as_deref(), Some("Alpha, acme's way."));
    assert_eq!(described(&globex, "alpha").as_deref(), Some("alpha from the base."));
    assert!(described(&acme, "own").is_some());
    assert_eq!(
        described(&globex, "own"),
        None,
        "nothing of one tenant is shown to another"
    );
    assert_eq!(described(&globex, "gamma").as_deref(), Some("gamma from the base."));
    let metrics = get(&client, server.url("/metrics"), METRICS_TOKEN)
        .await
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("skillstore_shared_sources 1"), "{metrics}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_the_base_reaches_every_tenant_after_one_listing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(platform(dir.path())).await;
    let client = reqwest::Client::new();
    let pool = server.service.source_pool();
    write(
        dir.path(),
        "base/delta/SKILL.md",
        &skill_md("delta", "Delta, new in the base."),
    );
    write(dir.path(), "base/beta/SKILL.md", &skill_md("beta", "Beta, edited."));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let acme = skills(&client, &server, ACME).await;
        let globex = skills(&client, &server, GLOBEX).await;
        let seen = |list: &[(String, String, String)]| {
            described(list, "delta").is_some() && described(list, "beta").as_deref() == Some("Beta, edited.")
        };
        if seen(&acme) && seen(&globex) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{acme:?} {globex:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The tenants' own refreshes never list the base: only the pool does,
    // once per interval.
    let before = pool.loads();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let listed = pool.loads() - before;
    assert!(
        (1..=5).contains(&listed),
        "the base was listed {listed} times in about three intervals"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_tenants_own_layer_stays_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(platform(dir.path())).await;
    let client = reqwest::Client::new();
    let put = client
        .put(server.url("/v1/skills/gamma/files/SKILL.md"))
        .bearer_auth(GLOBEX)
        .body(skill_md("gamma", "Gamma, globex's way."))
        .sent()
        .await;
    assert!(put.status().is_success(), "{}", put.text().await.unwrap());
    let globex = skills(&client, &server, GLOBEX).await;
    let acme = skills(&client, &server, ACME).await;
    assert_eq!(described(&globex, "gamma").as_deref(), Some("Gamma, globex's way."));
    assert_eq!(described(&acme, "gamma").as_deref(), Some("gamma from the base."));
    assert!(
        std::fs::read_to_string(dir.path().join("base/gamma/SKILL.md"))
            .unwrap()
            .contains("from the base")
    );
    server.stop().await;
}

/// The discovery index of public tenant `tenant`, asked anonymously:
/// entry name -> digest.
async fn published(client: &reqwest::Client, server: &Served, tenant: &str) -> Vec<(String, String)> {
    let url = server.url(&format!("/t/{tenant}/.well-known/agent-skills/index.json"));
    let r = client.get(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn digest_of(list: &[(String, String)], name: &str) -> String {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("no {name} in {list:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_tenants_share_each_base_artifact_and_keep_their_own_apart() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = platform(dir.path());
    // Each tenant's own skill of one name, size and modification time,
    // with different bytes.
    let twins = [
        ("acme", skill_md("twin", "Twin of acme.")),
        ("globex", skill_md("twin", "Twin of glbx.")),
    ];
    let moment = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (team, text) in &twins {
        let path = format!("teams/{team}/twin/SKILL.md");
        write(dir.path(), &path, text);
        let file = std::fs::File::options()
            .write(true)
            .open(dir.path().join(&path))
            .unwrap();
        file.set_modified(moment).unwrap();
    }
    for tenant in &mut settings.tenants {
        tenant.discovery = skillstore_server::Discovery::Public;
    }
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();
    let acme = published(&client, &server, "acme").await;
    let globex = published(&client, &server, "globex").await;
    for name in ["beta", "gamma"] {
        assert_eq!(digest_of(&acme, name), digest_of(&globex, name), "{name}");
    }
    assert_ne!(
        digest_of(&acme, "alpha"),
        digest_of(&globex, "alpha"),
        "acme shadows alpha"
    );
    for ((team, text), list) in twins.iter().zip([&acme, &globex]) {
        let own = format!("sha256:{}", skillstore::integrity::sha256_hex(text.as_bytes()));
        assert_eq!(digest_of(list, "twin"), own, "{team} is served its own twin");
    }
    // One artifact of a base skill for both tenants; each its own twin.
    let acme = server
        .service
        .tenant_named("acme")
        .unwrap()
        .view()
        .unwrap()
        .discovery()
        .await;
    let globex = server
        .service
        .tenant_named("globex")
        .unwrap()
        .view()
        .unwrap()
        .discovery()
        .await;
    let same = |name| std::sync::Arc::ptr_eq(acme.artifact(name).unwrap(), globex.artifact(name).unwrap());
    assert!(same("beta") && same("gamma"));
    assert!(!same("twin") && !same("alpha"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_requests_load_public_tenants_only_within_their_turns() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = platform(dir.path());
    for tenant in &mut settings.tenants {
        tenant.discovery = skillstore_server::Discovery::Public;
    }
    settings.limits.anonymous_loads = 0;
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();
    let globex = server.service.tenant_named("globex").unwrap();
    assert!(!globex.is_ready());
    let url = server.url("/t/globex/.well-known/agent-skills/index.json");
    let r = client.get(url.clone()).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    assert!(!globex.is_ready(), "an anonymous request past its turns loads nothing");
    // Loaded by its own token, it is served to anyone.
    assert_eq!(get(&client, server.url("/v1/skills"), GLOBEX).await.status(), 200);
    assert_eq!(client.get(url).send().await.unwrap().status(), 200);
    // acme, loaded at start, is served whatever the turns.
    assert_eq!(published(&client, &server, "acme").await.len(), 4);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_requests_alone_never_keep_a_tenant_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = platform(dir.path());
    write(dir.path(), "teams/initech/.keep", "");
    settings.tenants.push(skillstore_server::TenantSettings {
        name: "initech".into(),
        config: tenant_config(dir.path(), "initech"),
        tokens: vec![(skillstore_server::TokenHash::of("initech-token"), Scope::Read)],
        discovery: skillstore_server::Discovery::Public,
    });
    for tenant in &mut settings.tenants {
        tenant.discovery = skillstore_server::Discovery::Public;
    }
    settings.limits.max_loaded_tenants = Some(1);
    settings.limits.request_timeout = Duration::from_secs(1);
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();
    let globex = server.service.tenant_named("globex").unwrap();
    published(&client, &server, "globex").await;
    assert!(globex.is_ready());
    // Past the request timeout, anonymous requests keep asking for it...
    tokio::time::sleep(Duration::from_millis(1200)).await;
    published(&client, &server, "globex").await;
    // ...and a tenant its own caller loads past the bound unloads it: only
    // a load marks a tenant used for anonymous requests.
    assert_eq!(
        get(&client, server.url("/v1/skills"), "initech-token").await.status(),
        200
    );
    assert!(!globex.is_ready(), "anonymous requests kept globex loaded");
    server.stop().await;
}

/// The names and descriptions `token`'s tenant lists.
async fn listed(client: &reqwest::Client, server: &Served, token: &str) -> Vec<(String, String)> {
    skills(client, server, token)
        .await
        .into_iter()
        .map(|(name, _, description)| (name, description))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_switched_in_whole_is_served_whole_by_every_tenant_after_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The base is a link to one version of it, switched as an atomic
    // writer switches a tree: a new link renamed over the old.
    std::fs::create_dir_all(root.join("v1")).unwrap();
    std::os::unix::fs::symlink("v1", root.join("base")).unwrap();
    let settings = platform(root);
    let copy = std::process::Command::new("cp")
        .args(["-a", "v1", "v2"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(copy.success());
    write(root, "v2/beta/SKILL.md", &skill_md("beta", "beta, version 2."));
    write(
        root,
        "v2/delta/SKILL.md",
        &skill_md("delta", "delta, only in version 2."),
    );
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();
    let before = listed(&client, &server, ACME).await;
    assert!(
        before.contains(&("beta".into(), "beta from the base.".into())),
        "{before:?}"
    );

    std::os::unix::fs::symlink("v2", root.join("base.next")).unwrap();
    std::fs::rename(root.join("base.next"), root.join("base")).unwrap();
    for token in [ACME, GLOBEX] {
        let r = client
            .post(server.url("/v1/refresh"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let after = listed(&client, &server, token).await;
        assert!(
            after.contains(&("beta".into(), "beta, version 2.".into())),
            "{token}: {after:?}"
        );
        assert!(after.iter().any(|(name, _)| name == "delta"), "{token}: {after:?}");
        let body = get(&client, server.url("/v1/skills/beta/files/SKILL.md"), token)
            .await
            .text()
            .await
            .unwrap();
        assert!(body.contains("beta, version 2."), "{token}: {body}");
    }
    server.stop().await;
}

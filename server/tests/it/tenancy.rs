//! Tenants on demand, unloaded past a bound or when idle, and a tenant
//! list read again without a restart; through the server, with a base the
//! tenants share.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::*;
use serde_json::Value;
use skillstore_server::{Service, Settings, TokenHash};

fn hash(token: &str) -> String {
    TokenHash::of(token).to_hex()
}

/// A base of three skills, and for each tenant `NAME` a layer holding
/// `NAME-own` and its own `alpha`.
fn tree(root: &Path, tenants: &[&str]) {
    for name in ["alpha", "beta", "gamma"] {
        write(
            root,
            &format!("base/{name}/SKILL.md"),
            &skill_md(name, &format!("{name} from the base.")),
        );
    }
    for tenant in tenants {
        write(
            root,
            &format!("teams/{tenant}/{tenant}-own/SKILL.md"),
            &skill_md(&format!("{tenant}-own"), &format!("Owned by {tenant}.")),
        );
        write(
            root,
            &format!("teams/{tenant}/alpha/SKILL.md"),
            &skill_md("alpha", &format!("Alpha, {tenant}'s way.")),
        );
    }
}

/// A server file over `tree`: the template mounts the base and the
/// tenant's own layer; each tenant `NAME` has the token `token-NAME`.
fn server_file(root: &Path, tenants: &[(&str, &str)], limits: &str) -> String {
    let mut text = format!(
        "refresh_interval: 300ms\nmetrics_tokens:\n  - sha256: {}\n{limits}template:\n  mounts:\n    - at: /base\n      location: {}\n    - at: /team\n      location: {}\n  sources:\n    - path: /base\n    - path: /team\n      writable: true\ntenants:\n",
        hash(METRICS_TOKEN),
        root.join("base").display(),
        root.join("teams").join("{tenant}").display(),
    );
    for (name, token) in tenants {
        text.push_str(&format!(
            "  - name: {name}\n    tokens:\n      - sha256: {}\n        scope: write\n",
            hash(token)
        ));
    }
    text
}

async fn names(client: &reqwest::Client, server: &Served, token: &str) -> Result<Vec<(String, String)>, u16> {
    let r = get(client, server.url("/v1/skills"), token).await;
    if r.status() != 200 {
        return Err(r.status().as_u16());
    }
    let body: Value = r.json().await.unwrap();
    Ok(body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["description"].as_str().unwrap().to_owned(),
            )
        })
        .collect())
}

/// What tenant `name` must see, exactly: the base, its own skill, and its
/// own `alpha`.
fn expected(name: &str) -> Vec<(String, String)> {
    vec![
        ("alpha".to_owned(), format!("Alpha, {name}'s way.")),
        ("beta".to_owned(), "beta from the base.".to_owned()),
        ("gamma".to_owned(), "gamma from the base.".to_owned()),
        (format!("{name}-own"), format!("Owned by {name}.")),
    ]
}

async fn metric(client: &reqwest::Client, server: &Served, name: &str) -> f64 {
    let text = get(client, server.url("/metrics"), METRICS_TOKEN)
        .await
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .parse()
        .unwrap()
}

fn settings_of(root: &Path, text: &str) -> Settings {
    let file = root.join("server.yaml");
    std::fs::write(&file, text).unwrap();
    Settings::load(&file).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_is_loaded_at_its_first_request_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = ["acme", "globex", "initech"];
    tree(dir.path(), &tenants);
    let listed: Vec<(&str, String)> = tenants.iter().map(|t| (*t, format!("token-{t}"))).collect();
    let listed: Vec<(&str, &str)> = listed.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let server = Served::start(settings_of(dir.path(), &server_file(dir.path(), &listed, ""))).await;
    let client = reqwest::Client::new();
    // Ready once the base is in: one tenant brought it, the others wait.
    assert_eq!(metric(&client, &server, "skillstore_tenants_loaded").await, 1.0);
    assert_eq!(server.service.source_pool().loads(), 1);
    assert_eq!(
        names(&client, &server, "token-initech").await.unwrap(),
        expected("initech")
    );
    assert_eq!(metric(&client, &server, "skillstore_tenants_loaded").await, 2.0);
    assert_eq!(
        names(&client, &server, "token-globex").await.unwrap(),
        expected("globex")
    );
    assert_eq!(metric(&client, &server, "skillstore_tenants_loaded").await, 3.0);
    assert_eq!(metric(&client, &server, "skillstore_tenant_loads_total").await, 3.0);
    // The base was listed once for all three.
    assert_eq!(server.service.source_pool().loads(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_past_the_bound_or_idle_are_unloaded_and_load_again_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = ["t0", "t1", "t2", "t3", "t4"];
    tree(dir.path(), &tenants);
    let tokens: Vec<(String, String)> = tenants.iter().map(|t| (t.to_string(), format!("token-{t}"))).collect();
    let listed: Vec<(&str, &str)> = tokens.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let limits = "limits:\n  request_timeout: 200ms\n  max_loaded_tenants: 2\n  tenant_idle_unload: 1s\n";
    let server = Served::start(settings_of(dir.path(), &server_file(dir.path(), &listed, limits))).await;
    let client = reqwest::Client::new();
    // Concurrent requests across every tenant, in rounds with pauses past
    // the request timeout: each answer is exactly its tenant's.
    for round in 0..4 {
        let answers = futures::future::join_all(tokens.iter().cycle().skip(round).take(10).map(|(name, token)| {
            let client = client.clone();
            let server = &server;
            async move { (name.clone(), names(&client, server, token).await) }
        }))
        .await;
        for (name, answer) in answers {
            assert_eq!(answer, Ok(expected(&name)), "round {round}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let unloads = metric(&client, &server, "skillstore_tenant_unloads_total").await;
    assert!(unloads >= 1.0, "some tenant was unloaded past the bound: {unloads}");
    // Idle: every tenant but the one that loaded the base is unloaded.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while metric(&client, &server, "skillstore_tenants_loaded").await > 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "idle tenants were never unloaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names(&client, &server, "token-t3").await.unwrap(), expected("t3"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_list_is_read_again_without_a_restart_and_a_bad_one_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["acme", "globex"]);
    let file = dir.path().join("server.yaml");
    std::fs::write(&file, server_file(dir.path(), &[("acme", "token-acme")], "")).unwrap();
    let settings = Settings::load(&file).unwrap();
    let server = Served::start(settings).await;
    server.service.follow_file(file.clone(), Duration::from_millis(50));
    let client = reqwest::Client::new();
    assert_eq!(names(&client, &server, "token-acme").await.unwrap(), expected("acme"));
    assert_eq!(names(&client, &server, "token-globex").await, Err(401));

    // A tenant added, acme's token rotated.
    std::fs::write(
        &file,
        server_file(dir.path(), &[("acme", "token-acme-2"), ("globex", "token-globex")], ""),
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while names(&client, &server, "token-globex").await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the added tenant was never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        names(&client, &server, "token-globex").await.unwrap(),
        expected("globex")
    );
    assert_eq!(
        names(&client, &server, "token-acme").await,
        Err(401),
        "the rotated token is gone"
    );
    assert_eq!(names(&client, &server, "token-acme-2").await.unwrap(), expected("acme"));

    // A file that does not validate changes nothing, and is counted.
    std::fs::write(&file, "tenants: [ {name: acme, tokens: [ {sha256: nothex} ] } ]\n").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while metric(&client, &server, "skillstore_server_file_reloads_refused_total").await < 1.0 {
        assert!(tokio::time::Instant::now() < deadline, "the bad file was never read");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names(&client, &server, "token-acme-2").await.unwrap(), expected("acme"));
    assert_eq!(
        names(&client, &server, "token-globex").await.unwrap(),
        expected("globex")
    );

    // A tenant removed: its token is refused like any unknown one.
    std::fs::write(&file, server_file(dir.path(), &[("acme", "token-acme-2")], "")).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while names(&client, &server, "token-globex").await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the removed tenant was still served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names(&client, &server, "token-acme-2").await.unwrap(), expected("acme"));
    server.stop().await;
}

/// Random requests, tenants added and removed and edits of both layers,
/// interleaved: every answer is exactly what a load of that tenant from
/// scratch gives, and never shows another tenant's skill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_is_its_tenants_own_under_loads_unloads_edits_and_list_changes() {
    let dir = tempfile::tempdir().unwrap();
    let all = ["t0", "t1", "t2", "t3", "t4", "t5"];
    tree(dir.path(), &all);
    let file = dir.path().join("server.yaml");
    let limits = "limits:\n  request_timeout: 100ms\n  max_loaded_tenants: 2\n";
    let tokens: Vec<(String, String)> = all.iter().map(|t| (t.to_string(), format!("token-{t}"))).collect();
    let listed = |present: &[bool]| -> String {
        let chosen: Vec<(&str, &str)> = tokens
            .iter()
            .zip(present)
            .filter(|(_, p)| **p)
            .map(|((n, t), _)| (n.as_str(), t.as_str()))
            .collect();
        server_file(dir.path(), &chosen, limits)
    };
    let mut present = vec![true, true, true, false, false, true];
    std::fs::write(&file, listed(&present)).unwrap();
    let server = Served::start(Settings::load(&file).unwrap()).await;
    let service: Arc<Service> = server.service.clone();
    let client = reqwest::Client::new();
    let mut seed: u64 = 0x5eed_cafe;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut edition = 0;
    let mut owned: Vec<String> = all.iter().map(|n| format!("Owned by {n}.")).collect();
    for step in 0..60 {
        match next(10) {
            0 => {
                // Add or remove one tenant (never the first, which brings the base in).
                let at = 1 + next(all.len() as u64 - 1) as usize;
                present[at] = !present[at];
                std::fs::write(&file, listed(&present)).unwrap();
                service.reload(&Settings::load(&file).unwrap()).await.unwrap();
            }
            1 => {
                // Edit a tenant's own skill, and ask for a refresh when it
                // is listed (an unlisted one reads it at its next load).
                edition += 1;
                let at = next(all.len() as u64) as usize;
                let name = all[at];
                owned[at] = format!("Owned by {name}, edition {edition}.");
                write(
                    dir.path(),
                    &format!("teams/{name}/{name}-own/SKILL.md"),
                    &skill_md(&format!("{name}-own"), &owned[at]),
                );
                if present[at] {
                    let r = client
                        .post(server.url("/v1/refresh"))
                        .bearer_auth(&tokens[at].1)
                        .sent()
                        .await;
                    assert_eq!(r.status(), 200);
                }
            }
            2 => tokio::time::sleep(Duration::from_millis(150)).await,
            _ => {}
        }
        let requests = (0..3).map(|_| next(all.len() as u64) as usize).collect::<Vec<_>>();
        let answers = futures::future::join_all(requests.iter().map(|&at| {
            let client = client.clone();
            let server = &server;
            let token = tokens[at].1.clone();
            async move { names(&client, server, &token).await }
        }))
        .await;
        for (&at, answer) in requests.iter().zip(answers) {
            let name = all[at];
            if present[at] {
                let mut wanted = expected(name);
                wanted[3].1 = owned[at].clone();
                assert_eq!(answer, Ok(wanted), "step {step}: {name}");
            } else {
                assert_eq!(answer, Err(401), "step {step}: {name} is not listed");
            }
        }
    }
    // Past max_loaded_tenants a tenant is unloaded once it has been idle
    // for the request timeout: at a load, or by the sweep that follows.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while metric(&client, &server, "skillstore_tenant_unloads_total").await < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no tenant was unloaded past max_loaded_tenants"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(metric(&client, &server, "skillstore_server_file_reloads_total").await >= 1.0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_answers_kept_stay_within_the_budget_and_answers_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = ["t0", "t1", "t2", "t3"];
    tree(dir.path(), &tenants);
    let tokens: Vec<(String, String)> = tenants.iter().map(|t| (t.to_string(), format!("token-{t}"))).collect();
    let listed: Vec<(&str, &str)> = tokens.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    // Room for about one tenant's list.
    let limits = "limits:\n  max_rendered_bytes: 700\n";
    let server = Served::start(settings_of(dir.path(), &server_file(dir.path(), &listed, limits))).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        for (name, token) in &tokens {
            assert_eq!(names(&client, &server, token).await.unwrap(), expected(name));
            let show = get(&client, server.url(&format!("/v1/skills/{name}-own")), token).await;
            assert_eq!(show.status(), 200);
        }
        let kept = metric(&client, &server, "skillstore_rendered_bytes").await;
        assert!(kept > 0.0 && kept <= 700.0, "{kept}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_layer_of_one_tenant_is_not_loaded_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = ["acme", "globex", "initech"];
    tree(dir.path(), &tenants);
    let listed: Vec<(&str, String)> = tenants.iter().map(|t| (*t, format!("token-{t}"))).collect();
    let listed: Vec<(&str, &str)> = listed.iter().map(|(n, t)| (*n, t.as_str())).collect();
    // Each tenant's own layer read-only: shareable, but mounted by one.
    let text = server_file(dir.path(), &listed, "").replace("      writable: true\n", "");
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    assert_eq!(metric(&client, &server, "skillstore_tenants_loaded").await, 1.0);
    assert_eq!(
        names(&client, &server, "token-globex").await.unwrap(),
        expected("globex")
    );
    assert_eq!(metric(&client, &server, "skillstore_tenants_loaded").await, 2.0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_tenant_out_of_reach_does_not_keep_the_server_unready() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["good"]);
    let text = format!(
        "metrics_tokens:\n  - sha256: {}\ntenants:\n  - name: broken\n    tokens: [{{sha256: {}}}]\n    config: {{mounts: [{{at: /, location: \"git+http://127.0.0.1:1/x.git\"}}], sources: [{{path: /skills}}]}}\n  - name: good\n    tokens: [{{sha256: {}}}]\n    config: {{mounts: [{{at: /, location: \"{}\"}}], sources: [{{path: /good, writable: true}}]}}\n",
        hash(METRICS_TOKEN),
        hash("token-broken"),
        hash("token-good"),
        dir.path().join("teams").display(),
    );
    // Ready (Served::start waits for it) with no request of the good tenant.
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    assert_eq!(metric(&client, &server, "skillstore_tenants_loaded").await, 2.0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_directory_is_missing_is_left_out_and_the_rest_served() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["acme"]);
    let text = server_file(dir.path(), &[("acme", "token-acme"), ("newteam", "token-newteam")], "");
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    assert_eq!(names(&client, &server, "token-acme").await.unwrap(), expected("acme"));
    assert_eq!(names(&client, &server, "token-newteam").await, Err(401));
    // Made later and the file read again: served.
    tree(dir.path(), &["newteam"]);
    server.service.reload(&settings_of(dir.path(), &text)).await.unwrap();
    assert_eq!(
        names(&client, &server, "token-newteam").await.unwrap(),
        expected("newteam")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_holds_its_namespace_only_while_loaded_and_opens_it_again_at_each_load() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["acme", "globex"]);
    let text = server_file(dir.path(), &[("acme", "token-acme"), ("globex", "token-globex")], "");
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    let globex = server.service.tenant_named("globex").unwrap();
    assert!(
        globex.namespace().is_err(),
        "a tenant never asked for holds no namespace"
    );
    // Its storage goes after the file was read: the first request is
    // answered 503 and says nothing of the storage; the tenant stays
    // unloaded.
    let own = dir.path().join("teams/globex");
    std::fs::rename(&own, dir.path().join("moved")).unwrap();
    let r = get(&client, server.url("/v1/skills"), "token-globex").await;
    assert_eq!(r.status(), 503);
    let body = r.text().await.unwrap();
    assert!(!body.contains("teams") && !body.contains("moved"), "{body}");
    assert!(!globex.is_ready());
    // Back: the next request opens and loads it.
    std::fs::rename(dir.path().join("moved"), &own).unwrap();
    assert_eq!(
        names(&client, &server, "token-globex").await.unwrap(),
        expected("globex")
    );
    assert!(globex.namespace().is_ok());
    assert!(globex.unload().await);
    assert!(globex.namespace().is_err(), "an unloaded tenant holds no namespace");
    assert_eq!(
        names(&client, &server, "token-globex").await.unwrap(),
        expected("globex")
    );
    assert_eq!(names(&client, &server, "token-acme").await.unwrap(), expected("acme"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_refreshes_list_the_shared_base_at_most_once_a_second() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["acme", "globex"]);
    let text = server_file(dir.path(), &[("acme", "token-acme"), ("globex", "token-globex")], "")
        .replace("refresh_interval: 300ms", "refresh_interval: 1h");
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    let pool = server.service.source_pool();
    let before = pool.loads();
    let started = std::time::Instant::now();
    for _ in 0..20 {
        let r = client
            .post(server.url("/v1/refresh"))
            .bearer_auth("token-acme")
            .sent()
            .await;
        assert_eq!(r.status(), 200);
    }
    let seconds = started.elapsed().as_secs() + 1;
    let listed = pool.loads() - before;
    assert!(
        listed <= seconds,
        "20 refreshes in {seconds}s listed the base {listed} times"
    );
    assert!(listed >= 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_of_a_tenant_load_it_once() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["acme", "globex"]);
    let text = server_file(dir.path(), &[("acme", "token-acme"), ("globex", "token-globex")], "");
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    let before = metric(&client, &server, "skillstore_tenant_loads_total").await;
    let answers = futures::future::join_all((0..24).map(|_| names(&client, &server, "token-globex"))).await;
    assert!(answers.iter().all(|a| *a == Ok(expected("globex"))));
    assert_eq!(
        metric(&client, &server, "skillstore_tenant_loads_total").await - before,
        1.0
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_of_a_token_rotated_out_is_closed_and_others_stay() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["acme", "globex"]);
    let limits = "limits:\n  mcp_session_idle: 40s\n";
    let text = server_file(
        dir.path(),
        &[("acme", "token-acme"), ("globex", "token-globex")],
        limits,
    );
    let server = Served::start(settings_of(dir.path(), &text)).await;
    let client = reqwest::Client::new();
    let acme = common::mcp_client::http_client(&server.base, "token-acme").await;
    let globex = common::mcp_client::http_client(&server.base, "token-globex").await;
    assert_eq!(metric(&client, &server, "skillstore_mcp_sessions_open").await, 2.0);
    let rotated = server_file(
        dir.path(),
        &[("acme", "token-acme-2"), ("globex", "token-globex")],
        limits,
    );
    server.service.reload(&settings_of(dir.path(), &rotated)).await.unwrap();
    // The sweep runs every 10 s here; idle expiry would take 40 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(25);
    while metric(&client, &server, "skillstore_mcp_sessions_open").await > 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotated token's session was never closed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        globex.list_all_skills().await.is_ok(),
        "the unchanged token's session still works"
    );
    assert!(
        acme.list_all_skills().await.is_err(),
        "the rotated token's session is gone"
    );
    server.stop().await;
}

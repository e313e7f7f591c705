//! Agent Skills discovery served over HTTP, through a real client: the
//! index and its artifacts at the root of an open server and under a
//! public tenant's prefix, digests of the exact bytes served, ETags and
//! 304s, the index following the catalog, and tenants that did not opt in
//! indistinguishable from tenants that do not exist.

use std::collections::BTreeMap;

use crate::common::*;
use reqwest::StatusCode;
use serde_json::Value;
use skillstore::{ArchiveLimits, SkillArchive};
use skillstore_server::{Discovery, Scope, Settings};

const INDEX: &str = "/.well-known/agent-skills/index.json";
const SCHEMA: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", skillstore_server::digest::sha256_hex(bytes))
}

/// The layered tree plus `gamma`, a skill that is only its SKILL.md.
fn tree(root: &std::path::Path) {
    layered_tree(root);
    write(root, "team/gamma/SKILL.md", &skill_md("gamma", "Gamma alone."));
}

/// Fetches the index at `index_url` and every artifact it names (each
/// `url` resolved against the index's URL as RFC 3986 says), checking
/// each artifact's bytes against its digest; returns the files of each
/// skill by name.
async fn install_all(client: &reqwest::Client, index_url: &str) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    let response = client.get(index_url).sent().await;
    assert_eq!(response.status(), 200, "{index_url}");
    assert_eq!(response.headers()["content-type"], "application/json");
    let index: Value = response.json().await.unwrap();
    assert_eq!(index["$schema"], SCHEMA);
    let base = reqwest::Url::parse(index_url).unwrap();
    let mut skills = BTreeMap::new();
    for entry in index["skills"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap().to_owned();
        let url = base.join(entry["url"].as_str().unwrap()).unwrap();
        let artifact = client.get(url.clone()).sent().await;
        assert_eq!(artifact.status(), 200, "{url}");
        let content_type = artifact.headers()["content-type"].to_str().unwrap().to_owned();
        let bytes = artifact.bytes().await.unwrap();
        assert_eq!(entry["digest"].as_str().unwrap(), sha256(&bytes), "{name}");
        let files = match entry["type"].as_str().unwrap() {
            "skill-md" => {
                assert!(content_type.starts_with("text/markdown"), "{content_type}");
                BTreeMap::from([("SKILL.md".to_owned(), bytes.to_vec())])
            }
            "archive" => {
                assert_eq!(content_type, "application/zip");
                let archive = SkillArchive::read_rooted(&bytes, &name, &ArchiveLimits::default()).unwrap();
                archive
                    .files()
                    .iter()
                    .map(|f| (f.path.clone(), f.data.to_vec()))
                    .collect()
            }
            other => panic!("unexpected type {other}"),
        };
        skills.insert(name, files);
    }
    skills
}

/// What the tree holds for each winner, read from disk.
fn expected(root: &std::path::Path) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    let read = |p: &str| std::fs::read(root.join(p)).unwrap();
    BTreeMap::from([
        (
            "alpha".to_owned(),
            BTreeMap::from([
                ("SKILL.md".to_owned(), read("team/alpha/SKILL.md")),
                ("references/guide.md".to_owned(), read("team/alpha/references/guide.md")),
            ]),
        ),
        (
            "beta".to_owned(),
            BTreeMap::from([
                ("SKILL.md".to_owned(), read("base/beta/SKILL.md")),
                ("scripts/run.py".to_owned(), read("base/beta/scripts/run.py")),
            ]),
        ),
        (
            "gamma".to_owned(),
            BTreeMap::from([("SKILL.md".to_owned(), read("team/gamma/SKILL.md"))]),
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_server_publishes_every_winner_at_the_root() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let server = Served::start(Settings::single(layered_config(dir.path()))).await;
    let client = reqwest::Client::new();

    let index: Value = client.get(server.url(INDEX)).sent().await.json().await.unwrap();
    let entries: Vec<(&str, &str, &str, &str)> = index["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["type"].as_str().unwrap(),
                e["url"].as_str().unwrap(),
                e["description"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("alpha", "archive", "alpha.zip", "Alpha, the team's way."),
            ("beta", "archive", "beta.zip", "Beta, the base way."),
            ("gamma", "skill-md", "gamma/SKILL.md", "Gamma alone."),
        ]
    );
    assert_eq!(install_all(&client, &server.url(INDEX)).await, expected(dir.path()));

    // The archive is the same bytes each time it is asked for.
    let once = client
        .get(server.url("/.well-known/agent-skills/alpha.zip"))
        .sent()
        .await;
    let again = client
        .get(server.url("/.well-known/agent-skills/alpha.zip"))
        .sent()
        .await;
    assert_eq!(once.bytes().await.unwrap(), again.bytes().await.unwrap());

    // No artifact for what the index does not name, nor of the other type.
    for missing in [
        "nosuch.zip",
        "gamma.zip",
        "alpha/SKILL.md",
        "alpha",
        "alpha.tar.gz",
        ".zip",
    ] {
        let url = server.url(&format!("/.well-known/agent-skills/{missing}"));
        assert_eq!(client.get(&url).sent().await.status(), 404, "{missing}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_and_artifacts_answer_304_and_the_index_follows_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let server = Served::start(Settings::single(layered_config(dir.path()))).await;
    let client = reqwest::Client::new();

    for path in [
        INDEX,
        "/.well-known/agent-skills/alpha.zip",
        "/.well-known/agent-skills/gamma/SKILL.md",
    ] {
        let first = client.get(server.url(path)).sent().await;
        let etag = first.headers()["etag"].to_str().unwrap().to_owned();
        let body = first.bytes().await.unwrap();
        assert_eq!(
            etag,
            format!("\"{}\"", skillstore_server::digest::sha256_hex(&body)),
            "{path}"
        );
        let cached = client.get(server.url(path)).header("if-none-match", &etag).sent().await;
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert!(cached.bytes().await.unwrap().is_empty());
        let head = client.head(server.url(path)).sent().await;
        assert_eq!(head.status(), 200, "{path}");
        assert_eq!(head.headers()["etag"].to_str().unwrap(), etag);
    }

    let before: Value = client.get(server.url(INDEX)).sent().await.json().await.unwrap();
    let old_etag = client.get(server.url(INDEX)).sent().await.headers()["etag"].clone();
    // A supporting file of alpha changes; so does a new skill appear.
    let put = client
        .put(server.url("/v1/skills/alpha/files/references/guide.md"))
        .header("content-type", "text/markdown")
        .body("# Guide, second edition\n")
        .sent()
        .await;
    assert!(put.status().is_success(), "{}", put.status());
    write(dir.path(), "team/delta/SKILL.md", &skill_md("delta", "Delta, new."));
    let refreshed = client.post(server.url("/v1/refresh")).sent().await;
    assert_eq!(refreshed.status(), 200);

    let changed = client
        .get(server.url(INDEX))
        .header("if-none-match", old_etag.to_str().unwrap())
        .sent()
        .await;
    assert_eq!(changed.status(), 200, "the index must change with the catalog");
    let after: Value = changed.json().await.unwrap();
    let digest_of = |index: &Value, name: &str| {
        index["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["digest"].as_str().unwrap().to_owned())
    };
    assert_ne!(digest_of(&before, "alpha"), digest_of(&after, "alpha"));
    assert_eq!(digest_of(&before, "beta"), digest_of(&after, "beta"));
    assert_eq!(digest_of(&before, "gamma"), digest_of(&after, "gamma"));
    assert_eq!(digest_of(&before, "delta"), None);
    assert!(digest_of(&after, "delta").is_some());
    let installed = install_all(&client, &server.url(INDEX)).await;
    assert_eq!(installed["alpha"]["references/guide.md"], b"# Guide, second edition\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_skills_and_names_clients_skip_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    // A directory whose SKILL.md names a skill against the naming rule
    // loads (leniently) but is no index entry.
    write(
        dir.path(),
        "team/Bad_Name/SKILL.md",
        &skill_md("Bad_Name", "Against the rule."),
    );
    let mut config = layered_config(dir.path());
    config.skills.disabled = vec!["beta".to_owned()];
    let server = Served::start(Settings::single(config)).await;
    let client = reqwest::Client::new();
    let index: Value = client.get(server.url(INDEX)).sent().await.json().await.unwrap();
    let names: Vec<&str> = index["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "gamma"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_public_tenant_is_published_and_a_private_one_looks_absent() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let mut settings = settings(vec![
        ("acme", layered_config(dir.path()), vec![("acme-token", Scope::Read)]),
        (
            "globex",
            layered_config(dir.path()),
            vec![("globex-token", Scope::Read)],
        ),
    ]);
    settings.tenants[0].discovery = Discovery::Public;
    let server = Served::start(settings).await;
    let client = reqwest::Client::new();

    // No token needed for the public tenant.
    assert_eq!(
        install_all(&client, &server.url(&format!("/t/acme{INDEX}"))).await,
        expected(dir.path())
    );

    // The private tenant, a tenant that does not exist, and a route that
    // does not exist answer alike, with or without a token.
    let absent = |response: reqwest::Response| async move {
        let status = response.status();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(k, _)| *k != "date")
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        (status, headers, response.bytes().await.unwrap())
    };
    let reference = absent(client.get(server.url("/no/such/route")).sent().await).await;
    assert_eq!(reference.0, 404);
    for path in [
        format!("/t/globex{INDEX}"),
        format!("/t/nosuch{INDEX}"),
        "/t/globex/.well-known/agent-skills/alpha.zip".to_owned(),
        "/t/globex/.well-known/agent-skills/gamma/SKILL.md".to_owned(),
        "/t/nosuch/.well-known/agent-skills/gamma/SKILL.md".to_owned(),
        INDEX.to_owned(),
    ] {
        assert_eq!(
            absent(client.get(server.url(&path)).sent().await).await,
            reference,
            "{path}"
        );
        let with_token = client.get(server.url(&path)).bearer_auth("globex-token").sent().await;
        assert_eq!(absent(with_token).await, reference, "{path} with a token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_server_keeps_its_host_and_origin_checks_on_discovery() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let server = Served::start(Settings::single(layered_config(dir.path()))).await;
    let client = reqwest::Client::new();
    let rebound = client
        .get(server.url(INDEX))
        .header("host", "attacker.example")
        .sent()
        .await;
    assert_eq!(rebound.status(), 403);
    let foreign = client
        .get(server.url("/.well-known/agent-skills/alpha.zip"))
        .header("origin", "https://attacker.example")
        .sent()
        .await;
    assert_eq!(foreign.status(), 403);
    let own = client
        .get(server.url(INDEX))
        .header("origin", server.base.as_str())
        .sent()
        .await;
    assert_eq!(own.status(), 200);
}

/// A skill whose files together hold more than an artifact may (here 7
/// sparse files of 10,000,000 bytes, each under the read limit) is left out
/// of the index without being read, and stays out: an anonymous index
/// request cannot make the server hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_too_large_for_an_artifact_is_left_out_unread() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        dir.path(),
        "team/bloat/SKILL.md",
        &skill_md("bloat", "Many large files."),
    );
    for n in 0..7 {
        let file = std::fs::File::create(dir.path().join(format!("team/bloat/f{n}.bin"))).unwrap();
        file.set_len(10_000_000).unwrap();
    }
    const { assert!(7 * 10_000_000 > skillstore_server::discovery::MAX_ARTIFACT_INPUT_BYTES) };
    let server = Served::start(Settings::single(layered_config(dir.path()))).await;
    let client = reqwest::Client::new();
    let reads = || async {
        let text = client.get(server.url("/metrics")).sent().await.text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("skillstore_backend_calls_total{call=\"read\"} "))
            .map(|n| n.parse::<u64>().unwrap())
            .expect("the read counter")
    };
    let before = reads().await;
    for _ in 0..2 {
        let index: Value = client.get(server.url(INDEX)).sent().await.json().await.unwrap();
        let names: Vec<&str> = index["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["alpha", "beta", "gamma"]);
    }
    // The other skills' five files are read once; bloat's eight never.
    let read = reads().await - before;
    assert!(read < 8, "{read} reads for two index requests");
    let answer = client
        .get(server.url("/.well-known/agent-skills/bloat.zip"))
        .sent()
        .await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
}

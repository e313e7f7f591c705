//! The replica test's body, shared by `replicas.rs` (our in-process S3
//! server) and `replicas_moto.rs` (moto): two servers over one bucket
//! prefix; a write through one is seen by the other after a refresh;
//! writers hammering one skill through both lose no update (the
//! conditional puts decide); readers running meanwhile always get a whole
//! answer of one version.

use crate::common::*;
use sha2::{Digest, Sha256};
use skillstore::Config;
use skillstore_server::Scope;

const WRITERS_PER_SERVER: usize = 3;
const EDITS_PER_WRITER: usize = 8;

fn sha256_tag(body: &[u8]) -> String {
    let hex: String = Sha256::digest(body).iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Two servers over `location` (an `s3://BUCKET/PREFIX` the `AWS_*`
/// variables point at), as the module says. Where the store's conditional
/// writes are not atomic (`atomic_conditionals` false: moto checks and
/// then writes), two patches of one version can both succeed and the later
/// drops the earlier's line: then what is asserted is that every answer is
/// whole, no line is there twice and the file is one whole version, and
/// the lines lost are printed (at most one in four may be).
pub async fn run(location: String, atomic_conditionals: bool) {
    let config = || {
        Config::parse(&format!(
            "mounts:\n  - at: /\n    location: {location}\nsources:\n  - path: /team\n    writable: true\n"
        ))
        .unwrap()
    };
    let a = Served::start(settings(vec![("acme", config(), vec![("token", Scope::Write)])])).await;
    let b = Served::start(settings(vec![("acme", config(), vec![("token", Scope::Write)])])).await;
    let client = reqwest::Client::new();

    // A write through A reaches B at B's next refresh.
    let r = client
        .put(a.url("/v1/skills/counter"))
        .bearer_auth("token")
        .body(skill_md("counter", "Counts.") + "<!-- end -->\n")
        .sent()
        .await;
    assert_eq!(r.status(), 201);
    let r = get(&client, b.url("/v1/skills/counter"), "token").await;
    assert_eq!(r.status(), 404);
    let r = client.post(b.url("/v1/refresh")).bearer_auth("token").sent().await;
    assert_eq!(r.status(), 200);
    let r = get(&client, b.url("/v1/skills/counter"), "token").await;
    assert_eq!(r.status(), 200);

    // Writers on both servers append a line each, retrying when another
    // writer got there first; readers and refreshes run meanwhile.
    let stop = tokio_util::sync::CancellationToken::new();
    let mut readers = Vec::new();
    for server in [a.base.clone(), b.base.clone()] {
        for _ in 0..2 {
            let client = client.clone();
            let server = server.clone();
            let stop = stop.clone();
            readers.push(tokio::spawn(async move {
                let mut answers = 0;
                while !stop.is_cancelled() {
                    for path in ["/v1/skills/counter", "/v1/skills/counter/files/SKILL.md", "/v1/skills"] {
                        let r = get(&client, format!("{server}{path}"), "token").await;
                        assert_eq!(r.status(), 200, "{path}");
                        let tag = r.headers()["etag"].to_str().unwrap().to_owned();
                        let body = r.bytes().await.unwrap();
                        assert_eq!(tag, sha256_tag(&body), "{path}: the answer is one version");
                        answers += 1;
                    }
                    let r = client
                        .post(format!("{server}/v1/refresh"))
                        .bearer_auth("token")
                        .sent()
                        .await;
                    assert_eq!(r.status(), 200);
                }
                answers
            }));
        }
    }
    let mut writers = Vec::new();
    for (s, server) in [a.base.clone(), b.base.clone()].into_iter().enumerate() {
        for w in 0..WRITERS_PER_SERVER {
            let client = client.clone();
            let server = server.clone();
            writers.push(tokio::spawn(async move {
                let mut conflicts = 0;
                for i in 0..EDITS_PER_WRITER {
                    let line = format!("- s{s}-w{w}-e{i}\n<!-- end -->");
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        assert!(attempts < 500, "a writer never got through");
                        let r = client
                            .patch(format!("{server}/v1/skills/counter"))
                            .bearer_auth("token")
                            .json(&serde_json::json!({"find": "<!-- end -->", "replace": line}))
                            .sent()
                            .await;
                        match r.status().as_u16() {
                            200 => break,
                            412 => conflicts += 1,
                            other => panic!("{other}: {}", r.text().await.unwrap()),
                        }
                    }
                }
                conflicts
            }));
        }
    }
    let mut conflicts = 0;
    for writer in writers {
        conflicts += writer.await.unwrap();
    }
    stop.cancel();
    let mut answers = 0;
    for reader in readers {
        answers += reader.await.unwrap();
    }
    assert!(answers > 0);
    let r = client.post(a.url("/v1/refresh")).bearer_auth("token").sent().await;
    assert_eq!(r.status(), 200);
    let text = get(&client, a.url("/v1/skills/counter/files/SKILL.md"), "token")
        .await
        .text()
        .await
        .unwrap();
    let mut lost = 0;
    for s in 0..2 {
        for w in 0..WRITERS_PER_SERVER {
            for i in 0..EDITS_PER_WRITER {
                let line = format!("- s{s}-w{w}-e{i}\n");
                let count = text.matches(&line).count();
                assert!(count <= 1, "{line:?} {count} times:\n{text}");
                assert!(count == 1 || !atomic_conditionals, "lost {line:?}:\n{text}");
                lost += 1 - count;
            }
        }
    }
    assert!(text.ends_with("<!-- end -->\n"), "{text}");
    assert_eq!(
        text.matches("\n- s").count() + lost,
        2 * WRITERS_PER_SERVER * EDITS_PER_WRITER
    );
    eprintln!("{answers} reads, {conflicts} conflicting writes retried, {lost} lines lost");
    // A race lost now and then, never most: a store that checked nothing
    // would keep a handful.
    assert!(
        lost * 4 <= 2 * WRITERS_PER_SERVER * EDITS_PER_WRITER,
        "{lost} lines lost:\n{text}"
    );
    a.stop().await;
    b.stop().await;
}

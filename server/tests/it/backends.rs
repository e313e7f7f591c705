//! rmcp's client over streamable HTTP against tenants on each kind of
//! storage: a directory, a `memory:` file and S3 (the in-process s3s-fs
//! server), holding the same two layers. Every tool, resource, prompt and
//! Skills-extension method answers the same on each.
//!
//! The test runs alone in a process of its own (`with_s3_env`): it sets
//! the `AWS_*` variables before any other thread runs.

use std::path::Path;

use crate::common::mcp_client::{exercise, http_client};
use crate::common::*;
use skillstore::Config;
use skillstore_backends::testkit::s3_server::S3TestServer;
use skillstore_server::Scope;

/// Every file under `root` as `(relative path, text)`.
fn files(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
                out.push((relative, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

#[test]
fn every_storage_serves_the_same_through_mcp() {
    with_s3_env(run);
}

async fn run(s3: S3TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    layered_tree(&tree);
    let layers = files(&tree);

    let bucket = s3.create_bucket();
    for (relative, text) in &layers {
        s3.put_raw(&bucket, &format!("skills/{relative}"), text.as_bytes());
    }
    let mut s3_config = Config::parse("sources:\n  - path: /base\n  - path: /team\n    writable: true\n").unwrap();
    s3_config
        .set_mount("/", &format!("s3://{bucket}/skills"), Path::new("."))
        .unwrap();

    let memory_file = dir.path().join("layers.json");
    let flat: serde_json::Map<String, serde_json::Value> = layers
        .iter()
        .map(|(relative, text)| (format!("/{relative}"), text.clone().into()))
        .collect();
    std::fs::write(&memory_file, serde_json::to_vec(&flat).unwrap()).unwrap();
    let mut memory_config = Config::parse("sources:\n  - path: /base\n  - path: /team\n").unwrap();
    memory_config
        .set_mount("/", &format!("memory:{}", memory_file.display()), Path::new("."))
        .unwrap();

    let server = Served::start(settings(vec![
        (
            "on-s3",
            s3_config,
            vec![("s3-writer", Scope::Write), ("s3-reader", Scope::Read)],
        ),
        ("in-memory", memory_config, vec![("memory-reader", Scope::Read)]),
    ]))
    .await;
    for (token, writable) in [("s3-reader", false), ("memory-reader", false), ("s3-writer", true)] {
        let client = http_client(&server.base, token).await;
        exercise(&client, writable).await;
        let _ = client.cancel().await;
    }
    server.stop().await;
}

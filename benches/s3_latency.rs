//! `skillstore list --json` against S3 with network latency, counting every
//! request and response byte.
//!
//!     cargo bench --bench s3_latency -- TREE SKILLSTORE_BINARY [RUNS]
//!
//! TREE is a layered tree from gen_fixture.py (ROOT/{base,user,project,team}).
//! The bench starts an in-process s3s-fs server, uploads the tree, and puts
//! a proxy in front of it that delays every chunk by 10 ms in each direction
//! and counts requests and response bytes (headers and listings included).
//! The same tree is also written by `skillstore publish` (with its index).
//! It then times the `skillstore` binary listing each through the proxy,
//! with an empty local cache (a fresh `XDG_CACHE_HOME` per run) and with
//! the cache of an earlier run, and checks, in process, what a refresh of
//! an unchanged catalog and of a catalog with one changed skill ask of the
//! server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use skillstore::backends::testkit::latency_proxy;
use skillstore::backends::testkit::s3_server::{ACCESS_KEY, REGION, S3TestServer, SECRET_KEY};
use skillstore::backends::{ObjectStoreBackend, PutMode, SkillBackend, VPath};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

const DELAY: Duration = Duration::from_millis(10);
const LAYERS: [&str; 4] = ["base", "user", "project", "team"];

/// What went through the proxy.
#[derive(Default)]
struct Counters {
    lists: AtomicU64,
    gets: AtomicU64,
    heads: AtomicU64,
    puts: AtomicU64,
    response_bytes: AtomicU64,
}

impl Counters {
    fn reset(&self) {
        for c in [&self.lists, &self.gets, &self.heads, &self.puts, &self.response_bytes] {
            c.store(0, Ordering::SeqCst);
        }
    }

    fn snapshot(&self) -> [u64; 5] {
        [&self.lists, &self.gets, &self.heads, &self.puts, &self.response_bytes].map(|c| c.load(Ordering::SeqCst))
    }

    /// Counts the request lines in a chunk sent to the server.
    fn requests(&self, chunk: &[u8]) {
        for line in chunk.split(|&b| b == b'\n') {
            let counter = if line.starts_with(b"GET ") {
                let target = line.split(|&b| b == b' ').nth(1).unwrap_or_default();
                if target.windows(9).any(|w| w == b"list-type") || target.windows(9).any(|w| w == b"delimiter") {
                    &self.lists
                } else {
                    &self.gets
                }
            } else if line.starts_with(b"HEAD ") {
                &self.heads
            } else if line.starts_with(b"PUT ") {
                &self.puts
            } else {
                continue;
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl latency_proxy::Observer for Counters {
    fn request(&self, chunk: &[u8]) {
        self.requests(chunk);
    }

    fn response(&self, chunk: &[u8]) {
        self.response_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
}

/// Uploads every file of `tree` under `prefix`.
async fn upload(backend: &ObjectStoreBackend, tree: &Path) -> usize {
    let mut files = Vec::new();
    let mut pending = vec![tree.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("reading the tree") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.parent() != Some(tree) {
                files.push(path);
            }
        }
    }
    let puts = files.iter().map(|path| async move {
        let relative = path
            .strip_prefix(tree)
            .expect("under the tree")
            .to_string_lossy()
            .into_owned();
        let key = VPath::new(format!("/{relative}")).expect("a valid path");
        let data = std::fs::read(path).expect("reading a file");
        backend
            .put(&key, data.into(), PutMode::Overwrite)
            .await
            .expect("uploading");
    });
    futures::stream::iter(puts)
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    files.len()
}

use futures::StreamExt;

/// The `AWS_*` variables that point a process at `endpoint`.
fn env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", endpoint.to_owned()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_REGION", REGION.into()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
    ]
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

fn sources() -> SourceList {
    SourceList::from_sources(LAYERS.map(|l| Source::parse(&format!("/{l}/")).expect("a source"))).expect("sources")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let (Some(tree), Some(binary)) = (args.first(), args.get(1)) else {
        eprintln!("usage: s3_latency TREE SKILLSTORE_BINARY [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    let tree = PathBuf::from(tree);
    let skill_files: usize = LAYERS
        .iter()
        .map(|l| std::fs::read_dir(tree.join(l)).map(|d| d.count()).unwrap_or(0))
        .sum();

    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let direct = ObjectStoreBackend::new(server.store(&bucket), "catalog").expect("a prefix");
    let uploaded = upload(&direct, &tree).await;

    let upstream: std::net::SocketAddr = server
        .endpoint()
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let counters = Arc::new(Counters::default());
    let proxy = latency_proxy::start(
        upstream,
        DELAY,
        Arc::clone(&counters) as Arc<dyn latency_proxy::Observer>,
    )
    .await;
    let endpoint = format!("http://{proxy}");
    println!("uploaded {uploaded} files ({skill_files} SKILL.md) to s3s-fs; proxy adds {DELAY:?} each way");

    // The same tree as `skillstore publish` writes it (with its index),
    // sent straight to the server, in a bucket of its own.
    let published_bucket = server.create_bucket();
    let published = std::process::Command::new(binary)
        .envs(env(server.endpoint()))
        .args(["publish", "--no-check"])
        .arg(&tree)
        .arg(format!("s3://{published_bucket}/catalog"))
        .output()
        .expect("running skillstore publish");
    assert!(
        published.status.success(),
        "{}",
        String::from_utf8_lossy(&published.stderr)
    );

    let caches = tempfile::tempdir().expect("a directory for caches");
    let started = Instant::now();
    let base = direct
        .list_deep(&VPath::new("/base").expect("a path"), Default::default())
        .await
        .expect("a deep listing");
    println!(
        "deep listing of one source ({} keys) straight from s3s-fs, no proxy: {:.3} s",
        base.files.len(),
        started.elapsed().as_secs_f64()
    );
    let list = |bucket: &str, cache: &Path| {
        let mut command = std::process::Command::new(binary);
        command
            .envs(env(&endpoint))
            .env("XDG_CACHE_HOME", cache)
            .args(["--mount", &format!("/=s3://{bucket}/catalog")])
            .args(LAYERS.iter().flat_map(|l| ["--source".to_owned(), format!("/{l}/")]))
            .args(["list", "--json"]);
        command
    };
    let run_case = |label: &str, bucket: &str, warm: bool| {
        let mut times = Vec::new();
        let mut last = [0; 5];
        let mut skills = 0;
        let warm_dir = caches.path().join(format!("{bucket}-warm"));
        if warm {
            assert!(
                list(bucket, &warm_dir)
                    .output()
                    .expect("running skillstore")
                    .status
                    .success()
            );
        }
        for run in 0..runs {
            let cache = if warm {
                warm_dir.clone()
            } else {
                caches.path().join(format!("{bucket}-{run}"))
            };
            counters.reset();
            let started = Instant::now();
            let output = list(bucket, &cache).output().expect("running skillstore");
            times.push(started.elapsed().as_secs_f64());
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            let listed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
            assert!(
                listed["diagnostics"].as_array().is_some_and(|d| d.is_empty()),
                "{}",
                listed["diagnostics"]
            );
            skills = listed["skills"].as_array().map_or(0, Vec::len);
            last = counters.snapshot();
        }
        let [lists, gets, heads, _, bytes] = last;
        let mut sorted = times.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{label}: median {:.3} s (min {:.3}, max {:.3}) over {runs} runs; {skills} skills; {lists} listings, \
             {gets} GETs, {heads} HEADs; {bytes} response bytes = {:.0} bytes per SKILL.md",
            median(times),
            sorted[0],
            sorted[sorted.len() - 1],
            bytes as f64 / skill_files as f64
        );
    };
    run_case("1. published tree, cold, empty cache", &published_bucket, false);
    run_case(
        "2. published tree, cold, cache from an earlier run",
        &published_bucket,
        true,
    );
    run_case("3. plain-put tree (no index), cold, empty cache", &bucket, false);
    run_case("   plain-put tree, cold, cache from an earlier run", &bucket, true);

    // Refresh: in process, through the proxy.
    let client = skillstore::backends::testkit::s3_server::client(&endpoint, &bucket);
    let backend = Arc::new(ObjectStoreBackend::new(client, "catalog").expect("a prefix"));
    let catalog = Catalog::load(backend, sources(), LoadOptions::default()).await;
    counters.reset();
    let started = Instant::now();
    let same = catalog.refresh().await;
    let [lists, gets, heads, _, _] = counters.snapshot();
    println!(
        "4. refresh, nothing changed: {:.3} s; {lists} listings, {gets} GETs, {heads} HEADs; {} skills",
        started.elapsed().as_secs_f64(),
        same.skills().len()
    );
    let victim = same.skills()[0].clone();
    let changed_text = format!(
        "---\nname: {}\ndescription: changed for the refresh check\n---\nbody\n",
        victim.name()
    );
    direct
        .put(&victim.path, changed_text.into(), PutMode::Overwrite)
        .await
        .expect("changing one skill");
    counters.reset();
    let started = Instant::now();
    let after = same.refresh().await;
    let [lists, gets, heads, _, _] = counters.snapshot();
    assert_eq!(
        after.get(victim.name()).expect("still there").metadata.description,
        "changed for the refresh check"
    );
    println!(
        "4. refresh, one skill changed: {:.3} s; {lists} listings, {gets} GETs, {heads} HEADs",
        started.elapsed().as_secs_f64()
    );
}

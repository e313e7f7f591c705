//! `skillstore list --json` on a Git source served by smart HTTP (Git's own
//! `git http-backend`) behind a proxy that adds 20 ms each way, against
//! `git clone --depth 1` of the same repository plus `list` on that
//! checkout.
//!
//!     cargo bench --bench git_latency -- TREE SKILLSTORE_BINARY [RUNS]
//!
//! TREE is a layered tree from gen_fixture.py (ROOT/{base,user,project,team}),
//! committed here into one repository. Each run times, with the requests the
//! proxy saw: a cold open (empty Git cache), the clone plus a `list` of the
//! checkout, a warm open (the reference did not move) and the commit pinned
//! (warm), the warm ones with the local cache of frontmatters (the
//! command's default) and without it (`--no-cache`: every SKILL.md read
//! from the object database). Medians and the range over the runs are
//! printed.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use skillstore::backends::testkit::git_repo::git;
use skillstore::backends::testkit::git_servers::{GitHttpServer, publish_bare};
use skillstore::backends::testkit::latency_proxy;

const DELAY: Duration = Duration::from_millis(20);
const SOURCES: [&str; 8] = [
    "--source",
    "/base/",
    "--source",
    "/user/",
    "--source",
    "/project/",
    "--source",
    "/team/",
];

/// HTTP requests sent through the proxy.
#[derive(Default)]
struct Requests(AtomicU64);

impl latency_proxy::Observer for Requests {
    fn request(&self, chunk: &[u8]) {
        let starts = chunk
            .split(|&b| b == b'\n')
            .filter(|line| line.starts_with(b"GET ") || line.starts_with(b"POST "))
            .count();
        self.0.fetch_add(starts as u64, Ordering::Relaxed);
    }

    fn response(&self, _: &[u8]) {}
}

/// Runs `command` to completion, its output discarded; the seconds taken.
fn timed(command: &mut Command) -> f64 {
    let started = Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the command runs");
    let seconds = started.elapsed().as_secs_f64();
    assert!(status.success(), "{command:?} failed");
    seconds
}

/// `skillstore list --json` of the four layers mounted from `location`,
/// with the Git cache in `cache` and the local cache of frontmatters in
/// `frontmatters` (on by default in the command), or none.
fn list(binary: &Path, location: &str, cache: &Path, frontmatters: Option<&Path>) -> Command {
    let mut command = Command::new(binary);
    command.env("SKILLSTORE_GIT_CACHE", cache);
    match frontmatters {
        Some(dir) => command.env("XDG_CACHE_HOME", dir),
        None => command.arg("--no-cache"),
    };
    command
        .arg("--mount")
        .arg(format!("/={location}"))
        .args(SOURCES)
        .args(["list", "--json"]);
    command
}

/// Median, minimum and maximum.
fn spread(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples[0], samples[samples.len() - 1])
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.len() < 2 {
        eprintln!("usage: git_latency TREE SKILLSTORE_BINARY [RUNS]");
        std::process::exit(2);
    }
    let (tree, binary) = (
        Path::new(&args[0]),
        Path::new(&args[1]).canonicalize().expect("the binary"),
    );
    let runs: usize = args.get(2).map_or(5, |r| r.parse().expect("RUNS is a number"));
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let work = scratch.path().join("work");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(tree)
        .arg(&work)
        .status()
        .expect("cp runs");
    assert!(copied.success());
    git(&work, &["init", "-q"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "layers"]);
    let head = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    let served = scratch.path().join("served");
    std::fs::create_dir_all(&served).expect("the served directory");
    publish_bare(&work, &served, "skills.git");
    let http = GitHttpServer::start(&served);
    let upstream: SocketAddr = http
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("the server's address");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let requests = Arc::new(Requests::default());
    let proxy = runtime.block_on(latency_proxy::start(
        upstream,
        DELAY,
        Arc::clone(&requests) as Arc<dyn latency_proxy::Observer>,
    ));
    let url = format!("http://{proxy}/skills.git");
    let count = |requests: &Requests| requests.0.swap(0, Ordering::SeqCst);

    let (mut cold, mut clone, mut checkout_list) = (Vec::new(), Vec::new(), Vec::new());
    let (mut warm, mut warm_bare, mut pinned, mut pinned_bare) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut asked = [0u64; 5];
    let mut one_request = Vec::new();
    for run in 0..runs {
        let cache = scratch.path().join(format!("cache-{run}"));
        let frontmatters = scratch.path().join(format!("frontmatters-{run}"));
        let main = format!("git+{url}@main");
        count(&requests);
        cold.push(timed(&mut list(&binary, &main, &cache, Some(&frontmatters))));
        asked[0] = count(&requests);
        let checkout = scratch.path().join(format!("checkout-{run}"));
        clone.push(timed(
            Command::new("git")
                .args(["clone", "-q", "--depth", "1", &url])
                .arg(&checkout),
        ));
        count(&requests);
        checkout_list.push(timed(&mut list(&binary, &checkout.to_string_lossy(), &cache, None)));
        warm.push(timed(&mut list(&binary, &main, &cache, Some(&frontmatters))));
        asked[1] = count(&requests);
        warm_bare.push(timed(&mut list(&binary, &main, &cache, None)));
        asked[2] = count(&requests);
        // One round trip as a client sees it, the server's answer included:
        // the single GET of the reference advertisement (protocol 0).
        one_request.push(timed(Command::new("git").args([
            "-c",
            "protocol.version=0",
            "ls-remote",
            &url,
            "main",
        ])));
        count(&requests);
        let at_head = format!("git+{url}@{head}");
        pinned.push(timed(&mut list(&binary, &at_head, &cache, Some(&frontmatters))));
        asked[3] = count(&requests);
        pinned_bare.push(timed(&mut list(&binary, &at_head, &cache, None)));
        asked[4] = count(&requests);
    }
    let (list_median, _, _) = spread(checkout_list.clone());
    let clone_plus_list: Vec<f64> = clone.iter().zip(&checkout_list).map(|(c, l)| c + l).collect();
    let (clone_median, _, _) = spread(clone_plus_list.clone());
    let round_trip = 2.0 * DELAY.as_secs_f64();
    println!(
        "git_latency: {runs} runs, {} ms added each way, medians (min-max), requests of the last run",
        DELAY.as_millis()
    );
    println!("| case | seconds | requests | target |");
    println!("| --- | --- | --- | --- |");
    let row = |name: &str, samples: &[f64], requests: String, target: String| {
        let (median, low, high) = spread(samples.to_vec());
        println!("| {name} | {median:.3} ({low:.3}-{high:.3}) | {requests} | {target} |");
    };
    row(
        "cold, empty cache",
        &cold,
        asked[0].to_string(),
        format!("<= clone + list = {clone_median:.3}"),
    );
    row("git clone --depth 1", &clone, "-".into(), "-".into());
    row("list on the checkout", &checkout_list, "0".into(), "-".into());
    row("clone + list", &clone_plus_list, "-".into(), "-".into());
    let (request_median, _, _) = spread(one_request.clone());
    row("git ls-remote (one GET)", &one_request, "1".into(), "-".into());
    let warm_target = format!(
        "<= 1 round trip + 1.3 x list = {:.3} (with the GET as measured: {:.3})",
        round_trip + 1.3 * list_median,
        request_median + 1.3 * list_median
    );
    row("warm, ref unchanged", &warm, asked[1].to_string(), warm_target.clone());
    row(
        "warm, ref unchanged, --no-cache",
        &warm_bare,
        asked[2].to_string(),
        warm_target,
    );
    row(
        "pinned commit, warm",
        &pinned,
        asked[3].to_string(),
        "0 requests".into(),
    );
    row(
        "pinned commit, warm, --no-cache",
        &pinned_bare,
        asked[4].to_string(),
        "0 requests".into(),
    );
}

//! Search: a cold index build over 10,000 skills, a refresh where one
//! changed, query latency through the library, and the memory of the index
//! beside the catalog's.
//!
//!     cargo bench --bench search
//!
//! The tree comes from the peer harness's gen_fixture.py (2,500 skills per
//! layer, no names shared: 10,000 winners), generated under
//! `SKILLSTORE_BENCH_TREES` (default: the system temporary directory) when
//! missing. Times are printed as min / median / max over the runs, query
//! latency as median and p99 over 2,000 queries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillstore::backends::{FsBackend, SkillBackend};
use skillstore::search::{SearchIndex, SearchOptions};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

fn tree() -> PathBuf {
    let base = std::env::var_os("SKILLSTORE_BENCH_TREES")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("skillstore-bench"));
    let root = base.join("search-n2500-unshared");
    if !root.join("expected.json").exists() {
        let generator = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/peer/gen_fixture.py");
        let status = std::process::Command::new("python3")
            .arg(generator)
            .arg(&root)
            .args(["-n", "2500", "--share", "0", "--force"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("python3 runs gen_fixture.py");
        assert!(status.success(), "gen_fixture.py failed");
    }
    root
}

fn sources() -> SourceList {
    SourceList::from_sources(["/base/", "/user/", "/project/", "/team/"].map(|p| Source::parse(p).unwrap())).unwrap()
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn spread(mut times: Vec<Duration>) -> String {
    times.sort();
    format!(
        "min {:.1} ms / median {:.1} ms / max {:.1} ms ({} runs)",
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        times.len()
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = tree();
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(&root).unwrap());
    let before_catalog = rss();
    let catalog = runtime.block_on(Catalog::load(backend.clone(), sources(), LoadOptions::default()));
    let catalog_bytes = rss().saturating_sub(before_catalog);
    let skills = catalog.skills().len();
    println!(
        "skills: {skills}; cores: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // Cold builds (files in the page cache after the first).
    let mut builds = Vec::new();
    let mut index_bytes = 0;
    for run in 0..6 {
        let before = rss();
        let started = Instant::now();
        let index = SearchIndex::in_memory();
        let stats = runtime.block_on(index.refresh(&catalog)).unwrap();
        let took = started.elapsed();
        assert_eq!(stats.indexed, skills);
        if run > 0 {
            builds.push(took);
        }
        index_bytes = rss().saturating_sub(before);
        drop(index);
    }
    println!("cold build, {skills} skills: {}", spread(builds));

    // A refresh where one skill changed.
    let index = SearchIndex::in_memory();
    runtime.block_on(index.refresh(&catalog)).unwrap();
    let mut refreshes = Vec::new();
    let mut catalog = catalog;
    let changed = catalog.skills()[0].path.clone();
    let file = root.join(changed.as_str().trim_start_matches('/'));
    let original = std::fs::read_to_string(&file).unwrap();
    for run in 0..10 {
        std::fs::write(&file, format!("{original}\nrevision {run} zanzibar\n")).unwrap();
        catalog = runtime.block_on(catalog.refresh());
        let started = Instant::now();
        let stats = runtime.block_on(index.refresh(&catalog)).unwrap();
        refreshes.push(started.elapsed());
        assert_eq!(stats.indexed, 1, "one skill re-indexed");
    }
    std::fs::write(&file, original).unwrap();
    println!("refresh, one skill changed (re-indexes 1): {}", spread(refreshes));

    // Queries: words of the skills' own descriptions, two or three a query.
    let words: Vec<String> = catalog
        .skills()
        .iter()
        .flat_map(|s| {
            s.metadata
                .description
                .split_whitespace()
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .filter(|w| w.len() > 3)
        .collect();
    let mut latencies = Vec::new();
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for i in 0..2000 {
        let mut query = String::new();
        for _ in 0..(2 + i % 2) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            query.push_str(&words[(seed % words.len() as u64) as usize]);
            query.push(' ');
        }
        let started = Instant::now();
        let hits = index.search(&catalog, &query, SearchOptions::default()).unwrap();
        latencies.push(started.elapsed());
        std::hint::black_box(hits);
    }
    latencies.sort();
    println!(
        "query, {skills} skills, limit 10: median {:.3} ms, p99 {:.3} ms, max {:.3} ms (2000 queries)",
        latencies[latencies.len() / 2].as_secs_f64() * 1e3,
        latencies[latencies.len() * 99 / 100].as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3,
    );
    println!(
        "memory (resident growth): catalog {:.1} MiB, index {:.1} MiB",
        catalog_bytes as f64 / 1048576.0,
        index_bytes as f64 / 1048576.0
    );
}

//! Search: a cold index build over 10,000 skills (and the share of it
//! spent reading and splitting the SKILL.md files), a refresh where one
//! changed, query latency through the library, and the memory of the index
//! beside the catalog's.
//!
//!     cargo bench --bench search [-- QUERY_RUNS]
//!
//! The tree comes from the peer harness's gen_fixture.py (2,500 skills per
//! layer, no names shared: 10,000 winners), generated under
//! `SKILLSTORE_BENCH_TREES` (default: the system temporary directory) when
//! missing. Times are printed as min / median / max over the runs; query
//! latency as median and p99 over 2,000 queries, for each of QUERY_RUNS
//! runs (default 3).
//!
//! Memory is counted, not sampled: a counting global allocator gives the
//! heap each structure keeps (the catalog's; the index's in memory, as the
//! server holds it, after the queries), and for the index in the cache
//! directory (as the command holds it, memory-mapped) the resident pages of
//! its files are read from /proc/self/smaps after the queries.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;

use skillstore::backends::{FsBackend, SkillBackend};
use skillstore::cache::CacheSettings;
use skillstore::search::{SearchIndex, SearchOptions, text};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

/// The system allocator, counting the bytes live on the heap.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes live on the heap now.
fn heap() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Resident bytes of the files mapped from under `dir` (/proc/self/smaps).
fn mapped_resident(dir: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let dir = dir.to_string_lossy();
    let mut inside = false;
    let mut bytes = 0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            inside = line
                .split_whitespace()
                .nth(5)
                .is_some_and(|path| path.starts_with(&*dir));
        } else if inside && first == "Rss:" {
            bytes += fields.next().and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) * 1024;
        }
    }
    bytes
}

/// CPU time this process has used (all threads, user and system), at the
/// kernel's tick (usually 10 ms).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// How long this thread has waited, runnable, for a CPU
/// (/proc/thread-self/schedstat, nanoseconds).
fn waited() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(stat.split_whitespace().nth(1).and_then(|f| f.parse().ok()).unwrap_or(0))
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

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
    let before_catalog = heap();
    let catalog = runtime.block_on(Catalog::load(backend.clone(), sources(), LoadOptions::default()));
    let catalog_bytes = heap().saturating_sub(before_catalog);
    let skills = catalog.skills().len();
    println!(
        "skills: {skills}; cores: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // Reading and splitting every SKILL.md, as a build does, without the
    // index: the share of a build that is not tantivy's.
    let mut reads = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let bytes: usize = runtime.block_on(
            futures::stream::iter(catalog.skills())
                .map(|skill| {
                    let catalog = &catalog;
                    async move {
                        let file = catalog.read_skill(skill.name()).await.unwrap();
                        let body = text::body(&file);
                        body.len() + text::headings(&body).len()
                    }
                })
                .buffer_unordered(32)
                .fold(0, |sum, n| async move { sum + n }),
        );
        reads.push(started.elapsed());
        std::hint::black_box(bytes);
    }
    println!("read and split every SKILL.md (no index): {}", spread(reads));

    // Cold builds (files in the page cache after the first).
    let mut builds = Vec::new();
    let mut cpus = Vec::new();
    let mut peak = 0;
    for run in 0..6 {
        let live = heap();
        PEAK.store(live, Ordering::Relaxed);
        let (started, cpu_before) = (Instant::now(), cpu());
        let index = SearchIndex::in_memory();
        let stats = runtime.block_on(index.refresh(&catalog)).unwrap();
        let (took, cpu_took) = (started.elapsed(), cpu() - cpu_before);
        assert_eq!(stats.indexed, skills);
        if run > 0 {
            builds.push(took);
            cpus.push(cpu_took);
        }
        peak = peak.max(PEAK.load(Ordering::Relaxed) - live);
        drop(index);
    }
    println!("cold build, {skills} skills: {}", spread(builds));
    println!("cold build, CPU time of all threads: {}", spread(cpus));
    println!("cold build, peak heap growth: {}", mib(peak as f64));

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
    // A refresh where one skill changed.
    let before_index = heap();
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

    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(3);
    // Each query's wall time, and how much of it the thread waited for a
    // CPU (what a busy host adds).
    let queries = |index: &SearchIndex| {
        let mut timings = Vec::new();
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
            let before = waited();
            let started = Instant::now();
            let hits = index.search(&catalog, &query, SearchOptions::default()).unwrap();
            let took = started.elapsed();
            timings.push((took, waited() - before));
            std::hint::black_box(hits);
        }
        timings
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let percentiles = |mut times: Vec<Duration>| {
        times.sort();
        (
            times[times.len() / 2],
            times[times.len() * 99 / 100],
            times[times.len() - 1],
        )
    };
    for run in 0..runs {
        let timings = queries(&index);
        let (median, p99, max) = percentiles(timings.iter().map(|t| t.0).collect());
        let (_, own_p99, own_max) = percentiles(timings.iter().map(|t| t.0.saturating_sub(t.1)).collect());
        // The slowest 1%: how much of their time was spent waiting for a CPU.
        let mut slowest = timings.clone();
        slowest.sort_by_key(|t| std::cmp::Reverse(t.0));
        slowest.truncate(timings.len() / 100);
        let (slow_wall, slow_wait) = slowest
            .iter()
            .fold((Duration::ZERO, Duration::ZERO), |(w, q), t| (w + t.0, q + t.1));
        println!(
            "query run {}, {skills} skills, limit 10: median {:.3} ms, p99 {:.3} ms, max {:.3} ms (2000 queries); \
             the slowest 1% spent {:.0}% of their time waiting for a CPU; without those waits p99 {:.3} ms, max {:.3} ms",
            run + 1,
            ms(median),
            ms(p99),
            ms(max),
            100.0 * slow_wait.as_secs_f64() / slow_wall.as_secs_f64().max(1e-9),
            ms(own_p99),
            ms(own_max),
        );
    }
    let index_heap = heap().saturating_sub(before_index);

    // The same index in the cache directory, memory-mapped.
    let cache_dir = std::env::temp_dir().join(format!("skillstore-bench-search-{}", std::process::id()));
    let settings = CacheSettings {
        dir: Some(cache_dir.clone()),
        ..CacheSettings::default()
    };
    let before_cached = heap();
    let cached = SearchIndex::open_cached(&settings, "bench");
    assert!(cached.is_cached());
    runtime.block_on(cached.refresh(&catalog)).unwrap();
    std::hint::black_box(queries(&cached));
    let cached_heap = heap().saturating_sub(before_cached);
    let cached_pages = mapped_resident(&cache_dir);
    drop(cached);
    let _ = std::fs::remove_dir_all(&cache_dir);
    println!(
        "memory, {skills} skills: catalog heap {}; index in memory (heap, after the queries) {}; \
         index in the cache directory: heap {} + resident mapped pages {}",
        mib(catalog_bytes as f64),
        mib(index_heap as f64),
        mib(cached_heap as f64),
        mib(cached_pages as f64),
    );
}

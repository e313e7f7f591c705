//! What a lock costs: a plain catalog load against a `--locked` load whose
//! file digests are cold (every file read and hashed) and warm (kept by
//! version from an earlier load, as in a server, a refresh or `sync
//! --watch`), on the filesystem tree of 10,000 SKILL.md (2,500 per layer)
//! from the peer harness's gen_fixture.py, with its reference files.
//!
//!     cargo bench --bench integrity [-- CASE]
//!
//! With CASE, only the cases whose name holds it run (`warm`).
//! Each case runs 21 times after 3 warm-up runs; the median, the lowest
//! and the highest are printed in milliseconds. The tree is generated under
//! `SKILLSTORE_BENCH_TREES` (default: the system temporary directory) when
//! missing; `SKILLSTORE_BENCH_PER_LAYER` changes its size (default 2,500).
//!
//! The "one-shot" case is a `--locked` command after an earlier one: a
//! fresh backend and a fresh [`FileDigests::persistent`] store each run,
//! sharing only a private cache directory (under the system temporary
//! directory) that an earlier run filled; it must hash no file.
//!
//! Each cold run gets a fresh backend (no directory listing kept from an
//! earlier run) and a fresh digest store, and must hash every file of the
//! winners; a warm run must hash none. The page cache stays warm: the cold
//! case measures the hashing, not the disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use skillstore::backends::{FsBackend, SkillBackend};
use skillstore::cache::CacheSettings;
use skillstore::integrity::{FileDigests, Integrity, Lock};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

const RUNS: usize = 21;
const WARMUP: usize = 3;

fn tree(per_layer: usize) -> PathBuf {
    let trees = std::env::var_os("SKILLSTORE_BENCH_TREES")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("skillstore-bench"));
    let root = trees.join(format!("n{per_layer}"));
    if !root.join("expected.json").exists() {
        let generator = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/peer/gen_fixture.py");
        let status = std::process::Command::new("python3")
            .arg(generator)
            .arg(&root)
            .args(["-n", &per_layer.to_string(), "--force"])
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

fn measure(name: &str, mut run: impl FnMut() -> Catalog) {
    if let Some(only) = std::env::args().nth(1).filter(|a| !a.starts_with('-'))
        && !name.contains(&only)
    {
        return;
    }
    for _ in 0..WARMUP {
        run();
    }
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let catalog = run();
            let ms = started.elapsed().as_secs_f64() * 1e3;
            assert!(catalog.withheld().next().is_none(), "{name}: a skill was withheld");
            ms
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "{name:<24} median {:8.1} ms   min {:8.1}   max {:8.1}",
        times[RUNS / 2],
        times[0],
        times[RUNS - 1]
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let per_layer = std::env::var("SKILLSTORE_BENCH_PER_LAYER")
        .ok()
        .map_or(2500, |n| n.parse().expect("SKILLSTORE_BENCH_PER_LAYER is a number"));
    let root = tree(per_layer);
    let fresh = || -> Arc<dyn SkillBackend> { Arc::new(FsBackend::new(&root).unwrap().read_only()) };
    let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(&root).unwrap().read_only());
    let plain = runtime.block_on(Catalog::load(fs.clone(), sources(), LoadOptions::default()));
    let lock = Arc::new(runtime.block_on(Lock::for_catalog(&plain)).unwrap());
    let files: usize = runtime.block_on(async {
        let mut n = 0;
        for skill in plain.skills() {
            n += plain.skill_digest(skill.name()).await.unwrap().files.len();
        }
        n
    });
    println!(
        "{} winners, {files} files in them, {} cores",
        plain.skills().len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let locked = |digests: Arc<FileDigests>| LoadOptions {
        digests,
        integrity: Some(Arc::new(Integrity {
            lock: Some(Arc::clone(&lock)),
            ..Integrity::default()
        })),
        ..LoadOptions::default()
    };
    measure("plain load", || {
        runtime.block_on(Catalog::load(fs.clone(), sources(), LoadOptions::default()))
    });
    measure("locked load, cold", || {
        let digests = Arc::new(FileDigests::new());
        let before = digests.computed();
        let catalog = runtime.block_on(Catalog::load(fresh(), sources(), locked(Arc::clone(&digests))));
        let hashed = digests.computed() - before;
        assert!(
            hashed >= files as u64,
            "a cold load hashed {hashed} files, fewer than the {files} of the winners"
        );
        catalog
    });
    let cache = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: Some(cache.path().join("cache")),
        ..CacheSettings::default()
    };
    // Fill the cache; a file changed within the last seconds is racily
    // clean and hashed again, so wait until a run hashes nothing.
    for attempt in 0.. {
        let digests = Arc::new(FileDigests::persistent(settings.clone()));
        runtime.block_on(Catalog::load(fresh(), sources(), locked(Arc::clone(&digests))));
        if digests.computed() == 0 {
            break;
        }
        assert!(attempt < 10, "every run hashes files again");
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    measure("plain load, fresh backend", || {
        runtime.block_on(Catalog::load(fresh(), sources(), LoadOptions::default()))
    });
    measure("locked load, one-shot", || {
        let digests = Arc::new(FileDigests::persistent(settings.clone()));
        let catalog = runtime.block_on(Catalog::load(fresh(), sources(), locked(Arc::clone(&digests))));
        assert_eq!(digests.computed(), 0, "a one-shot load over unchanged files hashed");
        catalog
    });
    let warm = Arc::new(FileDigests::new());
    runtime.block_on(Catalog::load(fs.clone(), sources(), locked(Arc::clone(&warm))));
    let hashed = warm.computed();
    measure("locked load, warm", || {
        let catalog = runtime.block_on(Catalog::load(fs.clone(), sources(), locked(Arc::clone(&warm))));
        assert_eq!(warm.computed(), hashed, "a warm load hashed again");
        catalog
    });
    let loaded = runtime.block_on(Catalog::load(fs.clone(), sources(), locked(Arc::clone(&warm))));
    let plain_loaded = runtime.block_on(Catalog::load(fs.clone(), sources(), LoadOptions::default()));
    measure("plain refresh", || runtime.block_on(plain_loaded.refresh()));
    measure("locked refresh, warm", || runtime.block_on(loaded.refresh()));
}

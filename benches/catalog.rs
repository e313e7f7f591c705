//! Catalog load (memory and filesystem backends, 1,000 and 10,000 SKILL.md),
//! frontmatter parsing alone, and prompt rendering, with criterion.
//!
//!     cargo bench --bench catalog
//!
//! The trees come from the peer harness's gen_fixture.py (250 and 2,500
//! skills per layer); they are generated under `SKILLSTORE_BENCH_TREES`
//! (default: the system temporary directory) when missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use skillstore::backends::{FsBackend, MemoryBackend, SkillBackend};
use skillstore::{
    Catalog, LoadOptions, PromptOptions, PromptStyle, Source, SourceList, Strictness, parse_frontmatter, render,
};

fn trees() -> PathBuf {
    std::env::var_os("SKILLSTORE_BENCH_TREES")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("skillstore-bench"))
}

/// The tree of `per_layer` skills per layer, and its flat JSON form.
fn tree(per_layer: usize) -> (PathBuf, PathBuf) {
    let root = trees().join(format!("n{per_layer}"));
    let json = trees().join(format!("n{per_layer}.json"));
    if !root.join("expected.json").exists() || !json.exists() {
        let generator = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/peer/gen_fixture.py");
        let status = std::process::Command::new("python3")
            .arg(generator)
            .arg(&root)
            .args(["-n", &per_layer.to_string(), "--force", "--json"])
            .arg(&json)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("python3 runs gen_fixture.py");
        assert!(status.success(), "gen_fixture.py failed");
    }
    (root, json)
}

fn sources() -> SourceList {
    SourceList::from_sources(["/base/", "/user/", "/project/", "/team/"].map(|p| Source::parse(p).unwrap())).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn load(runtime: &tokio::runtime::Runtime, backend: Arc<dyn SkillBackend>) -> Catalog {
    runtime.block_on(Catalog::load(backend, sources(), LoadOptions::default()))
}

fn catalog_load(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("catalog_load");
    group.sample_size(10);
    for (per_layer, files) in [(250, "1k"), (2500, "10k")] {
        let (root, json) = tree(per_layer);
        let fs: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(&root).unwrap().read_only());
        group.bench_function(format!("fs_{files}"), |b| b.iter(|| load(&runtime, fs.clone())));
        let memory: Arc<dyn SkillBackend> =
            Arc::new(MemoryBackend::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap());
        group.bench_function(format!("memory_{files}"), |b| b.iter(|| load(&runtime, memory.clone())));
        let loaded = load(&runtime, fs.clone());
        group.bench_function(format!("fs_refresh_unchanged_{files}"), |b| {
            b.iter(|| runtime.block_on(loaded.refresh()))
        });
    }
    group.finish();
}

fn prompt_render(c: &mut Criterion) {
    let runtime = runtime();
    let (root, _) = tree(2500);
    let catalog = load(&runtime, Arc::new(FsBackend::new(&root).unwrap().read_only()));
    assert_eq!(catalog.skills().len(), 8673);
    let mut group = c.benchmark_group("prompt_render_8673");
    group.bench_function("markdown", |b| b.iter(|| render(&catalog, &PromptOptions::default())));
    let xml = PromptOptions {
        style: PromptStyle::Xml,
        ..PromptOptions::default()
    };
    group.bench_function("xml", |b| b.iter(|| render(&catalog, &xml)));
    let budget = PromptOptions {
        max_chars: Some(200_000),
        ..PromptOptions::default()
    };
    group.sample_size(10);
    group.bench_function("markdown_budget_200k_chars", |b| b.iter(|| render(&catalog, &budget)));
    group.finish();
}

/// The frontmatters of the 10,000-file tree, parsed one after the other on
/// one thread: the CPU a load spends per skill, without any I/O.
fn frontmatter_parse(c: &mut Criterion) {
    let (root, _) = tree(2500);
    let mut frontmatters = Vec::new();
    for layer in ["base", "user", "project", "team"] {
        for entry in std::fs::read_dir(root.join(layer)).unwrap() {
            let entry = entry.unwrap();
            let text = std::fs::read_to_string(entry.path().join("SKILL.md")).unwrap();
            let yaml = text
                .strip_prefix("---\n")
                .and_then(|rest| rest.find("\n---\n").map(|end| rest[..=end].to_owned()))
                .expect("a closed frontmatter");
            frontmatters.push((entry.file_name().into_string().unwrap(), yaml));
        }
    }
    let mut group = c.benchmark_group("frontmatter_parse");
    group.sample_size(20);
    group.bench_function(format!("{}_frontmatters", frontmatters.len()), |b| {
        b.iter(|| {
            frontmatters
                .iter()
                .filter(|(dir, yaml)| parse_frontmatter(yaml, Some(dir), Strictness::Lenient).skill.is_some())
                .count()
        })
    });
    group.finish();
}

criterion_group!(benches, catalog_load, frontmatter_parse, prompt_render);
criterion_main!(benches);

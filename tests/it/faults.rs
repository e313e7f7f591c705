//! S3 under faults: a proxy between the client and the in-process server
//! answers 503 or 500, resets connections, truncates bodies and stalls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use skillstore::backends::testkit::fault_proxy::{ALL_FAULTS, Fault, FaultProxy};
use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{
    ErrorKind, MemoryBackend, MountTable, ObjectStoreBackend, PutMode, ReadOptions, SkillBackend, VPath,
};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

const LAYERS: [&str; 4] = ["base", "user", "project", "team"];
/// Requests are given up after this long; stalls last longer.
const TIMEOUT: Duration = Duration::from_millis(800);
const STALL: Duration = Duration::from_secs(3);

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

fn sources() -> SourceList {
    SourceList::from_sources(LAYERS.map(|l| Source::parse(&format!("/{l}")).unwrap())).unwrap()
}

/// `per_layer` skills in each of the four layers; a quarter of the names
/// repeat across layers, as overrides. Bodies are 2-6 KiB.
fn layered_tree(per_layer: usize) -> BTreeMap<String, Bytes> {
    let mut files = BTreeMap::new();
    for (l, layer) in LAYERS.iter().enumerate() {
        for i in 0..per_layer {
            let name = if i % 4 == 0 {
                format!("shared-{i}")
            } else {
                format!("{layer}-skill-{i}")
            };
            let body = "Steps to follow.\n".repeat(120 + (i * 7 + l * 13) % 240);
            let text = format!("---\nname: {name}\ndescription: {name} from {layer}.\n---\n\n# {name}\n\n{body}");
            files.insert(format!("/{layer}/{name}/SKILL.md"), Bytes::from(text));
        }
    }
    files
}

/// A bucket holding `files`, written straight to the server.
async fn bucket_with(files: &BTreeMap<String, Bytes>) -> String {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let direct = ObjectStoreBackend::new(server.store(&bucket), "").unwrap();
    futures::stream::iter(files.iter())
        .map(|(path, data)| {
            let direct = &direct;
            async move { direct.put(&p(path), data.clone(), PutMode::Overwrite).await }
        })
        .buffer_unordered(32)
        .for_each(|r| async move {
            r.unwrap();
        })
        .await;
    bucket
}

fn proxied(proxy: &FaultProxy, bucket: &str, retries: usize) -> Arc<dyn SkillBackend> {
    Arc::new(ObjectStoreBackend::new(proxy.client(bucket, TIMEOUT, retries), "").unwrap())
}

/// How many skill names the files of `keep` hold.
fn distinct_names(files: &BTreeMap<String, Bytes>, keep: impl Fn(&str) -> bool) -> usize {
    let names: std::collections::BTreeSet<&str> = files
        .keys()
        .filter(|path| keep(path))
        .map(|path| path.split('/').nth(2).unwrap())
        .collect();
    names.len()
}

fn summary(catalog: &Catalog) -> Vec<(String, String, String)> {
    catalog
        .skills()
        .iter()
        .map(|s| (s.name().to_owned(), s.source.clone(), s.metadata.description.clone()))
        .collect()
}

/// Never lets a test hang: a load that does not finish is a failure.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_with_ten_percent_of_requests_faulted_returns_every_skill() {
    let files = layered_tree(250);
    let bucket = bucket_with(&files).await;
    let proxy = FaultProxy::start(S3TestServer::shared().endpoint(), STALL);
    let clean = Catalog::load(proxied(&proxy, &bucket, 0), sources(), LoadOptions::default()).await;
    assert_eq!(
        clean.skills().len(),
        distinct_names(&files, |_| true),
        "{:?}",
        clean.diagnostics()
    );
    assert_eq!(proxy.counts().total(), 0);

    proxy.set_rate(0.10);
    let faulted = bounded(
        "the faulted load",
        Catalog::load(proxied(&proxy, &bucket, 8), sources(), LoadOptions::default()),
    )
    .await;
    let counts = proxy.counts();
    eprintln!("faults: {counts:?}");
    assert!(faulted.diagnostics().is_empty(), "{:?}", faulted.diagnostics());
    assert_eq!(summary(&faulted), summary(&clean));
    assert!(counts.requests >= 1000);
    for fault in ALL_FAULTS {
        assert!(counts.of(fault) > 0, "no {fault:?} was injected: {counts:?}");
    }

    // A refresh under the same faults finds nothing changed.
    let refreshed = bounded("the faulted refresh", faulted.refresh()).await;
    assert!(refreshed.diagnostics().is_empty(), "{:?}", refreshed.diagnostics());
    assert_eq!(summary(&refreshed), summary(&clean));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_whose_server_is_down_is_one_diagnostic_and_the_rest_loads() {
    let files = layered_tree(5);
    let bucket = bucket_with(&files).await;
    let proxy = FaultProxy::start(S3TestServer::shared().endpoint(), STALL);
    proxy.set_down(true);
    let local = MemoryBackend::new();
    for (path, data) in files.iter().filter(|(p, _)| !p.starts_with("/team/")) {
        local.put(&p(path), data.clone(), PutMode::Overwrite).await.unwrap();
    }
    let mut namespace = MountTable::new();
    namespace.mount(VPath::root(), Arc::new(local)).unwrap();
    let team = ObjectStoreBackend::new(proxy.client(&bucket, TIMEOUT, 2), "team").unwrap();
    namespace.mount(p("/team"), Arc::new(team)).unwrap();

    let catalog = bounded(
        "a load with a dead source",
        Catalog::load(Arc::new(namespace), sources(), LoadOptions::default()),
    )
    .await;
    let diagnostics = catalog.diagnostics();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].source.as_deref(), Some("team"));
    assert_eq!(diagnostics[0].kind, "source_unavailable");
    assert!(catalog.skills().iter().all(|s| s.source != "team"));
    assert_eq!(
        catalog.skills().len(),
        distinct_names(&files, |path| !path.starts_with("/team/"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_during_an_outage_keeps_the_last_catalog_then_catches_up() {
    let files = layered_tree(5);
    let bucket = bucket_with(&files).await;
    let proxy = FaultProxy::start(S3TestServer::shared().endpoint(), STALL);
    let backend = proxied(&proxy, &bucket, 2);
    let first = Catalog::load(Arc::clone(&backend), sources(), LoadOptions::default()).await;
    assert!(!first.is_stale());
    let before = summary(&first);

    proxy.set_down(true);
    let direct = ObjectStoreBackend::new(S3TestServer::shared().store(&bucket), "").unwrap();
    let changed = "---\nname: team-skill-1\ndescription: Changed during the outage.\n---\n";
    direct
        .put(&p("/team/team-skill-1/SKILL.md"), changed.into(), PutMode::Overwrite)
        .await
        .unwrap();
    let during = bounded("a refresh during an outage", first.refresh()).await;
    assert!(during.is_stale());
    assert_eq!(summary(&during), before, "the last good skills stay");
    assert!(during.diagnostics().iter().all(|d| d.kind == "source_stale"));
    assert_eq!(during.diagnostics().len(), 4);

    proxy.set_down(false);
    let after = bounded("a refresh after recovery", during.refresh()).await;
    assert!(!after.is_stale(), "{:?}", after.diagnostics());
    assert_eq!(
        after.get("team-skill-1").unwrap().metadata.description,
        "Changed during the outage."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_body_is_never_taken_for_the_whole_file() {
    let mut files = BTreeMap::new();
    let whole: Bytes = (0..6000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into();
    files.insert("/base/big/SKILL.md".to_owned(), whole.clone());
    let bucket = bucket_with(&files).await;
    let proxy = FaultProxy::start(S3TestServer::shared().endpoint(), STALL);
    proxy.set_faults(&[Fault::Truncate]);
    let backend = proxied(&proxy, &bucket, 0);
    let path = p("/base/big/SKILL.md");

    proxy.set_rate(1.0);
    for options in [ReadOptions::default(), ReadOptions::prefix(4096)] {
        let err = backend.read(&path, options).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    }
    // Half the responses cut: every read that succeeds has every byte.
    proxy.set_rate(0.5);
    let mut whole_reads = 0;
    for _ in 0..60 {
        if let Ok(blob) = backend.read(&path, ReadOptions::default()).await {
            assert_eq!(blob.data, whole);
            whole_reads += 1;
        }
    }
    assert!(whole_reads > 0);
    assert!(proxy.counts().of(Fault::Truncate) >= 30);
}

//! A discovery endpoint read as a layer: the index `serve` publishes, the
//! same index as static files behind a plain HTTP server (Python's
//! `http.server`), and the 0.1 form, each give the original catalog; a
//! hostile endpoint's entries are refused one by one, the rest loaded;
//! bodies that never end are bounded; an unchanged index costs one
//! conditional request.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use serde_json::{Value, json};
use skillstore::backends::{DiscoveryBackend, DiscoveryLimits, ErrorKind, SkillBackend, Unpack, VPath};
use skillstore::{ArchiveFile, ArchiveLimits, Catalog, Config, FileLimits, SkillArchive, pack_rooted};
use skillstore_server::Settings;
use skillstore_server::digest::sha256_hex;

const INDEX: &str = "/.well-known/agent-skills/index.json";

/// Every winner's name, description and files, as a catalog reads them.
async fn contents(catalog: &Catalog) -> BTreeMap<String, (String, BTreeMap<String, Bytes>)> {
    let mut out = BTreeMap::new();
    for skill in catalog.skills() {
        let listed = catalog.skill_files(skill.name(), FileLimits::default()).await.unwrap();
        let mut files = BTreeMap::new();
        for relative in listed.relatives() {
            files.insert(
                relative.clone(),
                catalog.read_file(skill.name(), &relative).await.unwrap(),
            );
        }
        out.insert(skill.name().to_owned(), (skill.metadata.description.clone(), files));
    }
    out
}

/// A catalog of one source `/org` mounted from `location`, without the
/// local cache.
async fn read_from(location: &str) -> Catalog {
    read_cached(location, None).await
}

/// [`read_from`] with the local cache in `cache` (none when `None`).
async fn read_cached(location: &str, cache: Option<&Path>) -> Catalog {
    let cache = match cache {
        Some(dir) => format!("cache:\n  dir: \"{}\"\n", dir.display()),
        None => "cache:\n  enabled: false\n".to_owned(),
    };
    let config = Config::parse(&format!(
        "mounts:\n  - at: /org\n    location: \"{location}\"\nsources:\n  - path: /org\n{cache}"
    ))
    .unwrap();
    config.open().unwrap().load().await
}

fn tree(root: &Path) {
    layered_tree(root);
    write(root, "team/gamma/SKILL.md", &skill_md("gamma", "Gamma alone."));
    write(root, "team/delta/SKILL.md", &skill_md("delta", "Delta."));
    write(root, "team/delta/assets/bytes.bin", "\u{1}\u{2}\u{3}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_serve_publishes_reads_back_as_the_same_catalog() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let original_config = layered_config(dir.path());
    let server = Served::start(Settings::single(original_config.clone())).await;
    let original = original_config.open().unwrap().load().await;

    let read = read_from(&server.base).await;
    assert!(read.diagnostics().is_empty(), "{:?}", read.diagnostics());
    assert_eq!(contents(&read).await, contents(&original).await);
    assert_eq!(read.skills().len(), 4);
}

/// Fetches what `base` publishes into `site` as static files, at the same
/// relative URLs.
async fn mirror(base: &str, site: &Path) {
    let client = reqwest::Client::new();
    let index = client.get(format!("{base}{INDEX}")).sent().await.bytes().await.unwrap();
    let parsed: Value = serde_json::from_slice(&index).unwrap();
    let dir = site.join(".well-known/agent-skills");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("index.json"), &index).unwrap();
    for entry in parsed["skills"].as_array().unwrap() {
        let url = entry["url"].as_str().unwrap();
        let bytes = client
            .get(format!("{base}/.well-known/agent-skills/{url}"))
            .sent()
            .await
            .bytes()
            .await
            .unwrap();
        let path = dir.join(url);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// `python3 -m http.server` on a free loopback port, serving `site`.
struct StaticServer {
    child: std::process::Child,
    base: String,
}

impl StaticServer {
    async fn start(site: &Path) -> StaticServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "-d"])
            .arg(site)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs");
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..500 {
            if reqwest::get(format!("{base}/")).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        StaticServer { child, base }
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_served_as_static_files_reads_back_as_the_same_catalog() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let original_config = layered_config(dir.path());
    let server = Served::start(Settings::single(original_config.clone())).await;
    let original = original_config.open().unwrap().load().await;
    let site = tempfile::tempdir().unwrap();
    mirror(&server.base, site.path()).await;
    server.stop().await;

    let plain = StaticServer::start(site.path()).await;
    let read = read_from(&plain.base).await;
    assert!(read.diagnostics().is_empty(), "{:?}", read.diagnostics());
    assert_eq!(contents(&read).await, contents(&original).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_0_1_form_with_files_lists_is_read_too() {
    let site = tempfile::tempdir().unwrap();
    let dir = site.path().join(".well-known/skills");
    write(&dir, "pdf/SKILL.md", &skill_md("pdf", "Read PDFs."));
    write(&dir, "pdf/references/forms.md", "# Forms\n");
    write(&dir, "notes/SKILL.md", &skill_md("notes", "Take notes."));
    // `%2e%2e` passes a path check as a name, and a URL takes it for `..`.
    write(&dir, "encoded/SKILL.md", &skill_md("encoded", "Leaves, encoded."));
    write(site.path(), ".well-known/secret", "outside every skill\n");
    let index = json!({"skills": [
        {"name": "encoded", "description": "Leaves, encoded.", "files": ["SKILL.md", "%2e%2e/%2e%2e/secret"]},
        {"name": "pdf", "description": "Read PDFs.", "files": ["SKILL.md", "references/forms.md"]},
        {"name": "notes", "description": "Take notes.", "files": ["SKILL.md"]},
        {"name": "escape", "description": "Leaves.", "files": ["SKILL.md", "../../../etc/passwd"]},
        {"name": "missing", "description": "Not there.", "files": ["SKILL.md"]},
    ]});
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    let plain = StaticServer::start(site.path()).await;
    let read = read_from(&plain.base).await;
    let names: Vec<&str> = read.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names.len(), 2, "{names:?} {:?}", read.diagnostics());
    assert_eq!(read.read_file("pdf", "references/forms.md").await.unwrap(), "# Forms\n");
    for refused in ["escape", "missing", "encoded"] {
        let about: Vec<_> = read
            .diagnostics()
            .iter()
            .filter(|d| {
                d.path
                    .as_ref()
                    .is_some_and(|p| p.as_str().starts_with(&format!("/org/{refused}/")))
            })
            .collect();
        assert_eq!(about.len(), 1, "{refused}: {:?}", read.diagnostics());
    }
}

// ---------------------------------------------------------------------------
// A hostile endpoint, served in process, counting what is asked of it.

#[derive(Default)]
struct Counts {
    index: AtomicUsize,
    artifacts: AtomicUsize,
}

fn rooted(name: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let files: Vec<ArchiveFile> = files
        .iter()
        .map(|(p, d)| ArchiveFile {
            path: (*p).to_owned(),
            data: Bytes::copy_from_slice(d),
        })
        .collect();
    pack_rooted(name, &files, &ArchiveLimits::default()).unwrap()
}

fn zip_with_symlink(md: &str) -> Vec<u8> {
    use std::io::Write as _;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("SKILL.md", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(md.as_bytes()).unwrap();
    zip.add_symlink(
        "references/passwd",
        "/etc/passwd",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    zip.finish().unwrap().into_inner()
}

fn zip_bomb(md: &str) -> Vec<u8> {
    use std::io::Write as _;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("SKILL.md", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(md.as_bytes()).unwrap();
    zip.start_file("assets/zeros", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(&vec![0u8; 32 * 1024 * 1024]).unwrap();
    zip.finish().unwrap().into_inner()
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// The hostile site: its index and its artifacts by path.
fn hostile_site() -> (Bytes, BTreeMap<String, Bytes>) {
    let good = skill_md("good", "Good.");
    let archive = rooted(
        "kept",
        &[
            ("SKILL.md", skill_md("kept", "Kept.").as_bytes()),
            ("references/a.md", b"a"),
        ],
    );
    let linked = zip_with_symlink(&skill_md("linked", "Linked."));
    let bomb = zip_bomb(&skill_md("bomb", "Bomb."));
    let mut artifacts = BTreeMap::new();
    artifacts.insert("good/SKILL.md".to_owned(), Bytes::from(good.clone()));
    artifacts.insert("kept.zip".to_owned(), Bytes::from(archive.clone()));
    artifacts.insert("linked.zip".to_owned(), Bytes::from(linked.clone()));
    artifacts.insert("bomb.zip".to_owned(), Bytes::from(bomb.clone()));
    artifacts.insert(
        "mismatch/SKILL.md".to_owned(),
        Bytes::from(skill_md("mismatch", "Changed.")),
    );
    let entry = |name: &str, kind: &str, url: &str, digest: String| json!({"name": name, "type": kind, "description": "x", "url": url, "digest": digest});
    let index = json!({
        "$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json",
        "skills": [
            entry("good", "skill-md", "good/SKILL.md", digest(good.as_bytes())),
            entry("kept", "archive", "/.well-known/agent-skills/kept.zip", digest(&archive)),
            entry("linked", "archive", "linked.zip", digest(&linked)),
            entry("bomb", "archive", "bomb.zip", digest(&bomb)),
            entry("mismatch", "skill-md", "mismatch/SKILL.md", digest(b"something else")),
            entry("offsite", "skill-md", "https://example.invalid/offsite/SKILL.md", digest(b"x")),
            entry("dup", "skill-md", "good/SKILL.md", digest(good.as_bytes())),
            entry("dup", "skill-md", "good/SKILL.md", digest(good.as_bytes())),
            entry("odd-type", "tarball", "good/SKILL.md", digest(good.as_bytes())),
            entry("../../etc", "skill-md", "good/SKILL.md", digest(good.as_bytes())),
            entry("Bad_Name", "skill-md", "good/SKILL.md", digest(good.as_bytes())),
        ]
    });
    (Bytes::from(index.to_string()), artifacts)
}

async fn hostile_server(counts: Arc<Counts>) -> String {
    let (index, artifacts) = hostile_site();
    let etag = format!("\"{}\"", sha256_hex(&index));
    let artifacts = Arc::new(artifacts);
    let app = Router::new()
        .route(
            INDEX,
            get({
                let counts = Arc::clone(&counts);
                move |headers: HeaderMap| async move {
                    counts.index.fetch_add(1, Ordering::SeqCst);
                    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
                        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag.clone())]).into_response();
                    }
                    ([(header::ETAG, etag.clone())], index.clone()).into_response()
                }
            }),
        )
        .route(
            "/.well-known/agent-skills/{*path}",
            get(
                move |axum::extract::Path(path): axum::extract::Path<String>| async move {
                    counts.artifacts.fetch_add(1, Ordering::SeqCst);
                    match artifacts.get(&path) {
                        Some(bytes) => bytes.clone().into_response(),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                },
            ),
        );
    serve_router(app).await
}

async fn serve_router(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_endpoint_is_refused_entry_by_entry_and_revalidated_with_its_etag() {
    let counts = Arc::new(Counts::default());
    let base = hostile_server(Arc::clone(&counts)).await;
    let read = read_from(&base).await;
    let mut names: Vec<&str> = read.skills().iter().map(|s| s.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["good", "kept"], "{:#?}", read.diagnostics());
    assert_eq!(read.read_file("kept", "references/a.md").await.unwrap(), "a");

    // One diagnostic for each refused entry, naming it.
    for refused in ["linked", "bomb", "mismatch", "offsite", "dup", "odd-type"] {
        let about: Vec<_> = read
            .diagnostics()
            .iter()
            .filter(|d| {
                d.path.as_ref().is_some_and(|p| {
                    p.as_str().starts_with(&format!("/org/{refused}/")) || p.as_str() == format!("/org/{refused}")
                })
            })
            .collect();
        assert_eq!(about.len(), 1, "{refused}: {:#?}", read.diagnostics());
    }
    let shown = format!("{:?}", read.diagnostics());
    assert!(shown.contains("Bad_Name"), "{shown}");
    assert!(shown.contains("../../etc") || shown.contains("..\\/"), "{shown}");
    assert!(!shown.contains("example.invalid"), "no URL in a diagnostic: {shown}");
    // Each says why, in the words of the refusal, not only "backend error".
    for why in [
        "digest mismatch",
        "more than once",
        "only same-origin",
        "refused archive",
        "only skill-md and archive",
    ] {
        assert!(shown.contains(why), "{why}: {shown}");
    }

    // A refresh of an unchanged index: one conditional request, no download.
    let (index_before, artifacts_before) = (
        counts.index.load(Ordering::SeqCst),
        counts.artifacts.load(Ordering::SeqCst),
    );
    let again = read.refresh().await;
    assert_eq!(counts.index.load(Ordering::SeqCst), index_before + 1);
    assert_eq!(counts.artifacts.load(Ordering::SeqCst), artifacts_before);
    assert_eq!(again.skills().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_downloads_only_what_the_local_cache_lacks() {
    let counts = Arc::new(Counts::default());
    let base = hostile_server(Arc::clone(&counts)).await;
    let cache = tempfile::tempdir().unwrap();
    let first = read_cached(&base, Some(cache.path())).await;
    let downloads = counts.artifacts.load(Ordering::SeqCst);
    // good, kept, linked, bomb and mismatch are downloaded; the four whose
    // digests match are kept, the mismatch is not, and so are the files of
    // the two loaded (good's SKILL.md is its artifact; kept's two files).
    assert_eq!(downloads, 5);
    let kept = std::fs::read_dir(endpoint_cache(cache.path())).unwrap().count();
    assert_eq!(kept, 6);

    // A cold catalog (a new namespace, as a new process opens) over the
    // same cache downloads only the mismatch again, and loads the same.
    let second = read_cached(&base, Some(cache.path())).await;
    assert_eq!(counts.artifacts.load(Ordering::SeqCst), downloads + 1);
    assert_eq!(contents(&second).await, contents(&first).await);

    // A cached artifact that no longer matches its digest is downloaded
    // again, never used.
    for entry in std::fs::read_dir(endpoint_cache(cache.path())).unwrap() {
        std::fs::write(entry.unwrap().path(), b"tampered").unwrap();
    }
    let third = read_cached(&base, Some(cache.path())).await;
    assert_eq!(counts.artifacts.load(Ordering::SeqCst), downloads + 1 + 5);
    assert_eq!(contents(&third).await, contents(&first).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_says_why_an_entry_was_refused() {
    let base = hostile_server(Arc::new(Counts::default())).await;
    let home = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(skillstore_binary())
        .args(["list", "--no-cache", "--source", "/org", "--mount"])
        .arg(format!("/org={base}"))
        .env("HOME", home.path())
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("digest mismatch"), "{stderr}");
    // A refused archive says so once, then why, naming the entry.
    assert!(
        stderr.lines().any(|l| l
            == "error: [other] /org/linked/SKILL.md: cannot read /org/linked/SKILL.md: backend error \
                (refused archive (symlink_entry): `references/passwd`: a symbolic link)"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("refused archive").count(), 2, "{stderr}");
    assert!(
        !stderr.contains("AWS"),
        "no hint about another kind of location: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("good") && stdout.contains("kept"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_that_was_unavailable_is_asked_for_again_though_the_index_did_not_change() {
    use std::sync::atomic::AtomicBool;
    let good = Bytes::from(skill_md("flaky", "Flaky."));
    let index = Bytes::from(
        json!({"$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json", "skills": [
            {"name": "flaky", "type": "skill-md", "description": "x", "url": "flaky/SKILL.md", "digest": digest(&good)}
        ]})
        .to_string(),
    );
    let etag = format!("\"{}\"", sha256_hex(&index));
    let healed = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route(
            INDEX,
            get(move |headers: HeaderMap| async move {
                if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
                    return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag.clone())]).into_response();
                }
                ([(header::ETAG, etag.clone())], index.clone()).into_response()
            }),
        )
        .route(
            "/.well-known/agent-skills/flaky/SKILL.md",
            get({
                let healed = Arc::clone(&healed);
                move || async move {
                    if healed.load(Ordering::SeqCst) {
                        good.clone().into_response()
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE.into_response()
                    }
                }
            }),
        );
    let base = serve_router(app).await;
    let first = read_from(&base).await;
    assert!(first.skills().is_empty(), "{:?}", first.diagnostics());
    healed.store(true, Ordering::SeqCst);
    let again = first.refresh().await;
    let names: Vec<&str> = again.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["flaky"], "{:?}", again.diagnostics());
}

/// The one endpoint's directory in the discovery cache under `cache`.
fn endpoint_cache(cache: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(cache.join("discovery"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.pop().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_artifact_cache_is_kept_per_endpoint() {
    // Two endpoints listing the same artifacts: the second must download
    // them itself. A shared cache would let it learn, from what is never
    // requested, which artifacts the user fetched from the first.
    let (first_counts, second_counts) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    let first = hostile_server(Arc::clone(&first_counts)).await;
    let second = hostile_server(Arc::clone(&second_counts)).await;
    let cache = tempfile::tempdir().unwrap();
    read_cached(&first, Some(cache.path())).await;
    assert_eq!(first_counts.artifacts.load(Ordering::SeqCst), 5);
    let read = read_cached(&second, Some(cache.path())).await;
    assert_eq!(second_counts.artifacts.load(Ordering::SeqCst), 5);
    assert_eq!(read.skills().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_of_many_trickling_artifacts_ends_by_its_deadline() {
    let good = skill_md("good", "Good.");
    let mut skills = vec![
        json!({"name": "good", "type": "skill-md", "description": "x", "url": "good/SKILL.md", "digest": digest(good.as_bytes())}),
    ];
    for i in 0..40 {
        skills.push(json!({"name": format!("slow-{i}"), "type": "skill-md", "description": "x", "url": format!("slow-{i}/SKILL.md"), "digest": digest(b"never")}));
    }
    let index = Bytes::from(
        json!({"$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json", "skills": skills}).to_string(),
    );
    let good = Bytes::from(good);
    let app = Router::new()
        .route(INDEX, get(move || async move { index.clone() }))
        .route(
            "/.well-known/agent-skills/{name}/SKILL.md",
            get(
                move |axum::extract::Path(name): axum::extract::Path<String>| async move {
                    if name == "good" {
                        return good.clone().into_response();
                    }
                    let chunks = futures::stream::unfold((), |()| async {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), ()))
                    });
                    Response::new(Body::from_stream(chunks))
                },
            ),
        );
    let base = serve_router(app).await;
    // Each request alone may take an hour: only the load's deadline ends
    // these downloads (without it this test would wait for 40 of them).
    let mut limits = DiscoveryLimits::default();
    limits.timeout = Duration::from_secs(3600);
    limits.load_timeout = Duration::from_secs(2);
    let backend = DiscoveryBackend::new(&base, Arc::new(Rooted), limits, false).unwrap();
    let listed = tokio::time::timeout(Duration::from_secs(120), backend.list(&VPath::root()))
        .await
        .expect("the load ends by its deadline")
        .unwrap();
    assert_eq!(listed.len(), 41);
    let skill = VPath::new("/good/SKILL.md").unwrap();
    assert_eq!(
        backend.read(&skill, Default::default()).await.unwrap().data,
        good_text()
    );
    let slow = VPath::new("/slow-7/SKILL.md").unwrap();
    let err = backend.read(&slow, Default::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.public_detail().is_some_and(|d| d.contains("time limit")), "{err}");
}

fn good_text() -> String {
    skill_md("good", "Good.")
}

/// The archive reader of the skillstore crate, for a backend built here.
#[derive(Debug)]
struct Rooted;

impl Unpack for Rooted {
    fn unpack(&self, name: &str, bytes: &[u8]) -> Result<Vec<(String, Bytes)>, (String, String)> {
        SkillArchive::read_rooted(bytes, name, &ArchiveLimits::default())
            .map(|a| a.files().iter().map(|f| (f.path.clone(), f.data.clone())).collect())
            .map_err(|e| {
                let kind = e.kind().to_owned();
                match e {
                    skillstore::ArchiveError::Refused { message, .. } => (kind, message),
                    other => (kind, other.to_string()),
                }
            })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_trickle_or_never_end_are_bounded() {
    let endless = || {
        let chunks = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 64 * 1024])));
        Response::new(Body::from_stream(chunks))
    };
    let trickle = || {
        let chunks = futures::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), ()))
        });
        Response::new(Body::from_stream(chunks))
    };
    let base = serve_router(
        Router::new()
            .route(
                "/endless/.well-known/agent-skills/index.json",
                get(move || async move { endless() }),
            )
            .route(
                "/trickle/.well-known/agent-skills/index.json",
                get(move || async move { trickle() }),
            ),
    )
    .await;
    let mut limits = DiscoveryLimits::default();
    limits.timeout = Duration::from_secs(2);
    let open =
        |path: &str| DiscoveryBackend::new(&format!("{base}/{path}"), Arc::new(Rooted), limits.clone(), false).unwrap();

    let err = open("endless").list(&VPath::root()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    let err = open("trickle").list(&VPath::root()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_100000_entries_is_cut_at_its_bound() {
    let entries: Vec<Value> = (0..100_000)
        .map(|i| json!({"name": format!("s{i}"), "type": "skill-md", "description": "x", "url": format!("s{i}/SKILL.md"), "digest": format!("sha256:{}", "0".repeat(64))}))
        .collect();
    let index = Bytes::from(
        json!({"$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json", "skills": entries}).to_string(),
    );
    let base = serve_router(Router::new().route(INDEX, get(move || async move { index.clone() }))).await;
    let mut limits = DiscoveryLimits::default();
    limits.max_index_bytes = 64 * 1024 * 1024;
    limits.max_entries = 1000;
    let backend = DiscoveryBackend::new(&base, Arc::new(Rooted), limits, false).unwrap();
    let listed = backend.list(&VPath::root()).await.unwrap();
    assert_eq!(listed.len(), 1000);
    // Under the default bound, the index itself is too large.
    let backend = DiscoveryBackend::new(&base, Arc::new(Rooted), DiscoveryLimits::default(), false).unwrap();
    assert_eq!(
        backend.list(&VPath::root()).await.unwrap_err().kind(),
        ErrorKind::TooLarge
    );
}

/// `count` distinct `skill-md` entries of `size` bytes each, made on
/// request; every download is counted.
async fn bulk_server(count: usize, size: usize, counts: Arc<Counts>) -> String {
    let body = move |i: usize| -> Bytes {
        let mut text = skill_md(&format!("s{i}"), "Bulk.").into_bytes();
        text.resize(size, b'x');
        Bytes::from(text)
    };
    let skills: Vec<Value> = (0..count)
        .map(|i| json!({"name": format!("s{i}"), "type": "skill-md", "description": "x", "url": format!("s{i}/SKILL.md"), "digest": digest(&body(i))}))
        .collect();
    let index = Bytes::from(
        json!({"$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json", "skills": skills}).to_string(),
    );
    let app = Router::new()
        .route(INDEX, get(move || async move { index.clone() }))
        .route(
            "/.well-known/agent-skills/{name}/SKILL.md",
            get(
                move |axum::extract::Path(name): axum::extract::Path<String>| async move {
                    counts.artifacts.fetch_add(1, Ordering::SeqCst);
                    match name.strip_prefix('s').and_then(|n| n.parse::<usize>().ok()) {
                        Some(i) if i < count => body(i).into_response(),
                        _ => StatusCode::NOT_FOUND.into_response(),
                    }
                },
            ),
        );
    serve_router(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_load_is_bounded_in_total_bytes() {
    const SIZE: usize = 100_000;
    for cached in [false, true] {
        let counts = Arc::new(Counts::default());
        let base = bulk_server(10, SIZE, Arc::clone(&counts)).await;
        let cache = tempfile::tempdir().unwrap();
        let mut limits = DiscoveryLimits::default();
        limits.max_total_bytes = 3 * SIZE as u64 + SIZE as u64 / 2;
        limits.concurrent_downloads = 1;
        let mut backend = DiscoveryBackend::new(&base, Arc::new(Rooted), limits, false).unwrap();
        if cached {
            backend = backend.with_cache(cache.path().join("discovery"), 64 * 1024 * 1024);
        }
        assert_eq!(backend.list(&VPath::root()).await.unwrap().len(), 10);
        let mut loaded = 0;
        for i in 0..10 {
            let path = VPath::new(format!("/s{i}/SKILL.md")).unwrap();
            match backend.read(&path, Default::default()).await {
                Ok(blob) => {
                    assert_eq!(blob.data.len(), SIZE);
                    assert!(blob.data.starts_with(skill_md(&format!("s{i}"), "Bulk.").as_bytes()));
                    loaded += 1;
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
                    let why = e.public_detail().unwrap_or_default();
                    assert!(why.contains("bound of 350000 bytes"), "{why}");
                }
            }
        }
        assert_eq!(loaded, 3, "cached: {cached}");
        // Past the bound nothing more is downloaded.
        assert_eq!(counts.artifacts.load(Ordering::SeqCst), 4, "cached: {cached}");
        if !cached {
            continue;
        }
        // The files are kept in a private directory and served from there,
        // each checked against its digest: a changed or missing blob is
        // fetched again, never served.
        let root = cache.path().join("discovery");
        let endpoint = endpoint_cache(cache.path());
        for dir in [&root, &endpoint] {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(dir).unwrap().permissions().mode() & 0o777, 0o700);
        }
        let blobs: Vec<_> = std::fs::read_dir(&endpoint)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(blobs.len(), 3);
        std::fs::write(&blobs[0], b"tampered").unwrap();
        std::fs::remove_file(&blobs[1]).unwrap();
        let before = counts.artifacts.load(Ordering::SeqCst);
        for i in 0..3 {
            let path = VPath::new(format!("/s{i}/SKILL.md")).unwrap();
            let blob = backend.read(&path, Default::default()).await.unwrap();
            assert!(blob.data.starts_with(skill_md(&format!("s{i}"), "Bulk.").as_bytes()));
            assert_eq!(blob.data.len(), SIZE);
        }
        assert_eq!(counts.artifacts.load(Ordering::SeqCst), before + 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_load_stays_within_the_configured_bound_through_the_library() {
    let counts = Arc::new(Counts::default());
    let base = bulk_server(6, 200_000, Arc::clone(&counts)).await;
    let config = Config::parse(&format!(
        "mounts:\n  - at: /org\n    location: \"{base}\"\nsources:\n  - path: /org\nlimits:\n  max_discovery_bytes: 500000\ncache:\n  enabled: false\n"
    ))
    .unwrap();
    let catalog = config.open().unwrap().load().await;
    assert!(catalog.skills().len() <= 2, "{:?}", catalog.skills().len());
    let shown = format!("{:?}", catalog.diagnostics());
    assert!(shown.contains("bound of 500000 bytes"), "{shown}");
}

/// An endpoint serving one skill `alpha` whose SKILL.md is `content`.
async fn changing_server(content: Arc<std::sync::Mutex<Bytes>>) -> String {
    let index = {
        let content = Arc::clone(&content);
        move || {
            let body = content.lock().unwrap().clone();
            Bytes::from(
                json!({"$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json", "skills": [
                    {"name": "alpha", "type": "skill-md", "description": "x", "url": "alpha/SKILL.md", "digest": digest(&body)}
                ]})
                .to_string(),
            )
        }
    };
    let app = Router::new().route(INDEX, get(move || async move { index() })).route(
        "/.well-known/agent-skills/alpha/SKILL.md",
        get(move || async move { content.lock().unwrap().clone() }),
    );
    serve_router(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cached_search_index_follows_a_changed_discovery_skill() {
    let md = |word: &str| {
        Bytes::from(format!(
            "---\nname: alpha\ndescription: Alpha.\n---\n# Alpha\n\nAbout {word}.\n"
        ))
    };
    let content = Arc::new(std::sync::Mutex::new(md("zeppelin")));
    let base = changing_server(Arc::clone(&content)).await;
    let cache = tempfile::tempdir().unwrap();
    let config = Config::parse(&format!(
        "mounts:\n  - at: /org\n    location: \"{base}\"\nsources:\n  - path: /org\ncache:\n  dir: \"{}\"\n",
        cache.path().display()
    ))
    .unwrap();
    let search = |word: &'static str| {
        let config = config.clone();
        async move {
            // A new namespace each time, as a new process opens one.
            let namespace = config.open().unwrap();
            let catalog = namespace.load().await;
            let index = namespace.search_index_for(&catalog).await.unwrap();
            assert!(index.is_cached());
            let hits = index
                .search(&catalog, word, skillstore::search::SearchOptions::default())
                .unwrap();
            hits.into_iter().map(|h| h.name).collect::<Vec<_>>()
        }
    };
    assert_eq!(search("zeppelin").await, ["alpha"]);
    *content.lock().unwrap() = md("quokka");
    assert_eq!(search("quokka").await, ["alpha"]);
    assert!(search("zeppelin").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_1_entry_is_refreshed_when_its_files_change() {
    #[derive(Default)]
    struct Legacy {
        notes: std::sync::Mutex<&'static str>,
        bodies: AtomicUsize,
        unchanged: AtomicUsize,
    }
    let state = Arc::new(Legacy::default());
    *state.notes.lock().unwrap() = "one";
    let index = Bytes::from(
        json!({"skills": [{"name": "legacy", "description": "x", "files": ["SKILL.md", "notes.md"]}]}).to_string(),
    );
    let index_etag = format!("\"{}\"", sha256_hex(&index));
    let md = Bytes::from(skill_md("legacy", "Legacy."));
    let file = move |state: Arc<Legacy>, headers: HeaderMap, body: Bytes| {
        let etag = format!("\"{}\"", sha256_hex(&body));
        if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
            state.unchanged.fetch_add(1, Ordering::SeqCst);
            return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
        }
        state.bodies.fetch_add(1, Ordering::SeqCst);
        ([(header::ETAG, etag)], body).into_response()
    };
    let app = Router::new()
        .route(
            "/.well-known/skills/index.json",
            get(move |headers: HeaderMap| async move {
                if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(index_etag.as_str()) {
                    return (StatusCode::NOT_MODIFIED, [(header::ETAG, index_etag.clone())]).into_response();
                }
                ([(header::ETAG, index_etag.clone())], index.clone()).into_response()
            }),
        )
        .route(
            "/.well-known/skills/legacy/SKILL.md",
            get({
                let state = Arc::clone(&state);
                move |headers: HeaderMap| async move { file(state, headers, md.clone()) }
            }),
        )
        .route(
            "/.well-known/skills/legacy/notes.md",
            get({
                let state = Arc::clone(&state);
                move |headers: HeaderMap| async move {
                    let body = Bytes::from(*state.notes.lock().unwrap());
                    file(state, headers, body)
                }
            }),
        );
    let base = serve_router(app).await;
    let first = read_from(&base).await;
    assert_eq!(first.read_file("legacy", "notes.md").await.unwrap(), "one");
    assert_eq!(state.bodies.load(Ordering::SeqCst), 2);

    // Nothing changed: each file is revalidated, none downloaded.
    let same = first.refresh().await;
    assert_eq!(same.read_file("legacy", "notes.md").await.unwrap(), "one");
    assert_eq!(state.bodies.load(Ordering::SeqCst), 2);
    assert_eq!(state.unchanged.load(Ordering::SeqCst), 2);

    // A file changed behind an unchanged index: the refresh sees it.
    *state.notes.lock().unwrap() = "two";
    let changed = same.refresh().await;
    assert_eq!(changed.read_file("legacy", "notes.md").await.unwrap(), "two");
    assert_eq!(state.bodies.load(Ordering::SeqCst), 3);
}

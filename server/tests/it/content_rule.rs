//! The content rule on every source kind and every channel: generated
//! skill trees holding `.git` entries (any case), other hidden paths and
//! reserved paths, put behind a directory, a `memory:` file, S3, a Git
//! repository (committed by the real `git`) and a discovery endpoint, then
//! listed, read, digested, synced, packed and served over HTTP. No path the
//! rule refuses is ever listed, read, synced, packed or served; a discovery
//! archive holding one is refused whole with a diagnostic naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::*;
use axum::Router;
use axum::routing::get as route;
use bytes::Bytes;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::{Value, json};
use skillstore::backends::testkit::git_repo::git;
use skillstore::content::refusal;
use skillstore::{Catalog, Config, FileLimits};
use skillstore_server::digest::sha256_hex;

/// The kinds of source, each holding one skill named after it.
const KINDS: [&str; 5] = ["dir", "mem", "s3", "git", "disc"];
const TOKEN: &str = "reader-token";

/// A skill's files beside its SKILL.md: relative path -> bytes. No path is
/// a prefix of another (a name is a file or a directory, never both).
type Tree = BTreeMap<String, Vec<u8>>;

fn segment() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "scripts",
        "refs",
        "a.md",
        ".git",
        ".GIT",
        ".Git",
        "git~1",
        ".env",
        ".hidden",
        ".skillstore",
        "signature",
        "HEAD",
        "config",
        "objects",
    ])
    .prop_map(str::to_owned)
}

fn tree() -> impl Strategy<Value = Tree> {
    prop::collection::vec(
        (
            prop::collection::vec(segment(), 1..4),
            prop::collection::vec(any::<u8>(), 0..16),
        ),
        1..10,
    )
    .prop_map(|files| {
        let mut tree = Tree::new();
        for (segments, data) in files {
            let path = segments.join("/");
            let clashes = tree
                .keys()
                .any(|p| p == &path || p.starts_with(&format!("{path}/")) || path.starts_with(&format!("{p}/")));
            if !clashes && !path.eq_ignore_ascii_case("SKILL.md") {
                tree.insert(path, data);
            }
        }
        tree
    })
}

fn skill_md_of(name: &str) -> String {
    skill_md(name, &format!("The {name} skill."))
}

/// A rooted zip of `files` (SKILL.md at its root), written entry by entry
/// as a hostile publisher would, with no rule applied.
fn raw_zip(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    use std::io::Write as _;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (path, data) in files {
        zip.start_file(path.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// Serves `routes` (path -> body) on loopback; the base URL.
async fn serve_static(routes: BTreeMap<String, Bytes>) -> String {
    let mut app = Router::new();
    for (path, body) in routes {
        app = app.route(&path, route(move || async move { body.clone() }));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Every file under `dir`, links followed, by path relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap().path();
            if std::fs::metadata(&entry).unwrap().is_dir() {
                stack.push(entry);
            } else {
                out.push(entry.strip_prefix(dir).unwrap().to_str().unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

/// Puts `tree` (with a SKILL.md for each kind's skill) behind every kind
/// of source and returns the configuration that mounts them all.
async fn publish(
    work: &Path,
    tree: &Tree,
    s3: &skillstore_backends::testkit::s3_server::S3TestServer,
    case: usize,
) -> Config {
    let with_md = |name: &str| {
        let mut files: Vec<(String, Vec<u8>)> = vec![("SKILL.md".into(), skill_md_of(name).into_bytes())];
        files.extend(tree.iter().map(|(p, d)| (p.clone(), d.clone())));
        files
    };
    let write_tree = |root: &Path, files: &[(String, Vec<u8>)]| {
        for (path, data) in files {
            let target = root.join(path);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(target, data).unwrap();
        }
    };

    let dir = work.join("dir");
    write_tree(&dir.join("dir/skill-dir"), &with_md("skill-dir"));

    let memory: BTreeMap<String, String> = with_md("skill-mem")
        .into_iter()
        .map(|(p, d)| (format!("/skill-mem/{p}"), String::from_utf8_lossy(&d).into_owned()))
        .collect();
    let memory_file = work.join("memory.json");
    std::fs::write(&memory_file, serde_json::to_string(&memory).unwrap()).unwrap();

    let bucket = s3.create_bucket();
    let backend = s3.backend(&bucket, "skills");
    for (path, data) in with_md("skill-s3") {
        let path = skillstore::backends::VPath::new(format!("/s3/skill-s3/{path}")).unwrap();
        skillstore::backends::SkillBackend::put(
            &backend,
            &path,
            Bytes::from(data),
            skillstore::backends::PutMode::Overwrite,
        )
        .await
        .unwrap();
    }

    // `git add` itself refuses `.git` paths in any case: the rest is
    // committed.
    let repo = work.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let committed: Vec<(String, Vec<u8>)> = with_md("skill-git")
        .into_iter()
        .filter(|(p, _)| {
            !p.split('/')
                .any(|s| s.eq_ignore_ascii_case(".git") || s.eq_ignore_ascii_case("git~1"))
        })
        .collect();
    write_tree(&repo.join("git/skill-git"), &committed);
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "tree",
        ],
    );

    let archive = raw_zip(&with_md("skill-disc"));
    let index = json!({
        "$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json",
        "skills": [{
            "name": "skill-disc",
            "type": "archive",
            "description": "The skill-disc skill.",
            "url": "skill-disc.zip",
            "digest": format!("sha256:{}", sha256_hex(&archive)),
        }]
    });
    let endpoint = serve_static(BTreeMap::from([
        (
            "/.well-known/agent-skills/index.json".to_owned(),
            Bytes::from(index.to_string()),
        ),
        (
            "/.well-known/agent-skills/skill-disc.zip".to_owned(),
            Bytes::from(archive),
        ),
    ]))
    .await;

    let yaml = format!(
        "mounts:\n  - at: /\n    location: \"{dir}\"\n  - at: /mem\n    location: \"memory:{memory}\"\n  \
         - at: /s3\n    location: \"s3://{bucket}/skills/s3\"\n  - at: /git\n    location: \"git+file://{repo}@main\"\n  \
         - at: /disc\n    location: \"{endpoint}\"\nsources:\n  - path: /dir\n  - path: /mem\n  - path: /s3\n  \
         - path: /git/git\n  - path: /disc\ncache:\n  dir: \"{cache}\"\n",
        dir = dir.display(),
        memory = memory_file.display(),
        repo = repo.display(),
        cache = work.join(format!("cache-{case}")).display(),
    );
    Config::parse(&yaml).unwrap()
}

/// The refused paths of `tree`, and for each the path its skill's listing
/// must name: the first hidden directory on its way (never entered), else
/// the path itself.
fn refused_of(tree: &Tree) -> BTreeMap<String, String> {
    let mut refused = BTreeMap::new();
    for path in tree.keys() {
        if refusal(path).is_some() {
            let segments: Vec<&str> = path.split('/').collect();
            let first = (1..segments.len())
                .find(|&n| skillstore::content::skips_directory(segments[n - 1]))
                .map_or_else(|| path.clone(), |n| segments[..n].join("/"));
            refused.insert(path.clone(), first);
        }
    }
    refused
}

async fn check_case(tree: Tree, s3: &skillstore_backends::testkit::s3_server::S3TestServer, case: usize) {
    let work = tempfile::tempdir().unwrap();
    let config = publish(work.path(), &tree, s3, case).await;
    let refused = refused_of(&tree);
    let catalog: Catalog = config.open().unwrap().load().await;
    let names: BTreeSet<&str> = catalog.skills().iter().map(|s| s.name()).collect();

    // A discovery archive holding a refused path is refused whole, with a
    // diagnostic naming the path.
    if refused.is_empty() {
        assert!(names.contains("skill-disc"), "{:?}", catalog.diagnostics());
    } else {
        assert!(!names.contains("skill-disc"), "{tree:?}");
        let named = catalog.diagnostics().iter().any(|d| {
            d.message.contains("skill-disc") || d.path.as_ref().is_some_and(|p| p.as_str().contains("skill-disc"))
        });
        assert!(named, "{:?}", catalog.diagnostics());
    }

    for kind in KINDS {
        let name = format!("skill-{kind}");
        if !names.contains(name.as_str()) {
            assert_eq!(kind, "disc", "{name} missing: {:?}", catalog.diagnostics());
            continue;
        }
        let listed = catalog.skill_files(&name, FileLimits::default()).await.unwrap();
        for relative in listed.relatives() {
            assert!(refusal(&relative).is_none(), "{kind}: listed {relative}");
            assert!(
                tree.contains_key(&relative) || relative == "SKILL.md",
                "{kind}: {relative}"
            );
        }
        let left: BTreeSet<&str> = listed.left_out.iter().map(|l| l.relative.as_str()).collect();
        for (path, named) in &refused {
            let held = kind != "git"
                || !path
                    .split('/')
                    .any(|s| s.eq_ignore_ascii_case(".git") || s.eq_ignore_ascii_case("git~1"));
            if held {
                assert!(
                    left.contains(named.as_str()),
                    "{kind}: {path} not named as left out: {left:?}"
                );
            }
            assert!(catalog.read_file(&name, path).await.is_err(), "{kind}: {path} was read");
        }
        for path in tree.keys().filter(|p| !refused.contains_key(*p)) {
            let held = kind != "git" || !path.split('/').any(|s| s.eq_ignore_ascii_case("git~1"));
            if held {
                assert!(listed.relatives().contains(path), "{kind}: {path} not listed");
            }
        }
        catalog.skill_digest(&name).await.unwrap();
    }

    // sync writes nothing the rule refuses.
    let out = work.path().join("synced");
    skillstore::sync::sync(&catalog, &out, &skillstore::sync::SyncOptions::default())
        .await
        .unwrap();
    for kind in KINDS {
        let dir = out.join(format!("skill-{kind}"));
        if !dir.exists() {
            continue;
        }
        for relative in files_under(&dir) {
            assert!(refusal(&relative).is_none(), "sync wrote {kind}/{relative}");
        }
    }

    // pack of the directory skill holds nothing the rule refuses.
    let packed = skillstore::archive::pack_dir(
        &work.path().join("dir/dir/skill-dir"),
        &skillstore::ArchiveLimits::default(),
    )
    .await;
    if let Ok((_, bytes)) = packed {
        let zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let names: Vec<String> = zip.file_names().map(|n| n.unwrap().into_owned()).collect();
        for name in names {
            let relative = name.split_once('/').map_or(name.as_str(), |(_, rest)| rest);
            let relative = relative.trim_end_matches('/');
            assert!(
                refusal(relative).is_none() || relative == ".skillstore",
                "packed {name}"
            );
        }
    }

    // HTTP: the show object lists none, and none is served.
    let server = Served::start(settings(vec![(
        "t",
        config,
        vec![(TOKEN, skillstore_server::Scope::Read)],
    )]))
    .await;
    let client = reqwest::Client::new();
    // A refused discovery entry reaches the tenant with its public reason.
    let listed: Value = get(&client, server.url("/v1/skills"), TOKEN)
        .await
        .json()
        .await
        .unwrap();
    if !refused.is_empty() {
        let reasons: Vec<&str> = listed["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["path"] == "/disc/skill-disc/SKILL.md")
            .filter_map(|d| d["message"].as_str())
            .collect();
        let named = reasons.iter().any(|m| {
            [
                "never part of a skill",
                "not part of a skill",
                "only `.skillstore/signature`",
            ]
            .iter()
            .any(|why| m.contains(why))
        });
        assert!(named, "{reasons:?}");
    }
    for kind in KINDS {
        let name = format!("skill-{kind}");
        if !names.contains(name.as_str()) {
            continue;
        }
        let shown: Value = get(&client, server.url(&format!("/v1/skills/{name}")), TOKEN)
            .await
            .json()
            .await
            .unwrap();
        let text = shown.to_string();
        for path in refused.keys() {
            let answer = get(&client, server.url(&format!("/v1/skills/{name}/files/{path}")), TOKEN).await;
            assert_eq!(answer.status(), 404, "{kind}: HTTP served {path}");
            let quoted = format!("\"{path}\"");
            let listed = shown["files"]
                .as_array()
                .is_some_and(|files| files.iter().any(|f| f.to_string().contains(&quoted)));
            assert!(!listed, "{kind}: HTTP listed {path}: {text}");
        }
    }
    server.stop().await;
}

/// The property, on every source kind, over generated trees.
#[test]
fn no_path_the_content_rule_refuses_is_listed_read_synced_packed_or_served() {
    with_s3_env(|s3| async move {
        let mut runner = TestRunner::new(ProptestConfig {
            cases: 12,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let strategy = tree();
        let mut trees = Vec::new();
        for _ in 0..runner.config().cases {
            trees.push(strategy.new_tree(&mut runner).unwrap().current());
        }
        // The finding's archive, always among the cases.
        trees.push(Tree::from([
            (".git/HEAD".into(), b"ref: refs/heads/main\n".to_vec()),
            (".git/config".into(), b"[core]\n\tfsmonitor = touch pwned\n".to_vec()),
            (
                ".git/refs/heads/main".into(),
                b"0000000000000000000000000000000000000000\n".to_vec(),
            ),
            (".env".into(), b"SECRET=1\n".to_vec()),
            ("scripts/run.sh".into(), b"echo ok\n".to_vec()),
        ]));
        for (case, tree) in trees.into_iter().enumerate() {
            check_case(tree, &s3, case).await;
        }
    });
}

/// Finding: the rule was asked of a link's own name only, so
/// `gitlink -> .git` (read as `gitlink/config`), `innocent-config ->
/// .git/config` and `notes.txt -> .env` served the bytes of a `.git` entry
/// and a hidden file through every channel, on a directory and a Git
/// source. A link is never followed to a hidden name.
#[test]
fn a_link_with_an_innocent_name_never_reaches_a_hidden_file() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        use std::os::unix::fs::symlink;
        let work = tempfile::tempdir().unwrap();
        let skill = work.path().join("dir/base/evil");
        std::fs::create_dir_all(skill.join(".git")).unwrap();
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(skill.join("SKILL.md"), skill_md_of("evil")).unwrap();
        std::fs::write(skill.join(".git/config"), "[remote]\n\turl = https://token@host/r\n").unwrap();
        std::fs::write(skill.join(".env"), "SECRET=1\n").unwrap();
        std::fs::write(skill.join("scripts/ok.sh"), "echo ok\n").unwrap();
        symlink(".git", skill.join("gitlink")).unwrap();
        symlink(".git/config", skill.join("innocent-config")).unwrap();
        symlink(".env", skill.join("notes.txt")).unwrap();
        symlink("../.env", skill.join("scripts/innocent.txt")).unwrap();
        symlink("ok.sh", skill.join("scripts/fine.sh")).unwrap();

        // The same skill, links included, committed to a Git repository.
        let repo = work.path().join("repo");
        std::fs::create_dir_all(repo.join("git/evil/scripts")).unwrap();
        std::fs::write(repo.join("git/evil/SKILL.md"), skill_md_of("evil")).unwrap();
        std::fs::write(repo.join("git/evil/.env"), "SECRET=1\n").unwrap();
        std::fs::write(repo.join("git/evil/scripts/ok.sh"), "echo ok\n").unwrap();
        symlink(".env", repo.join("git/evil/notes.txt")).unwrap();
        symlink("../.env", repo.join("git/evil/scripts/innocent.txt")).unwrap();
        symlink("ok.sh", repo.join("git/evil/scripts/fine.sh")).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["add", "-A"]);
        git(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "tree",
            ],
        );

        for (mount, source) in [
            (work.path().join("dir").display().to_string(), "/base"),
            (format!("git+file://{}@main", repo.display()), "/git"),
        ] {
            let config = Config::parse(&format!(
                "mounts:\n  - at: /\n    location: \"{mount}\"\nsources:\n  - path: {source}\ncache:\n  dir: \"{}\"\n",
                work.path().join("cache").display()
            ))
            .unwrap();
            let catalog: Catalog = config.open().unwrap().load().await;
            assert!(catalog.get("evil").is_some(), "{mount}: {:?}", catalog.diagnostics());
            let listed = catalog.skill_files("evil", FileLimits::default()).await.unwrap();
            let mut relatives = listed.relatives();
            relatives.sort();
            assert_eq!(relatives, ["SKILL.md", "scripts/fine.sh", "scripts/ok.sh"], "{mount}");
            for path in [
                "gitlink/config",
                "gitlink/HEAD",
                "innocent-config",
                "notes.txt",
                "scripts/innocent.txt",
            ] {
                assert!(
                    catalog.read_file("evil", path).await.is_err(),
                    "{mount}: {path} was read"
                );
            }
            assert_eq!(
                &catalog.read_file("evil", "scripts/fine.sh").await.unwrap()[..],
                b"echo ok\n"
            );
            let out = work.path().join(format!("synced-{}", source.trim_start_matches('/')));
            skillstore::sync::sync(&catalog, &out, &skillstore::sync::SyncOptions::default())
                .await
                .unwrap();
            let mut synced = files_under(&out.join("evil"));
            synced.sort();
            assert_eq!(synced, ["SKILL.md", "scripts/fine.sh", "scripts/ok.sh"], "{mount}");

            let server = Served::start(settings(vec![(
                "t",
                config,
                vec![(TOKEN, skillstore_server::Scope::Read)],
            )]))
            .await;
            let client = reqwest::Client::new();
            for path in ["gitlink/config", "innocent-config", "notes.txt", "scripts/innocent.txt"] {
                let answer = get(&client, server.url(&format!("/v1/skills/evil/files/{path}")), TOKEN).await;
                assert_ne!(answer.status(), 200, "{mount}: HTTP served {path}");
            }
            server.stop().await;
        }
    });
}

//! Git repositories as sources, fetched by the real protocols from Git's
//! own servers on loopback (`file://`, `git daemon`, `git http-backend`):
//! the catalog equals that of a checkout of the same commit, a moved
//! branch is seen on the next open, a pinned commit is never fetched
//! again, and a Git mount is never writable.

use std::path::Path;

use skillstore::backends::testkit::git_repo::git;
use skillstore::backends::testkit::git_servers::{GitDaemon, GitHttpServer, publish_bare};
use skillstore::{Config, Error};

const SKILL: &str = "---\nname: NAME\ndescription: The NAME skill.\n---\nBody of NAME.\n";

fn write_skill(work: &Path, dir: &str, name: &str) {
    let at = work.join(dir).join(name);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join("SKILL.md"), SKILL.replace("NAME", name)).unwrap();
}

/// A work tree with base and team layers, committed on `main`.
fn layered_work(work: &Path) -> String {
    std::fs::create_dir_all(work).unwrap();
    write_skill(work, "base", "pdf");
    write_skill(work, "base", "docx");
    write_skill(work, "team", "pdf");
    std::fs::create_dir_all(work.join("team/pdf/references")).unwrap();
    std::fs::write(work.join("team/pdf/references/forms.md"), "# Forms\n").unwrap();
    git(work, &["init", "-q"]);
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", "layers"]);
    git(work, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// A configuration mounting `location` at `/` with the two layers, its
/// cache under `dir/cache`.
fn config(dir: &Path, location: &str) -> Config {
    let yaml = format!(
        "mounts:\n  - at: /\n    location: \"{location}\"\nsources:\n  - path: /base/\n  - path: /team/\ncache:\n  dir: cache\n"
    );
    let path = dir.join("skillstore.yaml");
    std::fs::write(&path, yaml).unwrap();
    Config::load(&path).unwrap()
}

/// `list --json`'s skills as JSON values, without the commit.
async fn listing(config: &Config) -> (Vec<serde_json::Value>, Vec<Option<String>>) {
    let catalog = config.open().unwrap().load().await;
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
    let mut skills = Vec::new();
    let mut commits = Vec::new();
    for skill in catalog.skills() {
        let mut value = serde_json::to_value(skill).unwrap();
        commits.push(
            value
                .as_object_mut()
                .unwrap()
                .remove("commit")
                .map(|c| c.as_str().unwrap().to_owned()),
        );
        skills.push(value);
    }
    (skills, commits)
}

/// Commits a new team skill `name` on the work tree's branch; returns the
/// new commit.
fn commit_skill(work: &Path, name: &str) -> String {
    write_skill(work, "team", name);
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", name]);
    git(work, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// A namespace following `branch`, locked to what it serves now (written
/// to `dir/skillstore.lock` and named by the configuration), shared; and
/// the lock.
async fn following_locked(dir: &Path, branch: &str) -> (skillstore::SharedCatalog, skillstore::integrity::Lock) {
    let namespace = config(dir, branch).open().unwrap();
    let lock = skillstore::integrity::Lock::of(&namespace, &namespace.load().await)
        .await
        .unwrap();
    std::fs::write(dir.join("skillstore.lock"), lock.to_json()).unwrap();
    let yaml = std::fs::read_to_string(dir.join("skillstore.yaml")).unwrap() + "lock: skillstore.lock\n";
    std::fs::write(dir.join("skillstore.yaml"), yaml).unwrap();
    let locked = Config::load(&dir.join("skillstore.yaml")).unwrap().open().unwrap();
    let shared = skillstore::SharedCatalog::new(locked.load().await).following(locked);
    assert_eq!(shared.snapshot().skills().len(), 2);
    (shared, lock)
}

fn checkout_config(dir: &Path, work: &Path) -> Config {
    config(dir, &work.to_string_lossy())
}

#[tokio::test]
async fn a_git_source_over_file_lists_what_a_checkout_lists() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let head = layered_work(&work);
    let url = format!("git+file://{}@main", work.display());
    let (from_git, commits) = listing(&config(dir.path(), &url)).await;
    let (from_checkout, none) = listing(&checkout_config(dir.path(), &work)).await;
    assert_eq!(from_git, from_checkout);
    assert_eq!(from_git.len(), 2);
    assert!(
        commits.iter().all(|c| c.as_deref() == Some(head.as_str())),
        "{commits:?}"
    );
    assert!(none.iter().all(Option::is_none));
    // The winner's files read through the catalog as from the checkout.
    let catalog = config(dir.path(), &url).open().unwrap().load().await;
    let bytes = catalog.read_file("pdf", "references/forms.md").await.unwrap();
    assert_eq!(bytes, "# Forms\n");
}

#[tokio::test]
async fn a_moved_branch_is_seen_on_the_next_open_and_a_pinned_commit_stays() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let first = layered_work(&work);
    let branch = format!("git+file://{}@main", work.display());
    let pinned = format!("git+file://{}@{first}", work.display());
    let (before, _) = listing(&config(dir.path(), &branch)).await;
    assert_eq!(before.len(), 2);
    write_skill(&work, "team", "xlsx");
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "xlsx"]);
    let second = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    let (after, commits) = listing(&config(dir.path(), &branch)).await;
    assert_eq!(after.len(), 3);
    assert!(commits.iter().all(|c| c.as_deref() == Some(second.as_str())));
    let (at_pin, commits) = listing(&config(dir.path(), &pinned)).await;
    assert_eq!(at_pin, before);
    assert!(commits.iter().all(|c| c.as_deref() == Some(first.as_str())));
    // With the remote gone, the pinned commit is still served (it is
    // never fetched again), and so is the branch as last fetched.
    std::fs::remove_dir_all(&work).unwrap();
    let (still, _) = listing(&config(dir.path(), &pinned)).await;
    assert_eq!(still, before);
    // The branch is served as last fetched, and says so: a `source_stale`
    // warning for each of its sources, which count as incomplete (exit 3).
    let stale = config(dir.path(), &branch).open().unwrap().load().await;
    assert_eq!(stale.skills().len(), 3);
    assert!(
        stale
            .skills()
            .iter()
            .all(|s| s.commit.as_deref() == Some(second.as_str()))
    );
    let warned: Vec<_> = stale.diagnostics().iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(warned, ["source_stale", "source_stale"], "{:?}", stale.diagnostics());
    assert!(
        stale.diagnostics()[0].message.contains(&second),
        "{:?}",
        stale.diagnostics()
    );
    assert_eq!(stale.incomplete_sources().len(), 2);
    // A reference never fetched cannot be served: its sources are
    // unavailable.
    let other = format!("git+file://{}@other", work.display());
    let catalog = config(dir.path(), &other).open().unwrap().load().await;
    assert!(catalog.skills().is_empty());
    assert_eq!(catalog.incomplete_sources().len(), 2);
}

#[tokio::test]
async fn the_cache_is_private_and_keyed_without_credentials() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let url = format!("git+file://{}", work.display());
    listing(&config(dir.path(), &url)).await;
    let cache = dir.path().join("cache/git");
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let repos: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".git"))
        .collect();
    assert_eq!(repos.len(), 1, "{repos:?}");
}

/// Six namespaces opened at once on one remote share one bare repository
/// of the cache: one `KEY.git` (and its `KEY.lock`) and nothing else under
/// `cache/git`, holding the one ref the branch is fetched into, every open
/// served the remote's head from it.
#[test]
fn concurrent_opens_share_one_cached_repository() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let head = layered_work(&work);
    let url = format!("git+file://{}@main", work.display());
    let config = config(dir.path(), &url);
    let commits: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    let namespace = config.open().unwrap();
                    namespace.sources().iter().next().unwrap().commit().unwrap().to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(commits.iter().all(|c| *c == head), "{commits:?}");
    let cache = dir.path().join("cache/git");
    let mut entries: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    entries.sort_unstable();
    let repos: Vec<&String> = entries.iter().filter(|n| n.ends_with(".git")).collect();
    assert_eq!(repos.len(), 1, "one repository for one remote: {entries:?}");
    let key = repos[0].strip_suffix(".git").unwrap();
    assert_eq!(entries, [format!("{key}.git"), format!("{key}.lock")], "{entries:?}");
    let repo = cache.join(repos[0]);
    let refs = git(&repo, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    let refs: Vec<&str> = refs.lines().collect();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert!(
        refs[0].starts_with("refs/skillstore/") && refs[0].ends_with(&head),
        "{refs:?}"
    );
}

#[tokio::test]
async fn a_git_mount_is_never_writable() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let yaml = format!(
        "mounts:\n  - at: /\n    location: \"git+file://{}\"\nsources:\n  - path: /team/\n    writable: true\ncache:\n  dir: cache\n",
        work.display()
    );
    let path = dir.path().join("skillstore.yaml");
    std::fs::write(&path, yaml).unwrap();
    match Config::load(&path).unwrap().open() {
        Err(Error::Usage(message)) => assert!(message.contains("never writable"), "{message}"),
        other => panic!("expected a usage error, got {:?}", other.map(|_| ())),
    }
    let namespace = config(dir.path(), &format!("git+file://{}", work.display()))
        .open()
        .unwrap();
    let err = namespace
        .backend()
        .put(
            &skillstore::backends::VPath::new("/team/new/SKILL.md").unwrap(),
            "x".into(),
            skillstore::backends::PutMode::Create,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), skillstore::backends::ErrorKind::ReadOnly);
}

/// An unreachable remote leaves its sources unavailable, never the others,
/// and its credentials show nowhere; a reference the remote does not have
/// is refused naming it.
#[tokio::test]
async fn an_unreachable_remote_is_unavailable_and_shows_no_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    write_skill(&local, "", "kept");
    // Nothing listens on port 9: the fetch fails at once.
    let yaml = format!(
        "mounts:\n  - at: /git\n    location: \"git+http://someone:hunter2@127.0.0.1:9/r.git@main\"\n  - at: /local\n    location: \"{}\"\nsources:\n  - path: /git/team/\n  - path: /local/\ncache:\n  dir: cache\n",
        local.display()
    );
    let path = dir.path().join("skillstore.yaml");
    std::fs::write(&path, yaml).unwrap();
    let catalog = Config::load(&path).unwrap().open().unwrap().load().await;
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["kept"]);
    let shown = serde_json::to_string(catalog.diagnostics()).unwrap();
    assert!(shown.contains("unavailable"), "{shown}");
    assert!(!shown.contains("hunter2") && !shown.contains("someone"), "{shown}");
    assert!(!catalog.incomplete_sources().is_empty());

    let work = dir.path().join("work");
    layered_work(&work);
    let missing = format!("git+file://{}@no-such-branch", work.display());
    match config(dir.path(), &missing).open() {
        Err(Error::Usage(message)) => assert!(message.contains("no-such-branch"), "{message}"),
        other => panic!("expected a usage error, got {:?}", other.map(|_| ())),
    }
    // A branch fetched before and then deleted at a remote that answers is
    // an error, never the old commit from the cache.
    git(&work, &["branch", "-q", "doomed"]);
    let doomed = format!("git+file://{}@doomed", work.display());
    assert!(config(dir.path(), &doomed).open().is_ok());
    git(&work, &["branch", "-q", "-D", "doomed"]);
    match config(dir.path(), &doomed).open() {
        Err(Error::Usage(message)) => assert!(message.contains("doomed"), "{message}"),
        other => panic!("expected a usage error, got {:?}", other.map(|_| ())),
    }
}

/// The same layers served by `git daemon` and by smart HTTP give the
/// catalog the checkout gives; an unchanged ref on the second open fetches
/// no objects.
#[tokio::test]
async fn git_daemon_and_smart_http_serve_the_same_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let head = layered_work(&work);
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let bare = publish_bare(&work, &served, "skills.git");
    let (expected, _) = listing(&checkout_config(dir.path(), &work)).await;

    let daemon = GitDaemon::start(&served);
    let cache_a = dir.path().join("a");
    std::fs::create_dir_all(&cache_a).unwrap();
    let (over_daemon, commits) = listing(&config(&cache_a, &format!("git+{}", daemon.url("skills.git")))).await;
    assert_eq!(over_daemon, expected);
    assert!(commits.iter().all(|c| c.as_deref() == Some(head.as_str())));

    let http = GitHttpServer::start(&served);
    let cache_b = dir.path().join("b");
    std::fs::create_dir_all(&cache_b).unwrap();
    let location = format!("git+{}@main", http.url("skills.git"));
    let (over_http, commits) = listing(&config(&cache_b, &location)).await;
    assert_eq!(over_http, expected);
    assert!(commits.iter().all(|c| c.as_deref() == Some(head.as_str())));
    let cold = http.requests();
    let objects = count_objects(&cache_b);
    let (again, _) = listing(&config(&cache_b, &location)).await;
    assert_eq!(again, expected);
    assert_eq!(count_objects(&cache_b), objects, "an unchanged ref fetched objects");
    // One request: version 1 of the protocol lists the refs in its first
    // answer, and the ref did not move, so nothing is fetched.
    let warm = http.requests() - cold;
    eprintln!("smart HTTP requests: cold {cold}, warm with the ref unchanged {warm}");
    assert_eq!(warm, 1);
    // A pinned commit already in the cache: no request at all.
    let pinned = format!("git+{}@{head}", http.url("skills.git"));
    let before = http.requests();
    let (at_pin, _) = listing(&config(&cache_b, &pinned)).await;
    assert_eq!(at_pin, expected);
    assert_eq!(http.requests(), before);
    drop(bare);
}

/// Files below `cache/git/*.git/objects`, a proxy for what was fetched.
fn count_objects(dir: &Path) -> usize {
    fn walk(path: &Path) -> usize {
        std::fs::read_dir(path)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| {
                        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                            walk(&e.path())
                        } else {
                            1
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    std::fs::read_dir(dir.join("cache/git"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".git"))
        .map(|e| walk(&e.path().join("objects")))
        .sum()
}

/// A SKILL.md that is a Git LFS pointer and a submodule among the skills
/// are reported as diagnostics; the other skills load.
#[tokio::test]
async fn lfs_pointers_and_submodules_become_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    std::fs::write(
        work.join("team/pdf/SKILL.md"),
        "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n",
    )
    .unwrap();
    git(&work, &["add", "-A"]);
    let gitlink = format!("160000,{},team/vendored", "1".repeat(40));
    git(&work, &["update-index", "--add", "--cacheinfo", &gitlink]);
    git(&work, &["commit", "-q", "-m", "lfs and a submodule"]);
    let url = format!("git+file://{}", work.display());
    let catalog = config(dir.path(), &url).open().unwrap().load().await;
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["docx", "pdf"]);
    assert_eq!(catalog.get("pdf").unwrap().source, "base", "the pointer never wins");
    let kinds: Vec<(String, String)> = catalog
        .diagnostics()
        .iter()
        .map(|d| {
            (
                d.kind.as_str().to_owned(),
                d.path.as_ref().map(|p| p.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("not_regular_file".into(), "/team/pdf/SKILL.md".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("unsupported".into(), "/team/vendored/SKILL.md".into())),
        "{kinds:?}"
    );
    assert!(
        catalog.incomplete_sources().is_empty(),
        "a skill's own refusal leaves its source whole"
    );
}

/// Credentials are never sent in clear text: a `user:password@` remote
/// over plain `http://` is refused by the transport, and the operator's
/// message says so (Git's own reason, every cause) without the password.
#[test]
fn a_password_over_plain_http_is_refused_and_the_message_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    publish_bare(&work, &served, "skills.git");
    let http = GitHttpServer::start(&served);
    let url = http.url("skills.git").replace("http://", "http://someone:hunter2@");
    let remote = skillstore::backends::GitRemote::new(&url).unwrap();
    let err = skillstore::git_source::open(&remote, None, Default::default(), Some(dir.path())).unwrap_err();
    let shown = skillstore::git_source::with_causes(&err);
    assert!(shown.contains("clear text"), "{shown}");
    assert!(!shown.contains("hunter2") && !shown.contains("someone"), "{shown}");
    // Without credentials the same server serves it.
    let plain = skillstore::backends::GitRemote::new(&http.url("skills.git")).unwrap();
    assert!(skillstore::git_source::open(&plain, None, Default::default(), Some(dir.path())).is_ok());
}

/// Links in the tree (a SKILL.md that is a link to a file beside it) give
/// the catalog a checkout of the same commit gives: such a tree is listed
/// by directory, where links follow the mount's policy, rather than by the
/// one walk of the object database that serves link-free trees.
#[tokio::test]
async fn a_tree_with_links_lists_what_a_checkout_lists() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let notes = work.join("team/notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(
        notes.join("real.md"),
        "---\nname: notes\ndescription: Take notes.\n---\nBody.\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("real.md", notes.join("SKILL.md")).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "a linked SKILL.md"]);
    let url = format!("git+file://{}", work.display());
    let (from_git, _) = listing(&config(dir.path(), &url)).await;
    let (from_checkout, _) = listing(&checkout_config(dir.path(), &work)).await;
    assert_eq!(from_git, from_checkout);
    let names: Vec<&str> = from_git.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["docx", "pdf", "notes"]);
}

/// What a load of a Git source read is kept in the local cache by blob
/// id, so the next load (the same commit, or a later one where those
/// files did not change) reads no SKILL.md it read before.
#[tokio::test]
async fn a_git_source_fills_the_local_cache() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let url = format!("git+file://{}", work.display());
    let (first, _) = listing(&config(dir.path(), &url)).await;
    let kept: Vec<String> = std::fs::read_dir(dir.path().join("cache"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(
        kept.iter()
            .any(|text| text.contains("\"git:") && text.contains("SKILL.md")),
        "no cache file for the Git source: {kept:?}"
    );
    let (second, _) = listing(&config(dir.path(), &url)).await;
    assert_eq!(first, second);
}

#[tokio::test]
async fn a_shared_catalog_following_a_branch_serves_it_moved_at_its_next_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let first = layered_work(&work);
    let branch = format!("git+file://{}@main", work.display());
    let namespace = config(dir.path(), &branch).open().unwrap();
    assert!(namespace.follows_git_references());
    let shared = skillstore::SharedCatalog::new(namespace.load().await).following(namespace);
    shared.refresh().await;
    assert_eq!(shared.snapshot().skills().len(), 2, "nothing moved, nothing changed");
    let second = commit_skill(&work, "xlsx");
    assert_ne!(first, second);
    shared.refresh().await;
    let catalog = shared.snapshot();
    assert_eq!(catalog.skills().len(), 3);
    assert!(
        catalog
            .skills()
            .iter()
            .all(|s| s.commit.as_deref() == Some(second.as_str())),
        "the provenance is the new commit"
    );
    assert_eq!(catalog.read_skill("xlsx").await.unwrap(), SKILL.replace("NAME", "xlsx"));

    // A pinned commit is never opened again: a new commit on the branch
    // is not served.
    let pinned = format!("git+file://{}@{first}", work.display());
    let namespace = config(dir.path(), &pinned).open().unwrap();
    assert!(!namespace.follows_git_references());
    let shared = skillstore::SharedCatalog::new(namespace.load().await).following(namespace);
    shared.refresh().await;
    assert_eq!(shared.snapshot().skills().len(), 2);
}

#[tokio::test]
async fn a_moved_branch_that_no_longer_matches_the_lock_is_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let branch = format!("git+file://{}@main", work.display());
    let (shared, _) = following_locked(dir.path(), &branch).await;
    // The branch moves: opening again is refused (the lock pins the
    // commit), so the catalog keeps serving the locked commit.
    commit_skill(&work, "xlsx");
    shared.refresh().await;
    let catalog = shared.snapshot();
    assert_eq!(catalog.skills().len(), 2);
    assert!(catalog.read_skill("xlsx").await.is_err());
}

#[tokio::test]
async fn a_lock_edited_while_following_a_branch_applies_at_the_next_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    layered_work(&work);
    let branch = format!("git+file://{}@main", work.display());
    let (shared, lock) = following_locked(dir.path(), &branch).await;
    let lock_path = dir.path().join("skillstore.lock");
    // The lock is edited to drop `docx`; the branch does not move.
    let mut value: serde_json::Value = serde_json::from_str(&lock.to_json()).unwrap();
    value["skills"].as_array_mut().unwrap().retain(|s| s["name"] != "docx");
    std::fs::write(&lock_path, value.to_string()).unwrap();
    shared.refresh().await;
    let catalog = shared.snapshot();
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["pdf"]);
    assert!(
        catalog.diagnostics().iter().any(|d| d.kind.as_str() == "not_locked"),
        "{:?}",
        catalog.diagnostics()
    );
}

//! The one assembly of a namespace (`Config::open`): writable sources on
//! their own roots, source policies that only narrow, aliases refused,
//! locations resolved against the configuration file, bounded files.

use std::os::unix::fs::symlink;
use std::path::Path;

use skillstore::backends::{ErrorKind, SkillBackendExt, VPath};
use skillstore::{Config, Error, Source, SourceList};

const SKILL: &str = "---\nname: NAME\ndescription: A skill for tests.\n---\nBody.\n";

fn skill(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    std::fs::write(dir.join(name).join("SKILL.md"), SKILL.replace("NAME", name)).unwrap();
}

fn config(yaml: &str, dir: &Path) -> Config {
    let path = dir.join("skillstore.yaml");
    std::fs::write(&path, yaml).unwrap();
    Config::load(&path).unwrap()
}

fn usage_message(result: Result<skillstore::Namespace, Error>) -> String {
    match result {
        Err(Error::Usage(message)) => message,
        Err(other) => panic!("expected a usage error, got {other:?}"),
        Ok(_) => panic!("expected the namespace to be refused"),
    }
}

/// Finding: a writable source made its whole mount writable, so a link
/// inside the root carried a write into the base layer.
#[tokio::test]
async fn link_in_writable_source_cannot_write_into_base_layer() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("base"), "secret");
    skill(&dir.path().join("team"), "evil");
    symlink("../../base/secret", dir.path().join("team/evil/references")).unwrap();
    let namespace = config(
        "sources:\n  - path: /base/\n  - path: /team/\n    writable: true\n",
        dir.path(),
    )
    .open()
    .unwrap();
    let editor = namespace.editor(Some("team")).unwrap();
    let err = editor
        .write_file("evil", "references/x.md", b"planted".to_vec(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind().as_str(), "write_through_symlink" | "symlink_escape"),
        "{err}"
    );
    assert!(!dir.path().join("base/secret/x.md").exists());
    // The namespace as a whole is read-only outside writable sources.
    let err = namespace
        .backend()
        .put(
            &VPath::new("/base/secret/y.md").unwrap(),
            "x".into(),
            Default::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly);
}

/// Finding: a second source name aliasing the base layer's directory could
/// be made writable.
#[test]
fn alias_of_base_layer_cannot_be_writable() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("base"), "one");
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let yaml = format!(
        "mounts:\n  - at: /\n    location: .\n  - at: /alias\n    location: {}\nsources:\n  - path: /base/\n  - path: /team/\n  - path: /alias/\n    writable: true\n",
        dir.path().join("base").display()
    );
    let message = usage_message(config(&yaml, dir.path()).open());
    assert!(message.contains("`alias`") && message.contains("`base`"), "{message}");

    // The same through a link to the base layer's directory.
    symlink("base", dir.path().join("linked")).unwrap();
    let yaml = "mounts:\n  - at: /\n    location: .\n    symlinks: follow\nsources:\n  - path: /base/\n  - path: /linked/\n    writable: true\n";
    let message = usage_message(config(yaml, dir.path()).open());
    assert!(message.contains("`linked`"), "{message}");
}

#[test]
fn nested_sources_cannot_differ_in_writability() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("skills"), "one");
    std::fs::create_dir_all(dir.path().join("skills/team")).unwrap();
    let yaml = "sources:\n  - path: /skills/\n  - path: /skills/team/\n    writable: true\n";
    let message = usage_message(config(yaml, dir.path()).open());
    assert!(message.contains("one holds the other"), "{message}");
    // Both read-only is fine.
    let yaml = "sources:\n  - path: /skills/\n  - path: /skills/team/\n";
    assert!(config(yaml, dir.path()).open().is_ok());
}

/// Finding: a source whose own directory is a link out of the root, under
/// `symlinks: deny`, was canonicalized and read from outside.
#[tokio::test]
async fn source_policy_never_loosens_its_mount() {
    let outside = tempfile::tempdir().unwrap();
    skill(outside.path(), "leaked");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    skill(&root.join("base"), "one");
    symlink(outside.path(), root.join("linked")).unwrap();
    let yaml = format!(
        "mounts:\n  - at: /\n    location: {}\nsources:\n  - path: /base/\n  - path: /linked/\n    symlinks: deny\n",
        root.display()
    );
    let message = usage_message(config(&yaml, dir.path()).open());
    assert!(message.contains("/linked"), "{message}");
    assert!(!message.contains(&outside.path().display().to_string()), "{message}");

    // A source may not ask for more than its mount allows.
    let yaml = format!(
        "mounts:\n  - at: /\n    location: {}\nsources:\n  - path: /base/\n    symlinks: follow\n",
        root.display()
    );
    let message = usage_message(config(&yaml, dir.path()).open());
    assert!(message.contains("looser"), "{message}");

    // Narrowing works, and the catalog loads.
    let yaml = format!(
        "mounts:\n  - at: /\n    location: {}\nsources:\n  - path: /base/\n    symlinks: deny\n",
        root.display()
    );
    let catalog = config(&yaml, dir.path()).open().unwrap().load().await;
    assert_eq!(catalog.skills().len(), 1);
}

/// Finding: a relative `memory:FILE` resolved from the working directory,
/// not from the configuration file.
#[tokio::test]
async fn memory_file_resolves_against_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("team.json"),
        r#"{"/changelog/SKILL.md": "---\nname: changelog\ndescription: Keep one.\n---\n"}"#,
    )
    .unwrap();
    let yaml = "mounts:\n  - at: /team\n    location: memory:team.json\nsources:\n  - path: /team/\n";
    let catalog = config(yaml, dir.path()).open().unwrap().load().await;
    assert_eq!(catalog.get("changelog").unwrap().source, "team");
}

/// Finding: configuration, template and memory files were read with no
/// size limit.
#[test]
fn local_files_are_read_under_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("team.json"),
        format!("{{\"/a\": \"{}\"}}", "x".repeat(2000)),
    )
    .unwrap();
    let yaml = "mounts:\n  - at: /team\n    location: memory:team.json\nsources:\n  - path: /team/\nlimits:\n  max_file_bytes: 1000\n";
    let err = config(yaml, dir.path()).open().unwrap_err().to_string();
    assert!(err.contains("larger than the 1000-byte limit"), "{err}");

    let yaml = "sources:\n  - path: /team/\nprompt:\n  template: big.txt\nlimits:\n  max_file_bytes: 1000\n";
    std::fs::write(dir.path().join("big.txt"), "y".repeat(1001)).unwrap();
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    let err = config(yaml, dir.path())
        .open()
        .unwrap()
        .prompt_options()
        .unwrap_err()
        .to_string();
    assert!(err.contains("template") && err.contains("limit"), "{err}");

    let path = dir.path().join("huge.yaml");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(10 * 1024 * 1024 + 1).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("configuration") && err.contains("limit"), "{err}");
}

#[tokio::test]
async fn flags_build_the_same_config() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("base"), "one");
    skill(&dir.path().join("team"), "one");
    let mut config = Config::default();
    config
        .set_mount("/", dir.path().to_str().unwrap(), Path::new("."))
        .unwrap();
    config.set_sources(["/base/", "Team=/team/"]).unwrap();
    config.make_writable("Team");
    let namespace = config.open().unwrap();
    assert!(namespace.sources().get("Team").unwrap().is_writable());
    let catalog = namespace.load().await;
    assert_eq!(catalog.get("one").unwrap().source, "Team");
    let text = namespace
        .backend()
        .read_to_string(&VPath::new("/team/one/SKILL.md").unwrap())
        .await
        .unwrap();
    assert!(text.contains("name: one"));

    let mut config = Config::default();
    config.set_sources(["/base/"]).unwrap();
    config.make_writable("nope");
    assert!(config.open().unwrap_err().to_string().contains("nope"));
}

/// Finding: with `team/evil/references -> ../../base/secret`, reading
/// `evil references/SKILL.md` printed the base layer's secret. Reads inside
/// a skill stay inside its directory once links resolve, and a SKILL.md
/// that is a link into another skill does not load.
#[tokio::test]
async fn link_in_skill_cannot_read_another_layer() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("base"), "secret");
    std::fs::write(dir.path().join("base/secret/notes.md"), "TOPSECRET").unwrap();
    skill(&dir.path().join("team"), "evil");
    symlink("../../base/secret", dir.path().join("team/evil/references")).unwrap();
    std::fs::create_dir_all(dir.path().join("team/copycat")).unwrap();
    symlink("../../base/secret/SKILL.md", dir.path().join("team/copycat/SKILL.md")).unwrap();
    std::fs::write(dir.path().join("team/evil/inside.md"), "fine").unwrap();
    symlink("inside.md", dir.path().join("team/evil/alias.md")).unwrap();

    for writable in [false, true] {
        let yaml = format!("sources:\n  - path: /base/\n  - path: /team/\n    writable: {writable}\n");
        let catalog = config(&yaml, dir.path()).open().unwrap().load().await;
        for relative in ["references/notes.md", "references/SKILL.md"] {
            let err = catalog.read_file("evil", relative).await.unwrap_err();
            assert!(err.kind().as_str().starts_with("symlink"), "{relative}: {err}");
            assert!(!err.to_string().contains("TOPSECRET"));
        }
        // A link that stays inside the skill still works.
        assert_eq!(&catalog.read_file("evil", "alias.md").await.unwrap()[..], b"fine");
        assert!(catalog.get("copycat").is_none(), "writable: {writable}");
        assert!(
            catalog
                .diagnostics()
                .iter()
                .any(|d| d.path.as_ref().is_some_and(|p| p.as_str() == "/team/copycat/SKILL.md")),
            "{:?}",
            catalog.diagnostics()
        );
    }
}

/// Files held in memory mount without a file: nothing is read from or
/// written to disk, and namespaces of one configuration share them.
#[tokio::test]
async fn a_memory_mount_touches_no_disk_and_is_shared_by_its_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("base"), "from-disk");
    let mut config = Config::default();
    config.set_mount("/", ".", dir.path()).unwrap();
    let files = skillstore::backends::MemoryBackend::from_json(
        r#"{"/changelog/SKILL.md": "---\nname: changelog\ndescription: Held in memory.\n---\n"}"#,
    )
    .unwrap();
    config.set_memory_mount("/team", files).unwrap();
    config.set_sources(["/base/", "/team/"]).unwrap();
    config.make_writable("team");
    let before = std::fs::read_dir(dir.path()).unwrap().count();

    let first = config.open().unwrap();
    let catalog = first.load().await;
    assert_eq!(catalog.get("changelog").unwrap().source, "team");
    assert_eq!(catalog.get("from-disk").unwrap().source, "base");
    first
        .editor(Some("team"))
        .unwrap()
        .create("written", SKILL.replace("NAME", "written"))
        .await
        .unwrap();
    let second = config.open().unwrap().load().await;
    assert_eq!(second.get("written").unwrap().source, "team");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        before,
        "a file appeared on disk"
    );

    // A later mount at the same point replaces it.
    skill(&dir.path().join("other"), "from-other");
    config.set_mount("/team", "other", dir.path()).unwrap();
    let replaced = config.open().unwrap().load().await;
    assert!(replaced.get("changelog").is_none());
    assert_eq!(replaced.get("from-other").unwrap().source, "team");
}

/// Plain `http://` to a host that is not loopback, for a discovery endpoint
/// or a Git remote, is refused unless the mount allows it; loopback and
/// https are taken as they are.
#[test]
fn plain_http_off_loopback_needs_the_mount_to_allow_it() {
    let dir = tempfile::tempdir().unwrap();
    for location in [
        "http://skills.example.invalid",
        "git+http://mirror.example.invalid/r.git@main",
    ] {
        let yaml = format!("mounts:\n  - at: /org\n    location: \"{location}\"\nsources:\n  - path: /org\n");
        let message = usage_message(config(&yaml, dir.path()).open());
        assert!(
            message.contains("allow_http: true") && message.contains("example.invalid"),
            "{message}"
        );
    }
    let allowed = "mounts:\n  - at: /org\n    location: \"http://skills.example.invalid\"\n    allow_http: true\nsources:\n  - path: /org\n";
    assert!(config(allowed, dir.path()).open().is_ok());
    let loopback = "mounts:\n  - at: /org\n    location: \"http://127.0.0.1:9\"\nsources:\n  - path: /org\n";
    assert!(config(loopback, dir.path()).open().is_ok());
}

/// Finding: a front end naming sources by path alone (the deepagents
/// middleware) named them `source0`, ..., so a lock written for the
/// configured source withheld every skill (`lock_mismatch`), and a source's
/// signature policy, kept by source name, checked nothing.
#[tokio::test]
async fn sources_named_by_path_keep_the_configured_names_and_policies() {
    let dir = tempfile::tempdir().unwrap();
    skill(&dir.path().join("skills"), "pdf");
    skill(&dir.path().join("skills"), "xls");
    skill(&dir.path().join("team/skills"), "csv");
    let plain = config("sources:\n  - path: /skills/\n", dir.path()).open().unwrap();
    let lock = skillstore::integrity::Lock::of(&plain, &plain.load().await)
        .await
        .unwrap();
    std::fs::write(dir.path().join("skillstore.lock"), lock.to_json()).unwrap();
    let locked = config("sources:\n  - path: /skills/\nlock: skillstore.lock\n", dir.path())
        .open()
        .unwrap();

    let list = locked.sources_at(&["/skills/"]).unwrap();
    assert_eq!(list.iter().map(|s| s.name()).collect::<Vec<_>>(), ["skills"]);
    let catalog = locked.load_sources(list).await.unwrap();
    assert_eq!(names(&catalog), ["pdf", "xls"], "{:?}", catalog.diagnostics());
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());

    // A path the configuration does not name is named as `--source PATH`
    // names it; a name taken already becomes the whole path.
    let list = locked.sources_at(&["/skills", "/team/skills/"]).unwrap();
    assert_eq!(
        list.iter().map(|s| s.name()).collect::<Vec<_>>(),
        ["skills", "team/skills"]
    );
    let catalog = locked.load_sources(list).await.unwrap();
    let withheld: Vec<_> = catalog
        .withheld()
        .map(|d| (d.source.clone(), d.kind.as_str()))
        .collect();
    assert_eq!(withheld, [(Some("team/skills".to_owned()), "not_locked")]);
    assert!(matches!(locked.sources_at(&["skills"]), Err(Error::Usage(_))));

    // The signature policy of the configured source applies too.
    std::fs::write(dir.path().join("allowed_signers"), "").unwrap();
    let signed = config(
        "sources:\n  - path: /skills/\n    signatures: {allowed_signers: allowed_signers, required: true}\n",
        dir.path(),
    )
    .open()
    .unwrap();
    let catalog = signed
        .load_sources(signed.sources_at(&["/skills/"]).unwrap())
        .await
        .unwrap();
    assert!(names(&catalog).is_empty());
    let kinds: Vec<_> = catalog.withheld().map(|d| d.kind.as_str()).collect();
    assert_eq!(kinds, ["signature_missing", "signature_missing"]);
    // Under another name the policy would not apply: refused.
    let renamed = SourceList::from_sources([Source::parse("other=/skills/").unwrap()]).unwrap();
    assert!(matches!(signed.load_sources(renamed).await, Err(Error::Usage(_))));
}

fn names(catalog: &skillstore::Catalog) -> Vec<&str> {
    catalog.enabled().map(|s| s.name()).collect()
}

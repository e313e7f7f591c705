//! Mount-table routing and the memory backend's JSON form.

use std::sync::Arc;

use skillstore_backends::{
    EntryKind, ErrorKind, MemoryBackend, MountTable, PutMode, ReadOptions, SkillBackend, SkillBackendExt, VPath,
};

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

async fn memory_with(files: &[(&str, &str)]) -> MemoryBackend {
    let backend = MemoryBackend::new();
    for (path, content) in files {
        backend
            .put(&p(path), content.to_string().into(), PutMode::Overwrite)
            .await
            .unwrap();
    }
    backend
}

async fn table() -> MountTable {
    let root = memory_with(&[("/teamwork/x", "root:teamwork"), ("/team/hidden", "root:team")]).await;
    let team = memory_with(&[("/x", "team"), ("/special/y", "team:special")]).await;
    let special = memory_with(&[("/y", "special")]).await;
    MountTable::new()
        .with(VPath::root(), Arc::new(root))
        .unwrap()
        .with(p("/team"), Arc::new(team))
        .unwrap()
        .with(p("/team/special"), Arc::new(special))
        .unwrap()
}

#[tokio::test]
async fn mount_routes_by_longest_whole_segment_prefix() {
    let ns = table().await;
    assert_eq!(ns.read_to_string(&p("/team/x")).await.unwrap(), "team");
    assert_eq!(ns.read_to_string(&p("/teamwork/x")).await.unwrap(), "root:teamwork");
    assert_eq!(ns.read_to_string(&p("/team/special/y")).await.unwrap(), "special");
    // The root backend's own /team is hidden by the mount.
    assert_eq!(
        ns.read_to_string(&p("/team/hidden")).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

async fn listed(ns: &MountTable, dir: &str) -> Vec<(String, EntryKind)> {
    ns.list(&p(dir))
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect()
}

#[tokio::test]
async fn mount_listing_shows_mount_points_as_directories() {
    let ns = table().await;
    assert_eq!(
        listed(&ns, "/").await,
        [("team".into(), EntryKind::Dir), ("teamwork".into(), EntryKind::Dir)]
    );
    assert_eq!(
        listed(&ns, "/team").await,
        [("special".into(), EntryKind::Dir), ("x".into(), EntryKind::File)]
    );
}

#[tokio::test]
async fn mount_errors_carry_namespace_paths() {
    let ns = table().await;
    let err = ns
        .read(&p("/team/special/missing"), ReadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.path(), Some(&p("/team/special/missing")));
    let err = ns.read(&p("/team/x"), ReadOptions::with_limit(1)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert_eq!(err.path(), Some(&p("/team/x")));
}

#[tokio::test]
async fn mount_without_a_backend_for_a_path_is_not_found() {
    let ns = MountTable::new()
        .with(p("/a/b/c"), Arc::new(memory_with(&[("/f", "x")]).await))
        .unwrap();
    assert_eq!(ns.read_to_string(&p("/a/b/c/f")).await.unwrap(), "x");
    assert_eq!(ns.stat(&p("/a")).await.unwrap().kind, EntryKind::Dir);
    assert_eq!(ns.list(&p("/a")).await.unwrap()[0].name, "b");
    assert_eq!(
        ns.read_to_string(&p("/other")).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        ns.read_to_string(&p("/a/b")).await.unwrap_err().kind(),
        ErrorKind::IsADirectory
    );
    assert_eq!(ns.list(&p("/other")).await.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(ns.list(&p("/a/bc")).await.unwrap_err().kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn mount_twice_at_one_point_is_refused() {
    let mut ns = MountTable::new();
    ns.mount(p("/x"), Arc::new(MemoryBackend::new())).unwrap();
    let err = ns.mount(p("/x"), Arc::new(MemoryBackend::new())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
}

#[tokio::test]
async fn mount_writes_go_to_the_routed_backend() {
    let team = MemoryBackend::new();
    let ns = MountTable::new().with(p("/team"), Arc::new(team.clone())).unwrap();
    ns.put(&p("/team/new/SKILL.md"), "hello".into(), PutMode::Create)
        .await
        .unwrap();
    assert_eq!(team.read_to_string(&p("/new/SKILL.md")).await.unwrap(), "hello");
}

#[tokio::test]
async fn memory_json_round_trip() {
    let json = r#"{"/base/a/SKILL.md": "---\nname: a\n---\n", "/user/b/references/r.md": "café"}"#;
    let backend = MemoryBackend::from_json(json).unwrap();
    assert_eq!(backend.len(), 2);
    assert_eq!(
        backend.read_to_string(&p("/user/b/references/r.md")).await.unwrap(),
        "café"
    );
    let dumped = backend.to_json().unwrap();
    let again = MemoryBackend::from_json(&dumped).unwrap();
    assert_eq!(
        again.read_to_string(&p("/base/a/SKILL.md")).await.unwrap(),
        "---\nname: a\n---\n"
    );
}

#[tokio::test]
async fn memory_json_refuses_bad_keys_and_shapes() {
    for bad in [
        r#"{"/base/../x": "x"}"#,
        r#"{"relative/x": "x"}"#,
        r#"{"/a": "file", "/a/b": "under a file"}"#,
        r#"{"/a": 1}"#,
        r#"["/a"]"#,
    ] {
        assert!(MemoryBackend::from_json(bad).is_err(), "{bad}");
    }
    assert_eq!(
        MemoryBackend::from_json(r#"{"/base/../x": "x"}"#).unwrap_err().kind(),
        ErrorKind::InvalidPath
    );
}

#[tokio::test]
async fn memory_clones_share_state_and_versions_are_unique() {
    let a = MemoryBackend::new();
    let b = a.clone();
    let v1 = a.put(&p("/x"), "1".into(), PutMode::Overwrite).await.unwrap();
    let v2 = b.put(&p("/y"), "1".into(), PutMode::Overwrite).await.unwrap();
    assert_ne!(v1, v2);
    assert_eq!(b.read_to_string(&p("/x")).await.unwrap(), "1");
}

#[tokio::test]
async fn memory_refuses_a_file_where_a_directory_is_needed() {
    let backend = memory_with(&[("/a/b", "x")]).await;
    let err = backend
        .put(&p("/a/b/c"), "y".into(), PutMode::Overwrite)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADirectory);
    let err = backend.put(&p("/a"), "y".into(), PutMode::Overwrite).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IsADirectory);
}

//! Two namespaces over one pool load a base they mount alike once, hold
//! one record per base skill, and each keep their own layer and filter.

use std::path::Path;

use skillstore::Config;
use skillstore::source_pool::SourcePool;

fn write(root: &Path, relative: &str, name: &str, description: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(
        path.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n"),
    )
    .unwrap();
}

fn config(root: &Path, team: &str, extra: &str) -> Config {
    let text = format!(
        "mounts:\n  - at: /base\n    location: {}\n  - at: /team\n    location: {}\nsources:\n  - path: /base\n  - path: /team\n    writable: true\n{extra}",
        root.join("base").display(),
        root.join(team).display()
    );
    Config::parse(&text).unwrap()
}

#[tokio::test]
async fn a_base_mounted_alike_is_loaded_once_and_its_records_shared() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for name in ["alpha", "beta", "gamma"] {
        write(root, &format!("base/{name}"), name, "From the base.");
    }
    write(root, "acme/alpha", "alpha", "Acme's alpha.");
    std::fs::create_dir_all(root.join("globex")).unwrap();
    let pool = SourcePool::new();
    let acme = config(root, "acme", "").open().unwrap().with_source_pool(pool.clone());
    let globex = config(root, "globex", "skills:\n  disabled: [gamma]\n")
        .open()
        .unwrap()
        .with_source_pool(pool.clone());
    let (a, g) = (acme.load().await, globex.load().await);
    assert_eq!(pool.loads(), 1, "the base was listed once");
    assert_eq!(pool.len(), 1);
    // beta: the same record in both catalogs.
    assert!(a.get("beta").unwrap().shares_record_with(g.get("beta").unwrap()));
    // alpha: acme's own, shadowing the base; globex's is the base's.
    assert_eq!(a.get("alpha").unwrap().metadata.description, "Acme's alpha.");
    assert_eq!(g.get("alpha").unwrap().metadata.description, "From the base.");
    assert_eq!(a.get("alpha").unwrap().shadowed.len(), 1);
    assert!(g.get("alpha").unwrap().shadowed.is_empty());
    // gamma: disabled for globex only, without changing acme's.
    assert!(!g.get("gamma").unwrap().enabled);
    assert!(a.get("gamma").unwrap().enabled);
    // A refresh of either lists only its own layer.
    let _ = a.refresh().await;
    let _ = g.refresh().await;
    assert_eq!(pool.loads(), 1);
    // A namespace mounting the same base under other settings does not share it.
    let other = Config::parse(&format!(
        "mounts:\n  - at: /base\n    location: {}\n    symlinks: deny\nsources:\n  - path: /base\n",
        root.join("base").display()
    ))
    .unwrap()
    .open()
    .unwrap()
    .with_source_pool(pool.clone());
    let o = other.load().await;
    assert_eq!(pool.len(), 2);
    assert!(!o.get("beta").unwrap().shares_record_with(a.get("beta").unwrap()));
}

#[tokio::test]
async fn a_source_with_a_mount_below_it_is_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "base/alpha", "alpha", "From the base.");
    write(root, "a-extra/extra", "extra", "A's private extra.");
    write(root, "b-extra/extra", "extra", "B's private extra.");
    let nested = |who: &str| {
        Config::parse(&format!(
            "mounts:\n  - at: /base\n    location: {}\n  - at: /base/extra\n    location: {}\nsources:\n  - path: /base\n",
            root.join("base").display(),
            root.join(format!("{who}-extra/extra")).display()
        ))
        .unwrap()
    };
    let pool = SourcePool::new();
    let a = nested("a").open().unwrap().with_source_pool(pool.clone()).load().await;
    let b = nested("b").open().unwrap().with_source_pool(pool.clone()).load().await;
    assert_eq!(a.get("extra").unwrap().metadata.description, "A's private extra.");
    assert_eq!(b.get("extra").unwrap().metadata.description, "B's private extra.");
    assert_eq!(pool.len(), 0);
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

#[tokio::test]
async fn namespaces_mounting_one_directory_alike_share_its_handle_until_it_is_replaced() {
    // It counts the descriptors of the whole process: alone in one.
    if !crate::own_process::in_own_process() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "base/alpha", "alpha", "First base.");
    let text = format!(
        "mounts:\n  - at: /base\n    location: {}\nsources:\n  - path: /base\n",
        root.join("base").display()
    );
    let before = open_descriptors();
    let namespaces: Vec<_> = (0..200)
        .map(|_| Config::parse(&text).unwrap().open().unwrap())
        .collect();
    let grown = open_descriptors().saturating_sub(before);
    assert!(
        grown < 20,
        "200 namespaces over one directory opened {grown} descriptors"
    );
    // The directory replaced: a namespace opened now reads the new one.
    std::fs::rename(root.join("base"), root.join("base-old")).unwrap();
    write(root, "base/alpha", "alpha", "Second base.");
    let fresh = Config::parse(&text).unwrap().open().unwrap().load().await;
    assert_eq!(fresh.get("alpha").unwrap().metadata.description, "Second base.");
    let old = namespaces[0].load().await;
    assert_eq!(old.get("alpha").unwrap().metadata.description, "First base.");
}

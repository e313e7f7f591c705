//! `Catalog::skill_files` lists exactly what `Catalog::read_file` serves,
//! on random trees of files, oversized files, FIFOs and links in every
//! direction, under each symlink policy.

#![cfg(unix)]

use std::collections::BTreeSet;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use skillstore::backends::{FsBackend, SymlinkPolicy};
use skillstore::{Catalog, FileLimits, LoadOptions, Source, SourceList};

const LIMIT: u64 = 64;

/// One entry of a generated skill directory.
#[derive(Debug, Clone)]
enum Node {
    File(usize),
    Big,
    Fifo,
    /// A link, by its target text.
    Link(&'static str),
}

const TARGETS: &[&str] = &[
    ".",
    "..",
    "../other/SKILL.md",
    "../../outside.md",
    "SKILL.md",
    "d/f0",
    "missing",
    "/etc/hostname",
    "d",
];

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![
        (0usize..40).prop_map(Node::File),
        Just(Node::Big),
        Just(Node::Fifo),
        proptest::sample::select(TARGETS).prop_map(Node::Link),
    ]
}

fn make(dir: &Path, name: &str, node: &Node) {
    let path = dir.join(name);
    match node {
        Node::File(n) => std::fs::write(path, "x".repeat(*n)).unwrap(),
        Node::Big => std::fs::write(path, vec![b'y'; LIMIT as usize + 1]).unwrap(),
        Node::Fifo => assert!(
            std::process::Command::new("mkfifo")
                .arg(path)
                .status()
                .unwrap()
                .success()
        ),
        Node::Link(target) => symlink(target, path).unwrap(),
    }
}

fn tree(root: &Path, top: &[Node], inner: &[Node]) -> Vec<String> {
    let skill = root.join("src/pdf");
    std::fs::create_dir_all(skill.join("d")).unwrap();
    std::fs::create_dir_all(root.join("src/other")).unwrap();
    std::fs::write(skill.join("SKILL.md"), "---\nname: pdf\ndescription: P.\n---\n").unwrap();
    std::fs::write(
        root.join("src/other/SKILL.md"),
        "---\nname: other\ndescription: O.\n---\n",
    )
    .unwrap();
    std::fs::write(root.join("outside.md"), "outside").unwrap();
    let mut names = vec!["SKILL.md".to_owned()];
    for (i, n) in top.iter().enumerate() {
        make(&skill, &format!("t{i}"), n);
        names.push(format!("t{i}"));
    }
    for (i, n) in inner.iter().enumerate() {
        make(&skill.join("d"), &format!("f{i}"), n);
        names.push(format!("d/f{i}"));
    }
    names
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_listing_is_exactly_what_a_confined_read_serves(
        top in proptest::collection::vec(node(), 0..6),
        inner in proptest::collection::vec(node(), 1..4),
        policy in proptest::sample::select(&[SymlinkPolicy::WithinRoot, SymlinkPolicy::Deny, SymlinkPolicy::Follow][..]),
    ) {
        let root = tempfile::tempdir().unwrap();
        let names = tree(root.path(), &top, &inner);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let backend = Arc::new(FsBackend::with_policy(root.path(), policy).unwrap());
            let sources = SourceList::from_sources([Source::parse("/src/").unwrap()]).unwrap();
            let options = LoadOptions { read_limit: LIMIT, ..LoadOptions::default() };
            let catalog = Catalog::load(backend, sources, options).await;
            let listed = catalog.skill_files("pdf", FileLimits::default()).await.unwrap();
            let listed_set: BTreeSet<String> = listed.relatives().into_iter().collect();
            prop_assert_eq!(listed_set.len(), listed.files.len(), "a file listed twice");
            // Every name the generator made, read through the confined door.
            let mut served = BTreeSet::new();
            for name in &names {
                if catalog.read_file("pdf", name).await.is_ok() {
                    served.insert(name.clone());
                }
            }
            prop_assert_eq!(&listed_set, &served);
            for file in &listed.files {
                let data = catalog.read_file("pdf", &file.relative).await.unwrap();
                prop_assert_eq!(data.len() as u64, file.size);
            }
            // Everything else of the directory is reported with a kind.
            for name in &names {
                if !listed_set.contains(name) {
                    prop_assert!(listed.left_out.iter().any(|l| &l.relative == name), "{} unreported", name);
                }
            }
            Ok(())
        })?;
    }
}

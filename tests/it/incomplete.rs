//! A catalog that is not whole says so: a source whose storage refused or
//! failed a skill's SKILL.md is incomplete, as one that could not be
//! listed; a skill refused for its own content leaves its source whole.

use std::sync::Arc;

use crate::common::skill_md;
use bytes::Bytes;
use skillstore::backends::{
    Blob, Capabilities, Entry, Error, ErrorKind, MemoryBackend, Metadata, PutMode, ReadOptions, SkillBackend, VPath,
};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

/// A memory backend whose reads of paths ending in `refused` fail with
/// `kind`, as storage that lists but will not serve them.
#[derive(Debug)]
struct Refusing {
    inner: MemoryBackend,
    refused: &'static str,
    kind: ErrorKind,
}

#[async_trait::async_trait]
impl SkillBackend for Refusing {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> skillstore::backends::Result<Vec<Entry>> {
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> skillstore::backends::Result<Metadata> {
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> skillstore::backends::Result<Blob> {
        if path.as_str().ends_with(self.refused) {
            return Err(Error::at(self.kind, path).with_detail("injected"));
        }
        self.inner.read(path, options).await
    }
}

async fn catalog_with(refused: &'static str, kind: ErrorKind) -> Catalog {
    let inner = MemoryBackend::new();
    for (path, name) in [
        ("/base/a/SKILL.md", "a"),
        ("/team/b/SKILL.md", "b"),
        ("/team/c/SKILL.md", "c"),
    ] {
        let data = Bytes::from(skill_md(name, "A skill."));
        inner
            .put(&VPath::new(path).unwrap(), data, PutMode::Overwrite)
            .await
            .unwrap();
    }
    let backend = Arc::new(Refusing { inner, refused, kind });
    let sources = SourceList::from_sources(["/base/", "/team/"].map(|s| Source::parse(s).unwrap())).unwrap();
    Catalog::load(backend, sources, LoadOptions::default()).await
}

fn incomplete(catalog: &Catalog) -> Vec<String> {
    catalog
        .incomplete_sources()
        .iter()
        .map(|s| s.name().to_owned())
        .collect()
}

#[tokio::test]
async fn a_skill_md_the_storage_refuses_makes_its_source_incomplete() {
    for kind in [ErrorKind::PermissionDenied, ErrorKind::Unavailable, ErrorKind::Other] {
        let catalog = catalog_with("/team/b/SKILL.md", kind).await;
        assert!(catalog.get("b").is_none(), "{kind:?}");
        assert!(catalog.get("c").is_some(), "{kind:?}: the other skills load");
        assert!(catalog.unlisted_sources().is_empty(), "{kind:?}: the source was listed");
        assert_eq!(incomplete(&catalog), ["team"], "{kind:?}");
    }
}

#[tokio::test]
async fn a_skill_refused_for_its_own_content_leaves_its_source_whole() {
    for kind in [ErrorKind::TooLarge, ErrorKind::SymlinkEscape, ErrorKind::NotRegularFile] {
        let catalog = catalog_with("/team/b/SKILL.md", kind).await;
        assert!(catalog.get("b").is_none(), "{kind:?}");
        assert!(incomplete(&catalog).is_empty(), "{kind:?}: {:?}", catalog.diagnostics());
    }
}

#[tokio::test]
async fn a_whole_catalog_has_no_incomplete_source() {
    let catalog = catalog_with("/nothing", ErrorKind::PermissionDenied).await;
    assert_eq!(catalog.skills().len(), 3);
    assert!(incomplete(&catalog).is_empty());
}

//! Finding: one odd object key under an S3 source (DEL, a name no path can
//! hold) failed the whole source's listing. It becomes one `invalid_key`
//! diagnostic with the key escaped, and the rest of the source loads.

use std::sync::Arc;

use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{PutMode, SkillBackend, VPath};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

#[tokio::test]
async fn an_odd_key_is_one_diagnostic_and_the_source_still_loads() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let backend = server.backend(&bucket, "skills");
    for name in ["alpha", "zeta"] {
        backend
            .put(
                &VPath::new(format!("/base/{name}/SKILL.md")).unwrap(),
                format!("---\nname: {name}\ndescription: Fine.\n---\n").into(),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
    }
    server.put_raw(&bucket, "skills/base/evil\u{7f}/SKILL.md", b"---\nname: evil\n---\n");
    server.put_raw(&bucket, "skills/base/csi\u{9b}x/SKILL.md", b"---\nname: csi\n---\n");

    let sources = SourceList::from_sources([Source::parse("/base").unwrap()]).unwrap();
    let catalog = Catalog::load(Arc::new(backend), sources, LoadOptions::default()).await;
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    let odd: Vec<&str> = catalog
        .diagnostics()
        .iter()
        .filter(|d| d.kind == "invalid_key")
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(odd.len(), 2, "{:?}", catalog.diagnostics());
    assert!(odd.iter().any(|m| m.contains("evil\\u{7f}")), "{odd:?}");
    assert!(odd.iter().any(|m| m.contains("csi\\u{9b}x")), "{odd:?}");
    assert!(odd.iter().all(|m| !m.contains('\u{7f}') && !m.contains('\u{9b}')));
    let refreshed = catalog.refresh().await;
    assert_eq!(refreshed.skills().len(), 2);
    assert!(!refreshed.is_stale());
}

//! One odd object key (a control character, a name no `VPath` can hold)
//! under an S3 prefix never fails the listing of its neighbours: the valid
//! entries are listed and the odd key is reported, escaped.

use skillstore_backends::testkit::s3_server::S3TestServer;
use skillstore_backends::{PutMode, SkillBackend, VPath};

fn path(text: &str) -> VPath {
    VPath::new(text).unwrap()
}

#[tokio::test]
async fn odd_keys_are_reported_and_the_rest_listed() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let backend = server.backend(&bucket, "skills");
    for name in ["alpha", "good", "zeta"] {
        backend
            .put(
                &path(&format!("/base/{name}/SKILL.md")),
                "---\nname: x\n---\n".into(),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
    }
    // DEL: object_store cannot parse the key at all. U+009B: it can, but
    // no VPath holds it.
    server.put_raw(&bucket, "skills/base/evil\u{7f}/SKILL.md", b"x");
    server.put_raw(&bucket, "skills/base/csi\u{9b}x/SKILL.md", b"x");
    server.put_raw(&bucket, "skills/base/file\u{7f}.md", b"x");

    let listing = backend.list_detailed(&path("/base")).await.unwrap();
    let mut names: Vec<&str> = listing.entries.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["alpha", "good", "zeta"]);
    let mut invalid = listing.invalid.clone();
    invalid.sort();
    assert_eq!(invalid, ["csi\\u{9b}x", "evil\\u{7f}", "file\\u{7f}.md"]);

    let plain = backend.list(&path("/base")).await.unwrap();
    assert_eq!(plain.len(), 3);
}

#[tokio::test]
async fn a_listing_of_only_odd_keys_is_not_missing() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let backend = server.backend(&bucket, "skills");
    server.put_raw(&bucket, "skills/team/bad\u{1}/SKILL.md", b"x");
    let listing = backend.list_detailed(&path("/team")).await.unwrap();
    assert!(listing.entries.is_empty());
    assert_eq!(listing.invalid, ["bad\\u{1}"]);
}

//! Property: a tenant's catalog, whatever its sources, mounts and relative
//! paths, reads only that tenant's objects from a bucket shared with others.

use std::sync::Arc;

use proptest::prelude::*;
use skillstore::backends::object_store::ObjectStore;
use skillstore::backends::object_store::memory::InMemory;
use skillstore::backends::testkit::hostile;
use skillstore::backends::{MountTable, ObjectStoreBackend, PutMode, SkillBackend, VPath};
use skillstore::{Catalog, LoadOptions, Source, SourceList};

const TENANTS: [&str; 3] = ["acme", "acme-evil", "globex"];

fn store_with_tenants() -> Arc<dyn ObjectStore> {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        for tenant in TENANTS {
            let backend = ObjectStoreBackend::new(Arc::clone(&store), &format!("tenants/{tenant}")).unwrap();
            for (path, name) in [
                ("/skills/pdf/SKILL.md", "pdf"),
                ("/skills/team/notes/SKILL.md", "notes"),
                ("/skills/pdf/references/a.md", ""),
            ] {
                let body = if name.is_empty() {
                    format!("owner={tenant}")
                } else {
                    format!("---\nname: {name}\ndescription: owner={tenant}\n---\nowner={tenant}\n")
                };
                backend
                    .put(&VPath::new(path).unwrap(), body.into(), PutMode::Overwrite)
                    .await
                    .unwrap();
            }
        }
    });
    store
}

fn strings() -> impl Strategy<Value = String> {
    let segment = prop::sample::select(vec![
        "..",
        ".",
        "",
        "tenants",
        "acme",
        "acme-evil",
        "globex",
        "skills",
        "team",
        "pdf",
        "references",
        "a.md",
        "SKILL.md",
        "%2e%2e",
        "\u{2025}",
    ]);
    let built = (any::<bool>(), prop::collection::vec(segment, 0..6))
        .prop_map(|(absolute, parts)| format!("{}{}", if absolute { "/" } else { "" }, parts.join("/")));
    prop_oneof![4 => built, 1 => prop::sample::select(hostile::corpus())]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_tenant_catalog_reads_only_its_own_objects(
        tenant in prop::sample::select(TENANTS.to_vec()),
        mount_at in strings(),
        source in strings(),
        relative in strings(),
    ) {
        let store = store_with_tenants();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let own = format!("owner={tenant}");
        runtime.block_on(async {
            let backend = Arc::new(ObjectStoreBackend::new(Arc::clone(&store), &format!("tenants/{tenant}")).unwrap());
            let mut table = MountTable::new();
            let at = VPath::new(&mount_at).unwrap_or_else(|_| VPath::root());
            table.mount(at, backend as Arc<dyn SkillBackend>).unwrap();
            let mut specs = vec![Source::parse("/skills")];
            specs.push(Source::parse(&format!("other={source}")));
            let sources = SourceList::from_sources(specs.into_iter().filter_map(Result::ok)).unwrap();
            let catalog = Catalog::load(Arc::new(table), sources, LoadOptions::default()).await;
            for skill in catalog.skills() {
                prop_assert!(skill.metadata.description == own, "{:?}", skill.metadata.description);
                let body = catalog.read_skill(skill.name()).await.unwrap();
                prop_assert!(String::from_utf8_lossy(&body).contains(&own));
                if let Ok(data) = catalog.read_file(skill.name(), &relative).await {
                    prop_assert!(String::from_utf8_lossy(&data).contains(&own), "{relative:?}");
                }
            }
            Ok(())
        })?;
    }
}

#[test]
fn a_tenant_prefix_that_climbs_is_refused() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    for prefix in ["tenants/../acme", "tenants/./acme", "tenants//acme", "tenants\\acme"] {
        assert!(ObjectStoreBackend::new(Arc::clone(&store), prefix).is_err(), "{prefix}");
    }
}

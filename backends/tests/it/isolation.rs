//! Properties: tenants sharing one bucket under different prefixes never
//! reach each other's objects, and mount routing never crosses a segment
//! boundary.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use proptest::prelude::*;
use skillstore_backends::testkit::hostile;
use skillstore_backends::{
    Blob, Capabilities, Entry, Error, ErrorKind, Metadata, MountTable, ObjectStoreBackend, PutMode, ReadOptions,
    Result, SkillBackend, VPath,
};

/// Tenant names chosen so that one is a string prefix of another.
const TENANTS: [&str; 3] = ["acme", "acme-evil", "globex"];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

/// One bucket; each tenant's files say whose they are.
fn shared_bucket() -> (Arc<dyn ObjectStore>, Vec<ObjectStoreBackend>) {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let backends: Vec<ObjectStoreBackend> = TENANTS
        .iter()
        .map(|t| ObjectStoreBackend::new(Arc::clone(&store), &format!("tenants/{t}")).unwrap())
        .collect();
    runtime().block_on(async {
        for (tenant, backend) in TENANTS.iter().zip(&backends) {
            for path in [
                "/skills/pdf/SKILL.md".to_owned(),
                "/skills/pdf/references/a.md".to_owned(),
                format!("/skills/only-{tenant}/SKILL.md"),
                "/secret.txt".to_owned(),
            ] {
                let body = format!("owner={tenant} path={path}");
                backend
                    .put(&VPath::new(&path).unwrap(), body.into(), PutMode::Overwrite)
                    .await
                    .unwrap();
            }
        }
    });
    (store, backends)
}

/// Path strings: segments that name tenants, climb, or only look like it,
/// joined by separators real and false; and the hostile corpus.
fn path_strings() -> impl Strategy<Value = String> {
    let segment = prop::sample::select(vec![
        "..",
        ".",
        "",
        "tenants",
        "acme",
        "acme-evil",
        "globex",
        "skills",
        "pdf",
        "only-acme",
        "only-globex",
        "only-acme-evil",
        "secret.txt",
        "SKILL.md",
        "references",
        "a.md",
        "%2e%2e",
        "\u{2025}",
        "\u{ff0e}\u{ff0e}",
        "acme%2f..",
        "tenants%2facme-evil",
    ]);
    let separator = prop::sample::select(vec!["/", "/", "/", "\\", "//", "%2f"]);
    let built = (any::<bool>(), prop::collection::vec((segment, separator), 0..7)).prop_map(|(absolute, parts)| {
        let mut out = String::from(if absolute { "/" } else { "" });
        for (i, (segment, separator)) in parts.iter().enumerate() {
            if i > 0 {
                out.push_str(separator);
            }
            out.push_str(segment);
        }
        out
    });
    let corpus = prop::sample::select(hostile::corpus());
    prop_oneof![4 => built, 1 => corpus]
}

fn own(tenant: &str, data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    text.starts_with(&format!("owner={tenant} "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever path a tenant asks for, it reads, stats and lists only its
    /// own objects.
    #[test]
    fn a_tenant_reaches_only_its_own_objects(raw in path_strings(), base in path_strings()) {
        let (_store, backends) = shared_bucket();
        runtime().block_on(async {
            for (tenant, backend) in TENANTS.iter().zip(&backends) {
                let mut paths = Vec::new();
                if let Ok(path) = VPath::new(&raw) {
                    paths.push(path);
                }
                // A path relative to a directory the tenant chose.
                if let Ok(dir) = VPath::new(&base)
                    && let Ok(joined) = dir.join(&raw)
                {
                    prop_assert!(joined.starts_with(&dir));
                    paths.push(joined);
                }
                for path in paths {
                    if let Ok(blob) = backend.read(&path, ReadOptions::default()).await {
                        prop_assert!(own(tenant, &blob.data), "{tenant} read {path}: {:?}", blob.data);
                    }
                    if let Ok(entries) = backend.list(&path).await {
                        for entry in entries {
                            for other in TENANTS.iter().filter(|o| *o != tenant) {
                                prop_assert_ne!(entry.name.clone(), format!("only-{other}"));
                            }
                        }
                    }
                    let _ = backend.stat(&path).await;
                }
            }
            Ok(())
        })?;
    }
}

/// Answers nothing, and remembers every path it was asked about.
#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<VPath>>,
}

#[async_trait]
impl SkillBackend for Recorder {
    fn capabilities(&self) -> Capabilities {
        Capabilities::READ_ONLY
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.seen.lock().unwrap().push(dir.clone());
        Err(Error::at(ErrorKind::NotFound, dir))
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.seen.lock().unwrap().push(path.clone());
        Err(Error::at(ErrorKind::NotFound, path))
    }
    async fn read(&self, path: &VPath, _: ReadOptions) -> Result<Blob> {
        self.seen.lock().unwrap().push(path.clone());
        Err(Error::at(ErrorKind::NotFound, path))
    }
}

fn vpath_from(segments: &[&str]) -> VPath {
    if segments.is_empty() {
        VPath::root()
    } else {
        VPath::new(format!("/{}", segments.join("/"))).unwrap()
    }
}

fn segments() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "ab", "a-b", "a.b", "b", "team", "teamwork"]),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A path goes to the mount whose point is its longest ancestor by whole
    /// segments, re-rooted there; with no such mount, to none.
    #[test]
    fn mount_routing_follows_whole_segments(
        points in prop::collection::btree_set(segments(), 1..6),
        target in segments(),
    ) {
        let points: Vec<VPath> = points.iter().map(|s| vpath_from(s)).collect();
        let recorders: Vec<Arc<Recorder>> = points.iter().map(|_| Arc::new(Recorder::default())).collect();
        let mut table = MountTable::new();
        for (point, recorder) in points.iter().zip(&recorders) {
            table.mount(point.clone(), Arc::clone(recorder) as Arc<dyn SkillBackend>).unwrap();
        }
        let path = vpath_from(&target);
        let result = runtime().block_on(table.read(&path, ReadOptions::default()));
        // A path above another mount point is a directory of the table
        // itself: refused without asking any backend.
        let above_a_mount = points.iter().any(|point| point != &path && point.starts_with(&path));
        let expected = points
            .iter()
            .enumerate()
            .filter(|(_, point)| path.starts_with(point) && !above_a_mount)
            .max_by_key(|(_, point)| point.segments().count());
        if above_a_mount {
            prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::IsADirectory);
        }
        for (i, recorder) in recorders.iter().enumerate() {
            let seen = recorder.seen.lock().unwrap().clone();
            match expected {
                Some((chosen, point)) if chosen == i => {
                    prop_assert_eq!(seen, vec![path.strip_prefix(point).unwrap()]);
                }
                _ => prop_assert!(seen.is_empty(), "mount {} saw {:?} for {}", points[i], seen, path),
            }
        }
    }
}

//! A real FUSE mount kept busy: many handles on a file that changed after
//! its directory was listed, files held open past the byte budget, a
//! backend that stops answering, and an unmount with readers inside. These
//! tests mount for real: on a machine that cannot, they fail and say why.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{
    Blob, Capabilities, Entry, Metadata, ObjectStoreBackend, PutMode, ReadOptions, Result, SkillBackend, VPath,
};
use skillstore::{Catalog, LoadOptions, SharedCatalog, Source, SourceList};
use skillstore_fuse::{MountOptions, Mounted};

use crate::common::{Served, is_mounted};
use crate::own_process::in_own_process;

const MIB: usize = 1024 * 1024;

/// A backend that counts the reads of each path and can hold the reads of
/// one path until it is let go (a backend that stopped answering).
#[derive(Debug)]
struct Gate {
    inner: Arc<dyn SkillBackend>,
    reads: Mutex<Vec<String>>,
    stall: Mutex<Option<String>>,
    stalled: AtomicUsize,
    open: tokio::sync::Notify,
}

impl Gate {
    fn new(inner: Arc<dyn SkillBackend>) -> Arc<Self> {
        Arc::new(Gate {
            inner,
            reads: Mutex::new(Vec::new()),
            stall: Mutex::new(None),
            stalled: AtomicUsize::new(0),
            open: tokio::sync::Notify::new(),
        })
    }

    fn reads_of(&self, path: &str) -> usize {
        self.reads.lock().unwrap().iter().filter(|p| *p == path).count()
    }

    fn stall(&self, path: &str) {
        *self.stall.lock().unwrap() = Some(path.to_owned());
    }

    fn let_go(&self) {
        *self.stall.lock().unwrap() = None;
        self.open.notify_waiters();
    }
}

#[async_trait]
impl SkillBackend for Gate {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.reads.lock().unwrap().push(path.to_string());
        let stalled = self.stall.lock().unwrap().as_deref() == Some(path.as_str());
        if stalled {
            let released = self.open.notified();
            self.stalled.fetch_add(1, Ordering::SeqCst);
            released.await;
        }
        self.inner.read(path, options).await
    }
}

fn skill_md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\n# {name}\n")
}

struct Fixture {
    team: Arc<ObjectStoreBackend>,
    gate: Arc<Gate>,
    catalog: SharedCatalog,
    _dir: tempfile::TempDir,
    mount_point: PathBuf,
}

/// Skills in S3 behind a [`Gate`]: `big` with four 1 MiB files, `pdf`,
/// and `slow`.
async fn fixture() -> Fixture {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let team = Arc::new(ObjectStoreBackend::new(server.store(&bucket), "").unwrap());
    let put = |path: &str, data: Bytes| {
        let team = Arc::clone(&team);
        let path = VPath::new(path).unwrap();
        async move { team.put(&path, data, PutMode::Overwrite).await.unwrap() }
    };
    for name in ["big", "pdf", "slow"] {
        put(&format!("/{name}/SKILL.md"), skill_md(name).into()).await;
    }
    for (i, file) in ["blob", "c1", "c2", "c3"].iter().enumerate() {
        put(&format!("/big/assets/{file}.bin"), vec![b'a' + i as u8; MIB].into()).await;
    }
    put("/pdf/references/forms.md", "# Forms\n".into()).await;
    put("/pdf/references/other.md", "# Other\n".into()).await;
    put("/slow/references/stuck.md", "never read\n".into()).await;
    let gate = Gate::new(team.clone());
    let sources = SourceList::from_sources([Source::parse("/").unwrap()]).unwrap();
    let catalog = Catalog::load(gate.clone(), sources, LoadOptions::default()).await;
    assert_eq!(catalog.skills().len(), 3, "{:?}", catalog.diagnostics());
    let dir = tempfile::tempdir().unwrap();
    let mount_point = dir.path().join("mnt");
    std::fs::create_dir(&mount_point).unwrap();
    Fixture {
        team,
        gate,
        catalog: SharedCatalog::new(catalog),
        _dir: dir,
        mount_point,
    }
}

fn options() -> MountOptions {
    MountOptions {
        attr_ttl: Duration::ZERO,
        refresh_interval: Duration::from_secs(3600),
        read_limit: 2 * MIB as u64,
        cache_bytes: 4 * MIB,
        request_timeout: Duration::from_secs(2),
        ..MountOptions::default()
    }
}

fn mount(f: &Fixture) -> Mounted {
    Mounted::mount(f.catalog.clone(), &f.mount_point, options())
        .unwrap_or_else(|e| panic!("this test needs a real FUSE mount and got none: {e}"))
}

/// Runs `work` on a thread of its own and waits at most `within` for it:
/// a request stuck behind another never returns, and the test must say so
/// rather than hang.
fn within<T: Send + 'static>(within: Duration, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(within).ok()
}

/// The resident memory of this process (the mount runs in it), in bytes.
fn resident_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|n| n.trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// Once a finding: the mount's memory grew 10 MiB per open handle when a
/// file changed after its directory was listed (the cache was looked up
/// under one version and stored under another): 100 handles took the
/// daemon to 1 GB. Fifty handles on the changed 1 MiB file share one copy,
/// read once from the backend; the process's resident memory grows by
/// less than 16 MiB while they are open (one copy each would be 50 MiB);
/// the bytes held stay within the budget, and an open past it fails with
/// ENFILE until handles close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_handles_on_a_file_changed_after_listing_share_one_copy() {
    // It measures the resident memory of the whole process: alone in one.
    if !in_own_process() {
        return;
    }
    let f = fixture().await;
    let mounted = mount(&f);
    let at = f.mount_point.clone();
    let listed = tokio::task::block_in_place(|| std::fs::read_dir(at.join("big/assets")).unwrap().count());
    assert_eq!(listed, 4);
    // The file changes after its directory was listed.
    f.team
        .put(
            &VPath::new("/big/assets/blob.bin").unwrap(),
            vec![b'z'; MIB].into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let before = f.gate.reads_of("/big/assets/blob.bin");
    let resident_before = resident_bytes();
    let at = f.mount_point.clone();
    let handles = tokio::task::block_in_place(|| {
        (0..50)
            .map(|_| {
                let mut file = std::fs::File::open(at.join("big/assets/blob.bin")).unwrap();
                let mut data = Vec::new();
                file.read_to_end(&mut data).unwrap();
                assert!(data.len() == MIB && data.iter().all(|&b| b == b'z'));
                file
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(
        f.gate.reads_of("/big/assets/blob.bin") - before,
        1,
        "fifty opens of one version read it once and share one copy"
    );
    let grown = resident_bytes().saturating_sub(resident_before);
    assert!(
        grown < 16 * MIB,
        "fifty handles on one 1 MiB file grew the process by {} MiB",
        grown / MIB
    );
    // Held open: blob, c1, c2 and c3 fill the 4 MiB budget; one more byte
    // cannot be held, and a file of another skill is refused too.
    let at = f.mount_point.clone();
    tokio::task::block_in_place(|| {
        let held: Vec<std::fs::File> = ["c1", "c2", "c3"]
            .iter()
            .map(|c| std::fs::File::open(at.join(format!("big/assets/{c}.bin"))).unwrap())
            .collect();
        let err = std::fs::File::open(at.join("pdf/references/forms.md")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(23), "ENFILE: {err}");
        drop(held);
        drop(handles);
        assert_eq!(std::fs::read(at.join("pdf/references/forms.md")).unwrap(), b"# Forms\n");
    });
    mounted.unmount().unwrap();
}

/// Once a finding: while one open waited on a stopped backend, `ls` of the
/// root and reads of cached files of other skills timed out. Other
/// requests are served meanwhile, and the stalled open answers EIO after
/// the backend timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_read_leaves_the_rest_of_the_mount_answering() {
    let f = fixture().await;
    let mounted = mount(&f);
    let at = f.mount_point.clone();
    let cached = tokio::task::block_in_place(|| std::fs::read(at.join("pdf/references/forms.md")).unwrap());
    assert_eq!(cached, b"# Forms\n");
    f.gate.stall("/slow/references/stuck.md");
    let at = f.mount_point.clone();
    let (stuck_tx, stuck_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = stuck_tx.send(std::fs::read(at.join("slow/references/stuck.md")));
    });
    while f.gate.stalled.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at = f.mount_point.clone();
    let others = within(Duration::from_secs(30), move || {
        let mut root: Vec<String> = std::fs::read_dir(&at)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        root.sort();
        let cached = std::fs::read(at.join("pdf/references/forms.md")).unwrap();
        let fresh = std::fs::read(at.join("pdf/references/other.md")).unwrap();
        (root, cached, fresh)
    });
    let (root, cached, fresh) = others.expect("the mount answered nothing while one read was stalled");
    assert_eq!(root, ["big", "pdf", "slow"]);
    assert_eq!(cached, b"# Forms\n");
    assert_eq!(fresh, b"# Other\n");
    let stuck = tokio::task::block_in_place(|| stuck_rx.recv_timeout(Duration::from_secs(30)))
        .expect("the stalled read never answered");
    assert_eq!(stuck.unwrap_err().raw_os_error(), Some(5), "EIO");
    f.gate.let_go();
    mounted.unmount().unwrap();
}

/// Once a finding: SIGTERM with a reader inside left a dead mount
/// ("cannot unmount", exit 1, then "Transport endpoint is not connected"
/// until a manual umount). The shutdown succeeds, the mount point is at
/// once an ordinary, empty directory again, and the reader keeps the file
/// it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_busy_unmounts_and_the_reader_keeps_its_file() {
    let f = fixture().await;
    let served = Served::start(f.catalog.clone(), f.mount_point.clone(), options()).await;
    let at = f.mount_point.clone();
    let (mut inside, mut held) = tokio::task::block_in_place(|| {
        let inside = Command::new("sleep")
            .arg("60")
            .current_dir(at.join("pdf"))
            .spawn()
            .unwrap();
        (inside, std::fs::File::open(at.join("pdf/references/forms.md")).unwrap())
    });
    let unmounted = served.stop().await;
    assert!(unmounted.is_ok(), "{unmounted:?}");
    assert!(!is_mounted(&f.mount_point));
    let listed = std::fs::read_dir(&f.mount_point).unwrap().count();
    assert_eq!(listed, 0, "the mount point is its own directory again");
    let mut data = Vec::new();
    tokio::task::block_in_place(|| held.read_to_end(&mut data)).unwrap();
    assert_eq!(data, b"# Forms\n");
    inside.kill().unwrap();
    inside.wait().unwrap();
}

/// `mount` refuses a directory that holds anything, as its help says: the
/// tree would hide it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_refuses_a_non_empty_directory() {
    let f = fixture().await;
    std::fs::write(f.mount_point.join("mine.txt"), "mine").unwrap();
    let err = Mounted::mount(f.catalog.clone(), &f.mount_point, options()).unwrap_err();
    assert!(err.to_string().contains("not empty"), "{err}");
    assert!(!is_mounted(&f.mount_point));
    assert_eq!(std::fs::read_to_string(f.mount_point.join("mine.txt")).unwrap(), "mine");
}

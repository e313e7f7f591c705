//! A real FUSE mount of a namespace with a local layer and an S3 layer
//! whose server stops answering (a proxy that holds every request): the
//! local layer and the root keep answering while readers of the S3 layer
//! wait, those readers get EIO at the request deadline, and a flood of
//! them past the source's queue is refused at once. These tests mount for
//! real: on a machine that cannot, they fail and say why.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use skillstore::backends::testkit::fault_proxy::{Fault, FaultProxy};
use skillstore::backends::testkit::s3_server::S3TestServer;
use skillstore::backends::{FsBackend, MountTable, ObjectStoreBackend, PutMode, SkillBackend, VPath};
use skillstore::{Catalog, LoadOptions, SharedCatalog, Source, SourceList};
use skillstore_fuse::{MountOptions, Mounted};

/// How many files of the S3 layer the stalled readers open, one each:
/// more than the mount's request threads.
const STALLED_READERS: usize = 6;

/// How long the tests wait for anything before saying the mount hangs.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn skill_md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\n# {name}\n")
}

struct Fixture {
    proxy: FaultProxy,
    catalog: SharedCatalog,
    _dir: tempfile::TempDir,
    mount_point: PathBuf,
}

/// A local layer with the skill `local`, and an S3 layer, reached through
/// a fault proxy, with the skill `remote` and its files `assets/fN.txt`.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    std::fs::create_dir_all(base.join("local/references")).unwrap();
    std::fs::write(base.join("local/SKILL.md"), skill_md("local")).unwrap();
    std::fs::write(base.join("local/references/notes.md"), "# Notes\n").unwrap();

    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let seed = server.backend(&bucket, "");
    let put = |path: String, data: String| {
        let seed = seed.clone();
        async move {
            seed.put(&VPath::new(&path).unwrap(), data.into(), PutMode::Overwrite)
                .await
                .unwrap()
        }
    };
    put("/remote/SKILL.md".into(), skill_md("remote")).await;
    for i in 0..STALLED_READERS {
        put(format!("/remote/assets/f{i}.txt"), format!("file {i}, ten\n")).await;
    }
    // Held requests last far longer than any test; the client never gives
    // up on its own, so only the mount's deadline ends a read.
    let proxy = FaultProxy::start(server.endpoint(), Duration::from_secs(3600));
    proxy.set_faults(&[Fault::Stall]);
    let team = Arc::new(ObjectStoreBackend::new(proxy.client(&bucket, Duration::from_secs(3600), 0), "").unwrap());

    let namespace = MountTable::new()
        .with(VPath::new("/base").unwrap(), Arc::new(FsBackend::new(&base).unwrap()))
        .unwrap()
        .with(VPath::new("/team").unwrap(), team)
        .unwrap();
    let sources =
        SourceList::from_sources([Source::parse("/base/").unwrap(), Source::parse("/team/").unwrap()]).unwrap();
    let catalog = Catalog::load(Arc::new(namespace), sources, LoadOptions::default()).await;
    assert_eq!(catalog.skills().len(), 2, "{:?}", catalog.diagnostics());
    let mount_point = dir.path().join("mnt");
    std::fs::create_dir(&mount_point).unwrap();
    Fixture {
        proxy,
        catalog: SharedCatalog::new(catalog),
        _dir: dir,
        mount_point,
    }
}

fn mount(f: &Fixture, options: MountOptions) -> Mounted {
    Mounted::mount(f.catalog.clone(), &f.mount_point, options)
        .unwrap_or_else(|e| panic!("this test needs a real FUSE mount and got none: {e}"))
}

/// Lists the S3 skill's directories through the mount while its server
/// still answers, so that a lookup of its files needs nothing more from
/// it and only the opens wait on the stalled server.
fn warm(at: &Path) {
    assert!(std::fs::read_dir(at.join("remote")).unwrap().count() > 0);
    assert_eq!(
        std::fs::read_dir(at.join("remote/assets")).unwrap().count(),
        STALLED_READERS
    );
}

/// Opens and reads `remote/assets/fN.txt` on a thread of its own; the
/// receiver gets what the read returned.
fn stalled_reader(at: &Path, n: usize) -> Receiver<std::io::Result<Vec<u8>>> {
    let path = at.join(format!("remote/assets/f{n}.txt"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read(path));
    });
    rx
}

/// Waits until the proxy holds `n` requests.
async fn until_held(proxy: &FaultProxy, n: u64) {
    let waited = tokio::time::timeout(HANG_GUARD, async {
        while proxy.counts().of(Fault::Stall) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the S3 server never got {n} requests to hold");
}

/// Runs `work` on a thread of its own and waits at most [`HANG_GUARD`]
/// for it, so a request stuck behind another fails the test rather than
/// hanging it.
fn guarded<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(HANG_GUARD).ok()
}

fn still_pending(readers: &[Receiver<std::io::Result<Vec<u8>>>]) -> usize {
    readers
        .iter()
        .filter(|r| matches!(r.try_recv(), Err(TryRecvError::Empty)))
        .count()
}

/// Finding: with an S3 source stalled, four reads of its files held all
/// four of the mount's request threads, and a local source's file and `ls`
/// through the same mount waited for them. With more stalled readers than
/// request threads, the local file and an `ls -la` of the root answer
/// while every stalled reader is still waiting, and the stalled reads end
/// with EIO at the request deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stalled_source_freezes_the_whole_mount() {
    let f = fixture().await;
    let options = MountOptions {
        attr_ttl: Duration::ZERO,
        refresh_interval: Duration::from_secs(3600),
        threads: 4,
        request_timeout: Duration::from_secs(10),
        ..MountOptions::default()
    };
    let threads = options.threads as u64;
    let mounted = mount(&f, options);
    let at = f.mount_point.clone();
    tokio::task::block_in_place(|| warm(&at));

    f.proxy.set_rate(1.0);
    let readers: Vec<_> = (0..STALLED_READERS).map(|n| stalled_reader(&at, n)).collect();
    // Every request thread's worth of reads has reached the server and is
    // held there.
    until_held(&f.proxy, threads).await;

    let root = at.clone();
    let others = tokio::task::block_in_place(|| {
        guarded(move || {
            let local = std::fs::read(root.join("local/references/notes.md")).unwrap();
            let ls = Command::new("ls").arg("-la").arg(&root).output().unwrap();
            (local, ls)
        })
    });
    let pending = still_pending(&readers);
    let (local, ls) = others.expect("the mount answered nothing while the S3 source was stalled");
    assert_eq!(local, b"# Notes\n");
    assert!(ls.status.success(), "{ls:?}");
    let listing = String::from_utf8(ls.stdout).unwrap();
    assert!(listing.contains("local") && listing.contains("remote"), "{listing}");
    assert_eq!(
        pending, STALLED_READERS,
        "the local file and `ls` waited until stalled reads of the S3 source gave up"
    );

    for reader in readers {
        let read = tokio::task::block_in_place(|| reader.recv_timeout(HANG_GUARD)).expect("a stalled read never ended");
        assert_eq!(read.unwrap_err().raw_os_error(), Some(5), "EIO");
    }
    mounted.unmount().unwrap();
}

/// A flood of reads on a stalled source costs a bounded number of
/// requests: with one call of the source at a time and no queue, one
/// reader is held at the server and every further reader gets EIO at once,
/// while the held one still waits; it gets EIO at the deadline, and the
/// cache room its open had reserved is given back: the budget holds one
/// file, and the next read fits. (Readers
/// waiting in the queue are those past the request threads in
/// `one_stalled_source_freezes_the_whole_mount`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_reads_on_a_stalled_source_is_refused_past_its_bound() {
    let f = fixture().await;
    let options = MountOptions {
        attr_ttl: Duration::ZERO,
        refresh_interval: Duration::from_secs(3600),
        source_concurrency: 1,
        source_queue: 0,
        request_timeout: Duration::from_secs(10),
        read_limit: 16,
        cache_bytes: 0,
        ..MountOptions::default()
    };
    let mounted = mount(&f, options);
    let at = f.mount_point.clone();
    tokio::task::block_in_place(|| warm(&at));

    f.proxy.set_rate(1.0);
    let held = [stalled_reader(&at, 0)];
    until_held(&f.proxy, 1).await;
    let refused: Vec<_> = (1..STALLED_READERS)
        .map(|n| {
            let path = at.join(format!("remote/assets/f{n}.txt"));
            tokio::task::block_in_place(|| guarded(move || std::fs::read(path)))
                .expect("a reader past the bound was not answered")
        })
        .collect();
    let pending = still_pending(&held);
    for read in &refused {
        assert_eq!(read.as_ref().unwrap_err().raw_os_error(), Some(5), "EIO: {read:?}");
    }
    assert_eq!(
        pending, 1,
        "the refused readers were answered while the held one waited"
    );
    assert_eq!(f.proxy.counts().of(Fault::Stall), 1, "one call of the source at a time");
    let [reader] = held;
    let read = tokio::task::block_in_place(|| reader.recv_timeout(HANG_GUARD)).expect("the held read never ended");
    assert_eq!(read.unwrap_err().raw_os_error(), Some(5), "EIO");
    // The source is served again once its server is.
    f.proxy.set_rate(0.0);
    let again = tokio::task::block_in_place(|| std::fs::read(at.join("remote/assets/f1.txt")).unwrap());
    assert_eq!(again, b"file 1, ten\n");
    mounted.unmount().unwrap();
}

/// Finding: readers of one path on a stalled source waited one deadline
/// each, in turn (the kernel holds every lookup of a name behind the one
/// in flight, and each then asked the stalled source again): ten readers
/// took ten deadlines. A path whose request ran past the deadline answers
/// `EIO` at once for one more deadline, so the source is asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_of_one_stalled_path_do_not_wait_a_deadline_each() {
    let f = fixture().await;
    let options = MountOptions {
        attr_ttl: Duration::ZERO,
        refresh_interval: Duration::from_secs(3600),
        request_timeout: Duration::from_secs(2),
        ..MountOptions::default()
    };
    let mounted = mount(&f, options);
    let at = f.mount_point.clone();
    // Not warmed: the lookup itself needs the stalled source.
    f.proxy.set_rate(1.0);
    let readers: Vec<_> = (0..6)
        .map(|_| {
            let path = at.join("remote/assets/f0.txt");
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(std::fs::read(path));
            });
            rx
        })
        .collect();
    for reader in readers {
        let read = tokio::task::block_in_place(|| reader.recv_timeout(HANG_GUARD)).expect("a reader never ended");
        assert_eq!(read.unwrap_err().raw_os_error(), Some(5), "EIO");
    }
    let asked = f.proxy.counts().of(Fault::Stall);
    assert!(asked <= 2, "the stalled source was asked {asked} times for one path");
    mounted.unmount().unwrap();
}

//! The merged skills of a `skillstore` namespace as a read-only FUSE
//! filesystem, laid out as a sync would write them: `DIR/NAME/...`, one
//! directory per winning skill.
//!
//! Guarantees:
//! - the tree is read-only: every write, create or remove is refused;
//! - the skill directories are the catalog's winners (enabled ones unless
//!   [`MountOptions::all_skills`]); directories below them are listed from
//!   the backend when first visited after a refresh, never entering a
//!   directory link, no deeper than [`MountOptions::max_depth`] and with at
//!   most [`MountOptions::max_entries`] entries each;
//! - a file is read when it is opened, whole, through the backend under the
//!   read limit and confined to its skill's directory once links resolve
//!   (backends read whole objects or prefixes, not ranges). Each version of
//!   a file is held once, shared by every handle open on it and kept
//!   between opens, so reopening an unchanged file reads nothing; all the
//!   bytes held, open and kept, stay within [`MountOptions::cache_bytes`],
//!   and an open that would pass it fails with `ENFILE`;
//! - a stalled source holds up only its own requests: the request threads
//!   ([`MountOptions::threads`]) answer from the catalog what needs no
//!   backend (the root, the skill directories, reads of open files) and
//!   hand everything else to the Tokio runtime, so no request thread waits
//!   on a backend; one source has at most
//!   [`MountOptions::source_concurrency`] backend calls under way and
//!   [`MountOptions::source_queue`] more requests waiting for a turn, and a
//!   request past that answers `EIO` at once (a flood of reads costs
//!   bounded memory); a request not answered within
//!   [`MountOptions::request_timeout`], waiting included, answers `EIO`;
//! - the catalog is refreshed every [`MountOptions::refresh_interval`] in
//!   the background, and at once by [`Mounted::refresh`]; a change shows
//!   once the kernel's attribute cache ([`MountOptions::attr_ttl`]) lapses;
//! - errors reach readers as `errno` values and are logged with virtual
//!   paths only;
//! - the mount point must be an empty directory; unmounting while a reader
//!   is still inside detaches the tree lazily (the reader keeps what it
//!   holds, the directory shows its own contents again at once).
//!
//! Mounting needs `/dev/fuse` and either root (the kernel's `mount(2)` is
//! called directly, no C library or helper involved) or the `fusermount3`
//! helper of the `fuse3` package for an unprivileged user.

mod cache;
mod fs;
mod limits;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skillstore::SharedCatalog;
use skillstore::backends::DEFAULT_READ_LIMIT;

/// How a mount behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Show disabled skills too (by default only enabled ones).
    pub all_skills: bool,
    /// How often the catalog is refreshed in the background.
    pub refresh_interval: Duration,
    /// How long the kernel may cache names and attributes before asking
    /// again; zero makes every change visible as soon as it is refreshed.
    pub attr_ttl: Duration,
    /// The largest file read, in bytes (the namespace's read limit).
    pub read_limit: u64,
    /// How many directory levels below a skill's directory are shown.
    pub max_depth: usize,
    /// The most entries shown in one directory.
    pub max_entries: usize,
    /// The most bytes of file contents held: one copy of each file version
    /// open or kept between opens (at least `read_limit`).
    pub cache_bytes: usize,
    /// How many threads take requests from the kernel. None of them waits
    /// on a backend.
    pub threads: usize,
    /// How many backend calls (listings, stats, reads) of one source run
    /// at once (at least one).
    pub source_concurrency: usize,
    /// How many more requests of one source may wait for one of its turns;
    /// a request past that gets `EIO` at once.
    pub source_queue: usize,
    /// How long one request (a lookup, an attribute, an open, a listing)
    /// may take, waiting for its source's turn included, before the reader
    /// gets `EIO`.
    pub request_timeout: Duration,
    /// Let users other than the one mounting read the tree (a container
    /// whose processes run as another user).
    pub allow_other: bool,
}

impl Default for MountOptions {
    /// Enabled skills, a refresh every 30 s, a 1 s attribute cache, the
    /// default 10 MiB read limit, 32 levels, 10,000 entries a directory,
    /// 128 MiB of file contents, 4 threads, 4 backend calls and 64 waiting
    /// requests per source, a 30 s request timeout, the mounting user only.
    fn default() -> Self {
        MountOptions {
            all_skills: false,
            refresh_interval: Duration::from_secs(30),
            attr_ttl: Duration::from_secs(1),
            read_limit: DEFAULT_READ_LIMIT,
            max_depth: 32,
            max_entries: 10_000,
            cache_bytes: 128 * 1024 * 1024,
            threads: 4,
            source_concurrency: 4,
            source_queue: 64,
            request_timeout: Duration::from_secs(30),
            allow_other: false,
        }
    }
}

/// A mounted tree. Dropping it (or [`Mounted::unmount`]) unmounts it and
/// stops the background refresh.
pub struct Mounted {
    unmounter: Option<fuser::SessionUnmounter>,
    session: Option<std::thread::JoinHandle<io::Result<()>>>,
    mount_point: PathBuf,
    inner: Arc<fs::Inner>,
    refresher: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted").finish_non_exhaustive()
    }
}

impl Mounted {
    /// Mounts `catalog` read-only at the directory `dir`, which must exist
    /// and be empty, and serves it on threads of its own. Must be called
    /// inside a Tokio runtime, which serves the backend calls and the
    /// background refresh. Fails with a message saying why when the machine
    /// cannot mount.
    pub fn mount(catalog: SharedCatalog, dir: &Path, options: MountOptions) -> io::Result<Mounted> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| io::Error::other("a skills mount must be made inside a Tokio runtime"))?;
        check_can_mount(dir)?;
        let mount_point = dir.canonicalize()?;
        let inner = Arc::new(fs::Inner::new(catalog, options.clone(), runtime));
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::RO,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
            fuser::MountOption::NoExec,
            fuser::MountOption::FSName("skillstore".into()),
            fuser::MountOption::Subtype("skillstore".into()),
        ];
        if options.allow_other {
            config.acl = fuser::SessionACL::All;
        }
        config.n_threads = Some(options.threads.max(1));
        let mut session = fuser::Session::new(fs::SkillsFs::new(Arc::clone(&inner)), &mount_point, &config)
            .map_err(explain_mount_error)?;
        let unmounter = session.unmount_callable();
        let session = std::thread::Builder::new()
            .name("skills-mount".into())
            .spawn(move || session.run())?;
        let refresher = tokio::spawn({
            let inner = Arc::clone(&inner);
            async move {
                loop {
                    tokio::time::sleep(inner.options.refresh_interval).await;
                    inner.refresh().await;
                }
            }
        });
        Ok(Mounted {
            unmounter: Some(unmounter),
            session: Some(session),
            mount_point,
            inner,
            refresher,
        })
    }

    /// Refreshes the catalog now; what changed in the sources shows from
    /// here on (after the attribute cache lapses).
    pub async fn refresh(&self) {
        self.inner.refresh().await;
    }

    /// Unmounts the tree. When no reader is inside, waits for its threads
    /// to end. When one is (a process's working directory, an open file),
    /// the tree is detached lazily: the mount point shows its own, empty
    /// directory at once, the readers inside keep what they hold and are
    /// served until they leave, and this returns without waiting for them.
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<()> {
        self.refresher.abort();
        let Some(mut unmounter) = self.unmounter.take() else {
            return Ok(());
        };
        let detached = match unmounter.unmount() {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) => {
                rustix::mount::unmount(&self.mount_point, rustix::mount::UnmountFlags::DETACH)?;
                tracing::warn!(
                    "readers were still inside the skills tree; it was detached and serves them until they leave"
                );
                true
            }
            Err(e) => return Err(e),
        };
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        // Unprivileged unmounts (fusermount3) are always lazy: wait a
        // little for the threads, and leave them serving whoever is inside.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !detached && !session.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if session.is_finished() {
            match session.join() {
                Ok(result) => result?,
                Err(_) => return Err(io::Error::other("the skills mount's thread panicked")),
            }
        }
        Ok(())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "cannot unmount the skills tree");
        }
    }
}

/// Mounts `catalog` at `dir` and serves it until `shutdown` completes,
/// then unmounts it. For a command that runs in the foreground until
/// SIGINT or SIGTERM.
pub async fn serve(
    catalog: SharedCatalog,
    dir: &Path,
    options: MountOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mounted = Mounted::mount(catalog, dir, options)?;
    shutdown.await;
    mounted.unmount()
}

/// Says why a mount cannot be made before trying, where that can be known.
fn check_can_mount(dir: &Path) -> io::Result<()> {
    match std::fs::metadata("/dev/fuse") {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "cannot mount: this machine has no /dev/fuse (load the fuse kernel module, or give the container --device /dev/fuse)",
            ));
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("cannot mount: /dev/fuse: {e}"))),
    }
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot mount: the mount point is not a directory",
            ));
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("cannot mount: the mount point: {e}"))),
    }
    // Mounting over files would hide them while the tree is mounted.
    let mut entries =
        std::fs::read_dir(dir).map_err(|e| io::Error::new(e.kind(), format!("cannot mount: the mount point: {e}")))?;
    if entries.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::DirectoryNotEmpty,
            "cannot mount: the mount point is not empty",
        ));
    }
    Ok(())
}

fn explain_mount_error(e: io::Error) -> io::Error {
    let why = match e.kind() {
        io::ErrorKind::PermissionDenied => {
            "not permitted to mount: run as root, or install fusermount3 (package fuse3) for an unprivileged mount"
        }
        io::ErrorKind::NotFound => {
            "cannot mount: no way to mount as this user (fusermount3 from the fuse3 package is missing)"
        }
        _ => "cannot mount",
    };
    io::Error::new(e.kind(), format!("{why}: {e}"))
}
